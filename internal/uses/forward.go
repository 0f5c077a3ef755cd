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
	// NotForwarded: nothing was sent (no peer key yet, no valid address).
	NotForwarded Forwarded = iota
	// ForwardServed: the holder served it from its quota, and counts it.
	ForwardServed
	// ForwardRefused: the holder answered that it has no quota.
	ForwardRefused
	// ForwardGone: the holder answered that the link no longer answers.
	ForwardGone
	// Unreachable: no authenticated answer came, and nothing the holder
	// could have served was sent (a connection refused, an impostor's
	// answer): the holder served nothing.
	Unreachable
	// Lost: no authenticated answer came in time after the request may
	// have reached the holder, which may have served it: a use counted
	// there and served to nobody (uses_forwards_total{result="lost"}).
	Lost
)

var forwardedNames = [...]string{"not-forwarded", "served", "refused", "gone", "unreachable", "lost"}

func (f Forwarded) String() string { return forwardedNames[f] }

// Forwarder asks another replica to serve a use from its reservation.
type Forwarder interface {
	// TakeFrom asks the holder (a reservation's holder and peer address)
	// to serve one use of v's link from its quota (Uses.TakeHeld there).
	// Only ForwardServed means it did, and counts the use. It returns by
	// ctx's deadline.
	TakeFrom(ctx context.Context, to Holder, v LinkVersion) Forwarded
}

// forwardTimeout bounds a forwarded use: a peer is a round trip inside the
// cluster away, and a click falls back to reserving after it, within the
// same ReserveTimeout.
const forwardTimeout = 500 * time.Millisecond

// forward asks the replica the informer shows holding c's link's quota to
// serve the use, by deadline at the latest, unless it refused this link
// within the last second. A holder that cannot be reached is asked through
// the API server instead: the reservation this request then tries marks
// its reservation (see returnAsked).
func (u *Uses) forward(c *Counter, at int64, deadline time.Time) bool {
	if u.opts.Forwarder == nil || at < c.noForward.Load() {
		return false
	}
	v, ok := c.version()
	if !ok || v.NoReservations || v.Peer.Peer == "" || v.Peer.Name == u.opts.Holder {
		return false
	}
	if d := time.Now().Add(forwardTimeout); d.Before(deadline) {
		deadline = d
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	result := u.opts.Forwarder.TakeFrom(ctx, v.Peer, v)
	u.metrics.forwards.WithLabelValues(result.String()).Inc()
	switch result {
	case ForwardServed:
		return true
	case Unreachable, Lost:
		name := v.Peer.Name
		c.askReturn.Store(&name)
	}
	// A burst on a link whose holder has run out (or cannot be reached)
	// forwards once a second, not once a click.
	c.noForward.Store(at + int64(time.Second))
	return false
}

// ReturnAsked is how long, at most, a holder that sees another replica ask
// for its quota takes to return it: its informer's delay, and a write
// (bounded by writeTimeout, usually a round trip).
//
// Asking works when the peer port cannot: a replica whose forward found no
// authenticated holder (a NetworkPolicy in the way, an impostor at the
// holder's address, a holder mid-restart) and whose reservation is then
// denied marks the holder's reservation returnRequested in that same
// write. The holder sees the mark in its informer and returns the unused
// quota at once (returnRequested: a write), and the asker's next click,
// no sooner than 200 ms later, reserves it. A dead holder answers neither
// way: its reservation is taken back after a lease, as always.
func (u *Uses) requestReturn(c *Counter) {
	u.mu.Lock()
	u.returnQueue[c] = struct{}{}
	u.mu.Unlock()
	select {
	case u.returnKick <- struct{}{}:
	default:
	}
}

// runReturns returns the reservations other replicas asked for, and writes
// the final count of reservations used up (see finalCount), until ctx ends.
func (u *Uses) runReturns(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-u.returnKick:
		}
		u.mu.Lock()
		todo := make([]*Counter, 0, len(u.returnQueue))
		for c := range u.returnQueue {
			todo = append(todo, c)
		}
		clear(u.returnQueue)
		u.mu.Unlock()
		for _, c := range todo {
			if ctx.Err() != nil {
				return
			}
			u.returnOne(ctx, c)
		}
	}
}

// returnOne returns c's reservation if another replica asked for it, or
// writes its uses at once if its quota ran out.
func (u *Uses) returnOne(ctx context.Context, c *Counter) {
	wctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	if !u.lock(wctx, c) {
		return
	}
	defer u.unlock(c)
	v, ok := c.version()
	if !ok || c.held == 0 && c.unconfirmed == nil {
		return
	}
	asked := v.PeerReturnRequested && v.Peer.Name == u.opts.Holder
	if !asked && (c.quota.Load() > 0 || c.pending.Load() == 0) {
		return // topped up, or written, meanwhile
	}
	if asked {
		// Not offered ahead again: the others could not reach this replica.
		c.noAhead.Store(true)
		u.endAhead(c)
		u.metrics.returns.WithLabelValues("asked").Inc()
	} else {
		u.metrics.returns.WithLabelValues("used-up").Inc()
	}
	// Asked: the unused quota goes back. Used up: the uses are written
	// now, so the others answer 410 at once if that was the last of the
	// limit, and the reservation is topped up if some is left.
	_, err := u.writeReservation(wctx, c, !asked, asked, budgetWait)
	if err != nil {
		u.opts.Log.V(1).Info("cannot return or report a reservation yet; the next round will", "link", c.name(), "error", err.Error())
	}
}
