package uses

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// unreachable is a peer network that never gets an authenticated answer
// from the holder: a NetworkPolicy in the way, or an impostor at its
// address (Unreachable); or this replica has no peer key (NoKey).
type unreachable struct {
	asks   int
	result Forwarded // Unreachable if 0 (NotForwarded)
}

func (u *unreachable) TakeFrom(context.Context, Holder, LinkVersion) Forwarded {
	u.asks++
	if u.result == NotForwarded {
		return Unreachable
	}
	return u.result
}

// returnsQueued reports whether r has reservations queued to return.
func (r *testReplica) returnsQueued() bool {
	r.u.mu.Lock()
	defer r.u.mu.Unlock()
	return len(r.u.returnQueue) > 0
}

// A single-use link held ahead by a replica the others cannot reach: the
// first click elsewhere marks the holder's reservation returnRequested in
// the write that found no quota (503), the holder returns it as soon as its
// informer shows the mark, and the next click, no sooner than 200 ms
// later, is served. Exactly one redirect, and the holder does not reserve
// the link ahead again. A replica without the peer key (NoKey) asks the
// same way rather than answering 503 until the key comes (issue 52).
func TestUnreachableHolderIsAskedThroughTheAPI(t *testing.T) {
	for _, result := range []Forwarded{Unreachable, NoKey} {
		t.Run(result.String(), func(t *testing.T) { testAskedThroughTheAPI(t, result) })
	}
}

func testAskedThroughTheAPI(t *testing.T, result Forwarded) {
	api := newFakeAPI(1)
	clk := &fakeClock{now: epoch}
	a := newAheadReplica(api, clk, "a", epoch, nil)
	net := &unreachable{result: result}
	b := newAheadReplica(api, clk, "b", epoch, net)
	a.aheadRound(clk)
	b.sync()
	if got := b.take(); got != Unavailable || net.asks != 1 {
		t.Fatalf("the first click: %v after %d forwards, want 503 after one", got, net.asks)
	}
	st := api.get().Status
	if len(st.UseReservations) != 1 || !st.UseReservations[0].ReturnRequested || st.UseReservations[0].Holder != "a" {
		t.Fatalf("reservations %+v, want a's asked for", st.UseReservations)
	}
	a.sync()
	if !a.returnsQueued() {
		t.Fatal("the holder did not take the mark in its informer as a request")
	}
	a.returnsNow()
	if st := api.get().Status; len(st.UseReservations) != 0 || st.Uses != 0 {
		t.Fatalf("after the return: %+v, want no reservation and no use", st)
	}
	b.sync()
	if got := b.take(); got != Unavailable {
		t.Errorf("a click within 200 ms of the denial: %v, want 503 (one reservation a second a link)", got)
	}
	clk.advance(200 * time.Millisecond)
	if got := b.take(); got != Served {
		t.Fatalf("the click after the return: %v", got)
	}
	a.sync()
	a.aheadRound(clk)
	if a.c.lim().held > 0 || a.take() == Served || b.take() == Served {
		t.Fatal("served past maxUses 1, or reserved ahead again by the replica asked")
	}
}

// markReturn marks holder's reservation returnRequested, as an asker's
// denied reservation write does.
func (a *fakeAPI) markReturn(holder string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range a.link.Status.UseReservations {
		if r := &a.link.Status.UseReservations[i]; r.Holder == holder {
			r.ReturnRequested = true
		}
	}
	a.rv++
	a.link.ResourceVersion = strconv.Itoa(a.rv)
}

// held is holder's reservation in status (0: none).
func (a *fakeAPI) held(holder string) int64 {
	for _, r := range a.get().Status.UseReservations {
		if r.Holder == holder {
			return r.Quota
		}
	}
	return 0
}

// A mark is returned by its holder only, whichever reservation the
// informer forwards to, and however the holder's next write comes: the
// prompt one, a flush round that read the mark first, or the round after a
// return whose write failed.
func TestMarkedReservationIsReturned(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(a *testReplica, api *fakeAPI)
	}{
		{"the prompt write", func(a *testReplica, _ *fakeAPI) { a.sync(); a.returnsNow() }},
		{"a flush round first", func(a *testReplica, _ *fakeAPI) { a.flush(false); a.sync(); a.returnsNow() }},
		{"a failed return, then a round", func(a *testReplica, api *fakeAPI) {
			api.setFault("a", timeoutBeforeApply)
			a.sync()
			a.returnsNow()
			a.flush(false)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(10)
			clk := &fakeClock{now: epoch}
			a := newTestReplica(api, clk, "a", 0)
			b := newTestReplica(api, clk, "b", 0)
			served := 0
			for _, r := range []*testReplica{a, a, b} {
				if r.take() == Served {
					served++
				}
				r.returnsNow() // used up: written, and topped up
			}
			if served != 3 || api.held("a") == 0 || api.held("b") == 0 {
				t.Fatalf("setup: %d served, reservations %+v", served, api.get().Status.UseReservations)
			}
			bHeld := api.held("b")
			api.markReturn("a")
			b.sync()
			b.returnsNow() // b is not asked: it renews at most
			if api.held("a") == 0 || api.held("b") != bHeld {
				t.Fatalf("b's write returned a's reservation or its own: %+v", api.get().Status.UseReservations)
			}
			tc.write(a, api)
			st := api.get().Status
			if api.held("a") != 0 || api.held("b") != bHeld || st.Uses+bHeld < int64(served) {
				t.Errorf("after %s: %+v, want a's reservation returned with its uses, b's kept", tc.name, st)
			}
			if a.u.peer() == "" || !a.c.lim().noAhead.Load() {
				t.Error("the link may be reserved ahead again by the replica asked")
			}
		})
	}
}

