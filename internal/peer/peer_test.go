package peer

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/valyala/fasthttp"

	"github.com/linkforge/linkforge/internal/uses"
)

// quota is a Taker holding n uses of one link.
type quota struct {
	mu    sync.Mutex
	n     int
	taken int
}

const testUID = 42

func (q *quota) TakeForPeer(ns, code string, uid uint64) Result {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case ns != "ns" || code != "code1" || uid != testUID:
		return Unknown
	case q.n == 0:
		return Refused
	}
	q.n--
	q.taken++
	return Served
}

func (q *quota) takenSoFar() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.taken
}

func testKey(t testing.TB) *Key {
	t.Helper()
	k, ok := NewKey(RandomKey())
	if !ok {
		t.Fatal("no key")
	}
	return k
}

// serve runs a peer port for holder on a free loopback port.
func serve(t testing.TB, taker Taker, o ServerOptions) string {
	t.Helper()
	_, addr := serveServer(t, taker, o)
	return addr
}

// serveServer is serve, and the server.
func serveServer(t testing.TB, taker Taker, o ServerOptions) (*Server, string) {
	t.Helper()
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if o.Holder == "" {
		o.Holder = "a"
	}
	s := NewServer(ln, taker, o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("peer server: %v", err)
		}
	})
	return s, ln.Addr().String()
}

// serveRaw runs a plain fasthttp server (an impostor) on a free port.
func serveRaw(t testing.TB, h fasthttp.RequestHandler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return ln.Addr().String()
}

var link = uses.LinkVersion{Namespace: "ns", Name: "l", Code: "code1", UID: testUID}

func withDeadline(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The client believes only the holder: a request to the right address
// under another name is unreachable (the replica there proves it is not
// that holder), and an answer from a server without the key (whatever it
// says), a replayed answer, and a holder of another installation are lost
// (the request was written: whoever answered may have served it); none of
// them counts a use as served.
func TestClientBelievesOnlyTheHolder(t *testing.T) {
	key := testKey(t)
	q := &quota{n: 1}
	addr := serve(t, q, ServerOptions{Keyring: StaticKeyring(key)})
	c := NewClient(ClientOptions{Keyring: StaticKeyring(key), AllowLocal: true})
	ctx := withDeadline(t)
	a := uses.Holder{Name: "a", Peer: addr}

	if got := c.TakeFrom(ctx, uses.Holder{Name: "a-restarted", Peer: addr}, link); got != uses.Unreachable {
		t.Errorf("a request for another holder at the address: %v, want unreachable", got)
	}
	if got := c.TakeFrom(ctx, a, link); got != uses.ForwardServed {
		t.Fatalf("the use held: %v", got)
	}
	if got := c.TakeFrom(ctx, a, link); got != uses.ForwardRefused {
		t.Errorf("no quota left: %v", got)
	}
	if got := c.TakeFrom(ctx, a, uses.LinkVersion{Namespace: "ns", Code: "other", UID: 1}); got != uses.ForwardRefused {
		t.Errorf("an unknown link: %v", got)
	}

	// An impostor that answers as a holder would, with the header and
	// with a MAC it recorded from a real answer (of another request).
	var recorded string
	{
		q.mu.Lock()
		q.n = 1
		q.mu.Unlock()
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		path := pathPrefix + "ns/code1/42"
		nonce, at := newNonce(), unixMillis(time.Now())
		req.Header.SetMethod("POST")
		req.SetRequestURI("http://" + addr + path)
		req.Header.Set(headerTo, "a")
		req.Header.Set(headerNonce, nonce)
		req.Header.Set(headerTime, at)
		req.Header.Set(headerMAC, key.requestMAC("a", nonce, at, path))
		if err := fasthttp.Do(req, resp); err != nil || resp.StatusCode() != 204 {
			t.Fatalf("a real answer: %v %d", err, resp.StatusCode())
		}
		recorded = string(resp.Header.Peek(headerMAC))
	}
	for name, h := range map[string]fasthttp.RequestHandler{
		"a bare 204": func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(204) },
		"served":     func(ctx *fasthttp.RequestCtx) { ctx.Response.Header.Set(headerUse, "served"); ctx.SetStatusCode(204) },
		"a replayed MAC": func(ctx *fasthttp.RequestCtx) {
			ctx.Response.Header.Set(headerUse, "served")
			ctx.Response.Header.Set(headerMAC, recorded)
			ctx.SetStatusCode(204)
		},
	} {
		impostor := serveRaw(t, h)
		if got := c.TakeFrom(ctx, uses.Holder{Name: "a", Peer: impostor}, link); got != uses.Lost {
			t.Errorf("an impostor answering %s: %v, want lost", name, got)
		}
	}

	// A replica of another installation (another key) neither serves nor
	// is believed.
	q.mu.Lock()
	q.n = 5
	q.mu.Unlock()
	before := q.takenSoFar()
	stranger := NewClient(ClientOptions{Keyring: StaticKeyring(testKey(t)), AllowLocal: true})
	if got := stranger.TakeFrom(ctx, a, link); got != uses.Lost {
		t.Errorf("a client with another key: %v, want lost (refused without a MAC it can check)", got)
	}
	if q.takenSoFar() != before {
		t.Error("a client with another key spent a use")
	}
}

