package uses

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

var epoch = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// serveUntilDenied takes uses on r until it is refused; it returns how many it served.
func serveUntilDenied(r *testReplica, most int) int {
	n := 0
	for n < most && r.take() == Served {
		n++
	}
	return n
}

// A lowered limit: replicas holding quota reserved under the old limit stop
// serving it as soon as their informer shows the new one, and the next live
// read shrinks their reservations to what fits. (Without Attach's check they
// served their old blocks: 128 redirects for a limit of 86 from outside.)
func TestLoweredLimitNeverServedPast(t *testing.T) {
	api := newFakeAPI(1000)
	clk := &fakeClock{now: epoch}
	replicas := []*testReplica{newTestReplica(api, clk, "a", 0), newTestReplica(api, clk, "b", 0), newTestReplica(api, clk, "c", 0)}
	served := 0
	for _, r := range replicas {
		// Blocks of 1, 2, 4 and 8 within a flush interval: each holds quota.
		served += serveUntilDenied(r, 9)
	}
	held := int64(0)
	for _, res := range api.get().Status.UseReservations {
		held += res.Quota
	}
	if held == 0 {
		t.Fatal("no replica holds quota")
	}
	limit := int64(served + 5)
	api.setMaxUses(limit)
	for _, r := range replicas {
		r.sync()
	}
	for round := 0; round < 5; round++ {
		for _, r := range replicas {
			served += serveUntilDenied(r, 100)
			r.flush(false)
			r.sync()
		}
		clk.advance(time.Second)
	}
	if int64(served) > limit {
		t.Fatalf("served %d after the limit was lowered to %d (replicas held %d)", served, limit, held)
	}
	if got := api.get().Status.Uses; got < int64(served) {
		t.Errorf("status.uses %d < %d served", got, served)
	}
}

// A request waits at most ReserveTimeout for quota, whatever the API server
// does: a frozen one answers nothing.
func TestReserveWaitIsBounded(t *testing.T) {
	api := newFakeAPI(10)
	clk := &fakeClock{now: epoch}
	r := newTestReplica(api, clk, "a", 0)
	api.setFault("a", frozen)
	start := time.Now()
	if v := r.take(); v != Unavailable {
		t.Fatalf("verdict %v with the API server frozen, want Unavailable", v)
	}
	// Twenty times the reserve timeout: the wait is the timeout, and the
	// rest is scheduling on a loaded machine under -race; a wait for the
	// frozen API server would never end.
	if d, bound := time.Since(start), 20*r.wait(); d > bound {
		t.Errorf("the first request waited %v (reserve timeout %v, bound %v)", d, r.wait(), bound)
	}
	if r.c.RetryAfter() < 1 {
		t.Errorf("Retry-After %d", r.c.RetryAfter())
	}
	// The next request is refused at once, without asking the API server
	// again (counted, not timed: a busy machine's scheduling is not the
	// code's wait).
	asked := api.frozenWaitCount()
	if v := r.take(); v != Unavailable || api.frozenWaitCount() != asked {
		t.Errorf("the next request: %v after %d more requests to the frozen API server, want Unavailable at once", v, api.frozenWaitCount()-asked)
	}
}

// A first click whose reservation loses its races (the other replicas
// writing the link between each of its reads and patches, maxWriteAttempts
// times in a row and more) tries again until its reserve timeout: with
// quota free and the API server answering, it is served, not answered 503
// at once (run 40 of issue 41: a 503 within a second on a link with 500
// uses free). A streak that outlasts the timeout still ends by it.
func TestReserveOutlastsALosingStreak(t *testing.T) {
	api := newFakeAPI(500)
	clk := &fakeClock{now: epoch}
	patient := newTestReplica(api, clk, "a", 0, true) // reserve timeout: a minute
	api.loseRaces("a", 3*maxWriteAttempts)
	if v := patient.take(); v != Served {
		t.Fatalf("verdict %v after %d lost races, want Served", v, 3*maxWriteAttempts)
	}
	if st := api.get().Status; len(st.UseReservations) != 1 || st.UseReservations[0].Holder != "a" {
		t.Errorf("status %+v, want a's reservation", st)
	}

	b := newTestReplica(api, clk, "b", 0) // reserve timeout: 50ms
	api.loseRaces("b", 1<<30)
	start := time.Now()
	if v := b.take(); v != Unavailable {
		t.Fatalf("verdict %v losing every race, want Unavailable", v)
	}
	// Twenty times the reserve timeout, as in TestReserveWaitIsBounded; a
	// streak retried without the timeout would never end.
	if d, bound := time.Since(start), 20*b.wait(); d > bound {
		t.Errorf("losing every race, the request waited %v (reserve timeout %v, bound %v)", d, b.wait(), bound)
	}
}

