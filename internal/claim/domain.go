package claim

import (
	"strings"
	"time"
)

// DomainAnnotation on a Namespace names a host whose requests /<code> are
// served from that namespace (the redirector), and for which the manager
// keeps a Gateway listener and route (--gateway).
const DomainAnnotation = "linkforge.io/domain"

// NormalizeHost turns a Host header or a linkforge.io/domain annotation into
// the form hosts are compared in: no port, lower case, no trailing dot. A
// host with userinfo, or with a port that is not a port (digits, at most
// 65535), is refused: "" names no host. It does not allocate for a host that
// is already lower case.
func NormalizeHost(h string) string {
	h = strings.TrimSpace(h)
	if strings.IndexByte(h, '@') >= 0 {
		return ""
	}
	port := ""
	if strings.HasPrefix(h, "[") {
		i := strings.IndexByte(h, ']')
		if i < 0 {
			return ""
		}
		h, port = h[:i+1], h[i+1:]
	} else if i := strings.LastIndexByte(h, ':'); i >= 0 {
		h, port = h[:i], h[i:]
	}
	if !validPort(port) {
		return ""
	}
	h = strings.TrimSuffix(h, ".")
	return strings.ToLower(h)
}

// validPort reports whether p is empty or ':' and a port: up to five
// digits, at most 65535 (RFC 3986 allows an empty port after ':').
func validPort(p string) bool {
	if p == "" {
		return true
	}
	if p[0] != ':' || len(p) > 6 {
		return false
	}
	n := 0
	for i := 1; i < len(p); i++ {
		c := p[i]
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	return n <= 65535
}

// Domain is a namespace's claim of a host (the linkforge.io/domain
// annotation): the host normalized (NormalizeHost) and the namespace's
// creation time.
type Domain struct {
	Host    string
	Created time.Time
}

// DomainPrecedes is the rule between two namespaces that claim one host:
// the rule of codes (Precedes: the older wins, then the smaller name).
func DomainPrecedes(aName string, a Domain, bName string, b Domain) bool {
	return Precedes(Link{Name: aName, Created: a.Created}, Link{Name: bName, Created: b.Created})
}

// DomainWinners returns, for claims (namespace -> its claim), the namespace
// that serves each host: of those that claim one host, the one that
// precedes (DomainPrecedes). The redirector serves /<code> on the host from
// it, and the manager programs the host's listener and route for it.
func DomainWinners(claims map[string]Domain) map[string]string {
	winners := make(map[string]string, len(claims))
	for ns, c := range claims {
		w, ok := winners[c.Host]
		if !ok || DomainPrecedes(ns, c, w, claims[w]) {
			winners[c.Host] = ns
		}
	}
	return winners
}