// The server serves a use only for a request with the installation's MAC,
// addressed to it, fresh, and seen once; everything else is refused
// without a MAC and without touching the quota.
func TestServerAuthenticatesCallers(t *testing.T) {
	key := testKey(t)
	q := &quota{n: 100}
	now := time.Unix(1_800_000_000, 0)
	addr := serve(t, q, ServerOptions{Keyring: StaticKeyring(key), Clock: func() time.Time { return now }})
	path := pathPrefix + "ns/code1/42"
	type req struct {
		method, path, to, nonce, at, mac string
		omit                             bool
	}
	signed := func(mut func(*req)) req {
		r := req{method: "POST", path: path, to: "a", nonce: newNonce(), at: unixMillis(now)}
		if mut != nil {
			mut(&r)
		}
		if r.mac == "" {
			r.mac = key.requestMAC(r.to, r.nonce, r.at, r.path)
		}
		return r
	}
	send := func(r req) (int, string) {
		t.Helper()
		rq, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(rq)
		defer fasthttp.ReleaseResponse(resp)
		rq.Header.SetMethod(r.method)
		rq.SetRequestURI("http://" + addr + r.path)
		if !r.omit {
			rq.Header.Set(headerTo, r.to)
			rq.Header.Set(headerNonce, r.nonce)
			rq.Header.Set(headerTime, r.at)
			rq.Header.Set(headerMAC, r.mac)
		}
		if err := fasthttp.DoTimeout(rq, resp, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode(), string(resp.Header.Peek(headerMAC))
	}
	replayed := signed(nil)
	if got, mac := send(replayed); got != 204 || mac == "" {
		t.Fatalf("a signed request: %d (MAC %q)", got, mac)
	}
	for _, tc := range []struct {
		name string
		r    req
		want int
		// signed: the refusal carries this holder's MAC (the request's
		// was valid), so the forwarder can believe it.
		signed bool
	}{
		{"a GET", signed(func(r *req) { r.method = "GET" }), 405, false},
		{"no prefix", signed(func(r *req) { r.path = "/ns/code1/42" }), 400, false},
		{"too few parts", signed(func(r *req) { r.path = pathPrefix + "ns/code1" }), 400, false},
		{"too many parts", signed(func(r *req) { r.path = path + "/x" }), 400, false},
		{"an empty code", signed(func(r *req) { r.path = pathPrefix + "ns//42" }), 400, false},
		{"a uid that is no number", signed(func(r *req) { r.path = pathPrefix + "ns/code1/abc" }), 400, false},
		{"a uid out of range", signed(func(r *req) { r.path = pathPrefix + "ns/code1/99999999999999999999999" }), 400, false},
		{"no headers", signed(func(r *req) { r.omit = true }), 401, false},
		{"no MAC", signed(func(r *req) { r.mac = "-" }), 401, false},
		{"another key's MAC", signed(func(r *req) { r.mac = testKey(t).requestMAC(r.to, r.nonce, r.at, r.path) }), 401, false},
		{"a MAC of another path", signed(func(r *req) { r.mac = key.requestMAC(r.to, r.nonce, r.at, pathPrefix+"ns/code2/42") }), 401, false},
		{"an answer's MAC", signed(func(r *req) { r.mac = key.answerMAC(r.to, r.nonce, r.path, "served") }), 401, false},
		{"for another holder", signed(func(r *req) { r.to = "b" }), 421, true},
		{"too old", signed(func(r *req) { r.at = unixMillis(now.Add(-31 * time.Second)) }), 401, true},
		{"too far ahead", signed(func(r *req) { r.at = unixMillis(now.Add(31 * time.Second)) }), 401, true},
		{"a time that is no number", signed(func(r *req) { r.at = "soon" }), 400, false},
		{"replayed", replayed, 401, false},
	} {
		got, mac := send(tc.r)
		if got != tc.want || (mac != "") != tc.signed {
			t.Errorf("%s: %d (MAC %q), want %d, signed %v", tc.name, got, mac, tc.want, tc.signed)
		}
	}
	if q.takenSoFar() != 1 {
		t.Errorf("%d uses taken, want only the signed request's", q.takenSoFar())
	}
	if got, _ := send(signed(func(r *req) { r.at = unixMillis(now.Add(-29 * time.Second)) })); got != 204 {
		t.Errorf("within the skew: %d", got)
	}
	// The replay memory turns over, and a request older than its time
	// window is refused by its time, not its memory.
	now = now.Add(61 * time.Second)
	if got, _ := send(replayed); got != 401 {
		t.Errorf("replayed a window later: %d", got)
	}
}

// No key read yet: the server refuses (503: nothing taken, not
// unreachable), and the client forwards nothing: it asks through the API
// server (NoKey).
func TestNoKeyNoPeers(t *testing.T) {
	q := &quota{n: 1}
	addr := serve(t, q, ServerOptions{Keyring: &Keyring{}})
	key := testKey(t)
	c := NewClient(ClientOptions{Keyring: StaticKeyring(key), AllowLocal: true})
	if got := c.TakeFrom(withDeadline(t), uses.Holder{Name: "a", Peer: addr}, link); got != uses.NotForwarded || q.takenSoFar() != 0 {
		t.Errorf("a holder without its key: %v, %d taken", got, q.takenSoFar())
	}
	none := NewClient(ClientOptions{Keyring: &Keyring{}, AllowLocal: true})
	if got := none.TakeFrom(withDeadline(t), uses.Holder{Name: "a", Peer: addr}, link); got != uses.NoKey {
		t.Errorf("a client without its key: %v, want no-key (it asks through the API server)", got)
	}
}

// Addresses a reservation may not make us send to, and a forward without a
// deadline, send nothing; a peer that is not there is unreachable at once.
func TestClientAddresses(t *testing.T) {
	key := testKey(t)
	ctx := withDeadline(t)
	c := NewClient(ClientOptions{Keyring: StaticKeyring(key), Log: logr.Discard()})
	for _, bad := range []string{"", "host", "host:", "host:0", "host:99999", "evil.example/x?:80", "user@host:80", ":8082"} {
		if got := c.TakeFrom(ctx, uses.Holder{Name: "a", Peer: bad}, link); got != uses.NotForwarded {
			t.Errorf("%q: %v, want not forwarded", bad, got)
		}
	}
	if got := c.TakeFrom(context.Background(), uses.Holder{Name: "a", Peer: "10.0.0.1:8082"}, link); got != uses.NotForwarded {
		t.Errorf("no deadline: %v", got)
	}
	// Loopback, link-local (the clouds' metadata endpoint) and the like
	// are refused before a connection, unless allowed.
	q := &quota{n: 1}
	addr := serve(t, q, ServerOptions{Keyring: StaticKeyring(key)})
	for _, local := range []string{addr, "169.254.169.254:80", "[::1]:8082", "[fe80::1]:8082", "0.0.0.0:8082", "224.0.0.1:8082", "localhost:8082"} {
		if got := c.TakeFrom(ctx, uses.Holder{Name: "a", Peer: local}, link); got != uses.Unreachable {
			t.Errorf("%q: %v, want unreachable", local, got)
		}
	}
	if q.takenSoFar() != 0 {
		t.Error("a loopback peer was asked")
	}
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := dead.Addr().String()
	_ = dead.Close()
	local := NewClient(ClientOptions{Keyring: StaticKeyring(key), AllowLocal: true})
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if got := local.TakeFrom(short, uses.Holder{Name: "a", Peer: deadAddr}, link); got != uses.Unreachable {
		t.Errorf("a peer that is not there: %v, want unreachable (nothing sent)", got)
	}
	// The caller's deadline, and scheduling slack on a loaded machine (5x,
	// as in TestLateAnswerIsLost); a refused connection returns at once.
	if d := time.Since(start); d > 5*200*time.Millisecond {
		t.Errorf("a refused connection took %v", d)
	}
}

// A holder that takes the request and answers too late: the use may have
// been served there, so the forward is lost, not unreachable, and returns
// by its deadline.
func TestLateAnswerIsLost(t *testing.T) {
	key := testKey(t)
	release := make(chan struct{})
	slow := slowTaker{release: release}
	addr := serve(t, slow, ServerOptions{Keyring: StaticKeyring(key)})
	defer close(release)
	c := NewClient(ClientOptions{Keyring: StaticKeyring(key), AllowLocal: true})
	const bound = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	start := time.Now()
	if got := c.TakeFrom(ctx, uses.Holder{Name: "a", Peer: addr}, link); got != uses.Lost {
		t.Errorf("a late answer: %v, want lost", got)
	}
	// The deadline, and scheduling slack on a loaded machine (5x).
	if d := time.Since(start); d > 5*bound {
		t.Errorf("returned after %v, deadline %v", d, bound)
	}
}

type slowTaker struct{ release chan struct{} }

func (s slowTaker) TakeForPeer(string, string, uint64) Result {
	<-s.release
	return Served
}

// The peer port faces the cluster network: an oversized head, a body, a
// client that sends nothing and one that never finishes its head are each
// cut off within the bound, and the port keeps answering.
func TestPeerPortHostileClients(t *testing.T) {
	const timeout = 300 * time.Millisecond
	addr := serve(t, &quota{}, ServerOptions{Keyring: StaticKeyring(testKey(t)), Timeout: timeout, IdleTimeout: timeout, MaxConnections: 4})
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
	if got := send("POST " + pathPrefix + "ns/code1/1 HTTP/1.1\r\nHost: p\r\nX-Pad: " + strings.Repeat("a", 4<<10) + "\r\n\r\n"); !strings.Contains(got, "431") {
		t.Errorf("an oversized head: %q, want 431", got)
	}
	if got := send("POST " + pathPrefix + "ns/code1/1 HTTP/1.1\r\nHost: p\r\nContent-Length: 100\r\n\r\n" + strings.Repeat("b", 100)); !strings.Contains(got, "413") {
		t.Errorf("a body: %q, want 413", got)
	}
	for _, tc := range []struct{ name, raw string }{
		{"a silent client", ""},
		{"a head that never ends", "POST " + pathPrefix + "ns/code1/1 HTTP/1.1\r\nHost: p\r\n"},
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, tc.raw)
		// The server closes after timeout; 15x is slack for a loaded
		// machine (the check below), and the read's own deadline, at 20x,
		// makes a server that never closes fail there.
		_ = c.SetReadDeadline(time.Now().Add(20 * timeout))
		start := time.Now()
		_, err = io.ReadAll(c)
		if d := time.Since(start); err != nil || d > 15*timeout {
			t.Errorf("%s: closed after %v (%v), want about %v", tc.name, d, err, timeout)
		}
		_ = c.Close()
	}
	if got := send("POST " + pathPrefix + "ns/code1/1 HTTP/1.1\r\nHost: p\r\n\r\n"); !strings.Contains(got, "401") {
		t.Errorf("after the hostile clients: %q, want an answer (401: no MAC)", got)
	}
}

