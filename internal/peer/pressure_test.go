package peer

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/valyala/fasthttp"

	"github.com/linkforge/linkforge/internal/peer/peertest"
	"github.com/linkforge/linkforge/internal/uses"
)

// gateTaker is a holder that takes each request as it comes (arrived) and
// serves it from q once release is closed: a holder slower than any
// forward's deadline until then.
type gateTaker struct {
	release chan struct{}
	arrived chan struct{}
	q       *quota
}

func (g gateTaker) TakeForPeer(ns, code string, uid uint64) Result {
	g.arrived <- struct{}{}
	<-g.release
	return g.q.TakeForPeer(ns, code, uid)
}

// forwards runs TakeFrom calls in goroutines and tallies their results.
type forwards struct {
	c      *Client
	holder uses.Holder
	wg     sync.WaitGroup
	mu     sync.Mutex
	got    map[uses.Forwarded]int
}

func (f *forwards) start(timeout time.Duration) {
	f.wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		r := f.c.TakeFrom(ctx, f.holder, link)
		f.mu.Lock()
		f.got[r]++
		f.mu.Unlock()
	})
}

func (f *forwards) wait() map[uses.Forwarded]int {
	f.wg.Wait()
	return f.got
}

// Finding 1 of issue 52: a holder slower than the forwards' deadline, and
// more forwards at once than the client's connections to it. A forward
// that waits for a free connection gets one when a timed-out request's
// connection closes, dialled by fasthttp with no timeout (0), which the
// dialer took for an expired one: the dial failed at once and the live
// holder read as unreachable (and was asked to return its quota). Waiting
// for a connection, and slowness, are never Unreachable.
func TestSlowHolderUnderConcurrentForwardsIsNeverUnreachable(t *testing.T) {
	key := testKey(t)
	gate := gateTaker{release: make(chan struct{}), arrived: make(chan struct{}, 1000), q: &quota{n: 1000}}
	addr := serve(t, gate, ServerOptions{Keyring: StaticKeyring(key)})
	f := &forwards{c: NewClient(ClientOptions{Keyring: StaticKeyring(key), AllowLocal: true, Log: logr.Discard()}),
		holder: uses.Holder{Name: "a", Peer: addr}, got: map[uses.Forwarded]int{}}
	// Every connection to the holder busy with a forward that times out.
	const first = 300 * time.Millisecond
	start := time.Now()
	for range MaxConnsPerHost {
		f.start(first)
	}
	for range MaxConnsPerHost {
		<-gate.arrived
	}
	// A click every 10 ms (each forward waits up to 100 ms for a
	// connection) until after the first ones have timed out and closed
	// theirs: the waiting ones get the connections dialled for them.
	tick := time.NewTicker(10 * time.Millisecond)
	for ; time.Since(start) < first+200*time.Millisecond; <-tick.C {
		f.start(2 * time.Second)
	}
	tick.Stop()
	close(gate.release)
	got := f.wait()
	t.Logf("forwards: %v", got)
	if got[uses.Unreachable] > 0 {
		t.Errorf("%d forwards to a live, slow holder read unreachable (%v)", got[uses.Unreachable], got)
	}
	if got[uses.Lost] < MaxConnsPerHost {
		t.Errorf("%d lost, want the %d that timed out after they were written (%v)", got[uses.Lost], MaxConnsPerHost, got)
	}
}

// A dial that fasthttp asks for with no timeout of its own (for a forward
// waiting for a free connection) gets the dialer's bound, not an expired
// one.
func TestDialWithoutATimeoutConnects(t *testing.T) {
	addr := serveRaw(t, func(*fasthttp.RequestCtx) {})
	d := &dialer{allowLocal: true}
	for _, timeout := range []time.Duration{0, -time.Second} {
		c, err := d.dial(addr, timeout)
		if err != nil {
			t.Fatalf("dial with timeout %v: %v", timeout, err)
		}
		_ = c.Close()
	}
}

