package peer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
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

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/uses"
)

// The counting property over the real network code: replicas of uses.Uses
// with their default write budget, each serving the real peer port on
// loopback and forwarding with the real client, against one API (a fake
// client with a status subresource and resourceVersion preconditions).
// Random histories click, flush, stop and kill replicas; a killed
// replica's address is taken by an impostor that answers every request as
// a holder would, with a made-up MAC; a replica may answer too late (its
// answers lost to the forwarder) or take a wrong key (another
// installation). At every step: redirects never exceed maxUses, and every
// use served is in status.uses or a reservation's quota (never reads low).
// uses' own TestCountingProperty covers the rest (faults of the API
// server, clocks, lowered limits, recreated links) over a simulated
// network.
func TestCountingPropertyOverTheNetwork(t *testing.T) {
	const histories, steps = 12, 60
	var seen netCoverage
	defer func() {
		// Else the histories would not test them.
		if seen.forwarded.Load() == 0 || seen.impostor.Load() == 0 || seen.late.Load() == 0 {
			t.Errorf("%d uses served through the peer port, %d asks of an impostor, %d late answers in all histories",
				seen.forwarded.Load(), seen.impostor.Load(), seen.late.Load())
		}
	}()
	for h := range histories {
		rng := rand.New(rand.NewPCG(uint64(h), 0x9e3))
		n := newNetRun(t, rng, &seen)
		for range steps {
			did := n.step()
			if err := n.check(); err != nil {
				t.Fatalf("history %d, after %v: %v", h, did, err)
			}
		}
		n.stopAll()
	}
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
// its own quota.
type netTaker struct {
	r    *netReplica
	seen *netCoverage
}

func (t netTaker) TakeForPeer(ns, code string, uid uint64) Result {
	if t.r.slow.pause() {
		t.seen.late.Add(1)
	}
	if ns != "ns" || code != "code1" || uid != t.r.uid {
		return Unknown
	}
	switch t.r.u.TakeHeld(t.r.c, time.Now()) {
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
type netCoverage struct{ forwarded, impostor, late atomic.Int64 }

type netRun struct {
	t        *testing.T
	seen     *netCoverage
	rng      *rand.Rand
	api      client.Client
	key      *Key
	maxUses  int64
	served   int64
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
	n := &netRun{t: t, seen: seen, rng: rng, maxUses: maxUses, key: testKey(t),
		api: fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&linkv1.ShortLink{}).WithObjects(link).Build()}
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
	r := &netReplica{name: fmt.Sprintf("r%d", n.next), ln: ln, slow: &slowness{wait: 700 * time.Millisecond}, done: make(chan error, 1)}
	n.next++
	r.u = uses.New(uses.Options{Client: n.api, Holder: r.name, Peer: ln.Addr().String(), Registry: prometheus.NewRegistry(),
		FlushInterval: time.Second, Lease: 3 * time.Second, ReserveTimeout: time.Second,
		Forwarder: NewClient(ClientOptions{Keyring: StaticKeyring(key), AllowLocal: true, Log: logr.Discard()})})
	srv := NewServer(ln, netTaker{r, n.seen}, ServerOptions{Keyring: StaticKeyring(key), Holder: r.name})
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
		if res.Peer != "" && !res.ReturnRequested && (v.Peer.Peer == "" || res.Quota > most) {
			v.Peer, most = uses.Holder{Name: res.Holder, Peer: res.Peer}, res.Quota
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
	switch op := n.rng.IntN(100); {
	case op < 60:
		if r.u.Take(r.c, time.Now()) == uses.Served {
			n.served++
		}
	case op < 70:
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		r.u.Flush(ctx, false)
		cancel()
		return "flush " + r.name
	case op < 78:
		r.slow.mu.Lock()
		r.slow.on = !r.slow.on
		r.slow.mu.Unlock()
		return "slow " + r.name
	case op < 83 && len(live) > 1:
		n.kill(r)
		return "kill " + r.name
	case op < 86 && len(live) > 1:
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r.u.Stop(ctx)
		cancel()
		n.shut(r)
		return "stop " + r.name
	case op < 90 && len(live) < 5:
		n.spawn()
		return "spawn"
	}
	for _, r := range n.live() {
		if n.rng.IntN(4) > 0 { // one in four is late
			n.sync(r)
		}
	}
	return "take " + r.name
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
	if n.served > n.maxUses {
		return fmt.Errorf("served %d, maxUses %d", n.served, n.maxUses)
	}
	l := &linkv1.ShortLink{}
	if err := n.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "l"}, l); err != nil {
		return err
	}
	inStatus := l.Status.Uses
	for _, res := range l.Status.UseReservations {
		inStatus += res.Quota
	}
	if n.served > inStatus {
		return fmt.Errorf("status reads low: %d served, %d in status.uses and reservations %+v", n.served, inStatus, l.Status.UseReservations)
	}
	return nil
}

func (n *netRun) stopAll() {
	for _, r := range n.live() {
		n.shut(r)
	}
	for _, imp := range n.impostor {
		_ = imp.Shutdown()
	}
}
