package redirect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// Uses: what a replica counts and where the counts live.
//
// A use is a GET answered with a redirect. Each replica counts its uses in
// memory (useCounter: an atomic add on the request path) and writes them to
// the link's status.uses in batches: a Flusher visits the links that served
// since its last round, at most once per link per flush interval and at most
// WritesPerSecond writes per replica; what does not fit waits for the next
// round, so nothing is dropped while the process lives.
//
// The counts live in the ShortLink's own status, written with the
// resourceVersion precondition (optimistic concurrency), not in a separate
// object: status.uses is then one number any reader (kubectl, the
// controller's Exhausted condition, the reaper) reads where it expects it,
// the controller and the redirectors never write the same field (the
// controller's merge patch carries only the fields it changed), and a lost
// race is a 409 that the writer retries on a fresh read, never a lost count.
// The cost is one write per link per flush: a replica drains the counts of
// flushInterval*writesPerSecond links per round (200 with the defaults).
//
// A link with maxUses is served only from quota this replica reserved in
// status.useReservations (a block at a time, sized to what it serves in a
// flush interval and shrinking as the limit nears), so the sum of all
// replicas' redirects never exceeds maxUses whatever the
// concurrency, crashes or API outages: a replica that cannot reserve answers
// 503. Reservations are leases: the holder renews its own at each flush, and
// stops serving from it a safety margin before it lapses if it cannot. A
// replica that stops serving a link (idle for a round, or shutting down)
// returns the unused quota. A reservation lapsed for more than a flush
// interval (its holder was killed) is taken back by the next reservation:
// what it held counts as used, because its holder may have served it.

// useCounter is the per-link state of uses in this replica. It outlives the
// Link versions that point at it (the informer handler hands it from one
// version to the next), and is dropped with the link.
type useCounter struct {
	// pending are the uses served and not yet written.
	pending atomic.Int64
	// quota is what this replica may still serve of a limited link.
	quota atomic.Int64
	// leaseEnd (Unix ns) is when this replica stops serving its quota.
	leaseEnd atomic.Int64
	// latest is the newest version of the link seen by the informer.
	latest atomic.Pointer[Link]
	// queued is true while the counter is on the flusher's dirty stack.
	queued atomic.Bool
	next   *useCounter // dirty stack

	// Reservations and writes of a link are serialized by Uses.lock, so
	// that a request waits for them no longer than its own timeout.
	// held is this replica's reservation quota as last written (0: none).
	held int64
	// block is the size of the next reservation and lastGrant when the last
	// one was granted: a block used up within a flush interval doubles the
	// next, a slower one halves it, so a replica holds about what it serves
	// in an interval, and a killed replica takes little quota with it.
	block     int64
	lastGrant time.Time
	// denied (Unix ns) is until when a failed reservation is not retried;
	// deniedGone says the limit was reached (410), not merely busy (503).
	denied     atomic.Int64
	deniedGone atomic.Bool
	retryAfter atomic.Int64 // seconds, for the 503's Retry-After
}

// take serves one use of a limited link from this replica's quota. It is
// the request path: atomics only.
func (u *useCounter) take(now int64) bool {
	if now >= u.leaseEnd.Load() {
		return false
	}
	for {
		q := u.quota.Load()
		if q <= 0 {
			return false
		}
		if u.quota.CompareAndSwap(q, q-1) {
			return true
		}
	}
}

// UsesOptions configure counting.
type UsesOptions struct {
	// Client writes status and reads live ShortLinks (an uncached client).
	Client client.Client
	// Holder names this replica in status.useReservations: unique per process.
	Holder string
	// FlushInterval is how often pending counts are written (default 10s).
	FlushInterval time.Duration
	// WritesPerSecond is this replica's budget of API writes (default 20).
	WritesPerSecond float64
	// Lease is how long a reservation lasts unless renewed (default 3 flush intervals).
	Lease time.Duration
	// ReserveTimeout bounds how long a request waits for a reservation (default 2s).
	ReserveTimeout time.Duration
	// MaxBlock caps the quota reserved at once (default 1000).
	MaxBlock int64
	Log      logr.Logger
	Registry prometheus.Registerer
}