// Finding 6 of issue 52: an answer changed on the way after the holder
// served the request (its status line, its MAC, its result) is not
// believed, and the use the holder spent is counted as lost, not as
// refused or unreachable.
func TestCorruptedAnswersAreLost(t *testing.T) {
	key := testKey(t)
	q := &quota{n: 100}
	holder := serve(t, q, ServerOptions{Keyring: StaticKeyring(key)})
	c := NewClient(ClientOptions{Keyring: StaticKeyring(key), AllowLocal: true, Log: logr.Discard()})
	cases := []struct {
		name    string
		rewrite func(*fasthttp.Response)
	}{
		{"the status line (409)", func(r *fasthttp.Response) { r.SetStatusCode(fasthttp.StatusConflict) }},
		{"the status line (503)", func(r *fasthttp.Response) { r.SetStatusCode(fasthttp.StatusServiceUnavailable) }},
		{"the status line (200)", func(r *fasthttp.Response) { r.SetStatusCode(fasthttp.StatusOK) }},
		{"the MAC corrupted", func(r *fasthttp.Response) {
			mac := []byte(string(r.Header.Peek(headerMAC)))
			mac[0] ^= 1
			r.Header.SetBytesV(headerMAC, mac)
		}},
		{"the MAC removed", func(r *fasthttp.Response) { r.Header.Del(headerMAC) }},
		{"the result (refused)", func(r *fasthttp.Response) { r.Header.Set(headerUse, Refused.String()) }},
	}
	for i, tc := range cases {
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
		if got := c.TakeFrom(withDeadline(t), uses.Holder{Name: "a", Peer: mitm}, link); got != uses.Lost {
			t.Errorf("a served answer with %s rewritten: %v, want lost", tc.name, got)
		}
		if q.takenSoFar() != i+1 {
			t.Fatalf("%s: the holder served %d uses in all, want %d", tc.name, q.takenSoFar(), i+1)
		}
	}
}

// signedRequest is one request of the protocol, to be sent (and sent
// again: a capture) as it is.
type signedRequest struct{ to, nonce, at, path string }

func newSignedRequest(to string, at time.Time) signedRequest {
	return signedRequest{to: to, nonce: newNonce(), at: unixMillis(at), path: pathPrefix + "ns/code1/42"}
}

// write makes req r, to addr, under key's MAC.
func (r signedRequest) write(req *fasthttp.Request, addr string, key *Key) {
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("http://" + addr + r.path)
	req.Header.Set(headerTo, r.to)
	req.Header.Set(headerNonce, r.nonce)
	req.Header.Set(headerTime, r.at)
	req.Header.Set(headerMAC, key.requestMAC(r.to, r.nonce, r.at, r.path))
}

// do sends r to addr under key's MAC and returns the answer's status and
// result, and whether its MAC is the holder's (r.to).
func (r signedRequest) do(t testing.TB, addr string, key *Key) (status int, result string, verified bool) {
	t.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	r.write(req, addr, key)
	if err := fasthttp.DoTimeout(req, resp, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	result = string(resp.Header.Peek(headerUse))
	return resp.StatusCode(), result, key.verify(resp.Header.Peek(headerMAC), key.answerMAC(r.to, r.nonce, r.path, result))
}

// Finding 6 of issue 52, the clock: a request captured on the wire, and a
// holder's clock stepped back after the replay memory forgot it (two
// generations). The memory and the window run on the newest reading, so
// the capture stays too old: one use, not two.
func TestClockSteppedBackServesNoReplay(t *testing.T) {
	key := testKey(t)
	q := &quota{n: 10}
	start := time.Unix(1_800_000_000, 0)
	var mu sync.Mutex
	now := start
	set := func(t time.Time) {
		mu.Lock()
		defer mu.Unlock()
		now = t
	}
	addr := serve(t, q, ServerOptions{Keyring: StaticKeyring(key), Clock: func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}})
	captured := newSignedRequest("a", start)
	if st, _, _ := captured.do(t, addr, key); st != fasthttp.StatusNoContent {
		t.Fatalf("the request: %d", st)
	}
	// Two generations (2 x 60 s) of fresh requests: the memory forgets
	// the capture, now too old.
	for _, d := range []time.Duration{61 * time.Second, 122 * time.Second} {
		set(start.Add(d))
		if st, _, _ := newSignedRequest("a", start.Add(d)).do(t, addr, key); st != fasthttp.StatusNoContent {
			t.Fatalf("a fresh request at +%v: %d", d, st)
		}
	}
	set(start.Add(5 * time.Second)) // stepped back
	st, result, verified := captured.do(t, addr, key)
	if st == fasthttp.StatusNoContent || result != Stale.String() || !verified {
		t.Errorf("the capture replayed after the clock stepped back: %d %q (MAC verified %v), want stale", st, result, verified)
	}
	if q.takenSoFar() != 3 {
		t.Errorf("%d uses taken, want 3 (the capture once)", q.takenSoFar())
	}
}