// The last use of a reservation is written at once, not at the next
// round: once the limit is reached, status shows it within a write, so
// every replica answers 410 (the informer's Finished, or a denial that
// reads it) instead of 503 until a round.
func TestUsedUpQuotaIsWrittenAtOnce(t *testing.T) {
	api := newFakeAPI(3)
	clk := &fakeClock{now: epoch}
	a := newTestReplica(api, clk, "a", 0)
	b := newTestReplica(api, clk, "b", 0)
	served := 0
	for range 3 {
		if a.take() == Served {
			served++
		}
	}
	if served != 3 {
		t.Fatalf("served %d of 3", served)
	}
	if !a.returnsQueued() {
		t.Fatal("the used-up reservation was not queued for a write")
	}
	a.returnsNow()
	if st := api.get().Status; st.Uses != 3 || len(st.UseReservations) != 0 {
		t.Fatalf("after the prompt write: %+v, want uses 3 and no reservation", st)
	}
	b.sync()
	if got := b.take(); got != Exhausted {
		t.Errorf("another replica's click after the last use: %v, want 410", got)
	}
	if got := a.take(); got != Exhausted {
		t.Errorf("the holder's click after the last use: %v, want 410", got)
	}
}

// silent is a holder that takes the request and never answers.
type silent struct{}

func (silent) TakeFrom(ctx context.Context, _ Holder, _ LinkVersion) Forwarded {
	<-ctx.Done()
	return Lost
}

// A click waits at most ReserveTimeout in all, the forward included: a
// holder that never answers and a frozen API server cost one bound, not
// the forward's 500 ms plus the reservation's timeout.
func TestTakeWaitsAtMostTheReserveTimeout(t *testing.T) {
	// Without the shared bound the forward alone took ForwardTimeout
	// (500 ms), past five times this one.
	const bound = 50 * time.Millisecond
	api := newFakeAPI(1)
	clk := &fakeClock{now: epoch}
	a := newAheadReplica(api, clk, "a", epoch, nil)
	a.aheadRound(clk)
	b := newAheadReplica(api, clk, "b", epoch, silent{})
	b.u.opts.ReserveTimeout = bound
	b.sync()
	api.setFault("b", frozen)
	start := time.Now()
	if got := b.take(); got != Unavailable {
		t.Fatalf("%v, want 503", got)
	}
	// Nine times the bound, 450ms: scheduling on a loaded machine, -race;
	// still under the 500ms the forward alone took without it.
	if d := time.Since(start); d > 9*bound {
		t.Errorf("the click waited %v, bound %v", d, bound)
	}
}

// A holder serves a forwarded use only within its lease, as it serves its
// own clicks: past it, or once its quota is stopped (a lowered limit), it
// refuses, whatever quota it still counts.
func TestTakeHeldStopsWithTheLease(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(r *testReplica, api *fakeAPI, clk *fakeClock)
	}{
		{"the lease's end", func(r *testReplica, _ *fakeAPI, clk *fakeClock) { clk.advance(r.u.opts.Lease) }},
		{"a lowered limit", func(r *testReplica, api *fakeAPI, _ *fakeClock) { api.setMaxUses(50); r.sync() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(100)
			clk := &fakeClock{now: epoch}
			a := newTestReplica(api, clk, "a", 0)
			for range 3 { // blocks grow while they are used up at once
				if got := a.take(); got != Served {
					t.Fatalf("a click: %v", got)
				}
				a.returnsNow()
			}
			if a.c.lim().quota.Load() < 2 {
				t.Fatalf("setup: %d quota", a.c.lim().quota.Load())
			}
			if got := a.u.TakeHeld(a.c, a.clock()); got != Served {
				t.Fatalf("a forwarded use within the lease: %v", got)
			}
			tc.end(a, api, clk)
			if got := a.u.TakeHeld(a.c, a.clock()); got == Served || a.c.lim().quota.Load() == 0 {
				t.Errorf("a forwarded use after %s, %d quota left: %v, want refused", tc.name, a.c.lim().quota.Load(), got)
			}
		})
	}
}
