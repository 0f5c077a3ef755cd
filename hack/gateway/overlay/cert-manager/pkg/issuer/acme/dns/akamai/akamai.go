// Package akamai stands in for cert-manager's Akamai DNS01 solver in
// linkforge's test build (hack/gateway): Akamai's SDK
// (github.com/akamai/AkamaiOPEN-edgegrid-golang/v13) is not served by the
// Go module proxy. The tests issue certificates from a CA ClusterIssuer,
// never through ACME; an issuer asking for Akamai is told it is not built in.
package akamai

import (
	"context"
	"errors"
)

var errNotBuilt = errors.New("the Akamai DNS01 provider is not built into this cert-manager (linkforge's hack/gateway build)")

// DNSProvider is never made.
type DNSProvider struct{}

// NewDNSProvider always fails.
func NewDNSProvider(_, _, _, _ string, _ []string) (*DNSProvider, error) {
	return nil, errNotBuilt
}

// Present fails.
func (*DNSProvider) Present(context.Context, string, string, string) error { return errNotBuilt }

// CleanUp fails.
func (*DNSProvider) CleanUp(context.Context, string, string, string) error { return errNotBuilt }
