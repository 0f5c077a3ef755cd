package peer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/uses"
)

// The counting property over the real network code: replicas of uses.Uses
// with their default write budget, each serving the real peer port on
// loopback and forwarding with the real client, against one API (a fake
// client with a status subresource and resourceVersion preconditions).
// Every replica, peer port and client reads one fake clock, which the
// histories move, so leases pass and reservations are taken back while
// their holders still answer the peer port. Random histories click
// (bursts of concurrent clicks on random replicas: forwards contend for
// the same holder and quota), flush, pass the time, cut a replica off the
// API server (its writes fail, its peer port still answers), stop and kill
// replicas; a killed replica's address is taken by an impostor that
// answers every request as a holder would, with a made-up MAC; a replica
// may answer too late (its answers lost to the forwarder) or take a wrong
// key (another installation). After every step, both bounds:
//   - redirects never exceed maxUses (once it is lowered, none is served
//     past the new limit);
//   - status.uses never exceeds the redirects, plus the forwards counted
//     lost (uses_forwards_total{result="lost"}: perhaps served there and
//     redirected nowhere), plus the quota of reservations another replica
//     took back (their holders may have served it): no use counted twice;
//   - status never reads low: every redirect is in status.uses or in a
//     reservation's quota.
//
// uses' own TestCountingProperty covers the rest (faults of the API
// server, skewed clocks, lowered limits, recreated links) over a simulated
// network.
func TestCountingPropertyOverTheNetwork(t *testing.T) {
	const histories, steps = 12, 80
	var seen netCoverage
	defer func() {
		t.Logf("in all histories: %d uses served through the peer port, %d asks of an impostor, %d late answers, %d uses of reservations taken back, %d forwards taken while another was",
			seen.forwarded.Load(), seen.impostor.Load(), seen.late.Load(), seen.takenBack.Load(), seen.concurrent.Load())
		// Else the histories would not test them.
		if seen.forwarded.Load() == 0 || seen.impostor.Load() == 0 || seen.late.Load() == 0 ||
			seen.takenBack.Load() == 0 || seen.concurrent.Load() == 0 {
			t.Errorf("in all histories: %d uses served through the peer port, %d asks of an impostor, %d late answers, %d uses of reservations taken back, %d forwards taken while another was",
				seen.forwarded.Load(), seen.impostor.Load(), seen.late.Load(), seen.takenBack.Load(), seen.concurrent.Load())
		}
	}()
	for h := range histories {
		rng := rand.New(rand.NewPCG(uint64(h), 0x9e3))
		n := newNetRun(t, rng, &seen)
		did := make([]string, 0, steps)
		for range steps {
			did = append(did, n.step())
			if err := n.check(); err != nil {
				t.Fatalf("history %d, step %d: %v\nhistory: %v", h, len(did), err, did)
			}
		}
		seen.takenBack.Add(n.api.taken())
		n.stopAll()
	}
}

// netClock is the time of a history: every replica reads it.
type netClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *netClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *netClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// netAPI is the API server of a history: one fake client, seen by each
// replica through its own client, which fails while the replica is cut
// off. Status patches are serialized, so that each tells whose
// reservations it removed.
type netAPI struct {
	client.WithWatch
	mu sync.Mutex
	// takenBack is the quota of reservations that a patch of another
	// holder removed: counted as used, since their holders may have
	// served it.
	takenBack int64
	cut       map[string]bool
}

var errCut = errors.New("cut off from the API server")

func (a *netAPI) isCut(holder string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cut[holder]
}

func (a *netAPI) setCut(holder string, cut bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cut[holder] = cut
}

func (a *netAPI) taken() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.takenBack
}