func (o UsesOptions) withDefaults() UsesOptions {
	if o.FlushInterval <= 0 {
		o.FlushInterval = 10 * time.Second
	}
	if o.WritesPerSecond <= 0 {
		o.WritesPerSecond = 20
	}
	if o.Lease <= 0 {
		o.Lease = 3 * o.FlushInterval
	}
	if o.ReserveTimeout <= 0 {
		o.ReserveTimeout = 2 * time.Second
	}
	if o.MaxBlock <= 0 {
		o.MaxBlock = 1000
	}
	return o
}

// lockStripes is the number of locks that serialize the writes of links:
// a link takes the stripe of its counter's address, so no link pays for a
// lock of its own.
const lockStripes = 64

// Uses counts this replica's uses and writes them back; see the comment at
// the top of this file.
type Uses struct {
	locks [lockStripes]chan struct{}
	// roundEnd is when the flush round in progress must leave the rest to
	// the next one. Only the flushing goroutine uses it.
	roundEnd time.Time

	opts    UsesOptions
	budget  *rate.Limiter
	dirty   atomic.Pointer[useCounter]
	metrics *usesMetrics

	mu      sync.Mutex
	holding map[*useCounter]struct{} // counters with a reservation: renewed each round
}

// NewUses returns the use counting of a replica. Run it with Start.
func NewUses(opts UsesOptions) *Uses {
	opts = opts.withDefaults()
	u := &Uses{
		opts: opts,
		// A burst of one: writes are spaced evenly, never more than the
		// budget in any second.
		budget:  rate.NewLimiter(rate.Limit(opts.WritesPerSecond), 1),
		holding: map[*useCounter]struct{}{},
	}
	for i := range u.locks {
		u.locks[i] = make(chan struct{}, 1)
	}
	u.metrics = newUsesMetrics(opts.Registry)
	return u
}

