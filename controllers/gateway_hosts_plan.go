package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/linkforge/linkforge/internal/claim"
)

// GatewayListenerLimit is the most listeners a Gateway holds (the Gateway
// API's maxItems on spec.listeners).
const GatewayListenerLimit = 64

// GatewayObjectPrefix starts the name of every listener and HTTPRoute the
// manager keeps: listeners of other names on the Gateway are the user's, and
// are never touched.
const GatewayObjectPrefix = "linkforge-"

// DefaultGatewayCertificateSecret is the default --gateway-certificate-secret:
// {host} is the host with dots as dashes.
const DefaultGatewayCertificateSecret = "linkforge-{host}"

// Why a claimed host has no listener (the Warning event's reason).
const (
	ReasonHostConflict     = "GatewayHostConflict"
	ReasonHostInvalid      = "GatewayHostInvalid"
	ReasonListenerLimit    = "GatewayListenerLimit"
	ReasonListenerNameUsed = "GatewayListenerNameUsed"
)

// gatewayHost is a host the manager keeps a listener and a route for.
type gatewayHost struct {
	Host      string
	Namespace string // the namespace that claims it and wins
	Listener  string // listener name, also the HTTPRoute's name
	Secret    string // certificate Secret (and cert-manager Certificate) name
}

// refusedHost is a claim that gets no listener, and why.
type refusedHost struct {
	Host, Namespace string
	Reason, Message string
}

// hostnamePattern is the Gateway API's Hostname without a wildcard: the
// redirector serves exact hosts.
var hostnamePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// validListenerHost says why host (normalized) cannot be a listener's
// hostname, or "" if it can.
func validListenerHost(host string) string {
	switch {
	case len(host) > 253:
		return "longer than 253 characters"
	case !hostnamePattern.MatchString(host):
		return "not a DNS name of lower-case letters, digits, '-' and '.' (no wildcard, no IPv6 address)"
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return "an IP address: a listener's hostname must be a DNS name"
	}
	return ""
}

// gatewayObjectName is prefix followed by host with dots as dashes, a valid
// listener (section) name and object name: at most 253 characters, the end
// of a longer one replaced by a hash of the host so that names stay apart.
func gatewayObjectName(prefix, host string) string {
	n := prefix + strings.ReplaceAll(host, ".", "-")
	if len(n) <= 253 {
		return n
	}
	sum := sha256.Sum256([]byte(host))
	return strings.TrimRight(n[:253-17], "-") + "-" + hex.EncodeToString(sum[:8])
}

// secretName fills a --gateway-certificate-secret template for host.
func secretName(template, host string) string {
	name := strings.ReplaceAll(template, "{host}", strings.ReplaceAll(host, ".", "-"))
	if len(name) <= 253 {
		return name
	}
	sum := sha256.Sum256([]byte(host))
	return strings.TrimRight(name[:253-17], "-.") + "-" + hex.EncodeToString(sum[:8])
}

// checkSecretTemplate says what is wrong with a --gateway-certificate-secret.
func checkSecretTemplate(t string) error {
	if !strings.Contains(t, "{host}") {
		return fmt.Errorf("--gateway-certificate-secret %q has no {host}: every host needs a Secret of its own", t)
	}
	if n := secretName(t, "a.example"); !hostnamePattern.MatchString(n) {
		return fmt.Errorf("--gateway-certificate-secret %q makes %q for host a.example, not a Secret name (lower-case letters, digits, '-', '.')", t, n)
	}
	return nil
}

// planGatewayHosts is the rule of what the Gateway holds. claims are the
// namespaces' linkforge.io/domain claims (namespace -> claim, hosts
// normalized); free is how many listeners fit beside the user's. Each host
// goes to the namespace the redirector serves it from (claim.DomainWinners);
// the others' claims are refused. Valid hosts get listeners in the order of
// their claims (claim.DomainPrecedes: the oldest first), as many as fit:
// the rest are refused at the limit, so which hosts are served does not
// depend on the order the manager saw them in. hosts is in that order;
// refused is sorted by namespace.
func planGatewayHosts(claims map[string]claim.Domain, free int, secretTemplate string) (hosts []gatewayHost, refused []refusedHost) {
	winners := claim.DomainWinners(claims)
	order := make([]string, 0, len(winners))
	for ns, c := range claims {
		if w := winners[c.Host]; w != ns {
			refused = append(refused, refusedHost{Host: c.Host, Namespace: ns, Reason: ReasonHostConflict,
				Message: fmt.Sprintf("host %q is also claimed by namespace %q, which is older: its listener and route serve %q, not this namespace", c.Host, w, w)})
			continue
		}
		if why := validListenerHost(c.Host); why != "" {
			refused = append(refused, refusedHost{Host: c.Host, Namespace: ns, Reason: ReasonHostInvalid,
				Message: fmt.Sprintf("host %q (annotation %s) gets no Gateway listener: %s", c.Host, claim.DomainAnnotation, why)})
			continue
		}
		order = append(order, ns)
	}
	slices.SortFunc(order, func(a, b string) int {
		if claim.DomainPrecedes(a, claims[a], b, claims[b]) {
			return -1
		}
		return 1
	})
	names := make(map[string]string, len(order))
	free = max(free, 0)
	for _, ns := range order {
		host := claims[ns].Host
		name := gatewayObjectName(GatewayObjectPrefix, host)
		if other, used := names[name]; used {
			refused = append(refused, refusedHost{Host: host, Namespace: ns, Reason: ReasonListenerNameUsed,
				Message: fmt.Sprintf("host %q would have listener %q, which host %q of an older claim has", host, name, other)})
			continue
		}
		if len(hosts) == free {
			refused = append(refused, refusedHost{Host: host, Namespace: ns, Reason: ReasonListenerLimit,
				Message: fmt.Sprintf("host %q gets no listener: the Gateway holds at most %d listeners, %d of them others', and older claims take the %d left",
					host, GatewayListenerLimit, GatewayListenerLimit-free, free)})
			continue
		}
		names[name] = host
		hosts = append(hosts, gatewayHost{Host: host, Namespace: ns, Listener: name, Secret: secretName(secretTemplate, host)})
	}
	slices.SortFunc(refused, func(a, b refusedHost) int { return strings.Compare(a.Namespace, b.Namespace) })
	return hosts, refused
}