// clientOf is holder's client of the API.
func (a *netAPI) clientOf(holder string) client.Client {
	return interceptor.NewClient(a.WithWatch, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if a.isCut(holder) {
				return errCut
			}
			return c.Get(ctx, key, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if a.isCut(holder) {
				return errCut
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			key := client.ObjectKeyFromObject(obj)
			before, after := &linkv1.ShortLink{}, &linkv1.ShortLink{}
			if err := c.Get(ctx, key, before); err != nil {
				return err
			}
			if err := c.SubResource(sub).Patch(ctx, obj, patch, opts...); err != nil {
				return err
			}
			if err := c.Get(ctx, key, after); err != nil {
				return err
			}
			for _, old := range before.Status.UseReservations {
				if old.Holder != holder && !slices.ContainsFunc(after.Status.UseReservations, func(r linkv1.UseReservation) bool { return r.Holder == old.Holder }) {
					a.takenBack += old.Quota
				}
			}
			return nil
		},
	})
}

// netReplica is a replica: counting, its peer port, and its view of the link.
type netReplica struct {
	name    string
	u       *uses.Uses
	c       *uses.Counter
	uid     uint64 // the object its counter is of
	ln      net.Listener
	cancel  context.CancelFunc
	done    chan error
	slow    *slowness
	dead    bool
	version *netVersion
	reg     *prometheus.Registry // its uses metrics
}

// slowness makes a replica's answers arrive after the forwarder gave up.
type slowness struct {
	mu   sync.Mutex
	on   bool
	wait time.Duration
}

func (s *slowness) pause() bool {
	s.mu.Lock()
	on, d := s.on, s.wait
	s.mu.Unlock()
	if on {
		time.Sleep(d)
	}
	return on
}

// netTaker is what the redirector does with a forwarded use
// (redirect.Redirector.TakeForPeer): only of the object it counts, from
// its own quota, at the history's time.
type netTaker struct {
	r    *netReplica
	seen *netCoverage
	clk  *netClock
}

func (t netTaker) TakeForPeer(ns, code string, uid uint64) Result {
	if t.seen.inFlight.Add(1) > 1 {
		t.seen.concurrent.Add(1)
	}
	defer t.seen.inFlight.Add(-1)
	if t.r.slow.pause() {
		t.seen.late.Add(1)
	}
	if ns != "ns" || code != "code1" || uid != t.r.uid {
		return Unknown
	}
	switch t.r.u.TakeHeld(t.r.c, t.clk.now()) {
	case uses.Served:
		t.seen.forwarded.Add(1)
		return Served
	case uses.Exhausted:
		return Gone
	}
	return Refused
}

type netVersion struct{ v uses.LinkVersion }

func (v *netVersion) UsesVersion() uses.LinkVersion { return v.v }

// netCoverage counts what the histories exercised.
type netCoverage struct {
	forwarded, impostor, late, takenBack atomic.Int64
	// concurrent counts the forwards a holder took while it was taking
	// another.
	concurrent, inFlight atomic.Int64
}

type netRun struct {
	t    *testing.T
	seen *netCoverage
	rng  *rand.Rand
	clk  *netClock
	api  *netAPI
	key  *Key
	// maxUses bounds the redirects: the limit, or as many as were served
	// when it was lowered below that.
	maxUses  int64
	served   atomic.Int64 // redirects
	replicas []*netReplica
	next     int
	impostor []*fasthttp.Server
}

func newNetRun(t *testing.T, rng *rand.Rand, seen *netCoverage) *netRun {
	scheme := runtime.NewScheme()
	_ = linkv1.AddToScheme(scheme)
	maxUses := int64(5 + rng.IntN(40))
	link := &linkv1.ShortLink{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "l", UID: "uid-1", CreationTimestamp: metav1.Now()},
		Spec:       linkv1.ShortLinkSpec{URL: "https://example.com/", MaxUses: &maxUses},
		Status:     linkv1.ShortLinkStatus{Code: "code1"},
	}
	n := &netRun{t: t, seen: seen, rng: rng, maxUses: maxUses, key: testKey(t), clk: &netClock{t: time.Now()},
		api: &netAPI{WithWatch: fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&linkv1.ShortLink{}).WithObjects(link).Build(),
			cut: map[string]bool{}}}
	for range 3 {
		n.spawn()
	}
	return n
}