// lock takes the write lock of c's link, waiting until ctx ends.
func (u *Uses) lock(ctx context.Context, c *useCounter) bool {
	select {
	case u.locks[stripe(c)] <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (u *Uses) unlock(c *useCounter) { <-u.locks[stripe(c)] }

func stripe(c *useCounter) uintptr {
	return uintptr(unsafe.Pointer(c)) / unsafe.Sizeof(useCounter{}) % lockStripes
}

// attach gives cur the counter of old (the same link), or a new one.
func (u *Uses) attach(old, cur *Link) {
	if cur == nil {
		return
	}
	if old != nil && old.counter != nil {
		cur.counter = old.counter
	} else if cur.counter == nil {
		cur.counter = &useCounter{}
	}
	cur.counter.latest.Store(cur)
}

// count records one use of an unlimited link (the request path).
func (u *Uses) count(c *useCounter) {
	if c.pending.Add(1) == 1 {
		u.markDirty(c)
	}
}

// markDirty pushes c on the lock-free stack of counters with pending uses.
func (u *Uses) markDirty(c *useCounter) {
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

// useVerdict is how a limited link answers a GET.
type useVerdict int

const (
	useServed      useVerdict = iota // a redirect, counted
	useExhausted                     // 410: the limit is reached
	useUnavailable                   // 503: no quota here now
)

// takeLimited serves one use of a limited link, reserving quota when this
// replica has none. Only the reservation leaves the request path's atomics,
// and concurrent requests share one reservation.
func (u *Uses) takeLimited(c *useCounter, now time.Time) useVerdict {
	for attempt := 0; ; attempt++ {
		// Counted before it is taken, so that a release, which zeroes the
		// quota and then reports what is pending, never misses a use taken
		// in between; a failed take gives the count back.
		if c.pending.Add(1) == 1 {
			u.markDirty(c)
		}
		if c.take(now.UnixNano()) {
			return useServed
		}
		c.pending.Add(-1)
		if attempt > 0 || now.UnixNano() < c.denied.Load() {
			break
		}
		u.reserve(c)
	}
	u.metrics.unavailable.Inc()
	if c.deniedGone.Load() {
		return useExhausted
	}
	return useUnavailable
}

// reserve reserves a block of quota for c, unless another request did while
// this one waited for the lock.
func (u *Uses) reserve(c *useCounter) {
	ctx, cancel := context.WithTimeout(context.Background(), u.opts.ReserveTimeout)
	defer cancel()
	if !u.lock(ctx, c) {
		return
	}
	defer u.unlock(c)
	now := time.Now()
	if c.quota.Load() > 0 && now.UnixNano() < c.leaseEnd.Load() || now.UnixNano() < c.denied.Load() {
		return
	}
	granted, err := u.writeReservation(ctx, c, true, false, budgetWait)
	switch {
	case err != nil:
		u.metrics.reservations.WithLabelValues("error").Inc()
		u.opts.Log.V(1).Info("cannot reserve uses", "link", c.name(), "error", err.Error())
		u.deny(c, false, time.Second)
	case granted > 0:
		u.metrics.reservations.WithLabelValues("granted").Inc()
	default:
		u.metrics.reservations.WithLabelValues("denied").Inc()
	}
}

func (u *Uses) deny(c *useCounter, gone bool, retryAfter time.Duration) {
	c.deniedGone.Store(gone)
	c.retryAfter.Store(max(1, int64((retryAfter+time.Second-1)/time.Second)))
	// Retry no sooner than a second: a burst of requests on a link with no
	// quota costs one read a second, not one per request.
	c.denied.Store(time.Now().Add(min(max(retryAfter, 200*time.Millisecond), time.Second)).UnixNano())
}

func (c *useCounter) name() string {
	if l := c.latest.Load(); l != nil {
		return l.Namespace + "/" + l.Name
	}
	return ""
}

var errLinkGone = errors.New("link deleted")

// writeReservation reads the link live and writes its status with the
// resourceVersion as a precondition: the uses pending in c and this
// replica's reservation, renewed, grown by a new block (grow) or returned
// (release). Lapsed reservations of other replicas are taken back on the
// way. It retries conflicts on a fresh read and returns the quota granted.
// c.mu is held. A request waiting for quota passes wait; a flush round does
// not, and leaves the link for the next round when the budget is spent.
func (u *Uses) writeReservation(ctx context.Context, c *useCounter, grow, release bool, mode budgetMode) (int64, error) {
	cur := c.latest.Load()
	if cur == nil {
		return 0, errLinkGone
	}
	key := types.NamespacedName{Namespace: cur.Namespace, Name: cur.Name}
	for attempt := 0; attempt < maxWriteAttempts; attempt++ {
		link := &linkv1.ShortLink{}
		if err := u.opts.Client.Get(ctx, key, link); err != nil {
			if apierrors.IsNotFound(err) {
				return 0, errLinkGone
			}
			return 0, err
		}
		now := time.Now()
		st := &link.Status
		served := c.pending.Swap(0)
		plan := planReservation(st, link.Spec.MaxUses, u.opts.Holder, c.held, served, now, u.opts.FlushInterval)
		if plan.lost {
			// Our reservation lapsed and was taken back while we could not
			// renew it: its whole quota, our unreported uses included, is
			// already counted, and we stopped serving it before it lapsed.
			c.quota.Store(0)
		}
		mine := plan.mine
		if release {
			// Stop serving first: every use taken from the quota is then in
			// the pending count reported by this write, and nothing is held.
			c.quota.Store(0)
			c.pending.Add(served)
			served = c.pending.Swap(0)
			plan = planReservation(st, link.Spec.MaxUses, u.opts.Holder, c.held, served, now, u.opts.FlushInterval)
			mine = 0
		}
		granted := int64(0)
		if grow && !release && link.Spec.MaxUses != nil {
			// At most half of what is free, split among the holders: single
			// uses at the limit's edge, whatever the demand.
			granted = min(u.nextBlock(c, now), max(plan.free/int64(2*(len(plan.others)+1)), 1), plan.free)
			granted = max(granted, 0)
		}
		mine += granted
		reservations := plan.others
		if link.Spec.MaxUses != nil && mine > 0 {
			reservations = append(reservations, linkv1.UseReservation{
				Holder: u.opts.Holder, Quota: mine, ExpiresAt: metav1.NewMicroTime(now.Add(u.opts.Lease)),
			})
		}
		sort.Slice(reservations, func(i, j int) bool { return reservations[i].Holder < reservations[j].Holder })
		st.UseReservations = reservations
		st.Uses = plan.uses
		if !u.spend(ctx, mode) {
			c.pending.Add(served)
			return 0, errNoBudget
		}
		err := u.opts.Client.Status().Update(ctx, link)
		switch {
		case err == nil:
			u.metrics.writes.WithLabelValues("ok").Inc()
			u.metrics.forfeited.Add(float64(plan.forfeited))
			c.held = mine
			c.quota.Add(granted)
			if granted > 0 {
				c.block, c.lastGrant = granted, now
			}
			if mine > 0 {
				// Stop serving a quarter of a lease before it lapses, so that
				// a replica whose clock runs up to that much behind the others'
				// never serves quota they already took back.
				c.leaseEnd.Store(now.Add(u.opts.Lease - u.opts.Lease/4).UnixNano())
				u.hold(c, true)
			} else {
				c.quota.Store(0)
				u.hold(c, false)
			}
			if grow && granted == 0 && link.Spec.MaxUses != nil {
				if plan.uses >= *link.Spec.MaxUses {
					u.deny(c, true, time.Second)
				} else {
					u.deny(c, false, min(max(time.Until(plan.busyUntil), time.Second), u.opts.FlushInterval))
				}
			}
			return granted, nil
		case apierrors.IsConflict(err):
			u.metrics.writes.WithLabelValues("conflict").Inc()
			c.pending.Add(served)
		default:
			u.metrics.writes.WithLabelValues("error").Inc()
			c.pending.Add(served)
			if apierrors.IsNotFound(err) {
				return 0, errLinkGone
			}
			return 0, err
		}
	}
	return 0, fmt.Errorf("status of %s kept changing under %d writes", c.name(), maxWriteAttempts)
}

// nextBlock is the size of c's next reservation: double the last if it was
// used up within a flush interval, half of it if it took more than two.
func (u *Uses) nextBlock(c *useCounter, now time.Time) int64 {
	switch since := now.Sub(c.lastGrant); {
	case c.block == 0:
		return 1
	case since < u.opts.FlushInterval:
		return min(2*c.block, u.opts.MaxBlock)
	case since > 2*u.opts.FlushInterval:
		return max(c.block/2, 1)
	}
	return c.block
}

// maxWriteAttempts bounds the conflict retries of one write.
const maxWriteAttempts = 4

var errNoBudget = errors.New("write budget spent for this round")

// reservationPlan is the status a reservation write starts from.
type reservationPlan struct {
	uses      int64                   // status.uses with our report and lapsed reservations added
	others    []linkv1.UseReservation // other replicas' live reservations
	mine      int64                   // our reservation's quota after the report
	free      int64                   // quota nobody holds (limited links)
	forfeited int64                   // quota of lapsed reservations counted as used
	lost      bool                    // our own reservation lapsed and was taken back
	busyUntil time.Time               // when the first other reservation lapses
}

// planReservation is the pure part of a reservation write: it adds the
// uses this replica served since its last write (held is its reservation's
// quota as it last wrote it), counts lapsed reservations of other replicas
// as used (their holders may have served them), and finds the quota left.
func planReservation(st *linkv1.ShortLinkStatus, maxUses *int64, holder string, held, served int64, now time.Time, grace time.Duration) reservationPlan {
	p := reservationPlan{uses: st.Uses}
	inAPI := int64(0)
	for _, res := range st.UseReservations {
		switch {
		case res.Holder == holder:
			inAPI = res.Quota
		case !now.Before(res.ExpiresAt.Add(grace)):
			// Lapsed a grace period ago: its holder had a flush interval
			// past the lapse (say, after an API outage) to renew it.
			p.uses += res.Quota
			p.forfeited += res.Quota
		default:
			if until := res.ExpiresAt.Add(grace); p.busyUntil.IsZero() || until.Before(p.busyUntil) {
				p.busyUntil = until
			}
			p.others = append(p.others, res)
		}
	}
	if held > 0 && inAPI == 0 {
		p.lost = true
	} else {
		p.uses += served
		p.mine = max(min(held, inAPI)-served, 0)
	}
	if maxUses != nil {
		p.free = *maxUses - p.uses - p.mine
		for _, res := range p.others {
			p.free -= res.Quota
		}
		p.free = max(p.free, 0)
	}
	return p
}

// budgetMode says how a write draws on the replica's write budget.
type budgetMode int

const (
	// budgetWait waits for the budget until the context ends: a request
	// waiting for quota.
	budgetWait budgetMode = iota
	// budgetRound waits until the round's end (a flush round may spend one
	// interval's budget); the write itself is not cut short by it, since a
	// write cancelled after the API server applied it would count twice.
	budgetRound
	// budgetNone ignores it (the final flush at shutdown, bounded by its
	// timeout instead).
	budgetNone
)

// spend takes one write from the budget as mode says.
func (u *Uses) spend(ctx context.Context, mode budgetMode) bool {
	if mode == budgetNone || u.budget.Allow() {
		return true
	}
	if mode == budgetRound {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, u.roundEnd)
		defer cancel()
	}
	return u.budget.Wait(ctx) == nil
}

func (u *Uses) hold(c *useCounter, on bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if on {
		u.holding[c] = struct{}{}
	} else {
		delete(u.holding, c)
	}
}

// writeCount writes the pending uses of an unlimited link: a merge patch of
// status.uses on the version the informer showed last, with its
// resourceVersion as precondition, so no read precedes the common write;
// a conflict retries on a live read. c.mu is held.
func (u *Uses) writeCount(ctx context.Context, c *useCounter, mode budgetMode) error {
	l := c.latest.Load()
	if l == nil {
		return errLinkGone
	}
	rv, base := l.ResourceVersion, l.statusUses
	for attempt := 0; attempt < maxWriteAttempts; attempt++ {
		served := c.pending.Swap(0)
		if served == 0 {
			return nil
		}
		if !u.spend(ctx, mode) {
			c.pending.Add(served)
			return errNoBudget
		}
		patch := []byte(`{"metadata":{"resourceVersion":` + strconv.Quote(rv) + `},"status":{"uses":` + strconv.FormatInt(base+served, 10) + `}}`)
		obj := &linkv1.ShortLink{ObjectMeta: metav1.ObjectMeta{Namespace: l.Namespace, Name: l.Name}}
		err := u.opts.Client.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
		switch {
		case err == nil:
			u.metrics.writes.WithLabelValues("ok").Inc()
			return nil
		case apierrors.IsConflict(err):
			u.metrics.writes.WithLabelValues("conflict").Inc()
			c.pending.Add(served)
			live := &linkv1.ShortLink{}
			if err := u.opts.Client.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
				if apierrors.IsNotFound(err) {
					return errLinkGone
				}
				return err
			}
			rv, base = live.ResourceVersion, live.Status.Uses
		case apierrors.IsNotFound(err):
			return errLinkGone
		default:
			u.metrics.writes.WithLabelValues("error").Inc()
			c.pending.Add(served)
			return err
		}
	}
	return fmt.Errorf("status of %s kept changing under %d writes", c.name(), maxWriteAttempts)
}

// flushOne writes what c has to write: its pending uses, and for a held
// reservation a renewal, or the return of its unused quota when it served
// nothing since the last write (idle) or release is set.
func (u *Uses) flushOne(ctx context.Context, c *useCounter, release bool, mode budgetMode) error {
	if !u.lock(ctx, c) {
		return ctx.Err()
	}
	defer u.unlock(c)
	l := c.latest.Load()
	switch {
	case c.held > 0:
		idle := c.pending.Load() == 0
		_, err := u.writeReservation(ctx, c, false, release || idle, mode)
		return err
	case l != nil && l.is(flagMaxUses):
		if c.pending.Load() == 0 {
			return nil
		}
		_, err := u.writeReservation(ctx, c, false, false, mode)
		return err
	default:
		return u.writeCount(ctx, c, mode)
	}
}

// Flush runs one round: every link with pending uses or a reservation gets
// at most one write, reservations first (they lapse), then the links in the
// order they started waiting, as far as the write budget allows; the rest
// wait for the next round. At shutdown (final) it writes everything without
// the budget, until ctx ends, and returns every reservation's unused quota.
// It returns how many uses are still pending.
func (u *Uses) Flush(ctx context.Context, final bool) int64 {
	var todo []*useCounter
	held := map[*useCounter]bool{}
	u.mu.Lock()
	for c := range u.holding {
		todo = append(todo, c)
		held[c] = true
	}
	u.mu.Unlock()
	var waiting []*useCounter
	for c := u.dirty.Swap(nil); c != nil; {
		next := c.next
		c.next = nil
		c.queued.Store(false)
		waiting = append(waiting, c)
		c = next
	}
	// The stack is newest first.
	slices.Reverse(waiting)
	for _, c := range waiting {
		if !held[c] {
			todo = append(todo, c)
		}
	}

	// A round may spend the budget of one interval: it waits for tokens
	// until the next round is due, and leaves the rest to that round.
	mode := budgetRound
	u.roundEnd = time.Now().Add(u.opts.FlushInterval)
	if final {
		mode = budgetNone
	}
	var pending int64
	budgetSpent := false
	for _, c := range todo {
		if !budgetSpent && ctx.Err() == nil {
			wctx, cancel := context.WithTimeout(ctx, u.writeTimeout())
			err := u.flushOne(wctx, c, final, mode)
			cancel()
			switch {
			case errors.Is(err, errLinkGone):
				c.pending.Store(0)
			case errors.Is(err, errNoBudget):
				budgetSpent = true
			case err != nil:
				// The API server is unreachable or refusing: the rest of
				// the round would only wait for it too.
				u.opts.Log.Info("cannot write uses yet; they wait for the next round", "link", c.name(), "error", err.Error())
				budgetSpent = !final
			}
		}
		if n := c.pending.Load(); n > 0 {
			pending += n
			u.markDirty(c)
		}
	}
	u.metrics.pending.Set(float64(pending))
	return pending
}

// writeTimeout bounds one write of a flush round, so that a hung API
// server holds a link's lock (and the requests waiting for quota) no longer.
func (u *Uses) writeTimeout() time.Duration {
	return 10 * time.Second
}

// Start writes counts every flush interval until ctx ends. The final flush
// is Stop's, once the redirect port no longer serves.
func (u *Uses) Start(ctx context.Context) error {
	t := time.NewTicker(u.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			u.Flush(ctx, false)
		}
	}
}

