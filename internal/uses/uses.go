package uses

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options configure counting.
type Options struct {
	// Client writes status and reads live ShortLinks (an uncached client:
	// NewClient).
	Client client.Client
	// Holder names this replica in status.useReservations: unique per process.
	Holder string
	// FlushInterval is how often pending counts are written (default 10s).
	FlushInterval time.Duration
	// WritesPerSecond is this replica's budget of API writes (default 20).
	WritesPerSecond float64
	// ReserveBurst is how many first reservations requests may make at once
	// beyond the steady rate (default: half a flush interval's budget,
	// 100). Flush rounds never draw on it: they are paced at the rate.
	ReserveBurst int
	// Lease is how long a reservation lasts unless renewed (default 6 flush
	// intervals: a link in use costs a write about every 5 rounds).
	Lease time.Duration
	// ReserveTimeout bounds how long a request waits for a reservation (default 2s).
	ReserveTimeout time.Duration
	// MaxBlock caps the quota reserved at once (default 1000).
	MaxBlock int64
	// Peer is the address at which Forwarders reach this replica, written
	// in its reservations ("": it takes no forwarded uses).
	Peer string
	// PeerReady, if set, tells whether the peer port answers yet (it has
	// the peer key): until then no reservation names Peer, so nobody
	// forwards to a replica that would refuse, and none is taken ahead.
	PeerReady func() bool
	// Forwarder, if set, asks the replica holding a link's quota to serve a
	// use when this one has none, before reserving (see Forwarder).
	Forwarder Forwarder
	// ReserveAhead is how long after its creation a limited link that
	// nobody has used or reserved gets a reservation ahead of its first
	// click (0: never; see Ahead).
	ReserveAhead time.Duration
	Log          logr.Logger
	Registry     prometheus.Registerer
	// Clock tells the time (default time.Now; tests).
	Clock func() time.Time
}

