package redirect

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/peer"
	"github.com/linkforge/linkforge/internal/uses"
)

func TestForwardTo(t *testing.T) {
	res := func(quota int64, addr string) linkv1.UseReservation {
		r := linkv1.UseReservation{Holder: "h" + addr, Quota: quota, PeerAddress: addr}
		if addr != "" {
			r.PeerProtocol = linkv1.PeerProtocolHMACv1
		}
		return r
	}
	previousRelease := func(quota int64, addr string) linkv1.UseReservation { // as v0.3.0 writes it
		return linkv1.UseReservation{Holder: "h" + addr, Quota: quota, Peer: addr}
	}
	noProtocol := func(quota int64, addr string) linkv1.UseReservation {
		r := res(quota, addr)
		r.PeerProtocol = ""
		return r
	}
	marked := func(quota int64, addr string) linkv1.UseReservation {
		r := res(quota, addr)
		r.ReturnRequested = true
		return r
	}
	for _, tc := range []struct {
		name string
		rs   []linkv1.UseReservation
		want string
	}{
		{"none", nil, ""},
		{"no peer", []linkv1.UseReservation{res(3, "")}, ""},
		{"the most quota", []linkv1.UseReservation{res(1, "a:1"), res(4, "b:1"), res(2, "c:1")}, "b:1"},
		{"the first of a tie", []linkv1.UseReservation{res(4, "a:1"), res(4, "b:1")}, "a:1"},
		{"a bigger one without a peer is skipped", []linkv1.UseReservation{res(9, ""), res(1, "a:1")}, "a:1"},
		{"an empty reservation's peer", []linkv1.UseReservation{res(0, "a:1")}, "a:1"},
		{"one asked to return is skipped", []linkv1.UseReservation{marked(9, "a:1"), res(1, "b:1")}, "b:1"},
		{"only one asked to return", []linkv1.UseReservation{marked(9, "a:1")}, ""},
		{"a previous release's holder (no protocol) is skipped", []linkv1.UseReservation{previousRelease(9, "a:1"), res(1, "b:1")}, "b:1"},
		{"only a previous release's holder", []linkv1.UseReservation{previousRelease(9, "a:1")}, ""},
		{"an address without a protocol is skipped", []linkv1.UseReservation{noProtocol(9, "a:1"), res(1, "b:1")}, "b:1"},
		{"another protocol is skipped", []linkv1.UseReservation{func() linkv1.UseReservation { r := res(9, "a:1"); r.PeerProtocol = "hmac-v2"; return r }()}, ""},
	} {
		if got := forwardTo(tc.rs); got.PeerAddress != tc.want || got.PeerAddress != "" && got.Holder != "h"+tc.want {
			t.Errorf("%s: %q (%s), want %q", tc.name, got.PeerAddress, got.Holder, tc.want)
		}
	}
}

func TestPeerTableInterns(t *testing.T) {
	r := func(holder, addr string) linkv1.UseReservation {
		return linkv1.UseReservation{Holder: holder, PeerAddress: addr}
	}
	a, b := peers.id(r("a", "10.1.2.3:8082")), peers.id(r("b", "10.1.2.3:8082"))
	if a == 0 || b == 0 || a == b || peers.id(r("a", "10.1.2.3:8082")) != a {
		t.Fatalf("ids %d %d", a, b)
	}
	if h := a.holder(); h != (uses.Holder{Name: "a", Peer: "10.1.2.3:8082"}) {
		t.Fatalf("holder %+v does not round-trip", h)
	}
	if peerID(0).holder() != (uses.Holder{}) || peers.id(r("a", "")) != 0 {
		t.Fatal("the zero id does not round-trip")
	}
}

// peerHarness is a redirector whose counting holds quota of limited links
// (reserved through a fake API server by clicks) and answers peers.
type peerHarness struct {
	*harness
	u *uses.Uses
}

func newPeerHarness(t *testing.T, links ...*linkv1.ShortLink) *peerHarness {
	t.Helper()
	u := uses.New(uses.Options{Client: fakeLinkClient(links...), Holder: "a", Peer: "a:1", Registry: prometheus.NewRegistry()})
	h := &peerHarness{harness: newHarnessWith(t, Options{Uses: u}), u: u}
	for _, l := range links {
		h.add(l)
	}
	return h
}

// fakeLinkClient is a fake API server holding links (as they are; without
// managedFields, which it refuses).
func fakeLinkClient(links ...*linkv1.ShortLink) client.WithWatch {
	scheme := runtime.NewScheme()
	_ = linkv1.AddToScheme(scheme)
	b := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&linkv1.ShortLink{})
	for _, l := range links {
		in := l.DeepCopy()
		in.ManagedFields = nil
		b = b.WithObjects(in)
	}
	return b.Build()
}

