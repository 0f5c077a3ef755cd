package uses

import (
	"context"
	"time"
)

// Holder names a reservation's holder and the peer address where it takes
// forwarded uses.
type Holder struct {
	Name, Peer string
}

// Forwarded is what became of a use forwarded to its holder.
type Forwarded int

const (
	// NotForwarded: nothing the holder could have taken was sent, and
	// nothing says it cannot be reached: no peer key yet, no valid
	// address, our own connections to it all busy (waiting for one is
	// bounded), or an answer that came before the request was read (its
	// peer port at its connection limits: fasthttp's 503 or 429) or that
	// says it took nothing (busy: its replay memory is full; no key yet).
	// The holder is not asked to return its quota.
	NotForwarded Forwarded = iota
	// ForwardServed: the holder served it from its quota, and counts it.
	ForwardServed
	// ForwardRefused: the holder answered that it has no quota.
	ForwardRefused
	// ForwardGone: the holder answered that the link no longer answers.
	ForwardGone
	// Unreachable: the holder cannot be reached at all, and served
	// nothing: nothing answers at its address (a connection refused, no
	// route, a dial timeout, an address not to be asked), or the replica
	// there proves with the key that it is not that holder, or that the
	// two clocks are too far apart for any request to be taken. Only then
	// is the holder asked to return its quota through the API server.
	Unreachable
	// NoKey: this replica has no peer key (yet): it cannot ask the
	// holder, and asks through the API server instead, as for
	// Unreachable (the holder returns its quota), so that its clicks are
	// not refused until the key arrives.
	NoKey
	// Lost: the request was written to the holder and no authenticated
	// answer came: none in time, the connection broke, or an answer that
	// does not verify (an impostor's, one changed on the way). The holder
	// may have served it: a use counted there and served to nobody
	// (uses_forwards_total{result="lost"}). At most MaxConnsPerHost of
	// package peer are in flight to one holder at once.
	Lost
)

var forwardedNames = [...]string{"not-forwarded", "served", "refused", "gone", "unreachable", "no-key", "lost"}

func (f Forwarded) String() string { return forwardedNames[f] }

// Forwarder asks another replica to serve a use from its reservation.
type Forwarder interface {
	// TakeFrom asks the holder (a reservation's holder and peer address)
	// to serve one use of v's link from its quota (Uses.TakeHeld there).
	// Only ForwardServed means it did, and counts the use. It returns by
	// ctx's deadline.
	TakeFrom(ctx context.Context, to Holder, v LinkVersion) Forwarded
}

// ForwardTimeout bounds a forwarded use: a peer is a round trip inside the
// cluster away, and a click falls back to reserving after it, within the
// same ReserveTimeout. The peer port's bounds derive from it (package peer).
const ForwardTimeout = 500 * time.Millisecond

// forward asks the replica the informer shows holding c's link's quota to
// serve the use, by deadline at the latest, unless it refused this link
// within the last second. A holder that cannot be reached at all
// (Unreachable) is asked through the API server instead: the reservation
// this request then tries marks its reservation (see requestReturn). A
// slow or congested one (Lost, NotForwarded) is not: it is there, and the
// link is not forwarded again for a second.
func (u *Uses) forward(c *Counter, at int64, deadline time.Time) bool {
	l := c.lim()
	if u.opts.Forwarder == nil || at < l.noForward.Load() {
		return false
	}
	v, ok := c.version()
	if !ok || v.NoReservations || v.Peer.Peer == "" || v.Peer.Name == u.opts.Holder {
		return false
	}
	if d := time.Now().Add(ForwardTimeout); d.Before(deadline) {
		deadline = d
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	result := u.opts.Forwarder.TakeFrom(ctx, v.Peer, v)
	u.metrics.forwards.WithLabelValues(result.String()).Inc()
	switch result {
	case ForwardServed:
		return true
	case Unreachable, NoKey:
		name := v.Peer.Name
		l.askReturn.Store(&name)
	}
	// A burst on a link whose holder has run out (or cannot be reached)
	// forwards once a second, not once a click.
	l.noForward.Store(at + int64(time.Second))
	return false
}

// requestReturn queues c for a prompt write (runReturns): a reservation
// marked returnRequested, or one used up.
//
// Asking works when the peer port cannot: a replica whose forward found
// the holder unreachable (a NetworkPolicy in the way, a holder
// mid-restart, another replica at its address, clocks too far apart) and
// whose reservation is then
// denied marks the holder's reservation returnRequested in that same
// write. The holder sees a mark in its informer and writes at once; any
// write of the holder that reads its own reservation marked returns the
// unused quota instead of renewing it (writeReservationOnce), so neither
// a renewal that read the mark first nor a failed return loses the
// request. The asker's next click, no sooner than 200 ms later, reserves
// it. A dead holder answers neither way: its reservation is taken back
// after a lease, as always. How long the return takes: the informer's
// delay and a write (writeTimeout at most, usually a round trip).
func (u *Uses) requestReturn(c *Counter) {
	u.mu.Lock()
	u.returnQueue[c] = struct{}{}
	u.mu.Unlock()
	select {
	case u.returnKick <- struct{}{}:
	default:
	}
}

// runReturns writes the links queued by requestReturn, until ctx ends.
func (u *Uses) runReturns(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-u.returnKick:
		}
		u.returnQueued(ctx)
	}
}

// returnQueued writes the links queued by requestReturn, roundWriters at
// once: a replica nobody could reach is asked for many links together (a
// campaign clicked on the others), and each return waits for a write;
// returned one by one, the last would come after the others take their
// reservations back as used.
func (u *Uses) returnQueued(ctx context.Context) {
	eachAtOnce(ctx, u.takeReturns(), roundWriters, func(c *Counter) bool {
		u.returnOne(ctx, c)
		return false
	})
}

// takeReturns empties the queue of requestReturn.
func (u *Uses) takeReturns() []*Counter {
	u.mu.Lock()
	defer u.mu.Unlock()
	todo := make([]*Counter, 0, len(u.returnQueue))
	for c := range u.returnQueue {
		todo = append(todo, c)
	}
	clear(u.returnQueue)
	return todo
}

// returnOne writes c's link at once if it holds a reservation and some
// reservation is marked returnRequested (the write reads it live, and
// returns ours if it is the one marked), or if its quota ran out.
func (u *Uses) returnOne(ctx context.Context, c *Counter) {
	wctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	if !u.lock(wctx, c) {
		return
	}
	defer u.unlock(c)
	v, ok := c.version()
	l := c.limit.Load()
	if !ok || l == nil || l.held == 0 && l.unconfirmed == nil {
		return
	}
	marked := v.ReturnRequested
	if !marked && (l.quota.Load() > 0 || c.pending.Load() == 0) {
		return // topped up, or written, meanwhile
	}
	if !marked {
		u.metrics.returns.WithLabelValues("used-up").Inc()
	}
	// Used up: the uses are written now, so the others answer 410 at once
	// if that was the last of the limit, and the reservation is topped up
	// if some is left.
	if _, err := u.writeReservation(wctx, c, !marked, false, budgetWait); err != nil {
		u.opts.Log.V(1).Info("cannot write a reservation yet; the next round will", "link", c.name(), "error", err.Error())
	}
}
