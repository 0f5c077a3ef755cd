package uses

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// reserve reserves a block of quota for c, unless another request did while
// this one waited for the lock.
func (u *Uses) reserve(c *Counter, deadline time.Time) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if !u.lock(ctx, c) {
		u.deny(c, false, time.Second)
		return
	}
	defer u.unlock(c)
	at := u.mono(u.opts.Clock())
	if l := c.lim(); l.quota.Load() > 0 && at < l.leaseEnd.Load() || at < l.denied.Load() {
		return
	}
	start := time.Now()
	// A reservation that lost its races to the other replicas' writes
	// (each conflicting, maxWriteAttempts in a row) tries again until the
	// request's deadline: quota that is free is reserved within
	// ReserveTimeout, not answered 503 at once.
	var granted int64
	err := untilWon(ctx, func() (err error) {
		granted, err = u.writeReservation(ctx, c, true, false, budgetWait)
		return err
	})
	u.metrics.reserveWait.Observe(time.Since(start).Seconds())
	switch {
	case err != nil:
		u.metrics.reservations.WithLabelValues(reservationFailure(err)).Inc()
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

// reservationFailure is the result a failed reservation is counted under:
// the replica's own write budget, the other replicas' writes, or the API
// server.
func reservationFailure(err error) string {
	switch {
	case errors.Is(err, errNoBudget):
		return resultBudget
	case errors.Is(err, errLostRaces):
		return resultContended
	}
	return resultError
}

func (u *Uses) deny(c *Counter, gone bool, retryAfter time.Duration) {
	l := c.lim()
	l.deniedGone.Store(gone)
	l.retryAfter.Store(max(1, int64((retryAfter+time.Second-1)/time.Second)))
	// Retry no sooner than a second: a burst of requests on a link with no
	// quota costs one read a second, not one per request.
	l.denied.Store(u.mono(u.opts.Clock().Add(min(max(retryAfter, 200*time.Millisecond), time.Second))))
}

var (
	errLinkGone = errors.New("link deleted")
	errNoBudget = errors.New("write budget spent for this round")
	// errLostRaces: each attempt of a write conflicted, other replicas
	// having written the link between its read and its patch.
	errLostRaces = errors.New("lost the race to other writers at every attempt")
)

func lostRaces(c *Counter) error {
	return fmt.Errorf("status of %s kept changing under %d writes: %w", c.name(), maxWriteAttempts, errLostRaces)
}

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
	key := v.key()
	// A first reservation of a link the informer shows with none writes on
	// that version, its resourceVersion the precondition: one round trip
	// for a first click, not a read and a write. If the version is stale
	// the write conflicts and the next attempt reads live.
	l := c.lim()
	onInformer := grow && l.held == 0 && l.unconfirmed == nil && v.NoReservations && v.ResourceVersion != ""
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
	return 0, lostRaces(c)
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
	l := c.lim()
	if l.unconfirmed != nil {
		u.settle(c, &link.Status, link.Spec.MaxUses)
	}
	if u.askedToReturn(c, &link.Status) {
		release, grow = true, false
	}
	if release {
		c.stopServing()
	}
	served := c.pending.Swap(0)
	split := c.takeSplit() // after the swap: each click counted before its use
	l.deferred = 0
	plan := PlanReservation(PlanInput{
		Status: &link.Status, MaxUses: link.Spec.MaxUses, Holder: u.opts.Holder,
		Held: l.held, Served: served, Now: now, Lease: u.opts.Lease, Grace: u.opts.FlushInterval, Seen: l.seen,
	})
	if plan.Lost {
		l.quota.Store(0)
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
	asked := grow && !release && granted == 0 && askReturn(reservations, l.askReturn.Load())
	reservations, expires := u.withMine(c, reservations, mine, now)
	sort.Slice(reservations, func(i, j int) bool { return reservations[i].Holder < reservations[j].Holder })
	delta := quotaDelta(mine, l.held, served, release, plan.Lost)
	var lastUsed *metav1.Time
	if served > 0 {
		// Read after the swap: every use of this batch was served before it.
		lastUsed = usedAt(u.opts.Clock(), link.Status.LastUsedAt)
	}
	w := written{mine: mine, granted: granted, delta: delta, expires: expires, now: now, grow: grow && !ahead, asked: asked, served: served}
	if mine == 0 && served == 0 && !asked && plan.Uses == link.Status.Uses && len(reservations) == len(link.Status.UseReservations) {
		// The status would not change (a reservation denied, nothing
		// to report): no write.
		split.putBack() // a forwarded click's, if any: with the next write
		u.written(c, link.Spec.MaxUses, plan, w)
		return 0, true, nil
	}
	vu, setVU := split.variantUses(link.Status.VariantUses)
	var variantUses *[]linkv1.VariantUses
	if setVU {
		variantUses = &vu
	}
	err = u.patchStatus(ctx, link, plan.Uses, lastUsed, reservations, variantUses)
	switch {
	case err == nil:
		u.metrics.writes.WithLabelValues("ok").Inc()
		u.written(c, link.Spec.MaxUses, plan, w)
		return granted, true, nil
	case apierrors.IsConflict(err):
		u.metrics.writes.WithLabelValues("conflict").Inc()
		c.pending.Add(served)
		split.putBack()
	case definite(err):
		u.metrics.writes.WithLabelValues(resultError).Inc()
		c.pending.Add(served)
		split.putBack()
		if apierrors.IsNotFound(err) {
			return 0, true, errLinkGone
		}
		return 0, true, err
	default:
		// The API server may have applied it. Serve as if it had for
		// what it took away, as if it had not for what it added, and
		// let the next live read tell.
		u.metrics.writes.WithLabelValues(resultError).Inc()
		l.quota.Add(min(delta, 0))
		l.unconfirmed = &unconfirmedWrite{served: served, mine: mine, expires: expires, delta: delta, sent: now, forfeited: plan.Forfeited, split: split}
		if link.Spec.MaxUses != nil {
			l.unconfirmed.maxUses = *link.Spec.MaxUses
		}
		if link.Spec.MaxUses != nil && *link.Spec.MaxUses < l.grantMax.Load() {
			l.grantMax.Store(*link.Spec.MaxUses)
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
	return u.readLive(ctx, c, key)
}

// written is what a reservation write applied.
type written struct {
	mine, granted, delta int64
	expires, now         time.Time
	grow                 bool
	// asked: the write asked a holder this replica could not reach to
	// return its quota (see requestReturn).
	asked bool
	// served is what it reported of this replica's uses.
	served int64
}

// written records a reservation write the API server applied (or one
// that had nothing to change).
func (u *Uses) written(c *Counter, maxUses *int64, plan Plan, w written) {
	u.metrics.forfeited.Add(float64(plan.Forfeited))
	l := c.lim()
	l.seen = plan.Seen
	if w.served > 0 {
		u.endAhead(c) // used: an ordinary reservation from now on
	}
	l.held, l.heldExpires = w.mine, w.expires
	if w.granted > 0 {
		l.block, l.lastGrant = w.granted, w.now
	}
	if w.mine > 0 {
		l.quota.Add(w.delta)
		u.startLease(c, w.now, *maxUses)
		u.hold(c, true)
	} else {
		l.quota.Store(0)
		u.hold(c, false)
		u.endAhead(c)
	}
	if w.asked || w.granted > 0 {
		l.askReturn.Store(nil)
	}
	if w.grow && w.granted == 0 && maxUses != nil {
		switch {
		case plan.Uses >= *maxUses:
			u.deny(c, true, time.Second)
		case w.asked:
			// The holder returns its quota within a round trip or two:
			// the next click tries again soon (deny's least wait).
			u.deny(c, false, 0)
		default:
			u.deny(c, false, min(max(plan.BusyUntil.Sub(w.now), time.Second), u.opts.FlushInterval))
		}
	}
}

// startLease lets c serve its quota for a lease from now (taken before the
// write was sent), unless the informer already shows a lower limit than
// maxUses, the one the reservation was written under.
func (u *Uses) startLease(c *Counter, now time.Time, maxUses int64) {
	l := c.lim()
	l.leaseEnd.Store(u.mono(now.Add(u.opts.Lease)))
	l.grantMax.Store(maxUses)
	if v, ok := c.version(); ok && v.MaxUses > 0 && v.MaxUses < maxUses {
		l.leaseEnd.Store(0)
	}
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
		// VariantUses, when set, replaces status.variantUses (null clears it).
		VariantUses *[]linkv1.VariantUses `json:"variantUses,omitempty"`
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

// patchStatus writes uses, lastUsedAt (unless nil), reservations and
// variantUses (unless nil) as a
// merge patch with link's resourceVersion as precondition: the fields of
// the status it does not know (a newer controller's, during an upgrade) are
// kept.
func (u *Uses) patchStatus(ctx context.Context, link *linkv1.ShortLink, uses int64, lastUsed *metav1.Time, reservations []linkv1.UseReservation, variantUses *[]linkv1.VariantUses) error {
	var p statusPatch
	p.Metadata.ResourceVersion = link.ResourceVersion
	p.Status.Uses, p.Status.LastUsedAt, p.Status.UseReservations = uses, lastUsed, reservations
	p.Status.VariantUses = variantUses
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
	l := c.lim()
	switch since := now.Sub(l.lastGrant); {
	case l.block == 0:
		return 1
	case since < u.opts.Lease:
		return min(2*l.block, u.opts.MaxBlock)
	case since > 2*u.opts.Lease:
		return max(l.block/2, 1)
	}
	return l.block
}

// quotaDelta is what a write changes of the quota this replica serves:
// its new reservation (mine) less what the old one (held, of which served
// were used) still held; nothing when it releases (it serves nothing from
// now on, whatever the outcome), all of mine when the old was taken back.
func quotaDelta(mine, held, served int64, release, lost bool) int64 {
	switch {
	case release:
		return 0
	case lost:
		return mine
	}
	return mine - (held - served)
}

// askedToReturn reports whether st shows this replica's reservation marked
// returnRequested: another replica could not reach it. The write that read
// it then returns the reservation's unused quota, and the link is not
// reserved ahead here again. c's lock is held.
func (u *Uses) askedToReturn(c *Counter, st *linkv1.ShortLinkStatus) bool {
	for _, r := range st.UseReservations {
		if r.Holder == u.opts.Holder && r.ReturnRequested {
			c.lim().noAhead.Store(true)
			u.endAhead(c)
			u.metrics.returns.WithLabelValues("asked").Inc()
			return true
		}
	}
	return false
}

// stopServing stops c's quota, and waits for the requests that took quota
// and have not counted it yet: every use taken is then in the count the
// next write reports.
func (c *Counter) stopServing() {
	l := c.lim()
	l.quota.Store(0)
	for l.taking.Load() != 0 {
		runtime.Gosched()
	}
}

// withMine adds this replica's reservation of mine (none if 0) to
// reservations, and returns the expiresAt that marks this write.
func (u *Uses) withMine(c *Counter, reservations []linkv1.UseReservation, mine int64, now time.Time) ([]linkv1.UseReservation, time.Time) {
	if mine == 0 {
		return reservations, time.Time{}
	}
	// The marker of this write (see settle): microseconds, as stored.
	expires := now.Add(u.opts.Lease).Round(0).Truncate(time.Microsecond)
	if held := c.lim().heldExpires; !expires.After(held) {
		// Each write's marker is its own, even within a microsecond.
		expires = held.Add(time.Microsecond)
	}
	return append(reservations, Reservation(u.opts.Holder, mine, expires, u.peer())), expires
}

// Reservation is the reservation a holder writes: quota until expires,
// taking forwarded uses at peer ("": none) under the peer key. The address
// goes in peerAddress alone: v0.3.0 replicas read peer, and believe any
// answer there (see linkv1.UseReservation.Peer).
func Reservation(holder string, quota int64, expires time.Time, peer string) linkv1.UseReservation {
	r := linkv1.UseReservation{Holder: holder, Quota: quota, ExpiresAt: metav1.NewMicroTime(expires), PeerAddress: peer}
	if peer != "" {
		r.PeerProtocol = linkv1.PeerProtocolHMACv1
	}
	return r
}

// askReturn marks the reservation of holder (the one a forward could not
// reach, nil: none) in reservations as asked to be returned, if it holds
// quota and is not marked yet, and reports whether it did.
func askReturn(reservations []linkv1.UseReservation, holder *string) bool {
	if holder == nil {
		return false
	}
	for i := range reservations {
		if r := &reservations[i]; r.Holder == *holder && r.Quota > 0 && !r.ReturnRequested {
			r.ReturnRequested = true
			return true
		}
	}
	return false
}
