package gate

import (
	"net/netip"
	"sync"
	"time"
)

// Rate is a token bucket: Burst attempts at once, then one every Every.
type Rate struct {
	Burst int
	Every time.Duration
}

// refill is how long an empty bucket takes to fill.
func (r Rate) refill() time.Duration { return time.Duration(r.Burst) * r.Every }

// Limits bound password attempts, each counted before it is checked.
type Limits struct {
	// PerClient bounds one client (an IPv4 address, an IPv6 /64: what one
	// subscriber has) across every gated link.
	PerClient Rate
	// PerLink bounds one link across every client: guesses spread over many
	// addresses still meet it. When it is spent the link takes no password
	// for anyone until it refills, its person's included: the price of a
	// guessing campaign is that wait, never a guess more.
	PerLink Rate
	// MaxTracked bounds the clients and links remembered at once; past it,
	// the ones not remembered share one bucket (their attempts limited
	// together, never freed).
	MaxTracked int
}

// DefaultLimits: a person who mistypes has 5 tries, then one every 12 s;
// a link takes 30 guesses at once, then one every 2 s (1,800 an hour,
// about 43,000 a day, against a bcrypt hash at cost 10); 65,536 tracked,
// a few MiB at most.
var DefaultLimits = Limits{
	PerClient:  Rate{Burst: 5, Every: 12 * time.Second},
	PerLink:    Rate{Burst: 30, Every: 2 * time.Second},
	MaxTracked: 1 << 16,
}

// Limiter counts password attempts per client and per link. Its memory is
// bounded: it keeps two generations of buckets, each as old as a full
// refill at most, so a bucket that is not in either is full.
type Limiter struct {
	limits Limits
	now    func() time.Time

	mu      sync.Mutex
	clients generations[netip.Prefix]
	links   generations[string]
}

// NewLimiter limits attempts by l on the clock now.
func NewLimiter(l Limits, now func() time.Time) *Limiter {
	if l.MaxTracked <= 0 {
		l.MaxTracked = DefaultLimits.MaxTracked
	}
	t := now()
	return &Limiter{limits: l, now: now,
		clients: newGenerations[netip.Prefix](l.PerClient, l.MaxTracked, t),
		links:   newGenerations[string](l.PerLink, l.MaxTracked, t)}
}

// Attempt counts one attempt at link's password from client, and reports
// whether it may be checked; if not, retryAfter is when one can be (at
// least a second). A refused attempt is counted in neither bucket.
func (l *Limiter) Attempt(link string, client netip.Addr) (ok bool, retryAfter time.Duration, byLink bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	c := l.clients.bucket(ClientKey(client), now)
	k := l.links.bucket(link, now)
	cWait, kWait := c.wait(l.limits.PerClient, now), k.wait(l.limits.PerLink, now)
	if cWait > 0 || kWait > 0 {
		return false, max(time.Second, cWait, kWait), kWait > 0
	}
	c.take(l.limits.PerClient, now)
	k.take(l.limits.PerLink, now)
	return true, 0, false
}

// Refund gives back the attempt Attempt counted for link and client, for
// an attempt that was not checked after all (the redirector had no CPU
// for it): a busy answer spends no guess.
func (l *Limiter) Refund(link string, client netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.clients.bucket(ClientKey(client), now).give(l.limits.PerClient, now)
	l.links.bucket(link, now).give(l.limits.PerLink, now)
}

// ClientKey is what one client's attempts are counted under: its IPv4
// address, or its IPv6 /64 (the prefix one subscriber gets); an address
// not known shares the zero prefix.
func ClientKey(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	switch {
	case a.Is4():
		return netip.PrefixFrom(a, 32)
	case a.Is6():
		p, _ := a.Prefix(64)
		return p
	}
	return netip.Prefix{}
}

// bucket is a token bucket: tokens at at.
type bucket struct {
	tokens float64
	at     time.Time
}

// level is b's tokens at now.
func (b *bucket) level(r Rate, now time.Time) float64 {
	if r.Every <= 0 {
		return float64(r.Burst)
	}
	return min(float64(r.Burst), b.tokens+float64(now.Sub(b.at))/float64(r.Every))
}

// wait is how long until b has a token (0: it has one).
func (b *bucket) wait(r Rate, now time.Time) time.Duration {
	if l := b.level(r, now); l < 1 {
		return time.Duration((1 - l) * float64(r.Every))
	}
	return 0
}

func (b *bucket) take(r Rate, now time.Time) {
	b.tokens, b.at = b.level(r, now)-1, now
}

// give puts a token back, up to the burst.
func (b *bucket) give(r Rate, now time.Time) {
	b.tokens, b.at = min(float64(r.Burst), b.level(r, now)+1), now
}

// generations holds buckets by key in two maps: current, and the one
// before it; every refill the older is dropped (its buckets were full
// again by then, or were copied to current when used).
type generations[K comparable] struct {
	rate     Rate
	max      int
	current  map[K]*bucket
	previous map[K]*bucket
	began    time.Time
	overflow bucket
}

func newGenerations[K comparable](r Rate, max int, now time.Time) generations[K] {
	return generations[K]{rate: r, max: max, current: map[K]*bucket{}, previous: map[K]*bucket{}, began: now,
		overflow: bucket{tokens: float64(r.Burst), at: now}}
}

// bucket is key's bucket at now, full if it is not remembered.
func (g *generations[K]) bucket(key K, now time.Time) *bucket {
	if now.Sub(g.began) >= g.rate.refill() {
		g.previous, g.current, g.began = g.current, map[K]*bucket{}, now
	}
	if b, ok := g.current[key]; ok {
		return b
	}
	b, ok := g.previous[key]
	if !ok {
		if len(g.current) >= g.max {
			return &g.overflow
		}
		b = &bucket{tokens: float64(g.rate.Burst), at: now}
	}
	if len(g.current) >= g.max {
		return &g.overflow
	}
	g.current[key] = b
	return b
}