// A full replay memory answers "busy" with the holder's MAC (its own
// label): the forwarder goes on as if it had not forwarded, and does not
// take the holder for an unreachable one (finding 3 of issue 52).
func TestFullReplayMemoryAnswersBusy(t *testing.T) {
	key := testKey(t)
	q := &quota{n: 10}
	reg := prometheus.NewRegistry()
	srv, addr := serveServer(t, q, ServerOptions{Keyring: StaticKeyring(key), Registry: reg})
	srv.replays.mu.Lock()
	for i := range maxRemembered {
		srv.replays.cur[strconv.Itoa(i)] = struct{}{}
	}
	srv.replays.mu.Unlock()
	c := NewClient(ClientOptions{Keyring: StaticKeyring(key), AllowLocal: true, Log: logr.Discard()})
	if got := c.TakeFrom(withDeadline(t), uses.Holder{Name: "a", Peer: addr}, link); got != uses.NotForwarded {
		t.Errorf("a holder whose replay memory is full: %v, want not forwarded", got)
	}
	if n := testutil.ToFloat64(srv.requests.WithLabelValues("busy")); n != 1 || q.takenSoFar() != 0 {
		t.Errorf("requests_total{result=busy} %v, %d taken; want 1 and none", n, q.takenSoFar())
	}
}

// syncBuffer is a log a test reads while servers write it.
type syncBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *syncBuffer) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.lines = append(b.lines, prefix+" "+args)
	}, funcr.Options{})
}

func (b *syncBuffer) matching(sub string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range b.lines {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}

// A forwarder whose clock is 40 s ahead of the holder's: every request is
// stale. The holder counts each (requests_total{result="stale"}, and the
// offset histogram) and logs one line in 10 s naming the peer's address;
// the forwarder reads the holder's signed refusal as unreachable (it
// cannot take any of ours) and logs one line naming the holder.
func TestStaleRequestsAreCountedAndLogged(t *testing.T) {
	key := testKey(t)
	q := &quota{n: 10}
	var serverLog, clientLog syncBuffer
	reg := prometheus.NewRegistry()
	srv, addr := serveServer(t, q, ServerOptions{Keyring: StaticKeyring(key), Registry: reg, Log: serverLog.logger()})
	c := NewClient(ClientOptions{Keyring: StaticKeyring(key), AllowLocal: true, Log: clientLog.logger(),
		Clock: func() time.Time { return time.Now().Add(40 * time.Second) }})
	const n = 3
	for range n {
		if got := c.TakeFrom(withDeadline(t), uses.Holder{Name: "a", Peer: addr}, link); got != uses.Unreachable {
			t.Errorf("a forward 40 s ahead: %v, want unreachable", got)
		}
	}
	if q.takenSoFar() != 0 {
		t.Error("a stale request was served")
	}
	if got := testutil.ToFloat64(srv.requests.WithLabelValues("stale")); got != n {
		t.Errorf("requests_total{result=stale} %v, want %d", got, n)
	}
	if got, over := histogramCount(t, reg, "linkforge_redirector_peer_clock_offset_seconds", 30); got != n || over != n {
		t.Errorf("offsets observed %d, %d of them past 30 s; want %d and %d", got, over, n, n)
	}
	lines := serverLog.matching("stale")
	if len(lines) != 1 || !strings.Contains(lines[0], `"peer"="127.0.0.1:`) || !strings.Contains(lines[0], `"offset"="40s"`) {
		t.Errorf("the holder's log of stale requests: %q, want one line naming the peer's address and the offset", lines)
	}
	lines = clientLog.matching("stale")
	if len(lines) != 1 || !strings.Contains(lines[0], `"holder"="a"`) || !strings.Contains(lines[0], addr) {
		t.Errorf("the forwarder's log: %q, want one line naming the holder and its address", lines)
	}
}

// histogramCount is the sample count of the histogram name in reg, and how
// many of them are above le.
func histogramCount(t *testing.T, reg *prometheus.Registry, name string, le float64) (count, above uint64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		count = h.GetSampleCount()
		for _, b := range h.GetBucket() {
			if b.GetUpperBound() == le {
				return count, count - b.GetCumulativeCount()
			}
		}
	}
	t.Fatalf("no histogram %s with a bucket %v", name, le)
	return 0, 0
}

