package uses

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"math"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// A campaign's first clicks (300 single-use invitations mailed at once)
// would each wait for a status write, and on a small API server 300 writes
// take half a second however they are sent. Two things keep them off the
// request path: quota reserved ahead, while the new links wait to be
// clicked (this file), and forwarding (forward.go), so that a click on a
// replica without the quota is served from the quota of the one that holds
// it, instead of waiting for a reservation that cannot be granted while
// the other holds it all.

// aheadSpread spreads the replicas' reservations ahead of a new link over
// this long, each replica at its own point (a hash of the link and the
// replica): the first one writes, and the others usually see its
// reservation in their informers before their turn, so a new link costs
// about one write, not one per replica.
const aheadSpread = 2 * time.Second

// Ahead offers c's link a reservation ahead of its first click. It is
// taken (by one replica, a block of one use) for a link with maxUses that
// was created within ReserveAhead and that nobody has used or reserved;
// the caller offers only links that answer now. The reservation is renewed
// while unused until ReserveAhead after the link's creation (a write per
// lease), then returned after a lease of quiet like any other. At most
// aheadMax reservations are held ahead, at most half the write budget's
// rate is spent on them, and a link clicked first elsewhere is served
// through its holder (Forwarder): a campaign's first clicks cost no write.
func (u *Uses) Ahead(c *Counter) {
	if u.opts.ReserveAhead <= 0 || c == nil || u.aheadStopped.Load() {
		return
	}
	v, ok := c.version()
	now := u.opts.Clock()
	if !ok || !u.aheadEligible(v, now) {
		return
	}
	if c.lim().noAhead.Load() {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	// The queue holds more than a replica may hold ahead: the replicas
	// share a campaign larger than that.
	if _, queued := u.aheadQueue[c]; queued || len(u.aheadQueue) >= 10*u.aheadMax() {
		return
	}
	u.aheadQueue[c] = now.Add(aheadOffset(v.UID, u.opts.Holder))
}

// aheadEligible reports whether v may be reserved ahead at now. Without a
// peer port the others could only wait for the reservation to lapse; one
// that does not answer yet (no peer key read) is waited for when the link
// falls due (reserveAheadOne), not here: a link that arrives first is
// offered once only.
func (u *Uses) aheadEligible(v LinkVersion, now time.Time) bool {
	return u.opts.Peer != "" && v.MaxUses > 0 && v.NoReservations && v.StatusUses == 0 && v.Created > 0 &&
		now.Sub(time.Unix(v.Created, 0)) < u.opts.ReserveAhead
}

// offerAheadAgain queues c to be reserved ahead after d.
func (u *Uses) offerAheadAgain(c *Counter, d time.Duration) {
	u.mu.Lock()
	u.aheadQueue[c] = u.opts.Clock().Add(d)
	u.mu.Unlock()
}

// aheadMax is how many reservations a replica holds ahead: their renewals,
// one every renewEvery each, take at most a quarter of the write budget
// (250 with the defaults: 20/s / 4 x 50 s).
func (u *Uses) aheadMax() int {
	return max(1, int(u.opts.WritesPerSecond/4*u.renewEvery().Seconds()))
}

// renewEvery is how often an unused reservation is written: in the first
// flush round when its lease has at most 1.5 rounds left (deferWrite), so
// every ceil(lease/interval - 1.5) rounds (5 with the defaults).
func (u *Uses) renewEvery() time.Duration {
	rounds := math.Ceil(float64(u.opts.Lease)/float64(u.opts.FlushInterval) - 1.5)
	return time.Duration(max(rounds, 1)) * u.opts.FlushInterval
}

// aheadOffset is when, within aheadSpread, holder reserves the link uid.
func aheadOffset(uid uint64, holder string) time.Duration {
	h := fnv.New64a()
	_, _ = h.Write(binary.LittleEndian.AppendUint64(nil, uid))
	_, _ = h.Write([]byte(holder))
	return time.Duration(h.Sum64() % uint64(aheadSpread))
}

// runAhead reserves the offered links as they fall due, until ctx ends or
// StopAhead.
func (u *Uses) runAhead(ctx context.Context) {
	_ = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, false, func(ctx context.Context) (bool, error) {
		u.reserveAhead(ctx)
		return u.aheadStopped.Load(), nil
	})
}

// StopAhead stops reserving ahead: a replica shutting down takes no quota
// it would only return.
func (u *Uses) StopAhead() { u.aheadStopped.Store(true) }

// reserveAhead writes the reservations ahead that are due, in the order
// they fell due, as the budget allows.
func (u *Uses) reserveAhead(ctx context.Context) {
	now := u.opts.Clock()
	type offer struct {
		c   *Counter
		due time.Time
	}
	var due []offer
	u.mu.Lock()
	for c, at := range u.aheadQueue {
		if !at.After(now) {
			due = append(due, offer{c, at})
			delete(u.aheadQueue, c)
		}
	}
	u.mu.Unlock()
	slices.SortFunc(due, func(a, b offer) int { return a.due.Compare(b.due) })
	for _, o := range due {
		if ctx.Err() != nil || u.aheadStopped.Load() {
			return
		}
		u.reserveAheadOne(ctx, o.c)
	}
}

// reserveAheadOne reserves c's link ahead, if it still may be.
func (u *Uses) reserveAheadOne(ctx context.Context, c *Counter) {
	v, ok := c.version()
	if !ok || !u.aheadEligible(v, u.opts.Clock()) {
		return // reserved by another replica first, used, or no longer new
	}
	if u.peer() == "" {
		// The peer port cannot take forwarded uses yet (its key is not
		// read): nobody could use this reservation. Offer it again.
		u.offerAheadAgain(c, time.Second)
		return
	}
	u.mu.Lock()
	full := u.aheadHeld >= u.aheadMax()
	u.mu.Unlock()
	if full {
		u.metrics.ahead.WithLabelValues("full").Inc()
		return
	}
	wctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	// The pace before the lock: see budgetAhead.
	if u.aheadPace.Wait(wctx) != nil || !u.lock(wctx, c) {
		return
	}
	defer u.unlock(c)
	l := c.lim()
	if l.held > 0 || l.unconfirmed != nil || c.pending.Load() > 0 || l.noAhead.Load() {
		return // a click reserved it meanwhile, or it was returned when asked
	}
	granted, err := u.writeReservation(wctx, c, true, false, budgetAhead)
	switch {
	case errors.Is(err, errNoBudget):
		// The clicks spent the budget: offer it again in a second.
		u.offerAheadAgain(c, time.Second)
	case err != nil:
		u.metrics.ahead.WithLabelValues(resultError).Inc()
		u.opts.Log.V(1).Info("cannot reserve ahead", "link", c.name(), "error", err.Error())
	case granted > 0:
		u.metrics.ahead.WithLabelValues("granted").Inc()
		l.ahead, l.aheadUntil = true, time.Unix(v.Created, 0).Add(u.opts.ReserveAhead)
		u.mu.Lock()
		u.aheadHeld++
		u.mu.Unlock()
	default:
		u.metrics.ahead.WithLabelValues("taken").Inc()
	}
}

// endAhead makes c's reservation an ordinary one. c's lock is held.
func (u *Uses) endAhead(c *Counter) {
	l := c.limit.Load()
	if l == nil || !l.ahead {
		return
	}
	l.ahead = false
	u.mu.Lock()
	u.aheadHeld--
	u.mu.Unlock()
}