// The uses client answers within the caller's context even when the API
// server never answers: its REST mapping needs no discovery. (The default
// mapper's discovery has no context: the first request of a limited link
// then waited as long as the API server was frozen.)
func TestClientNeedsNoDiscovery(t *testing.T) {
	release := make(chan struct{})
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	scheme := runtime.NewScheme()
	if err := linkv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(&rest.Config{Host: srv.URL}, scheme)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "l"}, &linkv1.ShortLink{}) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Get succeeded against a server that never answers")
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("Get still waiting 5s after its 200ms context ended (%d requests)", requests.Load())
	}
}

// A write applied by the API server whose response was lost is recognised
// on the next read by the expiresAt it wrote: its uses count once.
func TestUnconfirmedWriteCountsOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault fault
	}{
		{"applied, then the response lost", applyThenTimeout},
		{"lost before it was applied", timeoutBeforeApply},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(100)
			clk := &fakeClock{now: epoch}
			r := newTestReplica(api, clk, "a", 0)
			served := serveUntilDenied(r, 9)
			api.setFault("a", tc.fault)
			clk.advance(20 * time.Second) // the renewal is due (a held lease with quota left waits for it)
			r.flush(false)                // the renewal that reports the uses: outcome unknown
			r.sync()
			served += serveUntilDenied(r, 3)
			r.flush(false)
			r.sync()
			r.flush(true)
			st := api.get().Status
			if st.Uses != int64(served) {
				t.Errorf("status.uses %d after %d served", st.Uses, served)
			}
			if len(st.UseReservations) != 0 {
				t.Errorf("reservations left after the final flush: %+v", st.UseReservations)
			}
		})
	}
}

// A link deleted and created again under its name, seen by the informer as
// one update (a re-list), gets a new counter; the old one's writes find
// another uid and write nothing.
func TestRecreatedLinkStartsAfresh(t *testing.T) {
	api := newFakeAPI(100)
	clk := &fakeClock{now: epoch}
	r := newTestReplica(api, clk, "a", 0)
	served := serveUntilDenied(r, 5)
	old := r.c
	api.create("uid-2", 100)
	r.sync()
	if r.c == old {
		t.Fatal("the recreated link got the old link's counter")
	}
	if r.take() != Served {
		t.Fatal("the recreated link is not served")
	}
	r.flush(false)
	r.flush(true)
	st := api.get().Status
	if st.Uses != 1 {
		t.Errorf("the new link's status.uses = %d, want 1 (the old link served %d)", st.Uses, served)
	}
	if len(st.UseReservations) != 0 {
		t.Errorf("reservations left: %+v", st.UseReservations)
	}
}

// Requests that find no quota never make the pending count negative, and
// every use taken is in the count a release writes, however requests and
// releases interleave.
func TestTakeAndReleaseInterleave(t *testing.T) {
	api := newFakeAPI(1_000_000)
	r := newTestReplica(api, &fakeClock{now: epoch}, "a", 0)
	r.u.opts.Clock = time.Now
	r.u.base = time.Now()
	var served atomic.Int64
	var negative atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if r.u.Take(r.c, time.Now()) == Served {
					served.Add(1)
				}
				if r.c.pending.Load() < 0 {
					negative.Store(true)
				}
			}
		})
	}
	for i := range 2000 {
		// Renewals that report counts, and releases (an idle link's
		// round, a shutdown), while requests take and find no quota.
		r.flush(i%2 == 0)
	}
	close(stop)
	wg.Wait()
	r.flush(true)
	if negative.Load() {
		t.Error("the pending count went below zero")
	}
	if api.lowered {
		t.Error("a write lowered status.uses")
	}
	if got := api.get().Status.Uses; got != served.Load() {
		t.Errorf("status.uses %d, served %d", got, served.Load())
	}
}

