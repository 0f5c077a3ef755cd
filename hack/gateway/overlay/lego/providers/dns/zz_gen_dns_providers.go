// Package dns stands in for lego's providers/dns in linkforge's test build of
// Traefik (hack/gateway): the original imports the SDKs of some 180 DNS
// services, several of which the Go module proxy does not serve. The tests
// issue certificates with cert-manager, never with Traefik's ACME resolver,
// so no DNS challenge provider is built in; asking for one says so.
package dns

import (
	"fmt"

	"github.com/go-acme/lego/v5/challenge"
)

// NewDNSChallengeProviderByName always fails: no DNS provider is built in.
func NewDNSChallengeProviderByName(name string) (challenge.Provider, error) {
	return nil, fmt.Errorf("DNS provider %s: this Traefik (linkforge's hack/gateway build) has no DNS challenge providers", name)
}
