package uses

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
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
	}
	u.metrics = newMetrics(opts.Registry)
	return u
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
	if c == nil || c.uid != v.UID {
		c = &Counter{uid: v.UID}
	}
	c.latest.Store(cur)
	// After latest: a write that stores grantMax and then reads latest
	// sees this version, or this check sees its grantMax.
	if g := c.grantMax.Load(); v.MaxUses > 0 && v.MaxUses < g {
		c.leaseEnd.Store(0)
		u.metrics.limitLowered.Inc()
	}
	return c
}

// Count records one use of an unlimited link (the request path).
func (u *Uses) Count(c *Counter) {
	if c.pending.Add(1) == 1 {
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
// the request path's atomics; the reservation waits at most
// ReserveTimeout, and concurrent requests share it.
func (u *Uses) Take(c *Counter, now time.Time) Verdict {
	at := u.mono(now)
	for attempt := 0; ; attempt++ {
		if u.takeLocal(c, at) {
			return Served
		}
		if attempt == 0 && u.forward(c, at) {
			return Served
		}
		if attempt > 0 || at < c.denied.Load() {
			break
		}
		u.reserve(c)
	}
	u.metrics.unavailable.Inc()
	if c.deniedGone.Load() {
		return Exhausted
	}
	return Unavailable
}

// takeLocal serves one use from this replica's quota and counts it.
func (u *Uses) takeLocal(c *Counter, at int64) bool {
	c.taking.Add(1)
	defer c.taking.Add(-1)
	if !c.take(at) {
		return false
	}
	if c.pending.Add(1) == 1 {
		u.markDirty(c)
	}
	return true
}

// TakeHeld serves one use of c's link from this replica's quota, for
// another replica that forwarded the request (see Forwarder); it never
// reserves, so a forwarded use costs no API request.
func (u *Uses) TakeHeld(c *Counter, now time.Time) bool {
	if !u.takeLocal(c, u.mono(now)) {
		u.metrics.peerTakes.WithLabelValues("refused").Inc()
		return false
	}
	u.metrics.peerTakes.WithLabelValues("served").Inc()
	return true
}

// reserve reserves a block of quota for c, unless another request did while
// this one waited for the lock.
func (u *Uses) reserve(c *Counter) {
	ctx, cancel := context.WithTimeout(context.Background(), u.opts.ReserveTimeout)
	defer cancel()
	if !u.lock(ctx, c) {
		u.deny(c, false, time.Second)
		return
	}
	defer u.unlock(c)
	at := u.mono(u.opts.Clock())
	if c.quota.Load() > 0 && at < c.leaseEnd.Load() || at < c.denied.Load() {
		return
	}
	start := time.Now()
	granted, err := u.writeReservation(ctx, c, true, false, budgetWait)
	u.metrics.reserveWait.Observe(time.Since(start).Seconds())
	switch {
	case err != nil:
		u.metrics.reservations.WithLabelValues(resultError).Inc()
		u.opts.Log.V(1).Info("cannot reserve uses", "link", c.name(), "error", err.Error())
		u.deny(c, false, time.Second)
		if errors.Is(err, errLinkGone) {
			u.endAhead(c)
		}
	case granted > 0:
		u.metrics.reservations.WithLabelValues("granted").Inc()
	default:
		u.metrics.reservations.WithLabelValues("denied").Inc()
	}
}

func (u *Uses) deny(c *Counter, gone bool, retryAfter time.Duration) {
	c.deniedGone.Store(gone)
	c.retryAfter.Store(max(1, int64((retryAfter+time.Second-1)/time.Second)))
	// Retry no sooner than a second: a burst of requests on a link with no
	// quota costs one read a second, not one per request.
	c.denied.Store(u.mono(u.opts.Clock().Add(min(max(retryAfter, 200*time.Millisecond), time.Second))))
}

var (
	errLinkGone = errors.New("link deleted")
	errNoBudget = errors.New("write budget spent for this round")
)

// maxWriteAttempts bounds the conflict retries of one write.
const maxWriteAttempts = 4

// writeReservation reads the link live and writes its status with the
// resourceVersion as a precondition: the uses pending in c and this
// replica's reservation, renewed, grown by a new block (grow) or returned
// (release). It retries conflicts on a fresh read and returns the quota
// granted. c's lock is held. A request waiting for quota passes
// budgetWait; a flush round does not wait past its end.
func (u *Uses) writeReservation(ctx context.Context, c *Counter, grow, release bool, mode budgetMode) (int64, error) {
	v, ok := c.version()
	if !ok {
		return 0, errLinkGone
	}
	key := types.NamespacedName{Namespace: v.Namespace, Name: v.Name}
	// A first reservation of a link the informer shows with none writes on
	// that version, its resourceVersion the precondition: one round trip
	// for a first click, not a read and a write. If the version is stale
	// the write conflicts and the next attempt reads live.
	onInformer := grow && c.held == 0 && c.unconfirmed == nil && v.NoReservations && v.ResourceVersion != "" && v.UID == c.uid
	for attempt := 0; attempt < maxWriteAttempts; attempt++ {
		// The budget is spent before the read: a read and a write per token.
		if !u.spend(ctx, mode) {
			return 0, errNoBudget
		}
		granted, done, err := u.writeReservationOnce(ctx, c, key, v, attempt == 0 && onInformer, grow, release, mode == budgetAhead)
		if done {
			return granted, err
		}
	}
	return 0, fmt.Errorf("status of %s kept changing under %d writes", c.name(), maxWriteAttempts)
}

// writeReservationOnce is one attempt of writeReservation; done is false
// when the write conflicted and is to be retried on a live read.
func (u *Uses) writeReservationOnce(ctx context.Context, c *Counter, key types.NamespacedName, v LinkVersion, onInformer, grow, release, ahead bool) (granted int64, done bool, err error) {
	link, err := u.readLink(ctx, c, key, v, onInformer)
	if err != nil {
		return 0, true, err
	}
	if ahead && (len(link.Status.UseReservations) > 0 || link.Status.Uses > 0) {
		return 0, true, nil // another replica reserved it first, or it was used
	}
	now := u.opts.Clock()
	if c.unconfirmed != nil {
		u.settle(c, &link.Status, link.Spec.MaxUses)
	}
	if release {
		// Stop serving first, and wait for the requests that took quota
		// and have not counted it yet: every use taken is then in the
		// count this write reports.
		c.quota.Store(0)
		for c.taking.Load() != 0 {
			runtime.Gosched()
		}
	}
	served := c.pending.Swap(0)
	c.deferred = 0
	plan := PlanReservation(PlanInput{
		Status: &link.Status, MaxUses: link.Spec.MaxUses, Holder: u.opts.Holder,
		Held: c.held, Served: served, Now: now, Lease: u.opts.Lease, Grace: u.opts.FlushInterval, Seen: c.seen,
	})
	if plan.Lost {
		c.quota.Store(0)
	}
	mine := plan.Mine
	switch {
	case release || link.Spec.MaxUses == nil:
		mine = 0
	case grow:
		granted = Grant(plan, u.nextBlock(c, now))
		mine += granted
	}
	reservations := slices.Clone(plan.Others)
	var expires time.Time
	if mine > 0 {
		// The marker of this write (see settle): microseconds, as stored.
		expires = now.Add(u.opts.Lease).Round(0).Truncate(time.Microsecond)
		if !expires.After(c.heldExpires) {
			// Each write's marker is its own, even within a microsecond.
			expires = c.heldExpires.Add(time.Microsecond)
		}
		reservations = append(reservations, linkv1.UseReservation{
			Holder: u.opts.Holder, Quota: mine, ExpiresAt: metav1.NewMicroTime(expires), Peer: u.opts.Peer,
		})
	}
	sort.Slice(reservations, func(i, j int) bool { return reservations[i].Holder < reservations[j].Holder })
	// What this write changes of the quota this replica serves: its
	// new reservation less what the old one still held.
	delta := mine - (c.held - served)
	switch {
	case release:
		delta = 0 // it serves nothing from now on, whatever the outcome
	case plan.Lost:
		delta = mine
	}
	var lastUsed *metav1.Time
	if served > 0 {
		// Read after the swap: every use of this batch was served before it.
		lastUsed = usedAt(u.opts.Clock(), link.Status.LastUsedAt)
	}
	w := written{mine: mine, granted: granted, delta: delta, expires: expires, now: now, grow: grow && !ahead}
	if mine == 0 && served == 0 && plan.Uses == link.Status.Uses && len(reservations) == len(link.Status.UseReservations) {
		// The status would not change (a reservation denied, nothing
		// to report): no write.
		u.written(c, link.Spec.MaxUses, plan, w)
		return 0, true, nil
	}
	err = u.patchStatus(ctx, link, plan.Uses, lastUsed, reservations)
	switch {
	case err == nil:
		u.metrics.writes.WithLabelValues("ok").Inc()
		u.written(c, link.Spec.MaxUses, plan, w)
		return granted, true, nil
	case apierrors.IsConflict(err):
		u.metrics.writes.WithLabelValues("conflict").Inc()
		c.pending.Add(served)
	case definite(err):
		u.metrics.writes.WithLabelValues(resultError).Inc()
		c.pending.Add(served)
		if apierrors.IsNotFound(err) {
			return 0, true, errLinkGone
		}
		return 0, true, err
	default:
		// The API server may have applied it. Serve as if it had for
		// what it took away, as if it had not for what it added, and
		// let the next live read tell.
		u.metrics.writes.WithLabelValues(resultError).Inc()
		c.quota.Add(min(delta, 0))
		c.unconfirmed = &unconfirmedWrite{served: served, mine: mine, expires: expires, delta: delta, sent: now, forfeited: plan.Forfeited}
		if link.Spec.MaxUses != nil {
			c.unconfirmed.maxUses = *link.Spec.MaxUses
		}
		if link.Spec.MaxUses != nil && *link.Spec.MaxUses < c.grantMax.Load() {
			c.grantMax.Store(*link.Spec.MaxUses)
		}
		u.markDirty(c)
		return 0, true, err
	}
	return 0, false, nil // a conflict: again, on a live read
}

// readLink is the link a reservation write starts from: the informer's
// version v when onInformer, else a live read of key (errLinkGone if it is
// no longer c's object).
func (u *Uses) readLink(ctx context.Context, c *Counter, key types.NamespacedName, v LinkVersion, onInformer bool) (*linkv1.ShortLink, error) {
	if onInformer {
		u.metrics.reads.WithLabelValues("informer").Inc()
		return v.asLink(), nil
	}
	u.metrics.reads.WithLabelValues("live").Inc()
	link := &linkv1.ShortLink{}
	if err := u.opts.Client.Get(ctx, key, link); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, errLinkGone
		}
		return nil, err
	}
	if UIDKey(link.UID) != c.uid {
		return nil, errLinkGone
	}
	return link, nil
}