// The replay memory holds at most maxRemembered MACs a generation: past
// that, requests are busy, and a request answered busy is busy for good
// (its capture is not served once there is room).
func TestReplayMemoryIsBounded(t *testing.T) {
	const skew = 30 * time.Second
	now := time.Unix(1_800_000_000, 0)
	r := newReplays(skew, now)
	for i := range maxRemembered {
		if v, _ := r.admit(fmt.Sprint(i), now, now); v != admitted {
			t.Fatalf("%d: %v", i, v)
		}
	}
	if v, _ := r.admit("one more", now, now); v != busy {
		t.Errorf("remembered past the bound: %v", v)
	}
	later := now.Add(2*skew + time.Millisecond)
	if v, _ := r.admit("one more", now, later); v == admitted {
		t.Error("a request answered busy was taken once the generation turned")
	}
	if v, _ := r.admit("new", later, later); v != admitted || len(r.cur) != 1 || len(r.old) != maxRemembered {
		t.Errorf("a new request after the generation turned: %v (%d and %d remembered)", v, len(r.cur), len(r.old))
	}
}

// A MAC is remembered for as long as its request is fresh on the newest
// clock reading, and forgotten once it is stale.
func TestReplayMemoryKeepsWhatIsFresh(t *testing.T) {
	const skew = 30 * time.Second
	now := time.Unix(1_800_000_000, 0)
	r := newReplays(skew, now)
	// The last moment of a generation: the request is fresh past its turn.
	sent := now.Add(2*skew - time.Second)
	if v, _ := r.admit("x", sent, sent); v != admitted {
		t.Fatalf("%v", v)
	}
	turned := now.Add(2*skew + time.Second)
	if v, _ := r.admit("x", sent, turned); v != replayed {
		t.Errorf("a replay within the skew, after a turn: %v, want replayed", v)
	}
	gone := turned.Add(2*skew + time.Second)
	if v, _ := r.admit("x", sent, gone); v != stale || len(r.cur)+len(r.old) != 0 {
		t.Errorf("two turns later: %v, %d remembered, want stale and none", v, len(r.cur)+len(r.old))
	}
}

