package redirect

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/uses"
)

func TestForwardPeer(t *testing.T) {
	res := func(quota int64, peer string) linkv1.UseReservation {
		return linkv1.UseReservation{Holder: "h" + peer, Quota: quota, Peer: peer}
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
	} {
		if got := forwardPeer(tc.rs); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestPeerTableInterns(t *testing.T) {
	a, b := peers.id("10.1.2.3:8082"), peers.id("10.1.2.4:8082")
	if a == 0 || b == 0 || a == b || peers.id("10.1.2.3:8082") != a {
		t.Fatalf("ids %d %d", a, b)
	}
	if a.addr() != "10.1.2.3:8082" || peerID(0).addr() != "" || peers.id("") != 0 {
		t.Fatal("addresses do not round-trip")
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
	scheme := runtime.NewScheme()
	_ = linkv1.AddToScheme(scheme)
	b := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&linkv1.ShortLink{})
	for _, l := range links {
		in := l.DeepCopy()
		in.ManagedFields = nil
		b = b.WithObjects(in)
	}
	u := uses.New(uses.Options{Client: b.Build(), Holder: "a", Peer: "a:1", Registry: prometheus.NewRegistry()})
	h := &peerHarness{harness: newHarnessWith(t, Options{Uses: u}), u: u}
	for _, l := range links {
		h.add(l)
	}
	return h
}

// peerAsk sends a peer request to the handler and returns its status.
func (h *peerHarness) peerAsk(method, path string) int {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI(path)
	h.r.handlePeer(&ctx)
	return ctx.Response.StatusCode()
}

// limitedLink is a link with maxUses 10.
func limitedLink(name, code string, mut ...func(*linkv1.ShortLink)) *linkv1.ShortLink {
	l := link("ns", name, code, "https://example.com/"+name, mut...)
	l.Spec.MaxUses = ptr.To[int64](10)
	l.ResourceVersion = ""
	return l
}

func peerPath(l *linkv1.ShortLink, code string) string {
	return fmt.Sprintf("%s%s/%s/%d", peerPathPrefix, l.Namespace, code, uses.UIDKey(l.UID))
}

// The peer port serves a use from this replica's quota and nothing else:
// not a link it holds no quota of, not another object under the code, not
// a link that does not answer, and never by reserving.
func TestPeerRequests(t *testing.T) {
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
	for _, tc := range []struct {
		name, method, path string
		want               int
	}{
		{"a GET", "GET", peerPath(held, "held1"), 405},
		{"no prefix", "POST", "/ns/held1", 400},
		{"too few parts", "POST", peerPathPrefix + "ns/held1", 400},
		{"too many parts", "POST", peerPath(held, "held1") + "/x", 400},
		{"an empty code", "POST", peerPathPrefix + "ns//1", 400},
		{"a uid that is no number", "POST", peerPathPrefix + "ns/held1/abc", 400},
		{"a uid out of range", "POST", peerPathPrefix + "ns/held1/99999999999999999999999", 400},
		{"an unknown code", "POST", peerPath(held, "nope"), 404},
		{"another object under the code", "POST", fmt.Sprintf("%sns/held1/%d", peerPathPrefix, uses.UIDKey("other")), 404},
		{"a link without maxUses", "POST", peerPath(unlimited, "free1"), 404},
		{"an expired link", "POST", peerPath(expired, "exp1"), 410},
		{"the use held", "POST", peerPath(held, "held1"), 204},
		{"no quota left here", "POST", peerPath(held, "held1"), 409},
		{"a link that answers, never clicked here (no quota)", "POST", peerPath(unheld, "unheld1"), 409},
	} {
		if got := h.peerAsk(tc.method, tc.path); got != tc.want {
			t.Errorf("%s: %s %s answered %d, want %d", tc.name, tc.method, tc.path, got, tc.want)
		}
	}
}

// startPeers serves h's peer port on a free local port with o.
func startPeers(t *testing.T, h *peerHarness, o PeerServerOptions) string {
	t.Helper()
	ln, err := ListenPeers("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewPeerServer(ln, h.r, o)
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

// A forwarded use over the network: the client's verdict is the holder's.
func TestPeerClientTakesFromTheHolder(t *testing.T) {
	held := limitedLink("held", "held1")
	h := newPeerHarness(t, held)
	for range 2 {
		h.do("GET", "", "/ns/held1")
	}
	addr := startPeers(t, h, PeerServerOptions{})
	c := NewPeerClient(h.r.log)
	v := uses.LinkVersion{Namespace: "ns", Name: "held", Code: "held1", UID: uses.UIDKey(held.UID)}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if !c.TakeFrom(ctx, addr, v) {
		t.Fatal("the use held was not served")
	}
	if c.TakeFrom(ctx, addr, v) {
		t.Fatal("a use was served past the quota held")
	}
	if c.TakeFrom(context.Background(), addr, v) {
		t.Fatal("a forward without a deadline was sent")
	}
	for _, bad := range []string{"", "host", "host:", "host:0", "host:99999", "evil.example/x?:80", "user@host:80", ":8082"} {
		if c.TakeFrom(ctx, bad, v) {
			t.Errorf("forwarded to %q", bad)
		}
	}
	// Something else on a reused address that answers 204 to anything
	// serves no use.
	other := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(fasthttp.StatusNoContent) }}
	oln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = other.Serve(oln) }()
	defer func() { _ = other.Shutdown() }()
	if c.TakeFrom(ctx, oln.Addr().String(), v) {
		t.Error("a bare 204 from another server was taken for a use served")
	}
	// A peer that is not there: refused, within the deadline.
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := dead.Addr().String()
	_ = dead.Close()
	short, cancelShort := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancelShort()
	start := time.Now()
	if c.TakeFrom(short, deadAddr, v) {
		t.Fatal("a peer that is not there served a use")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a refused connection took %v", d)
	}
}

// The peer port faces the cluster network: an oversized head, a body, a
// client that sends nothing and one that never finishes its head are each
// cut off within the bound, and the port keeps answering.
func TestPeerPortHostileClients(t *testing.T) {
	h := newPeerHarness(t, limitedLink("held", "held1"))
	const timeout = 300 * time.Millisecond
	addr := startPeers(t, h, PeerServerOptions{Timeout: timeout, IdleTimeout: timeout, MaxConnections: 4})
	send := func(raw string) string {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, raw); err != nil {
			return ""
		}
		line, _ := bufio.NewReader(c).ReadString('\n')
		return line
	}
	if got := send("POST " + peerPathPrefix + "ns/held1/1 HTTP/1.1\r\nHost: p\r\nX-Pad: " + strings.Repeat("a", 4<<10) + "\r\n\r\n"); !strings.Contains(got, "431") {
		t.Errorf("an oversized head: %q, want 431", got)
	}
	if got := send("POST " + peerPathPrefix + "ns/held1/1 HTTP/1.1\r\nHost: p\r\nContent-Length: 100\r\n\r\n" + strings.Repeat("b", 100)); !strings.Contains(got, "413") {
		t.Errorf("a body: %q, want 413", got)
	}
	for _, tc := range []struct{ name, raw string }{
		{"a silent client", ""},
		{"a head that never ends", "POST " + peerPathPrefix + "ns/held1/1 HTTP/1.1\r\nHost: p\r\n"},
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, tc.raw)
		// Generous for a loaded machine; without the timeout the server
		// would hold the connection past the deadline and ReadAll fail.
		_ = c.SetReadDeadline(time.Now().Add(20 * timeout))
		start := time.Now()
		_, err = io.ReadAll(c)
		if d := time.Since(start); err != nil || d > 15*timeout {
			t.Errorf("%s: closed after %v (%v), want about %v", tc.name, d, err, timeout)
		}
		_ = c.Close()
	}
	if got := send("POST " + peerPathPrefix + "ns/held1/1 HTTP/1.1\r\nHost: p\r\n\r\n"); !strings.Contains(got, "404") {
		t.Errorf("after the hostile clients: %q, want an answer (404: another uid)", got)
	}
}