// written is what a reservation write applied.
type written struct {
	mine, granted, delta int64
	expires, now         time.Time
	grow                 bool
}

// written records a reservation write the API server applied (or one
// that had nothing to change).
func (u *Uses) written(c *Counter, maxUses *int64, plan Plan, w written) {
	u.metrics.forfeited.Add(float64(plan.Forfeited))
	c.seen = plan.Seen
	c.held, c.heldExpires = w.mine, w.expires
	if w.granted > 0 {
		c.block, c.lastGrant = w.granted, w.now
	}
	if w.mine > 0 {
		c.quota.Add(w.delta)
		u.startLease(c, w.now, *maxUses)
		u.hold(c, true)
	} else {
		c.quota.Store(0)
		u.hold(c, false)
		u.endAhead(c)
	}
	if w.grow && w.granted == 0 && maxUses != nil {
		if plan.Uses >= *maxUses {
			u.deny(c, true, time.Second)
		} else {
			u.deny(c, false, min(max(plan.BusyUntil.Sub(w.now), time.Second), u.opts.FlushInterval))
		}
	}
}

// startLease lets c serve its quota for a lease from now (taken before the
// write was sent), unless the informer already shows a lower limit than
// maxUses, the one the reservation was written under.
func (u *Uses) startLease(c *Counter, now time.Time, maxUses int64) {
	c.leaseEnd.Store(u.mono(now.Add(u.opts.Lease)))
	c.grantMax.Store(maxUses)
	if v, ok := c.version(); ok && v.MaxUses > 0 && v.MaxUses < maxUses {
		c.leaseEnd.Store(0)
	}
}