// NeedLeaderElection is false: every replica counts its own uses.
func (*Uses) NeedLeaderElection() bool { return false }

// Stop writes what is pending and returns unused quota, until ctx ends.
// Call it after the redirect port has stopped serving.
func (u *Uses) Stop(ctx context.Context) int64 {
	return u.Flush(ctx, true)
}

// usesMetrics count the writes of uses; none has a per-link label.
type usesMetrics struct {
	writes       *prometheus.CounterVec
	reservations *prometheus.CounterVec
	unavailable  prometheus.Counter
	forfeited    prometheus.Counter
	pending      prometheus.Gauge
}

func newUsesMetrics(reg prometheus.Registerer) *usesMetrics {
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: name, Help: help}
	}
	m := &usesMetrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts(opts("uses_writes_total",
			"Status writes of uses and reservations, by result: ok, conflict (a 409, retried on a fresh read) or error (retried next round).")), []string{"result"}),
		reservations: prometheus.NewCounterVec(prometheus.CounterOpts(opts("uses_reservations_total",
			"Reservations of maxUses quota asked by requests, by result: granted, denied (no quota left to reserve) or error (API server unreachable).")), []string{"result"}),
		unavailable: prometheus.NewCounter(prometheus.CounterOpts(opts("uses_quota_denied_total",
			"GETs of a link with maxUses that this replica could not serve from its quota (answered 503, or 410 once the limit is reached)."))),
		forfeited: prometheus.NewCounter(prometheus.CounterOpts(opts("uses_forfeited_total",
			"Quota of lapsed reservations (their replica stopped without returning it) counted as used by this replica's writes."))),
		pending: prometheus.NewGauge(prometheus.GaugeOpts(opts("uses_pending",
			"Uses served and not yet written to the API server, after the last flush round."))),
	}
	if reg != nil {
		reg.MustRegister(m.writes, m.reservations, m.unavailable, m.forfeited, m.pending)
	}
	return m
}