// Reservation writes are merge patches of uses and useReservations with a
// resourceVersion precondition: status fields a newer controller writes
// are never sent back (an Update would, and drop the ones this build does
// not know). The fake refuses anything else.
func TestReservationWritesArePatches(t *testing.T) {
	api := newFakeAPI(10)
	// Writes get a minute, not 50 ms: nothing here pauses the API, and a
	// busy machine once took longer than 50 ms over the release (CI at a
	// load average of 26: "1 patches").
	r := newTestReplica(api, &fakeClock{now: epoch}, "a", 0, true)
	if r.take() != Served {
		t.Fatal("not served")
	}
	r.flush(true)
	if len(api.patches) != 2 {
		t.Fatalf("%d patches, want a reservation and its release", len(api.patches))
	}
	for _, p := range api.patches {
		if !strings.HasPrefix(p, `{"metadata":{"resourceVersion":`) {
			t.Errorf("patch %s", p)
		}
	}
	if !strings.Contains(api.patches[1], `"useReservations":null`) {
		t.Errorf("the release does not remove the list: %s", api.patches[1])
	}
}

// When the budget is short, the reservations whose leases end first are
// renewed first.
func TestRenewalsDueFirst(t *testing.T) {
	cs := make([]*Counter, 0, 3)
	for _, end := range []int64{30, 10, 20} {
		c := &Counter{}
		c.lim().leaseEnd.Store(end)
		cs = append(cs, c)
	}
	dueFirst(cs)
	for i, want := range []int64{10, 20, 30} {
		if got := cs[i].lim().leaseEnd.Load(); got != want {
			t.Fatalf("renewal %d: lease ending at %d, want %d", i, got, want)
		}
	}
}

// The bound a burst of first clicks on distinct limited links puts on the
// API server: at most ReserveBurst + WritesPerSecond*t writes in t seconds
// per replica; and flush rounds, paced at the rate, leave that burst to
// the requests.
func TestWriteBudgetBound(t *testing.T) {
	const rate, burst = 1000.0, 50
	u := New(Options{WritesPerSecond: rate, ReserveBurst: burst, FlushInterval: time.Second})
	u.roundEnd = time.Now().Add(time.Second)
	start := time.Now()
	for range 100 {
		if !u.spend(context.Background(), budgetRound) {
			t.Fatal("a flush round found no budget")
		}
	}
	// A lower bound, which a slower machine only makes easier to meet: 100
	// writes paced at rate take 99 intervals after the first.
	if d := time.Since(start); d < 90*time.Millisecond {
		t.Errorf("100 flush writes took %v: not paced at %v/s", d, rate)
	}
	if tokens := u.budget.Tokens(); tokens < burst-2 {
		t.Errorf("flush rounds left %.1f of the reservation burst %d", tokens, burst)
	}
	const window = 20 * time.Millisecond
	var granted atomic.Int64
	var wg sync.WaitGroup
	begin := time.Now()
	for range 500 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), window)
			defer cancel()
			if u.spend(ctx, budgetWait) {
				granted.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(begin)
	if most := float64(burst) + rate*elapsed.Seconds() + 1; float64(granted.Load()) > most {
		t.Errorf("%d writes in %v; the bound is %v", granted.Load(), elapsed, most)
	}
	if granted.Load() < burst-2 {
		t.Errorf("%d writes granted to a burst; want the burst of %d at once", granted.Load(), burst)
	}
}