// settle decides whether c's unconfirmed write was applied, from the live
// status: our reservation carries the expiresAt of the last write applied.
func (u *Uses) settle(c *Counter, st *linkv1.ShortLinkStatus, liveMax *int64) {
	w := c.unconfirmed
	c.unconfirmed = nil
	var found time.Time
	for _, res := range st.UseReservations {
		if res.Holder == u.opts.Holder {
			found = res.ExpiresAt.Time
		}
	}
	applied := false
	switch {
	case !w.expires.IsZero() && found.Equal(w.expires):
		applied = true
	case !c.heldExpires.IsZero() && found.Equal(c.heldExpires):
		applied = false
	case found.IsZero() && c.held > 0:
		if w.mine > 0 {
			// Taken back by another replica: its whole quota, the uses
			// of this write included, is counted (the planner sees it
			// lost). Whether this write was applied cannot be told, and
			// does not matter but for what it took back (counted if it
			// was, or again by the next write if it was not).
			u.metrics.settled.WithLabelValues("taken-back").Inc()
			return
		}
		applied = true // the write returned our reservation
	}
	if applied {
		u.metrics.settled.WithLabelValues("applied").Inc()
		u.metrics.forfeited.Add(float64(w.forfeited))
		c.held, c.heldExpires = w.mine, w.expires
		c.quota.Add(max(w.delta, 0))
		if w.mine > 0 {
			// Under the limit it was written with; a lower one since (the
			// informer's, or this read's) stops it until the next write.
			u.startLease(c, w.sent, w.maxUses)
			if liveMax != nil && *liveMax < w.maxUses {
				c.leaseEnd.Store(0)
			}
		} else {
			c.quota.Store(0)
			u.endAhead(c)
		}
		return
	}
	// Not applied, or nothing tells: count its uses again (status.uses
	// may then read high, never low).
	u.metrics.settled.WithLabelValues("not-applied").Inc()
	c.pending.Add(w.served)
	c.quota.Add(-min(w.delta, 0))
}

