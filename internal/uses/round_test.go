package uses

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A flush round, and the returns other replicas ask for, write their links
// roundWriters at a time: one at a time, an API server slow to answer
// lets the last leases of a round lapse while their holder is alive, and
// another replica takes them back as used (TestUntrustedPeers lost a
// single-use link so at load 26). The fake API holds every patch until
// roundWriters of them are in flight together, which writing one at a time
// never reaches: the round would end at writeTimeout with none written.
func TestRoundWritesOverlap(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(t *testing.T, u *Uses, ctx context.Context, clk *fakeClock, asked []*fakeAPI)
	}{
		{"renewals of a flush round", func(_ *testing.T, u *Uses, ctx context.Context, clk *fakeClock, _ []*fakeAPI) {
			clk.advance(16 * time.Second) // every lease (30s) within 1.5 rounds of its end
			u.Flush(ctx, false)
		}},
		{"returns asked for by a replica that could not reach this one", func(t *testing.T, u *Uses, ctx context.Context, _ *fakeClock, asked []*fakeAPI) {
			for _, api := range asked {
				api.mu.Lock()
				api.link.Status.UseReservations[0].ReturnRequested = true
				api.rv++
				api.link.ResourceVersion = fmt.Sprint(api.rv)
				api.mu.Unlock()
				u.Attach(u.counterOf(api), api.version()) // queues its return
			}
			u.returnQueued(ctx)
			for _, api := range asked {
				if res := api.get().Status.UseReservations; len(res) != 0 {
					t.Errorf("%s: reservations %+v after its return", api.get().Name, res)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{now: epoch}
			api := &routedAPI{links: map[string]*fakeAPI{}, counters: map[string]*Counter{}}
			u := New(Options{Client: api, Holder: "a", Peer: "a", FlushInterval: 10 * time.Second, Lease: 30 * time.Second,
				WritesPerSecond: 1e9, ReserveTimeout: time.Minute, MaxBlock: 8, Clock: clk.skewed(0)})
			const links = 2 * roundWriters
			all := make([]*fakeAPI, 0, links)
			for i := range links {
				link := newFakeAPI(100)
				link.link.Name = fmt.Sprintf("l%d", i)
				api.links[link.link.Name] = link
				c := u.Attach(nil, link.version())
				api.counters[link.link.Name] = c
				if u.Take(c, clk.now) != Served {
					t.Fatalf("%s: the first click was not served", link.link.Name)
				}
				all = append(all, link)
			}
			written := func() int {
				n := 0
				for _, link := range all {
					n += len(link.patches)
				}
				return n
			}
			before := written()
			api.holdPatches(roundWriters)
			// A deadline past writeTimeout: a round written one at a time
			// ends with that write's timeout, not the test's.
			ctx, cancel := context.WithTimeout(context.Background(), 3*writeTimeout)
			defer cancel()
			tc.write(t, u, ctx, clk, all)
			if !api.filled() {
				t.Fatalf("never %d patches in flight at once: the writes went one at a time (%d of %d links written)", roundWriters, written()-before, links)
			}
			if got := written() - before; got != links {
				t.Errorf("%d of %d links written", got, links)
			}
		})
	}
}

// counterOf is the counter the test attached for api's link.
func (u *Uses) counterOf(api *fakeAPI) *Counter {
	return u.opts.Client.(*routedAPI).counters[api.get().Name]
}

// routedAPI is one replica's client of several fakeAPIs, by link name,
// which can hold patches until a number of them are in flight at once.
type routedAPI struct {
	client.Client // nil: any other call panics
	links         map[string]*fakeAPI
	counters      map[string]*Counter

	mu       sync.Mutex
	hold     int // patches to hold until this many are in flight
	inFlight int
	full     chan struct{} // closed once hold patches were in flight together
}

func (r *routedAPI) holdPatches(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hold, r.full = n, make(chan struct{})
}

func (r *routedAPI) filled() bool {
	select {
	case <-r.full:
		return true
	default:
		return false
	}
}

func (r *routedAPI) client(name string) *fakeClient {
	return &fakeClient{api: r.links[name], holder: "a"}
}

func (r *routedAPI) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return r.client(key.Name).Get(ctx, key, obj, opts...)
}

func (r *routedAPI) Status() client.SubResourceWriter { return &routedStatus{r: r} }

type routedStatus struct {
	client.SubResourceWriter // nil: Update and the others panic
	r                        *routedAPI
}

func (s *routedStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	r := s.r
	r.mu.Lock()
	full := r.full
	if r.hold > 0 && !r.filled() {
		r.inFlight++
		if r.inFlight == r.hold {
			close(r.full)
		}
	}
	r.mu.Unlock()
	if full != nil {
		select {
		case <-full:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return r.client(obj.GetName()).Status().Patch(ctx, obj, patch, opts...)
}