// A reservation in use stays with its replica between clicks (a renewal
// every other round, no write while its lease lasts), and goes back to the
// others once it has served nothing for a lease.
func TestQuietReservationReturnedAfterALease(t *testing.T) {
	api := newFakeAPI(100)
	clk := &fakeClock{now: epoch}
	r := newTestReplica(api, clk, "a", 0)
	if serveUntilDenied(r, 2) != 2 { // blocks of 1 and 2: one use left
		t.Fatal("not served")
	}
	writes := func() int { return len(api.patches) }
	r.flush(false) // in use, quota left, the lease lasts: the report waits for the renewal
	after := writes()
	held := func() bool { return len(api.get().Status.UseReservations) == 1 }
	for round, want := range []struct {
		writes int
		held   bool
	}{
		{0, true},  // quiet 1: the lease lasts 20s more: no write
		{1, true},  // quiet 2: 10s left: renewed
		{1, false}, // quiet 3 (a lease): returned
	} {
		clk.advance(10 * time.Second)
		r.flush(false)
		if got := writes() - after; got != want.writes || held() != want.held {
			t.Fatalf("round %d: %d writes, held %v; want %d, %v", round+1, got, held(), want.writes, want.held)
		}
		after = writes()
	}
	if uses := api.get().Status.Uses; uses != 2 {
		t.Errorf("status.uses %d after the reservation was returned, want the 2 served", uses)
	}
}

// A link in use keeps its quota, topped up as it is used, and costs a write
// per renewal, not one per click or round: with the default lease (six
// rounds), a link clicked every 20s (every second round) is served every
// time from quota and written about every five rounds. A link with an
// idleTimeout writes its uses every round, for lastUsedAt.
func TestReservationInUseWritesPerRenewal(t *testing.T) {
	for _, idle := range []bool{false, true} {
		t.Run(fmt.Sprintf("idleTimeout=%v", idle), func(t *testing.T) {
			api := newFakeAPI(1_000_000)
			clk := &fakeClock{now: epoch}
			r := newTestReplica(api, clk, "a", 0)
			r.u = New(Options{Client: &fakeClient{api: api, holder: "a"}, Holder: "a",
				FlushInterval: 10 * time.Second, WritesPerSecond: 1e9, Clock: r.clock})
			version := func() Versioned {
				v := api.version().(*testVersion)
				v.IdleTimeout = idle
				return v
			}
			r.c = r.u.Attach(nil, version())
			const rounds = 60
			clicks := 0
			for round := range rounds {
				if round%2 == 0 {
					if r.take() != Served {
						t.Fatalf("round %d: the click was not served", round)
					}
					clicks++
				}
				clk.advance(10 * time.Second)
				r.flush(false)
				r.c = r.u.Attach(r.c, version())
			}
			writes := len(api.patches)
			if idle {
				if writes < clicks {
					t.Errorf("%d writes for %d clicks: a link with an idleTimeout must report each round's uses", writes, clicks)
				}
				return
			}
			if writes*2 > clicks {
				t.Errorf("%d writes for %d clicks over %d rounds, want at most one for two clicks (a write per renewal)", writes, clicks, rounds)
			}
			t.Logf("%d writes for %d clicks over %d rounds", writes, clicks, rounds)
		})
	}
}

// A release waits for a request that has taken quota and not yet counted
// it, so the count it writes holds that use; and a request that finds no
// quota leaves the pending count alone. (Counting before taking, as before,
// let a write carry away a count that a failed take then took back: the
// pending count went negative and the next write lowered status.uses.)
func TestReleaseWaitsForATakeInFlight(t *testing.T) {
	api := newFakeAPI(100)
	r := newTestReplica(api, &fakeClock{now: epoch}, "a", 0)
	served := serveUntilDenied(r, 2) // blocks of 1 and 2: one use left
	if !r.c.lim().take(r.u.mono(r.clock())) {
		t.Fatal("no quota left to take")
	}
	r.c.lim().taking.Add(1) // a request between its take and its count
	released := make(chan struct{})
	go func() {
		r.flush(true)
		close(released)
	}()
	select {
	case <-released:
		t.Fatal("the release did not wait for the request between its take and its count")
	case <-time.After(100 * time.Millisecond):
	}
	r.c.pending.Add(1)
	r.c.lim().taking.Add(-1)
	<-released
	if got := api.get().Status.Uses; got != int64(served+1) {
		t.Errorf("status.uses %d after %d uses", got, served+1)
	}
	// No quota and a denial in force: the request is refused and the
	// pending count is untouched.
	r.c.lim().denied.Store(r.u.mono(r.clock().Add(time.Minute)))
	if v := r.take(); v != Unavailable || r.c.pending.Load() != 0 {
		t.Errorf("a refused request: %v, pending %d", v, r.c.pending.Load())
	}
}