// limitedLink is a link with maxUses 10.
func limitedLink(name, code string, mut ...func(*linkv1.ShortLink)) *linkv1.ShortLink {
	l := link("ns", name, code, "https://example.com/"+name, mut...)
	l.Spec.MaxUses = ptr.To[int64](10)
	l.ResourceVersion = ""
	return l
}

// The peer port serves a use from this replica's quota and nothing else:
// not a link it holds no quota of, not another object under the code, not
// a link that does not answer, and never by reserving.
func TestTakeForPeer(t *testing.T) {
	held := limitedLink("held", "held1")
	expired := limitedLink("expired", "exp1", func(l *linkv1.ShortLink) { l.Spec.ExpiresAt = &metav1.Time{Time: epoch.Add(-time.Minute)} })
	unlimited := link("ns", "free", "free1", "https://example.com/free")
	unheld := limitedLink("unheld", "unheld1")
	h := newPeerHarness(t, held, expired, unlimited, unheld)
	// Two clicks: a block of one, used, then a block of two, one left.
	for i := range 2 {
		if resp := h.do("GET", "", "/ns/held1"); resp.StatusCode != 302 {
			t.Fatalf("click %d: %d", i, resp.StatusCode)
		}
	}
	uid := func(l *linkv1.ShortLink) uint64 { return uses.UIDKey(l.UID) }
	for _, tc := range []struct {
		name, code string
		uid        uint64
		want       peer.Result
	}{
		{"an unknown code", "nope", uid(held), peer.Unknown},
		{"another object under the code", "held1", uses.UIDKey("other"), peer.Unknown},
		{"a link without maxUses", "free1", uid(unlimited), peer.Unknown},
		{"an expired link", "exp1", uid(expired), peer.Gone},
		{"the use held", "held1", uid(held), peer.Served},
		{"no quota left here", "held1", uid(held), peer.Refused},
		{"a link that answers, never clicked here (no quota)", "unheld1", uid(unheld), peer.Refused},
	} {
		if got := h.r.TakeForPeer("ns", tc.code, tc.uid); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// startPeers serves h's peer port on a free local port as holder "a".
func startPeers(t *testing.T, h *peerHarness, key *peer.Key) string {
	t.Helper()
	ln, err := peer.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := peer.NewServer(ln, h.r, peer.ServerOptions{Keyring: peer.StaticKeyring(key), Holder: "a", Log: h.r.log})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("peer server: %v", err)
		}
	})
	return ln.Addr().String()
}

// A forwarded use over the network, from the client to the redirector: the
// client's verdict is the holder's, and only the holder's.
func TestPeerClientTakesFromTheHolder(t *testing.T) {
	held := limitedLink("held", "held1")
	h := newPeerHarness(t, held)
	for range 2 {
		h.do("GET", "", "/ns/held1")
	}
	key, _ := peer.NewKey(peer.RandomKey())
	addr := startPeers(t, h, key)
	c := peer.NewClient(peer.ClientOptions{Keyring: peer.StaticKeyring(key), AllowLocal: true, Log: h.r.log})
	v := uses.LinkVersion{Namespace: "ns", Name: "held", Code: "held1", UID: uses.UIDKey(held.UID)}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if got := c.TakeFrom(ctx, uses.Holder{Name: "b", Peer: addr}, v); got != uses.Unreachable {
		t.Fatalf("a request for another holder: %v, want unreachable", got)
	}
	if got := c.TakeFrom(ctx, uses.Holder{Name: "a", Peer: addr}, v); got != uses.ForwardServed {
		t.Fatalf("the use held: %v", got)
	}
	if got := c.TakeFrom(ctx, uses.Holder{Name: "a", Peer: addr}, v); got != uses.ForwardRefused {
		t.Fatalf("past the quota held: %v", got)
	}
	other, _ := peer.NewKey(peer.RandomKey())
	stranger := peer.NewClient(peer.ClientOptions{Keyring: peer.StaticKeyring(other), AllowLocal: true, Log: h.r.log})
	// Its request was written and the answer carries no MAC it can verify:
	// lost, never served, and the holder is not marked (issue 52: only a
	// holder that cannot be reached at all is).
	if got := stranger.TakeFrom(ctx, uses.Holder{Name: "a", Peer: addr}, v); got != uses.Lost {
		t.Fatalf("a client of another installation: %v, want lost", got)
	}
}