// What classify builds on: fasthttp names the connection on the response
// once it holds one for the request, before writing it, and not when it
// could not get one (every connection busy, or a failed dial, whose error
// is the dialer's).
func TestWrittenIsTold(t *testing.T) {
	key := testKey(t)
	gate := gateTaker{release: make(chan struct{}), arrived: make(chan struct{}, 10), q: &quota{n: 10}}
	addr := serve(t, gate, ServerOptions{Keyring: StaticKeyring(key)})
	defer close(gate.release)
	c := &fasthttp.Client{MaxConnsPerHost: 1, DialTimeout: (&dialer{allowLocal: true}).dial}
	do := func(addr string, timeout time.Duration) answer {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		newSignedRequest("a", time.Now()).write(req, addr, key)
		err := c.DoDeadline(req, resp, time.Now().Add(timeout))
		return answer{err: err, written: resp.RemoteAddr() != nil}
	}
	first := make(chan answer, 1)
	go func() { first <- do(addr, 300*time.Millisecond) }()
	<-gate.arrived // it holds the only connection
	if a := do(addr, time.Second); a.err == nil || a.written || a.classify() != uses.NotForwarded {
		t.Errorf("no free connection: %v, written %v (%v), want an error, not written, not forwarded", a.err, a.written, a.classify())
	}
	if a := <-first; a.err == nil || !a.written || a.classify() != uses.Lost {
		t.Errorf("a request that timed out at the holder: %v, written %v (%v), want an error, written, lost", a.err, a.written, a.classify())
	}
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	_ = dead.Close()
	if a := do(deadAddr, time.Second); a.err == nil || a.written || a.classify() != uses.Unreachable {
		t.Errorf("a refused connection: %v, written %v (%v), want an error, not written, unreachable", a.err, a.written, a.classify())
	}
}

func TestClassify(t *testing.T) {
	dial := &dialError{syscall.ECONNREFUSED}
	for _, tc := range []struct {
		name string
		a    answer
		want uses.Forwarded
	}{
		{"served, 204", answer{written: true, verified: true, result: "served", status: 204}, uses.ForwardServed},
		{"served, its status line changed", answer{written: true, verified: true, result: "served", status: 409}, uses.Lost},
		{"served, changed to a 503", answer{written: true, verified: true, result: "served", status: 503}, uses.Lost},
		{"refused", answer{written: true, verified: true, result: "refused", status: 409}, uses.ForwardRefused},
		{"refused, its status line changed", answer{written: true, verified: true, result: "refused", status: 204}, uses.ForwardRefused},
		{"unknown", answer{written: true, verified: true, result: "unknown", status: 404}, uses.ForwardRefused},
		{"gone", answer{written: true, verified: true, result: "gone", status: 410}, uses.ForwardGone},
		{"busy", answer{written: true, verified: true, result: "busy", status: 503}, uses.NotForwarded},
		{"misaddressed", answer{written: true, verified: true, result: "misaddressed", status: 421}, uses.Unreachable},
		{"stale", answer{written: true, verified: true, result: "stale", status: 401}, uses.Unreachable},
		{"a result of a later release", answer{written: true, verified: true, result: "later", status: 200}, uses.Lost},
		{"a failed dial", answer{err: dial}, uses.Unreachable},
		{"no free connection", answer{err: fasthttp.ErrNoFreeConns}, uses.NotForwarded},
		{"no connection in time", answer{err: fasthttp.ErrTimeout}, uses.NotForwarded},
		{"written, then a timeout", answer{err: fasthttp.ErrTimeout, written: true}, uses.Lost},
		{"written, then closed", answer{err: fasthttp.ErrConnectionClosed, written: true}, uses.Lost},
		{"written, then reset", answer{err: syscall.ECONNRESET, written: true}, uses.Lost},
		{"the port's connection cap", answer{written: true, status: 503}, uses.NotForwarded},
		{"the port's per-address cap", answer{written: true, status: 429}, uses.NotForwarded},
		{"a 204 without a MAC", answer{written: true, status: 204, result: "served"}, uses.Lost},
		{"a refusal without a MAC", answer{written: true, status: 401}, uses.Lost},
		{"a 421 without a MAC", answer{written: true, status: 421}, uses.Lost},
	} {
		if got := tc.a.classify(); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// classify's promises, whatever the answer: served only from a verified
// 204 "served"; unreachable only from a failed dial or a verified answer
// that says so; a request written and answered without a valid MAC is
// never unreachable.
func FuzzClassify(f *testing.F) {
	f.Add(204, "served", true, true, uint8(0))
	f.Add(503, "", false, true, uint8(0))
	f.Add(0, "", false, false, uint8(1))
	f.Fuzz(func(t *testing.T, status int, result string, verified, written bool, errKind uint8) {
		a := answer{status: status, result: result, verified: verified, written: written}
		switch errKind % 4 {
		case 1:
			a.err = &dialError{syscall.ECONNREFUSED}
		case 2:
			a.err = fasthttp.ErrTimeout
		case 3:
			a.err = fasthttp.ErrNoFreeConns
		}
		ok := a.err == nil
		switch got := a.classify(); got {
		case uses.ForwardServed:
			if !ok || !verified || status != 204 || result != "served" {
				t.Errorf("%+v: served", a)
			}
		case uses.Unreachable:
			saysSo := ok && verified && (result == "misaddressed" || result == "stale")
			dialFailed := errKind%4 == 1 && !written
			if !saysSo && !dialFailed {
				t.Errorf("%+v: unreachable", a)
			}
		}
	})
}

// Finding 2 of issue 52, the forwarder's side: a holder's peer port full
// (every connection, or every connection of our address, held by silent
// clients) is no unreachable holder, and takes nothing.
func TestFullPortIsNotUnreachable(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    ServerOptions
	}{
		{"every connection", ServerOptions{MaxConnections: 4}},
		{"every connection of the forwarder's address", ServerOptions{MaxConnectionsPerAddress: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := testKey(t)
			q := &quota{n: 10}
			o := tc.o
			o.Keyring, o.Timeout = StaticKeyring(key), time.Minute
			addr := serve(t, q, o)
			for range 4 {
				// Accepted before the forward's connection: one accept loop.
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = c.Close() }()
			}
			c := NewClient(ClientOptions{Keyring: StaticKeyring(key), AllowLocal: true, Log: logr.Discard()})
			got := c.TakeFrom(withDeadline(t), uses.Holder{Name: "a", Peer: addr}, link)
			if got == uses.Unreachable || q.takenSoFar() != 0 {
				t.Errorf("%v, %d taken; want not unreachable, none taken", got, q.takenSoFar())
			}
			t.Logf("a forward to a full port: %v", got)
		})
	}
}

