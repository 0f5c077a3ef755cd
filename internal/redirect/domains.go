package redirect

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/linkforge/linkforge/internal/claim"
)

// normalizeHost is claim.NormalizeHost: the domain table is keyed by it.
func normalizeHost(h string) string { return claim.NormalizeHost(h) }

type conflict struct{ host, loser string }

// Domains maps hosts to the namespaces that serve /<code> under them. Reads
// load an immutable snapshot (one atomic load, no lock); writes (namespace
// events, rare) rebuild it under a mutex.
type Domains struct {
	snap atomic.Pointer[map[string]string] // host -> namespace

	mu     sync.Mutex
	claims map[string]claim.Domain // namespace -> its claim
	warned map[conflict]bool
	// onConflict is called, under mu, once when loser starts losing host to
	// winner (not again while that conflict lasts).
	onConflict func(host, loser, winner string)
}

// NewDomains returns an empty domain table. onConflict (optional) is told
// about each new conflict once.
func NewDomains(onConflict func(host, loser, winner string)) *Domains {
	d := &Domains{claims: map[string]claim.Domain{}, warned: map[conflict]bool{}, onConflict: onConflict}
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
		if had && old.Host == host && old.Created.Equal(created) {
			return
		}
		d.claims[ns] = claim.Domain{Host: host, Created: created}
	}
	d.rebuildLocked()
}

// Delete withdraws the claim of a deleted namespace.
func (d *Domains) Delete(ns string) { d.Set(ns, time.Time{}, "") }

func (d *Domains) rebuildLocked() {
	winners := claim.DomainWinners(d.claims)
	losing := map[conflict]bool{}
	for ns, c := range d.claims {
		if w := winners[c.Host]; w != ns {
			k := conflict{c.Host, ns}
			losing[k] = true
			if !d.warned[k] && d.onConflict != nil {
				d.onConflict(c.Host, ns, w)
			}
		}
	}
	d.warned = losing
	d.snap.Store(&winners)
}