func (o Options) withDefaults() Options {
	if o.FlushInterval <= 0 {
		o.FlushInterval = 10 * time.Second
	}
	if o.WritesPerSecond <= 0 {
		o.WritesPerSecond = 20
	}
	if o.Lease <= 0 {
		o.Lease = 6 * o.FlushInterval
	}
	if o.ReserveTimeout <= 0 {
		o.ReserveTimeout = 2 * time.Second
	}
	if o.MaxBlock <= 0 {
		o.MaxBlock = 1000
	}
	if o.ReserveBurst <= 0 {
		o.ReserveBurst = max(1, int(o.WritesPerSecond*o.FlushInterval.Seconds()/2))
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return o
}

// Uses counts this replica's uses and writes them back; see the package doc.
type Uses struct {
	// locks serialize the writes of each link (linkLocks: a lock exists
	// only while a write holds or awaits it).
	locks linkLocks
	// roundEnd is when the flush round in progress must leave the rest to
	// the next one. Only the flushing goroutine uses it.
	roundEnd time.Time
	// base is the origin of the monotonic clock of leases and denials.
	base time.Time

	opts Options
	// budget is the replica's writes: WritesPerSecond in the long run, and
	// up to ReserveBurst at once. pace spaces the flush rounds' writes at
	// the rate with a burst of one, so that they never take the burst that
	// a campaign's first clicks need.
	budget *rate.Limiter
	pace   *rate.Limiter
	// aheadPace spaces the reservations ahead at half the rate: the
	// clicks keep the other half and the burst.
	aheadPace *rate.Limiter
	dirty     atomic.Pointer[Counter]
	metrics   *metrics

	mu      sync.Mutex
	holding map[*Counter]struct{} // counters with a reservation: renewed each round
	// aheadQueue are the links offered for a reservation ahead, each due at
	// its own point of aheadSpread; aheadHeld counts the reservations held
	// ahead (at most aheadMax).
	aheadQueue map[*Counter]time.Time
	aheadHeld  int
	// aheadStopped: StopAhead was called.
	aheadStopped atomic.Bool
	// returnQueue are the links whose reservation another replica asked
	// for, or whose quota ran out (runReturns); returnKick wakes it.
	returnQueue map[*Counter]struct{}
	returnKick  chan struct{}
}

// New returns the use counting of a replica. Run it with Start.
func New(opts Options) *Uses {
	opts = opts.withDefaults()
	u := &Uses{
		opts:    opts,
		base:    opts.Clock(),
		budget:  rate.NewLimiter(rate.Limit(opts.WritesPerSecond), opts.ReserveBurst),
		pace:    rate.NewLimiter(rate.Limit(opts.WritesPerSecond), 1),
		holding: map[*Counter]struct{}{},

		aheadPace:  rate.NewLimiter(rate.Limit(opts.WritesPerSecond/2), 1),
		aheadQueue: map[*Counter]time.Time{},

		returnQueue: map[*Counter]struct{}{},
		returnKick:  make(chan struct{}, 1),
	}
	u.metrics = newMetrics(opts.Registry)
	return u
}

// peer is the peer address this replica's reservations name now.
func (u *Uses) peer() string {
	if u.opts.PeerReady != nil && !u.opts.PeerReady() {
		return ""
	}
	return u.opts.Peer
}

// mono is t on the monotonic clock of leases (ns since base).
func (u *Uses) mono(t time.Time) int64 { return int64(t.Sub(u.base)) }

// lock takes the write lock of c's link, waiting until ctx ends.
func (u *Uses) lock(ctx context.Context, c *Counter) bool { return u.locks.lock(ctx, c) }

func (u *Uses) unlock(c *Counter) { u.locks.unlock(c) }

// Attach returns the counter of cur, a new version of a link: old (the
// counter of its previous version) if it is the same object, else a new
// one. A version with a lower maxUses than the reservation was written
// under stops this replica's quota at once.
func (u *Uses) Attach(old *Counter, cur Versioned) *Counter {
	v := cur.UsesVersion()
	c := old
	if c == nil || c.uid() != v.UID {
		c = &Counter{}
	}
	if v.MaxUses > 0 || !v.NoReservations {
		c.lim() // before the version is served: its clicks take quota
	}
	c.latest.Store(cur)
	c.resplit(v.SplitURLs)
	// After latest: a write that stores grantMax and then reads latest
	// sees this version, or this check sees its grantMax.
	if l := c.limit.Load(); l != nil && v.MaxUses > 0 && v.MaxUses < l.grantMax.Load() {
		l.leaseEnd.Store(0)
		u.metrics.limitLowered.Inc()
	}
	if v.ReturnRequested {
		u.requestReturn(c) // the live read of its write tells whose
	}
	return c
}

// Count records one use of an unlimited link (the request path).
func (u *Uses) Count(c *Counter) {
	if c.pending.Add(1) == 1 {
		u.markDirty(c)
	}
}

// CountPreviewerFetch records one GET of c's link by a previewer (a
// client that reads links without following them for a person): not a
// use, it never touches the quota nor lastUsedAt; it is written to
// status.previewerFetches with the next write of the link, or alone.
func (u *Uses) CountPreviewerFetch(c *Counter) {
	if c.previews.Add(1) == 1 {
		u.markDirty(c)
	}
}

// markDirty pushes c on the lock-free stack of counters with pending uses.
func (u *Uses) markDirty(c *Counter) {
	if !c.queued.CompareAndSwap(false, true) {
		return
	}
	for {
		head := u.dirty.Load()
		c.next = head
		if u.dirty.CompareAndSwap(head, c) {
			return
		}
	}
}

// Verdict is how a limited link answers a GET.
type Verdict int

const (
	Served      Verdict = iota // a redirect, counted
	Exhausted                  // 410: the limit is reached
	Unavailable                // 503: no quota here now
)

// Take serves one use of a limited link: from this replica's quota, else
// from the quota of the replica the informer shows holding it (Forwarder),
// else from quota it reserves. Only the forward and the reservation leave
// the request path's atomics; together they wait at most ReserveTimeout
// (the forward at most ForwardTimeout of it), and concurrent requests share
// the reservation.
func (u *Uses) Take(c *Counter, now time.Time) Verdict {
	at := u.mono(now)
	deadline := time.Now().Add(u.opts.ReserveTimeout)
	l := c.lim()
	for attempt := 0; ; attempt++ {
		if u.takeLocal(c, l, at) {
			return Served
		}
		if attempt == 0 && u.forward(c, at, deadline) {
			// The holder counts the use; the split click counted here is
			// written by this replica (writeTallies).
			if c.split.Load() != nil {
				u.markDirty(c)
			}
			return Served
		}
		if attempt > 0 || at < l.denied.Load() {
			break
		}
		u.reserve(c, deadline)
	}
	u.metrics.unavailable.Inc()
	if l.deniedGone.Load() {
		return Exhausted
	}
	return Unavailable
}

// takeLocal serves one use from this replica's quota (l, c's limits) and
// counts it.
func (u *Uses) takeLocal(c *Counter, l *limits, at int64) bool {
	l.taking.Add(1)
	defer l.taking.Add(-1)
	if !l.take(at) {
		return false
	}
	if c.pending.Add(1) == 1 {
		u.markDirty(c)
	}
	if l.quota.Load() == 0 {
		// The reservation is used up: its uses are written now, not at
		// the next round, so that a limit reached answers 410 everywhere
		// within a write (and a link in demand is topped up sooner).
		u.requestReturn(c)
	}
	return true
}

// TakeHeld serves one use of c's link from this replica's quota, for
// another replica that forwarded the request (see Forwarder); it never
// reserves, so a forwarded use costs no API request. Not served, it is
// Exhausted if this replica found the limit reached, else Unavailable.
func (u *Uses) TakeHeld(c *Counter, now time.Time) Verdict {
	l := c.lim()
	if !u.takeLocal(c, l, u.mono(now)) {
		u.metrics.peerTakes.WithLabelValues("refused").Inc()
		if l.deniedGone.Load() {
			return Exhausted
		}
		return Unavailable
	}
	u.metrics.peerTakes.WithLabelValues("served").Inc()
	return Served
}

func (u *Uses) hold(c *Counter, on bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if on {
		u.holding[c] = struct{}{}
	} else {
		delete(u.holding, c)
	}
}

// NeedLeaderElection is false: every replica counts its own uses.
func (*Uses) NeedLeaderElection() bool { return false }