// Finding 2 of issue 52: silent connections from 32 addresses (32 pods
// without the key), each at its per-address limit and dialled again as
// soon as the port drops it, do not take the peer port: genuine forwards
// keep being served, and the port drops each silent connection within its
// first-byte timeout. Before, the 1,000 connections of the port were full
// with them, and each was held 5 s.
func TestPeerPortServesThroughASilentFlood(t *testing.T) {
	key := testKey(t)
	q := &quota{n: 1 << 20}
	addr := serve(t, q, ServerOptions{Keyring: StaticKeyring(key), Log: logr.Discard()})
	const addresses = 32
	f := peertest.StartFlood(addr, addresses, DefaultMaxConnectionsPerAddress)
	defer f.End()
	// Until the flood holds what a full port held before (a backstop, not
	// a bound: the dials take what the machine gives them).
	backstop := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for ; f.Open() < 1000; <-tick.C {
		if time.Now().After(backstop) {
			t.Fatalf("the flood holds %d connections after 30 s", f.Open())
		}
	}
	c := NewClient(ClientOptions{Keyring: StaticKeyring(key), AllowLocal: true, Log: logr.Discard()})
	got := map[uses.Forwarded]int{}
	// Forwards over four first-byte timeouts: the flood's connections
	// are dropped and dialled again meanwhile.
	for end := time.Now().Add(4 * FirstByteTimeout); time.Now().Before(end); <-tick.C {
		ctx, cancel := context.WithTimeout(context.Background(), uses.ForwardTimeout)
		got[c.TakeFrom(ctx, uses.Holder{Name: "a", Peer: addr}, link)]++
		cancel()
	}
	open := f.Open()
	f.End()
	t.Logf("forwards through the flood (%d silent connections open at the end): %v; the longest a silent one was held: %v",
		open, got, f.Longest().Round(time.Millisecond))
	if got[uses.ForwardServed] == 0 || len(got) != 1 {
		t.Errorf("forwards through a silent flood: %v, want every one served", got)
	}
	// The first-byte timeout, and scheduling on a loaded machine with a
	// thousand connections dialled a second: three times (the 5 s it was
	// before is past it).
	if d := f.Longest(); d > 3*FirstByteTimeout {
		t.Errorf("a silent connection was held %v, first-byte timeout %v", d, FirstByteTimeout)
	}
}