// spawn starts a replica: one in six has another installation's key.
func (n *netRun) spawn() {
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		n.t.Fatal(err)
	}
	key := n.key
	if n.rng.IntN(6) == 0 {
		key = testKey(n.t)
	}
	r := &netReplica{name: fmt.Sprintf("r%d", n.next), ln: ln, slow: &slowness{wait: 700 * time.Millisecond}, done: make(chan error, 1),
		reg: prometheus.NewRegistry()}
	n.next++
	r.u = uses.New(uses.Options{Client: n.api.clientOf(r.name), Holder: r.name, Peer: ln.Addr().String(), Registry: r.reg,
		FlushInterval: time.Second, Lease: 3 * time.Second, ReserveTimeout: time.Second, Clock: n.clk.now,
		Forwarder: NewClient(ClientOptions{Keyring: StaticKeyring(key), AllowLocal: true, Log: logr.Discard(), Clock: n.clk.now})})
	srv := NewServer(ln, netTaker{r, n.seen, n.clk}, ServerOptions{Keyring: StaticKeyring(key), Holder: r.name, Clock: n.clk.now})
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- srv.Start(ctx) }()
	n.sync(r)
	n.replicas = append(n.replicas, r)
}

// sync delivers the link as the informer would: the peer to forward to is
// the reservation with the most quota not asked to return (forwardTo).
func (n *netRun) sync(r *netReplica) {
	l := &linkv1.ShortLink{}
	if err := n.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "l"}, l); err != nil {
		n.t.Fatal(err)
	}
	v := uses.LinkVersion{Namespace: "ns", Name: "l", ResourceVersion: l.ResourceVersion, UID: uses.UIDKey(l.UID),
		StatusUses: l.Status.Uses, MaxUses: *l.Spec.MaxUses, NoReservations: len(l.Status.UseReservations) == 0,
		Code: "code1", Created: l.CreationTimestamp.Unix()}
	var most int64
	for _, res := range l.Status.UseReservations {
		if res.PeerAddress != "" && !res.ReturnRequested && (v.Peer.Peer == "" || res.Quota > most) {
			v.Peer, most = uses.Holder{Name: res.Holder, Peer: res.PeerAddress}, res.Quota
		}
		v.ReturnRequested = v.ReturnRequested || res.ReturnRequested
	}
	r.version = &netVersion{v}
	r.c = r.u.Attach(r.c, r.version)
	r.uid = v.UID
}

func (n *netRun) live() []*netReplica {
	var out []*netReplica
	for _, r := range n.replicas {
		if !r.dead {
			out = append(out, r)
		}
	}
	return out
}

// step does one random thing and says what.
func (n *netRun) step() string {
	live := n.live()
	r := live[n.rng.IntN(len(live))]
	did := ""
	switch op := n.rng.IntN(100); {
	case op < 45:
		did = n.burst(live)
	case op < 57:
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		r.u.Flush(ctx, false)
		cancel()
		did = "flush " + r.name
	case op < 67:
		d := time.Duration(n.rng.Int64N(int64(3 * time.Second)))
		n.clk.advance(d)
		did = "advance " + d.Round(time.Millisecond).String()
	case op < 73:
		r.slow.mu.Lock()
		r.slow.on = !r.slow.on
		r.slow.mu.Unlock()
		did = "slow " + r.name
	case op < 79:
		cut := !n.api.isCut(r.name)
		n.api.setCut(r.name, cut)
		did = fmt.Sprintf("cut %s %v", r.name, cut)
	case op < 83 && len(live) > 1:
		n.kill(r)
		did = "kill " + r.name
	case op < 86 && len(live) > 1:
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r.u.Stop(ctx)
		cancel()
		n.shut(r)
		did = "stop " + r.name
	case op < 90 && len(live) < 5:
		n.spawn()
		did = "spawn"
	case op < 92:
		did = n.lower()
	default:
		did = "nothing"
	}
	lowered := strings.HasPrefix(did, "limit")
	for _, r := range n.live() {
		if lowered || n.rng.IntN(4) > 0 { // one in four is late, but every replica sees a lowered limit
			n.sync(r)
		}
	}
	return did
}