// definite reports whether a write's error says the API server did not
// apply it (a 4xx answer), as opposed to a lost or failed response.
func definite(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	code := st.Status().Code
	return code >= 400 && code < 500 && code != 408
}

// statusPatch is the merge patch of a reservation write; useReservations
// null removes the list; lastUsedAt is left out when the write reports no
// use.
type statusPatch struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Status struct {
		Uses            int64                   `json:"uses"`
		LastUsedAt      *metav1.Time            `json:"lastUsedAt,omitempty"`
		UseReservations []linkv1.UseReservation `json:"useReservations"`
	} `json:"status"`
}

// usedAt is the status.lastUsedAt of a write that reports uses, sent at
// now: now rounded up to the second (the API's precision), so never
// earlier than a use it reports, and never before cur, the value it
// replaces (another replica's, perhaps with a clock ahead of ours).
func usedAt(now time.Time, cur *metav1.Time) *metav1.Time {
	at := ceilSecond(now)
	if cur != nil && cur.After(at) {
		at = cur.Time
	}
	t := metav1.NewTime(at)
	return &t
}

// ceilSecond rounds t up to a whole second.
func ceilSecond(t time.Time) time.Time {
	s := t.Truncate(time.Second)
	if s.Before(t) {
		s = s.Add(time.Second)
	}
	return s
}

// patchStatus writes uses, lastUsedAt (unless nil) and reservations as a
// merge patch with link's resourceVersion as precondition: the fields of
// the status it does not know (a newer controller's, during an upgrade) are
// kept.
func (u *Uses) patchStatus(ctx context.Context, link *linkv1.ShortLink, uses int64, lastUsed *metav1.Time, reservations []linkv1.UseReservation) error {
	var p statusPatch
	p.Metadata.ResourceVersion = link.ResourceVersion
	p.Status.Uses, p.Status.LastUsedAt, p.Status.UseReservations = uses, lastUsed, reservations
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	obj := &linkv1.ShortLink{ObjectMeta: metav1.ObjectMeta{Namespace: link.Namespace, Name: link.Name}}
	return u.opts.Client.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, body))
}

// nextBlock is the size of c's next reservation: double the last if it was
// used up within a lease, half of it if it took more than two. A replica
// holds about a lease's worth of a link's traffic, so that a link in use is
// topped up once per renewal, and a killed replica takes at most that with
// it (MaxBlock at most).
func (u *Uses) nextBlock(c *Counter, now time.Time) int64 {
	switch since := now.Sub(c.lastGrant); {
	case c.block == 0:
		return 1
	case since < u.opts.Lease:
		return min(2*c.block, u.opts.MaxBlock)
	case since > 2*u.opts.Lease:
		return max(c.block/2, 1)
	}
	return c.block
}

