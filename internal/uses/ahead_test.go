package uses

import (
	"context"
	"testing"
	"time"
)

// newAheadReplica is a test replica that reserves links created at created
// ahead of their first click, and forwards to fwd (if not nil).
func newAheadReplica(api *fakeAPI, clk *fakeClock, holder string, created time.Time, fwd Forwarder) *testReplica {
	r := newTestReplica(api, clk, holder, 0)
	r.u.opts.ReserveAhead, r.u.opts.Forwarder = 10*time.Minute, fwd
	r.created = created.Unix()
	r.sync()
	return r
}

// aheadRound offers r's link and reserves it once its point of the spread
// has come.
func (r *testReplica) aheadRound(clk *fakeClock) {
	r.u.Ahead(r.c)
	clk.advance(aheadSpread)
	r.u.reserveAhead(context.Background())
}

// A new limited link is reserved ahead by one replica at the cost of one
// write: the others see its reservation and write nothing, and one whose
// informer is behind conflicts, reads it live, and writes nothing either.
func TestReserveAheadOnceAcrossReplicas(t *testing.T) {
	api := newFakeAPI(1)
	clk := &fakeClock{now: epoch}
	a := newAheadReplica(api, clk, "a", epoch, nil)
	b := newAheadReplica(api, clk, "b", epoch, nil)
	stale := newAheadReplica(api, clk, "c", epoch, nil)
	stale.u.Ahead(stale.c) // queued on the version before a's write
	a.aheadRound(clk)
	if st := api.get().Status; len(st.UseReservations) != 1 || st.UseReservations[0].Holder != "a" || st.UseReservations[0].PeerAddress != "a" || st.UseReservations[0].Peer != "" {
		t.Fatalf("reservations %v, want a's, with its peer address", st.UseReservations)
	}
	b.sync()
	b.aheadRound(clk)
	stale.u.reserveAhead(context.Background())
	if len(api.patches) != 1 || api.gets != 1 {
		t.Errorf("%d writes and %d live reads for a link reserved ahead, want 1 write and the stale replica's read", len(api.patches), api.gets)
	}
	if a.take() != Served {
		t.Error("the use reserved ahead was not served")
	}
}

// A link that arrives before the replica's peer port answers (its peer key
// not read yet) is reserved ahead once it does: the informer offers it
// once only. (The e2e's TestUntrustedPeers lost such links on a loaded
// machine, where the manager made the key after the links arrived.)
func TestReserveAheadWaitsForThePeerPort(t *testing.T) {
	api := newFakeAPI(1)
	clk := &fakeClock{now: epoch}
	a := newAheadReplica(api, clk, "a", epoch, nil)
	ready := false
	a.u.opts.PeerReady = func() bool { return ready }
	a.aheadRound(clk)
	if len(api.patches) != 0 {
		t.Fatalf("reserved ahead before the peer port answers: %v", api.get().Status.UseReservations)
	}
	ready = true
	clk.advance(time.Second)
	a.u.reserveAhead(context.Background())
	if st := api.get().Status; len(st.UseReservations) != 1 || st.UseReservations[0].PeerAddress != "a" || st.UseReservations[0].Peer != "" {
		t.Fatalf("reservations %v once the peer port answers, want a's reserved ahead", st.UseReservations)
	}
}

// Links that are not new, already used or reserved, or unlimited are not
// reserved ahead; nor with ReserveAhead off.
func TestReserveAheadOnlyNewUnusedLinks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		created time.Time
		prepare func(*fakeAPI)
		off     bool
	}{
		{"created before the window", epoch.Add(-11 * time.Minute), nil, false},
		{"used", epoch, func(a *fakeAPI) { a.link.Status.Uses = 1 }, false},
		{"unlimited", epoch, func(a *fakeAPI) { a.link.Spec.MaxUses = nil }, false},
		{"reserve-ahead off", epoch, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(5)
			if tc.prepare != nil {
				tc.prepare(api)
			}
			clk := &fakeClock{now: epoch}
			r := newAheadReplica(api, clk, "a", tc.created, nil)
			if tc.off {
				r.u.opts.ReserveAhead = 0
			}
			r.aheadRound(clk)
			if len(api.patches) != 0 {
				t.Errorf("reserved ahead: %v", api.get().Status.UseReservations)
			}
		})
	}
}