// status.lastUsedAt rides on the writes of uses, limited or not: each write
// that reports uses sets it to its own time rounded up to the second (never
// before a use it reports), a write that reports none leaves it out, no
// write is added for it, and it never moves back, whatever another
// replica's clock says.
func TestLastUsedAtRidesOnUseWrites(t *testing.T) {
	for _, limited := range []bool{false, true} {
		name := "unlimited"
		if limited {
			name = "maxUses"
		}
		t.Run(name, func(t *testing.T) {
			var maxUses int64
			if limited {
				maxUses = 100
			}
			api := newFakeAPI(maxUses)
			clk := &fakeClock{now: epoch.Add(400 * time.Millisecond)}
			ahead := newTestReplica(api, clk, "ahead", 5*time.Second)
			r := newTestReplica(api, clk, "r", 0)
			use := func(r *testReplica) {
				t.Helper()
				if limited {
					if r.take() != Served {
						t.Fatal("not served")
					}
					return
				}
				r.u.Count(r.c)
			}
			patches := func() int { api.mu.Lock(); defer api.mu.Unlock(); return len(api.patches) }

			use(r)
			used := clk.skewed(0)()
			r.flush(false)
			l := api.get()
			if l.Status.Uses != 1 || l.Status.LastUsedAt == nil {
				t.Fatalf("after one use: uses %d, lastUsedAt %v", l.Status.Uses, l.Status.LastUsedAt)
			}
			if got, want := l.Status.LastUsedAt.Time, used.Truncate(time.Second).Add(time.Second); !got.Equal(want) {
				t.Errorf("lastUsedAt %s, want %s: the write's time rounded up", got, want)
			}
			// No write of its own: one count write, or a reservation (which
			// reports no use yet) and the flush's renewal that reports it.
			want := 1
			if limited {
				want = 2
			}
			if n := patches(); n != want {
				t.Fatalf("%d writes for one use, want %d: %q", n, want, api.patches)
			}
			if !strings.Contains(api.patches[want-1], `"lastUsedAt"`) {
				t.Errorf("the write of the use has no lastUsedAt: %s", api.patches[want-1])
			}
			if limited && strings.Contains(api.patches[0], `"lastUsedAt"`) {
				t.Errorf("the reservation, which reports no use, sets lastUsedAt: %s", api.patches[0])
			}

			// A replica whose clock is ahead sets a later time; ours does not
			// move it back.
			ahead.sync()
			use(ahead)
			clk.advance(time.Second)
			ahead.flush(false)
			aheadAt := api.get().Status.LastUsedAt.Time
			r.sync()
			use(r)
			for limited && r.c.lim().quota.Load() > 0 {
				use(r) // a held reservation with quota left reports at its renewal
			}
			clk.advance(time.Second)
			r.flush(false)
			if got := api.get().Status.LastUsedAt.Time; got.Before(aheadAt) {
				t.Errorf("lastUsedAt moved back from %s to %s", aheadAt, got)
			}

			// A round with no use writes no lastUsedAt.
			n := patches()
			clk.advance(10 * time.Second)
			r.sync()
			r.flush(true) // a release for the limited link, nothing for the other
			for _, p := range api.patches[n:] {
				if strings.Contains(p, `"lastUsedAt"`) {
					t.Errorf("a write reporting no use sets lastUsedAt: %s", p)
				}
			}
			if api.lastUsedBack {
				t.Error("a patch moved lastUsedAt back")
			}
		})
	}
}