// budgetMode says how a write draws on the replica's write budget.
type budgetMode int

const (
	// budgetWait waits for the budget until the context ends: a request
	// waiting for quota.
	budgetWait budgetMode = iota
	// budgetRound waits until the round's end (a flush round may spend one
	// interval's budget).
	budgetRound
	// budgetNone ignores it (the final flush at shutdown, bounded by its
	// timeout instead).
	budgetNone
	// budgetAhead takes a token of the budget if one is free, without
	// waiting: a reservation ahead (see Ahead), which waited for aheadPace
	// before it took the link's lock.
	budgetAhead
)

// spend takes one write, and the read before it, from the budget as mode
// says. In any t seconds a replica writes at most ReserveBurst +
// WritesPerSecond*t times and reads at most as often, however many
// distinct limited links are clicked (the bound an attacker can put on the
// API server per replica; the final flush at shutdown aside).
func (u *Uses) spend(ctx context.Context, mode budgetMode) bool {
	switch mode {
	case budgetNone:
		return true
	case budgetRound:
		ctx, cancel := context.WithDeadline(ctx, u.roundEnd)
		defer cancel()
		return u.pace.Wait(ctx) == nil && u.budget.Wait(ctx) == nil
	case budgetAhead:
		// Its pace was waited for before the link's lock: a click on the
		// link never waits behind a reservation ahead that waits for tokens.
		return u.budget.Allow()
	}
	return u.budget.Allow() || u.budget.Wait(ctx) == nil
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

// writeCount writes the pending uses of an unlimited link: a merge patch of
// status.uses on the version the informer showed last, with its
// resourceVersion as precondition, so no read precedes the common write;
// a conflict retries on a live read. c's lock is held. A write whose
// response is lost is counted again (status.uses may read high by it).
func (u *Uses) writeCount(ctx context.Context, c *Counter, mode budgetMode) error {
	v, ok := c.version()
	if !ok {
		return errLinkGone
	}
	rv, base := v.ResourceVersion, v.StatusUses
	var lastUsed *metav1.Time
	if v.StatusLastUsed > 0 {
		t := metav1.Unix(v.StatusLastUsed, 0)
		lastUsed = &t
	}
	for attempt := 0; attempt < maxWriteAttempts; attempt++ {
		served := c.pending.Swap(0)
		if served == 0 {
			return nil
		}
		if !u.spend(ctx, mode) {
			c.pending.Add(served)
			return errNoBudget
		}
		// Taken after the swap: every use of this batch was served before it.
		at := usedAt(u.opts.Clock(), lastUsed).UTC().Format(time.RFC3339)
		patch := []byte(`{"metadata":{"resourceVersion":` + strconv.Quote(rv) + `},"status":{"uses":` + strconv.FormatInt(base+served, 10) + `,"lastUsedAt":"` + at + `"}}`)
		obj := &linkv1.ShortLink{ObjectMeta: metav1.ObjectMeta{Namespace: v.Namespace, Name: v.Name}}
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
			if UIDKey(live.UID) != c.uid {
				return errLinkGone
			}
			rv, base, lastUsed = live.ResourceVersion, live.Status.Uses, live.Status.LastUsedAt
		case apierrors.IsNotFound(err):
			return errLinkGone
		default:
			u.metrics.writes.WithLabelValues(resultError).Inc()
			c.pending.Add(served)
			return err
		}
	}
	return fmt.Errorf("status of %s kept changing under %d writes", c.name(), maxWriteAttempts)
}