// A reservation ahead is kept, unused, until ReserveAhead after the link's
// creation, renewed once per lease, and returned after that like any
// quiet one; a use makes it an ordinary reservation at once.
func TestReservationAheadKeptWhileNew(t *testing.T) {
	t.Run("unused", func(t *testing.T) {
		api := newFakeAPI(1)
		clk := &fakeClock{now: epoch}
		r := newAheadReplica(api, clk, "a", epoch, nil)
		r.aheadRound(clk)
		for clk.now.Before(epoch.Add(10*time.Minute - 10*time.Second)) {
			clk.advance(10 * time.Second)
			r.flush(false)
			if len(api.get().Status.UseReservations) != 1 {
				t.Fatalf("at %v: the reservation ahead was returned before the link was 10m old", clk.now.Sub(epoch))
			}
		}
		// A renewal when the lease would end before the round after next:
		// with a 30s lease and 10s rounds, every other round (30 in 10m;
		// with the default 1m lease, every fifth).
		if n := len(api.patches); n < 20 || n > 31 {
			t.Errorf("%d writes in 10m for a reservation ahead, want a renewal every other round", n)
		}
		for range r.u.quietRounds() + 1 {
			clk.advance(10 * time.Second)
			r.flush(false)
		}
		if st := api.get().Status; len(st.UseReservations) != 0 || st.Uses != 0 {
			t.Errorf("after the window and a lease of quiet: %+v, want the quota returned unused", st)
		}
		if r.u.aheadHeld != 0 {
			t.Errorf("%d held ahead, want 0", r.u.aheadHeld)
		}
	})
	t.Run("used", func(t *testing.T) {
		api := newFakeAPI(5)
		clk := &fakeClock{now: epoch}
		r := newAheadReplica(api, clk, "a", epoch, nil)
		r.aheadRound(clk)
		if r.take() != Served {
			t.Fatal("not served")
		}
		clk.advance(10 * time.Second)
		r.flush(false)
		if r.c.lim().ahead || r.u.aheadHeld != 0 {
			t.Fatal("a used reservation is still held as ahead")
		}
		if api.get().Status.Uses != 1 {
			t.Errorf("status.uses %d, want the use reported", api.get().Status.Uses)
		}
	})
}

// Whatever ends a reservation ahead ends its place among the aheadMax: a
// single-use link reserved ahead, used, and clicked again on the same
// replica before a flush round (the second click's reservation returns
// the used-up one; the counter then leaves the flush rounds). Before, the
// place was never given back, and after aheadMax such links nothing was
// reserved ahead again.
func TestReservationAheadEndsWithItsQuota(t *testing.T) {
	api := newFakeAPI(1)
	clk := &fakeClock{now: epoch}
	r := newAheadReplica(api, clk, "a", epoch, nil)
	r.aheadRound(clk)
	if r.take() != Served {
		t.Fatal("not served")
	}
	clk.advance(time.Second)
	if r.take() == Served {
		t.Fatal("served past maxUses 1")
	}
	for range 20 {
		clk.advance(10 * time.Second)
		r.flush(false)
	}
	if r.c.lim().ahead || r.u.aheadHeld != 0 {
		t.Errorf("ahead %v, %d held ahead, with status %+v; want none", r.c.lim().ahead, r.u.aheadHeld, api.get().Status)
	}
}

// Stopped (a replica draining), nothing more is reserved ahead.
func TestStopAhead(t *testing.T) {
	api := newFakeAPI(1)
	clk := &fakeClock{now: epoch}
	r := newAheadReplica(api, clk, "a", epoch, nil)
	r.u.StopAhead()
	r.aheadRound(clk)
	if len(api.patches) != 0 {
		t.Error("reserved ahead after StopAhead")
	}
}

// A replica holds at most aheadMax reservations ahead.
func TestReservationsAheadCapped(t *testing.T) {
	api := newFakeAPI(1)
	clk := &fakeClock{now: epoch}
	r := newAheadReplica(api, clk, "a", epoch, nil)
	r.u.mu.Lock()
	r.u.aheadHeld = r.u.aheadMax()
	r.u.mu.Unlock()
	r.aheadRound(clk)
	if len(api.patches) != 0 {
		t.Error("reserved ahead past the cap")
	}
	if got := (&Uses{opts: Options{WritesPerSecond: 20, Lease: time.Minute, FlushInterval: 10 * time.Second}}).aheadMax(); got != 250 {
		t.Errorf("aheadMax with the defaults: %d, want 250 (a quarter of the budget in renewals every 50 s)", got)
	}
}

// replicaForwarder forwards to one test replica, counting the asks.
type replicaForwarder struct {
	to   *testReplica
	asks int
}

func (f *replicaForwarder) TakeFrom(_ context.Context, to Holder, _ LinkVersion) Forwarded {
	f.asks++
	if to.Name == f.to.holder && f.to.u.TakeHeld(f.to.c, f.to.clock()) == Served {
		return ForwardServed
	}
	return ForwardRefused
}