// A first click costs one round trip: the first reservation of a link the
// informer shows with no reservation is written on that version, with no
// live read. A stale version (another replica reserved since) conflicts,
// and the retry reads live and grants only what is free.
func TestFirstReservationWritesOnTheInformersVersion(t *testing.T) {
	api := newFakeAPI(1)
	clk := &fakeClock{now: epoch}
	a := newTestReplica(api, clk, "a", 0)
	b := newTestReplica(api, clk, "b", 0) // its informer will lag behind a's write
	if a.take() != Served {
		t.Fatal("a's first click was not served")
	}
	if api.gets != 0 || len(api.patches) != 1 {
		t.Fatalf("a's first click: %d reads and %d writes, want a write alone", api.gets, len(api.patches))
	}
	if got := b.take(); got == Served {
		t.Fatal("b served the single use a holds")
	}
	if api.gets != 1 {
		t.Fatalf("b's stale write was retried on %d live reads, want 1", api.gets)
	}
	if st := api.get().Status; len(st.UseReservations) != 1 || st.UseReservations[0].Holder != "a" {
		t.Fatalf("reservations %v, want a's alone", st.UseReservations)
	}
}

// requestCounter is an API server of many limited links, each held in full
// by another replica's reservation, that counts the requests it is sent.
type requestCounter struct {
	client.Client // nil: any other call panics
	gets, patches atomic.Int64
}

func (c *requestCounter) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	c.gets.Add(1)
	l := obj.(*linkv1.ShortLink)
	*l = linkv1.ShortLink{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: types.UID(key.Name), ResourceVersion: "1"}}
	l.Spec.MaxUses = ptr.To[int64](1)
	l.Status.UseReservations = []linkv1.UseReservation{{Holder: "other", Quota: 1, ExpiresAt: metav1.NewMicroTime(time.Now().Add(time.Hour))}}
	return nil
}

func (c *requestCounter) Status() client.SubResourceWriter { return &countedStatus{c: c} }

type countedStatus struct {
	client.SubResourceWriter
	c *requestCounter
}

func (s *countedStatus) Patch(context.Context, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
	s.c.patches.Add(1)
	return nil
}

// The bound an attacker clicking many distinct limited links puts on the
// API server, per replica: at most ReserveBurst + WritesPerSecond*t reads
// and as many writes in t seconds, whatever the links. Here 2,000 links
// whose quota another replica holds are clicked at once; each click waits
// for a reservation up to ReserveTimeout and gets a 503. (With the read
// before the budget, every click read the link at once.)
func TestAttackerBoundOnTheAPIServer(t *testing.T) {
	const rate, burst, links = 200.0, 20, 2000
	api := &requestCounter{}
	u := New(Options{Client: api, Holder: "a", WritesPerSecond: rate, ReserveBurst: burst,
		FlushInterval: 10 * time.Second, ReserveTimeout: 100 * time.Millisecond})
	counters := make([]*Counter, links)
	for i := range counters {
		name := fmt.Sprintf("link-%d", i)
		counters[i] = u.Attach(nil, &testVersion{LinkVersion{Namespace: "ns", Name: name, ResourceVersion: "1",
			UID: UIDKey(types.UID(name)), MaxUses: 1}})
	}
	var wg sync.WaitGroup
	var served atomic.Int64
	begin := time.Now()
	for _, c := range counters {
		wg.Go(func() {
			if u.Take(c, time.Now()) == Served {
				served.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(begin)
	most := float64(burst) + rate*elapsed.Seconds() + 1
	if served.Load() != 0 {
		t.Errorf("%d clicks served from quota another replica holds", served.Load())
	}
	if g, p := float64(api.gets.Load()), float64(api.patches.Load()); g > most || p > most {
		t.Errorf("%v reads and %v writes in %v for %d clicks; the bound is %.0f of each", g, p, elapsed, links, most)
	}
	if api.gets.Load() < burst {
		t.Errorf("%d reads: the clicks did not even try to reserve", api.gets.Load())
	}
	t.Logf("%d clicks of distinct links in %v: %d reads, %d writes (bound %.0f each)", links, elapsed, api.gets.Load(), api.patches.Load(), most)
}