// flushOne writes what c has to write: its pending uses, and for a held
// reservation a renewal, or the return of its unused quota when it served
// nothing since the last write (idle) or release is set.
func (u *Uses) flushOne(ctx context.Context, c *Counter, release bool, mode budgetMode) error {
	if !u.lock(ctx, c) {
		return ctx.Err()
	}
	defer u.unlock(c)
	v, _ := c.version()
	switch {
	case c.held > 0:
		pending := c.pending.Load()
		inUse := pending > c.deferred // served since the last round
		if c.ahead && (inUse || !u.opts.Clock().Before(c.aheadUntil)) {
			u.endAhead(c) // used, or no longer new: held as any other
		}
		if inUse {
			c.quietRounds = 0
		} else if !release {
			c.quietRounds++
			// Quiet for a lease: the quota goes back to the others, unless
			// it was reserved ahead of the first click of a new link.
			release = c.quietRounds >= u.quietRounds() && !c.ahead
		}
		if !release && u.deferWrite(c, v) {
			c.deferred = pending
			return nil
		}
		// A reservation used since its last write is topped up in the same
		// write: its next clicks are served from quota, not from a
		// reservation each.
		_, err := u.writeReservation(ctx, c, pending > 0 && !release, release, mode)
		if c.held == 0 || errors.Is(err, errLinkGone) {
			u.endAhead(c)
		}
		return err
	case v.MaxUses > 0 || c.unconfirmed != nil:
		if c.pending.Load() == 0 && c.unconfirmed == nil {
			return nil
		}
		_, err := u.writeReservation(ctx, c, false, release, mode)
		return err
	default:
		return u.writeCount(ctx, c, mode)
	}
}

// deferWrite reports whether a held reservation's write can wait for a
// later round: its lease lasts past the next round, it has quota left, and
// its uses (inside the reservation, so counted by anyone who takes it
// back) can arrive with the renewal, unless the link has an idleTimeout,
// whose lastUsedAt must arrive within the manager's --idle-grace. A link
// in use then costs a write per renewal, not one per round.
func (u *Uses) deferWrite(c *Counter, v LinkVersion) bool {
	if c.leaseEnd.Load()-u.mono(u.opts.Clock()) <= int64(u.opts.FlushInterval*3/2) || c.unconfirmed != nil {
		return false
	}
	return c.pending.Load() == 0 || c.quota.Load() > 0 && !v.IdleTimeout
}

// quietRounds is how many flush rounds a reservation serves nothing before
// its replica returns it: a lease's worth. A link clicked less often than
// every round keeps its quota (and costs a renewal every other round, not
// a reservation per click); a link gone quiet gives it back to the others.
func (u *Uses) quietRounds() int {
	return max(1, int(u.opts.Lease/u.opts.FlushInterval))
}

// Flush runs one round: every link with pending uses or a reservation due
// for renewal or return gets at most one write, reservations first in the order their leases end
// (they lapse), then the links in the order they started waiting, as far
// as the write budget allows; the rest wait for the next round. At
// shutdown (final) it writes everything without the budget, until ctx
// ends, and returns every reservation's unused quota. It returns how many
// uses are still pending.
func (u *Uses) Flush(ctx context.Context, final bool) int64 {
	var todo []*Counter
	held := map[*Counter]bool{}
	u.mu.Lock()
	for c := range u.holding {
		todo = append(todo, c)
		held[c] = true
	}
	u.mu.Unlock()
	dueFirst(todo)
	var waiting []*Counter
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
	u.roundEnd = time.Now().Add(u.opts.FlushInterval) // a real deadline for the budget's wait
	if final {
		mode = budgetNone
	}
	var pending int64
	budgetSpent := false
	for _, c := range todo {
		if !budgetSpent && ctx.Err() == nil {
			wctx, cancel := context.WithTimeout(ctx, writeTimeout)
			err := u.flushOne(wctx, c, final, mode)
			cancel()
			switch {
			case errors.Is(err, errLinkGone):
				c.pending.Store(0)
				u.hold(c, false)
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

// dueFirst orders held counters by the end of their leases, soonest first:
// when the budget is short, the renewals that cannot wait are written.
func dueFirst(held []*Counter) {
	sort.Slice(held, func(i, j int) bool { return held[i].leaseEnd.Load() < held[j].leaseEnd.Load() })
}

// writeTimeout bounds one write of a flush round, so that a hung API
// server holds a link's lock (and the requests waiting for quota) no longer.
const writeTimeout = 10 * time.Second

// Start writes counts every flush interval until ctx ends. The final flush
// is Stop's, once the redirect port no longer serves.
func (u *Uses) Start(ctx context.Context) error {
	if u.opts.ReserveAhead > 0 {
		// Returns after it: no reservation ahead is written after Stop's
		// final flush has taken its list of reservations to return.
		done := make(chan struct{})
		go func() {
			defer close(done)
			u.runAhead(ctx)
		}()
		defer func() { <-done }()
	}
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
