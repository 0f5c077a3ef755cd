package uses

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// A stopping replica returns every reservation it holds within the
// shutdown timeout, with counts exact, when the API server is 25 ms away:
// 1,500 links, each a read and a write, are 75 s one at a time (the rest
// lost as on a kill) and about 1.2 s releaseWorkers at a time.
func TestStopReturnsEveryReservation(t *testing.T) {
	const links, latency, shutdownTimeout = 1500, 25 * time.Millisecond, 30 * time.Second
	scheme := runtime.NewScheme()
	_ = linkv1.AddToScheme(scheme)
	b := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&linkv1.ShortLink{})
	maxUses := int64(10)
	for i := range links {
		b = b.WithObjects(&linkv1.ShortLink{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("l%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))},
			Spec:       linkv1.ShortLinkSpec{URL: "https://example.com/", MaxUses: &maxUses},
		})
	}
	base := b.Build()
	var slow atomic.Bool
	wait := func() {
		if slow.Load() {
			time.Sleep(latency)
		}
	}
	c := interceptor.NewClient(base, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			wait()
			return c.Get(ctx, key, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			wait()
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	u := New(Options{Client: c, Holder: "a", Peer: "a:1", WritesPerSecond: 1e6, Registry: prometheus.NewRegistry()})
	ctx := context.Background()
	counters := make([]*Counter, links)
	for i := range links {
		l := &linkv1.ShortLink{}
		if err := base.Get(ctx, types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("l%d", i)}, l); err != nil {
			t.Fatal(err)
		}
		counters[i] = u.Attach(nil, &testVersion{LinkVersion{Namespace: "ns", Name: l.Name, ResourceVersion: l.ResourceVersion,
			UID: UIDKey(l.UID), MaxUses: maxUses, NoReservations: true}})
		if got := u.Take(counters[i], time.Now()); got != Served {
			t.Fatalf("link %d: %v", i, got)
		}
	}
	slow.Store(true)
	stop, cancel := context.WithTimeout(ctx, shutdownTimeout)
	defer cancel()
	start := time.Now()
	left := u.Stop(stop)
	took := time.Since(start)
	t.Logf("%d links returned in %v with %v of latency a request", links, took, latency)
	if left != 0 {
		t.Errorf("%d uses left unwritten", left)
	}
	list := &linkv1.ShortLinkList{}
	if err := base.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, l := range list.Items {
		if len(l.Status.UseReservations) > 0 || l.Status.Uses != 1 {
			held++
		}
	}
	if held > 0 {
		t.Errorf("%d of %d links kept a reservation or a wrong count after Stop (%v)", held, links, took)
	}
}

// A stopping replica whose writes keep losing races (a rollout: four
// replicas writing a link clicked ten times a second, on a loaded API
// server) keeps writing within the shutdown timeout: its uses are written
// and its quota returned, not left to be taken back after a lease and
// counted as used, as on a kill (run 10 of issue 41 lost 62 uses so, in
// the cluster suite's rollout test). A frozen API server is not retried
// so: a stop against it returns when its writes time out.
func TestStopOutlastsALosingStreak(t *testing.T) {
	api := newFakeAPI(100)
	clk := &fakeClock{now: epoch}
	a := newTestReplica(api, clk, "a", 0)
	for range 3 {
		if got := a.take(); got != Served {
			t.Fatalf("take: %v", got)
		}
	}
	a.flush(false) // a renewal: a reservation held beyond the uses served
	if st := api.get().Status; len(st.UseReservations) != 1 || st.UseReservations[0].Quota == 0 {
		t.Fatalf("before the stop: %+v, want a reservation with quota left", st)
	}
	for range 2 {
		if got := a.take(); got != Served {
			t.Fatalf("take: %v", got)
		}
	}
	api.loseRaces("a", 5*maxWriteAttempts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if left := a.u.Stop(ctx); left != 0 {
		t.Errorf("%d uses left unwritten", left)
	}
	if st := api.get().Status; st.Uses != 5 || len(st.UseReservations) != 0 {
		t.Errorf("after the stop: %+v, want uses 5 and no reservation", st)
	}

	b := newTestReplica(api, clk, "b", 0)
	for range 2 {
		if got := b.take(); got != Served {
			t.Fatalf("take: %v", got)
		}
	}
	pending := b.c.pending.Load()
	api.setFault("b", frozen)
	stopped, cancel := context.WithTimeout(context.Background(), 3*writeTimeout)
	defer cancel()
	start := time.Now()
	if left := b.u.Stop(stopped); left != pending || left == 0 {
		t.Errorf("against a frozen API server: %d uses left unwritten, want the %d pending", left, pending)
	}
	// Its writes each end at writeTimeout; retried as a lost race is, they
	// would take the stop's whole timeout, three times writeTimeout here:
	// the line between the two is that timeout.
	if took := time.Since(start); took >= 3*writeTimeout {
		t.Errorf("against a frozen API server the stop took %v, its whole timeout", took)
	}
}
