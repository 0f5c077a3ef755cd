package redirect

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linkforge/linkforge/internal/claim"
)

// normalizeHost turns a Host header or a domain annotation into the form the
// domain table is keyed by: no port, lower case, no trailing dot. A host
// with userinfo, or with a port that is not a port (digits, at most 65535),
// is refused: "" names no host. It does not allocate for a host that is
// already lower case.
func normalizeHost(h string) string {
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

type nsClaim struct {
	host    string
	created time.Time
}

// precedes is the rule between two namespaces that claim one domain: the
// ownership rule of codes (the older wins, then the smaller name).
func (a nsClaim) precedes(aName string, b nsClaim, bName string) bool {
	return claim.Precedes(claim.Link{Name: aName, Created: a.created}, claim.Link{Name: bName, Created: b.created})
}

type conflict struct{ host, loser string }

// Domains maps hosts to the namespaces that serve /<code> under them. Reads
// load an immutable snapshot (one atomic load, no lock); writes (namespace
// events, rare) rebuild it under a mutex.
type Domains struct {
	snap atomic.Pointer[map[string]string] // host -> namespace

	mu     sync.Mutex
	claims map[string]nsClaim // namespace -> its claim
	warned map[conflict]bool
	// onConflict is called, under mu, once when loser starts losing host to
	// winner (not again while that conflict lasts).
	onConflict func(host, loser, winner string)
}

// NewDomains returns an empty domain table. onConflict (optional) is told
// about each new conflict once.
func NewDomains(onConflict func(host, loser, winner string)) *Domains {
	d := &Domains{claims: map[string]nsClaim{}, warned: map[conflict]bool{}, onConflict: onConflict}
	empty := map[string]string{}
	d.snap.Store(&empty)
	return d
}

// Lookup returns the namespace served under a Host header value.
func (d *Domains) Lookup(host string) (string, bool) {
	m := *d.snap.Load()
	if len(m) == 0 {
		return "", false
	}
	h := normalizeHost(host)
	if h == "" {
		return "", false
	}
	ns, ok := m[h]
	return ns, ok
}

// Len is the number of hosts served.
func (d *Domains) Len() int { return len(*d.snap.Load()) }

// Set records that namespace ns (created at created) claims host; an empty
// host withdraws its claim.
func (d *Domains) Set(ns string, created time.Time, host string) {
	host = normalizeHost(host)
	d.mu.Lock()
	defer d.mu.Unlock()
	old, had := d.claims[ns]
	if host == "" {
		if !had {
			return
		}
		delete(d.claims, ns)
	} else {
		if had && old.host == host && old.created.Equal(created) {
			return
		}
		d.claims[ns] = nsClaim{host: host, created: created}
	}
	d.rebuildLocked()
}

// Delete withdraws the claim of a deleted namespace.
func (d *Domains) Delete(ns string) { d.Set(ns, time.Time{}, "") }

func (d *Domains) rebuildLocked() {
	winners := make(map[string]string, len(d.claims))
	for ns, c := range d.claims {
		w, ok := winners[c.host]
		if !ok || c.precedes(ns, d.claims[w], w) {
			winners[c.host] = ns
		}
	}
	losing := map[conflict]bool{}
	for ns, c := range d.claims {
		if w := winners[c.host]; w != ns {
			k := conflict{c.host, ns}
			losing[k] = true
			if !d.warned[k] && d.onConflict != nil {
				d.onConflict(c.host, ns, w)
			}
		}
	}
	d.warned = losing
	d.snap.Store(&winners)
}