// An attacker on the path, without the key, turns a holder's genuine
// "refused" or "gone" into "served" (status, header, or both; the MAC
// kept): the client believes none of it, and nothing more is served.
func TestClientRefusesRewrittenAnswers(t *testing.T) {
	key := testKey(t)
	q := &quota{n: 0}
	holder := serve(t, q, ServerOptions{Keyring: StaticKeyring(key)})
	for _, tc := range []struct {
		name    string
		rewrite func(*fasthttp.Response)
		want    uses.Forwarded // the status alone is not believed either way
	}{
		{"the result header", func(r *fasthttp.Response) { r.Header.Set(headerUse, "served") }, uses.Lost},
		{"the status", func(r *fasthttp.Response) { r.SetStatusCode(fasthttp.StatusNoContent) }, uses.ForwardRefused},
		{"both", func(r *fasthttp.Response) {
			r.Header.Set(headerUse, "served")
			r.SetStatusCode(fasthttp.StatusNoContent)
		}, uses.Lost},
	} {
		mitm := serveRaw(t, func(ctx *fasthttp.RequestCtx) {
			req := &fasthttp.Request{}
			ctx.Request.CopyTo(req)
			req.SetRequestURI("http://" + holder + string(ctx.Path()))
			if err := fasthttp.DoTimeout(req, &ctx.Response, 5*time.Second); err != nil {
				ctx.SetStatusCode(fasthttp.StatusBadGateway)
				return
			}
			tc.rewrite(&ctx.Response)
		})
		c := NewClient(ClientOptions{Keyring: StaticKeyring(key), AllowLocal: true})
		if got := c.TakeFrom(withDeadline(t), uses.Holder{Name: "a", Peer: mitm}, link); got != tc.want {
			t.Errorf("a refusal with %s rewritten: %v, want %v", tc.name, got, tc.want)
		}
	}
	if q.takenSoFar() != 0 {
		t.Error("a use was taken")
	}
}

// Each MAC covers every field of what it vouches for, and a request's MAC
// is never an answer's: change any one and it differs.
func TestMACsCoverEveryField(t *testing.T) {
	k := testKey(t)
	base := []string{"holder", "nonce", "1700000000000", "/v1/uses/ns/code1/42", "served"}
	req := func(f []string) string { return k.requestMAC(f[0], f[1], f[2], f[3]) }
	ans := func(f []string) string { return k.answerMAC(f[0], f[1], f[3], f[4]) }
	for name, mac := range map[string]func([]string) string{"request": req, "answer": ans} {
		want := mac(base)
		for i := range base {
			f := slices.Clone(base)
			f[i] += "x"
			if mac(f) == want && (name == "answer" && i != 2 || name == "request" && i != 4) {
				t.Errorf("the %s MAC does not cover field %d (%s)", name, i, base[i])
			}
		}
	}
	if k.requestMAC("a", "n", "served", "/p") == k.answerMAC("a", "n", "served", "/p") {
		t.Error("a request's MAC is an answer's")
	}
}