// A click on a replica without quota is served from the quota of the
// replica holding it, with no API request; when the holder has none left,
// the click falls back to reserving, and the link is not asked again for a
// second. maxUses holds across both.
func TestForwardedUseServedByTheHolder(t *testing.T) {
	api := newFakeAPI(1)
	clk := &fakeClock{now: epoch}
	a := newAheadReplica(api, clk, "a", epoch, nil)
	fwd := &replicaForwarder{to: a}
	b := newAheadReplica(api, clk, "b", epoch, fwd)
	a.aheadRound(clk)
	b.sync()
	writes, reads := len(api.patches), api.gets
	if b.take() != Served {
		t.Fatal("b's click was not served from a's quota")
	}
	if len(api.patches) != writes || api.gets != reads {
		t.Errorf("a forwarded use cost %d writes and %d reads, want none", len(api.patches)-writes, api.gets-reads)
	}
	if b.take() == Served || a.take() == Served {
		t.Fatal("served past maxUses 1")
	}
	asks := fwd.asks
	if b.take() == Served || fwd.asks != asks {
		t.Errorf("a refused link was asked again within a second (%d asks)", fwd.asks-asks)
	}
	clk.advance(10 * time.Second)
	a.flush(false)
	if st := api.get().Status; st.Uses != 1 {
		t.Errorf("status.uses %d, want the forwarded use counted by its holder", st.Uses)
	}
}

// A refusal leaves the click to reserve on its own: a link with quota left
// beyond the holder's is served.
func TestForwardRefusedFallsBackToReserving(t *testing.T) {
	api := newFakeAPI(10)
	clk := &fakeClock{now: epoch}
	a := newAheadReplica(api, clk, "a", epoch, nil)
	a.aheadRound(clk)
	if a.take() != Served { // a's block of one, used
		t.Fatal("not served")
	}
	b := newAheadReplica(api, clk, "b", epoch, &replicaForwarder{to: a})
	if b.take() != Served {
		t.Fatal("b did not reserve after a refused")
	}
	if st := api.get().Status; len(st.UseReservations) != 2 {
		t.Errorf("reservations %v, want a's and b's", st.UseReservations)
	}
}

// A reservation held ahead and never used is written once per renewEvery
// (flush rounds as the ticker runs them), so aheadMax of them take at most
// a quarter of the write budget: with the defaults, 250 links renewed
// every 50 s are 5 writes a second of 20.
func TestRenewalsOfReservationsAheadTakeAQuarter(t *testing.T) {
	for _, tc := range []struct{ lease, flush time.Duration }{
		{time.Minute, 10 * time.Second}, // the defaults
		{6 * time.Second, time.Second},  // the e2e's
		{45 * time.Second, 10 * time.Second},
	} {
		api := newFakeAPI(1)
		clk := &fakeClock{now: epoch}
		a := newAheadReplica(api, clk, "a", epoch, nil)
		a.u.opts.Lease, a.u.opts.FlushInterval, a.u.opts.WritesPerSecond = tc.lease, tc.flush, 20
		a.u.opts.ReserveAhead = time.Hour
		a.aheadRound(clk)
		before := len(api.patches)
		const leases = 10
		for range int(leases * tc.lease / tc.flush) {
			clk.advance(tc.flush)
			a.flush(false)
			a.sync()
		}
		writes := len(api.patches) - before
		if writes < leases {
			t.Fatalf("lease %v: %d writes in %d leases: not renewed", tc.lease, writes, leases)
		}
		every := time.Duration(leases) * tc.lease / time.Duration(max(writes, 1))
		if every < a.u.renewEvery() {
			t.Errorf("lease %v, flush %v: renewed every %v, want %v", tc.lease, tc.flush, every, a.u.renewEvery())
		}
		if perSecond := float64(a.u.aheadMax()) / every.Seconds(); perSecond > a.u.opts.WritesPerSecond/4 {
			t.Errorf("lease %v, flush %v: %d links held ahead take %.1f writes/s, more than a quarter of %v", tc.lease, tc.flush, a.u.aheadMax(), perSecond, a.u.opts.WritesPerSecond)
		}
	}
}

// A reservation ahead becomes an ordinary one with its first use, however
// that use is written (here the prompt write of a used-up reservation,
// which leaves no pending use for the flush round to see).
func TestReservationAheadEndsAtItsFirstUse(t *testing.T) {
	api := newFakeAPI(10)
	clk := &fakeClock{now: epoch}
	a := newAheadReplica(api, clk, "a", epoch, nil)
	a.aheadRound(clk)
	if !a.c.lim().ahead {
		t.Fatal("not reserved ahead")
	}
	if a.take() != Served {
		t.Fatal("not served")
	}
	a.returnsNow()
	a.u.mu.Lock()
	held := a.u.aheadHeld
	a.u.mu.Unlock()
	if a.c.lim().ahead || held != 0 {
		t.Errorf("after its first use: ahead %v, %d held ahead", a.c.lim().ahead, held)
	}
}