// lower lowers maxUses: from then on, no more than the new limit are
// served, or none more if as many were served already.
func (n *netRun) lower() string {
	l := &linkv1.ShortLink{}
	if err := n.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "l"}, l); err != nil {
		n.t.Fatal(err)
	}
	limit := max(1, n.maxUses-int64(n.rng.IntN(int(n.maxUses)+1)))
	l.Spec.MaxUses = &limit
	if err := n.api.Update(context.Background(), l); err != nil {
		n.t.Fatal(err)
	}
	n.maxUses = max(limit, n.served.Load())
	return fmt.Sprintf("limit %d (%d served)", limit, n.served.Load())
}

// burst clicks up to six times at once, each on a random live replica,
// and one time in three flushes a replica meanwhile (its write releases
// or renews the quota the clicks and forwards take).
func (n *netRun) burst(live []*netReplica) string {
	var wg sync.WaitGroup
	names := make([]string, 1+n.rng.IntN(6))
	for i := range names {
		r := live[n.rng.IntN(len(live))]
		names[i] = r.name
		wg.Go(func() {
			if r.u.Take(r.c, n.clk.now()) == uses.Served {
				n.served.Add(1)
			}
		})
	}
	did := "take " + strings.Join(names, ",")
	if n.rng.IntN(3) == 0 {
		r := live[n.rng.IntN(len(live))]
		did += " with a flush of " + r.name
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			r.u.Flush(ctx, false)
		})
	}
	wg.Wait()
	return did
}

// shut stops r's peer port.
func (n *netRun) shut(r *netReplica) {
	r.dead = true
	r.slow.mu.Lock()
	r.slow.on = false
	r.slow.mu.Unlock()
	r.cancel()
	if err := <-r.done; err != nil {
		n.t.Errorf("%s's peer port: %v", r.name, err)
	}
}

// kill is a SIGKILL: the peer port goes, what it counted and did not write
// is lost, and an impostor takes its address.
func (n *netRun) kill(r *netReplica) {
	addr := r.ln.Addr().String()
	n.shut(r)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return // the port was taken meanwhile: no impostor this time
	}
	imp := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		n.seen.impostor.Add(1)
		ctx.Response.Header.Set(headerUse, "served")
		ctx.Response.Header.Set(headerMAC, "c2VydmVk")
		ctx.SetStatusCode(fasthttp.StatusNoContent)
	}}
	go func() { _ = imp.Serve(ln) }()
	n.impostor = append(n.impostor, imp)
}

// check holds the bounds both ways.
func (n *netRun) check() error {
	served := n.served.Load()
	if served > n.maxUses {
		return fmt.Errorf("served %d, maxUses %d (or as many as were served when it was lowered)", served, n.maxUses)
	}
	l := &linkv1.ShortLink{}
	if err := n.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "l"}, l); err != nil {
		return err
	}
	var lost int64
	for _, r := range n.replicas {
		lost += counterValue(n.t, r.reg, "linkforge_redirector_uses_forwards_total", "lost")
	}
	if taken := n.api.taken(); l.Status.Uses > served+lost+taken {
		return fmt.Errorf("status.uses %d > %d served + %d forwards lost + %d taken back: a use counted twice", l.Status.Uses, served, lost, taken)
	}
	inStatus := l.Status.Uses
	for _, res := range l.Status.UseReservations {
		inStatus += res.Quota
	}
	if served > inStatus {
		return fmt.Errorf("status reads low: %d served, %d in status.uses and reservations %+v", served, inStatus, l.Status.UseReservations)
	}
	return nil
}

// counterValue is the counter name{result=result} in reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name, result string) int64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "result" && lp.GetValue() == result {
					return int64(m.GetCounter().GetValue())
				}
			}
		}
	}
	t.Fatalf("no %s{result=%q}", name, result)
	return 0
}

func (n *netRun) stopAll() {
	for _, r := range n.live() {
		n.shut(r)
	}
	for _, imp := range n.impostor {
		_ = imp.Shutdown()
	}
}
