//go:build linux

package redirect

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/util/wait"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// startEpoll serves r with an EpollServer on 127.0.0.1:0 until the test
// ends or stop is called.
func startEpoll(t *testing.T, r *Redirector, mut ...func(*EpollServer)) (s *EpollServer, stop func()) {
	t.Helper()
	s = NewEpollServer("127.0.0.1:0", r)
	s.Loops = 2
	s.ShutdownTimeout = 5 * time.Second
	for _, m := range mut {
		m(s)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Start: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("epoll server did not stop")
			}
		})
	}
	t.Cleanup(stop)
	return s, stop
}

// handlerRequests are the requests of TestHandler and TestDomainRoutes, and
// a few more whose targets net/http decodes.
var handlerRequests = []struct{ method, host, target string }{
	{"GET", "", "/team-a/dflt"},
	{"GET", "", "/team-a/s301"},
	{"GET", "", "/team-a/s302"},
	{"GET", "", "/team-a/s307"},
	{"GET", "", "/team-a/s308"},
	{"HEAD", "", "/team-a/s301"},
	{"HEAD", "", "/team-a/nope"},
	{"GET", "", "/team-a/enc"},
	{"GET", "", "/team-a/fq?b=2&c=%20"},
	{"GET", "", "/team-a/fqnoq?b=2"},
	{"GET", "", "/team-a/fq"},
	{"GET", "", "/team-a/fq?"},
	{"GET", "", "/team-a/fq?x=%zz&y="},
	{"GET", "", "/team-a/nofq?b=2"},
	{"POST", "", "/team-a/dflt"},
	{"DELETE", "", "/team-a/dflt"},
	{"OPTIONS", "", "/team-a/dflt"},
	{"GET", "", "/team-b/dflt"},
	{"GET", "", "/team-a/nope"},
	{"GET", "", "/"},
	{"GET", "", "/dflt"},
	{"GET", "", "/team-a/dflt/x"},
	{"GET", "", "/team-a/"},
	{"GET", "", "//team-a/dflt"},
	{"GET", "", "/team-a/%64flt"},
	{"GET", "", "/team-a%2Fdflt"},
	{"GET", "", "/team-a/expired"},
	{"GET", "", "/team-a/ttlexp"},
	{"GET", "", "/team-a/ttllive"},
	{"GET", "", "/team-a/exhausted"},
	{"GET", "", "/team-a/usesleft"},
	{"GET", "", "/team-a/permexp"},
	{"GET", "", "/team-a/saidexp"},
	{"GET", "", "/team-a/pending"},
	{"GET", "", "/team-a/conflict"},
	{"GET", "", "/team-a/noready"},
	{"GET", "go.c.example.com", "/docs"},
	{"GET", "Go.C.Example.COM:8080", "/docs"},
	{"GET", "go.c.example.com.", "/docs"},
	{"HEAD", "go.c.example.com", "/docs"},
	{"GET", "go.c.example.com", "/team-b/docs"},
	{"GET", "go.c.example.com", "/nope"},
	{"GET", "go.d.example.com", "/docs"},
	{"GET", "go.c.example.com", "/healthz"},
}

// respSummary is what the two front ends must agree on.
func respSummary(resp *http.Response) string {
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "%d", resp.StatusCode)
	for _, k := range []string{"Location", "Cache-Control", "Allow", "Retry-After", "Content-Type", "Content-Length"} {
		fmt.Fprintf(&b, " %s=%q", k, resp.Header.Values(k))
	}
	fmt.Fprintf(&b, " body=%q", body)
	return b.String()
}

func newClient() *http.Client {
	return &http.Client{
		Transport:     &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       10 * time.Second,
	}
}

func clientDo(t *testing.T, c *http.Client, addr, method, host, target string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	return resp
}

// Every request of the handler tests gets the same answer from the epoll
// server as from ServeHTTP, and the same metrics and access-log lines.
func TestEpollMatchesNetHTTP(t *testing.T) {
	h := newHarness(t)
	handlerLinks(h)
	s, _ := startEpoll(t, h.r)
	addr := s.Addr().String()
	c := newClient()
	for _, rq := range handlerRequests {
		host := rq.host
		if host == "" {
			host = "example.com"
		}
		want := respSummary(h.do(rq.method, host, rq.target))
		got := respSummary(clientDo(t, c, addr, rq.method, host, rq.target))
		if got != want {
			t.Errorf("%s %s %s:\n epoll    %s\n net/http %s", rq.method, host, rq.target, got, want)
		}
	}

	// Metrics: each request counted twice (once per front end).
	h.r.accessMu.Lock()
	lines := strings.Split(strings.TrimSpace(h.log.String()), "\n")
	h.r.accessMu.Unlock()
	if len(lines) != 2*len(handlerRequests) {
		t.Errorf("%d access-log lines, want %d", len(lines), 2*len(handlerRequests))
	}
	var total float64
	for _, cnt := range h.r.metrics.byClass[1:] {
		var m dto.Metric
		if err := cnt.Write(&m); err != nil {
			t.Fatal(err)
		}
		total += m.GetCounter().GetValue()
	}
	if int(total) != 2*len(handlerRequests) {
		t.Errorf("%v requests counted, want %d", total, 2*len(handlerRequests))
	}
	// The last line is the epoll server's.
	last := lines[len(lines)-1]
	for _, s := range []string{`"uri":"/healthz"`, `"host":"go.c.example.com"`, `"remote":"127.0.0.1:`, `"user_agent":"Go-http-client/1.1"`} {
		if !strings.Contains(last, s) {
			t.Errorf("access-log line %s lacks %s", last, s)
		}
	}

	// Not ready: 503 with Retry-After from both.
	h.r.ready.Store(false)
	h.links.synced = false
	want := respSummary(h.do("GET", "example.com", "/team-a/dflt"))
	got := respSummary(clientDo(t, c, addr, "GET", "example.com", "/team-a/dflt"))
	if got != want || !strings.HasPrefix(got, "503") {
		t.Errorf("not ready:\n epoll    %s\n net/http %s", got, want)
	}
}

type rawConn struct {
	t *testing.T
	net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, s *EpollServer) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, Conn: c, br: bufio.NewReader(c)}
}

func (c *rawConn) send(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.Conn, s); err != nil {
		c.t.Fatal(err)
	}
}

// read reads one response (of a HEAD request if head) and its body.
func (c *rawConn) read(head bool) (*http.Response, string) {
	c.t.Helper()
	req := &http.Request{Method: "GET"}
	if head {
		req.Method = "HEAD"
	}
	resp, err := http.ReadResponse(c.br, req)
	if err != nil {
		c.t.Fatalf("reading a response: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("reading a body: %v", err)
	}
	return resp, string(body)
}

// expectStatus reads one response and checks its status.
func (c *rawConn) expectStatus(status int, what string) *http.Response {
	c.t.Helper()
	resp, body := c.read(false)
	if resp.StatusCode != status {
		c.t.Errorf("%s: status %d, want %d (%q)", what, resp.StatusCode, status, body)
	}
	return resp
}

// expectEOF checks that the server closes the connection.
func (c *rawConn) expectEOF(what string) {
	c.t.Helper()
	b, err := c.br.ReadByte()
	if err == nil {
		c.t.Errorf("%s: connection still open (read %q)", what, b)
		return
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		c.t.Errorf("%s: connection not closed", what)
	}
}

func epollHarness(t *testing.T, mut ...func(*EpollServer)) (*harness, *EpollServer, func()) {
	h := newHarness(t)
	h.add(link("ns", "a", "a", "https://example.com/a"))
	h.add(link("ns", "b", "b", "https://example.com/b?x=1", func(l *linkv1.ShortLink) { l.Spec.ForwardQuery = true }))
	s, stop := startEpoll(t, h.r, mut...)
	return h, s, stop
}

func TestEpollProtocol(t *testing.T) {
	_, s, _ := epollHarness(t)

	t.Run("pipelined requests in one write", func(t *testing.T) {
		c := dialRaw(t, s)
		var b strings.Builder
		for i := range 20 {
			fmt.Fprintf(&b, "GET /ns/b?i=%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
			b.WriteString("HEAD /ns/a HTTP/1.1\r\nHost: x\r\n\r\n")
		}
		c.send(b.String())
		for i := range 20 {
			resp, body := c.read(false)
			if want := "https://example.com/b?x=1&i=" + strconv.Itoa(i); resp.StatusCode != 302 || resp.Header.Get("Location") != want || body != "302 Found\n" {
				t.Fatalf("response %d: %d %q %q", i, resp.StatusCode, resp.Header.Get("Location"), body)
			}
			resp, body = c.read(true)
			if resp.StatusCode != 302 || body != "" || resp.Header.Get("Content-Length") != "10" {
				t.Fatalf("HEAD %d: %d %q %q", i, resp.StatusCode, body, resp.Header.Get("Content-Length"))
			}
		}
	})

	t.Run("request split across many writes", func(t *testing.T) {
		c := dialRaw(t, s)
		req := "GET /ns/a HTTP/1.1\r\nHost: x\r\nUser-Agent: slow\r\n\r\n"
		for i := range len(req) {
			c.send(req[i : i+1])
		}
		if resp := c.expectStatus(302, "split"); resp.Header.Get("Location") != "https://example.com/a" {
			t.Errorf("split: Location %q", resp.Header.Get("Location"))
		}
		// And once more on the same connection, LF line ends only.
		c.send("GET /ns/a HTTP/1.1\nHost: x\n\n")
		c.expectStatus(302, "LF only")
	})

	t.Run("405 with Allow", func(t *testing.T) {
		c := dialRaw(t, s)
		c.send("PUT /ns/a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
		if resp := c.expectStatus(405, "PUT"); resp.Header.Get("Allow") != "GET, HEAD" || resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("405 headers %v", resp.Header)
		}
		c.send("GET /ns/a HTTP/1.1\r\nHost: x\r\n\r\n")
		c.expectStatus(302, "after a skipped body")
	})

	for _, tc := range []struct{ name, req string }{
		{"garbage", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"},
		{"no version", "GET /ns/a\r\n\r\n"},
		{"HTTP/2.0", "GET /ns/a HTTP/2.0\r\nHost: x\r\n\r\n"},
		{"header without colon", "GET /ns/a HTTP/1.1\r\nHost: x\r\nnonsense\r\n\r\n"},
		{"bad header name", "GET /ns/a HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n"},
		{"no Host in HTTP/1.1", "GET /ns/a HTTP/1.1\r\n\r\n"},
		{"two Hosts", "GET /ns/a HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n"},
		{"bad Host", "GET /ns/a HTTP/1.1\r\nHost: x y\r\n\r\n"},
		{"Transfer-Encoding", "POST /ns/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		{"bad Content-Length", "POST /ns/a HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n"},
		{"bad escape", "GET /ns/%zz HTTP/1.1\r\nHost: x\r\n\r\n"},
	} {
		t.Run("400 for "+tc.name, func(t *testing.T) {
			c := dialRaw(t, s)
			c.send(tc.req + "GET /ns/a HTTP/1.1\r\nHost: x\r\n\r\n")
			resp := c.expectStatus(400, tc.name)
			if !resp.Close {
				t.Errorf("400 without Connection: close")
			}
			c.expectEOF(tc.name)
		})
	}

	t.Run("431 for huge headers", func(t *testing.T) {
		c := dialRaw(t, s)
		c.send("GET /ns/a HTTP/1.1\r\nHost: x\r\n")
		for range 10 {
			c.send("X-Filler: " + strings.Repeat("a", 1000) + "\r\n")
		}
		c.send("\r\n")
		c.expectStatus(431, "huge headers")
		c.expectEOF("huge headers")
	})

	t.Run("431 once the limit is reached, without waiting for more", func(t *testing.T) {
		c := dialRaw(t, s)
		start := "GET /ns/a HTTP/1.1\r\nHost: x\r\nX-Filler: "
		c.send(start + strings.Repeat("a", 8192-len(start)))
		c.expectStatus(431, "8 KiB without an end")
		c.expectEOF("8 KiB without an end")
	})

	t.Run("headers just under the limit", func(t *testing.T) {
		c := dialRaw(t, s)
		c.send("GET /ns/a HTTP/1.1\r\nHost: x\r\nX-Filler: " + strings.Repeat("a", 7000) + "\r\n\r\n")
		c.expectStatus(302, "7 KB of headers")
	})

	t.Run("413 for a large body", func(t *testing.T) {
		c := dialRaw(t, s)
		c.send("POST /ns/a HTTP/1.1\r\nHost: x\r\nContent-Length: 65537\r\n\r\n")
		c.expectStatus(413, "large body")
		c.expectEOF("large body")
	})

	t.Run("body skipped across reads", func(t *testing.T) {
		c := dialRaw(t, s)
		c.send("GET /ns/a HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\n")
		c.expectStatus(302, "GET with a body")
		body := strings.Repeat("GET /ns/b HTTP/1.1\r\n\r\n", 60000/22) // looks like requests; must be skipped
		body += strings.Repeat("x", 60000-len(body))
		for i := 0; i < len(body); i += 7000 {
			c.send(body[i:min(i+7000, len(body))])
		}
		c.send("GET /ns/b HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp := c.expectStatus(302, "after the body"); resp.Header.Get("Location") != "https://example.com/b?x=1" {
			t.Errorf("after the body: Location %q", resp.Header.Get("Location"))
		}
	})

	t.Run("Connection: close", func(t *testing.T) {
		c := dialRaw(t, s)
		c.send("GET /ns/a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /ns/a HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp := c.expectStatus(302, "close"); !resp.Close {
			t.Errorf("no Connection: close in the response")
		}
		c.expectEOF("Connection: close")
	})

	t.Run("HTTP/1.0", func(t *testing.T) {
		c := dialRaw(t, s)
		c.send("GET /ns/a HTTP/1.0\r\n\r\n")
		c.expectStatus(302, "HTTP/1.0")
		c.expectEOF("HTTP/1.0")

		c = dialRaw(t, s)
		c.send("GET /ns/a HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
		c.expectStatus(302, "HTTP/1.0 keep-alive")
		c.send("HEAD /ns/a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
		if resp, body := c.read(true); resp.StatusCode != 302 || body != "" {
			t.Errorf("HTTP/1.0 keep-alive HEAD: %d %q", resp.StatusCode, body)
		}
	})

	t.Run("absolute-form target", func(t *testing.T) {
		c := dialRaw(t, s)
		c.send("GET http://other.example/ns/b?q=1 HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp := c.expectStatus(302, "absolute"); resp.Header.Get("Location") != "https://example.com/b?x=1&q=1" {
			t.Errorf("absolute: Location %q", resp.Header.Get("Location"))
		}
	})

	t.Run("OPTIONS *", func(t *testing.T) {
		c := dialRaw(t, s)
		c.send("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n")
		c.expectStatus(200, "OPTIONS *")
	})
}

func TestEpollTimeouts(t *testing.T) {
	_, s, _ := epollHarness(t, func(s *EpollServer) {
		s.IdleTimeout = 300 * time.Millisecond
		s.ReadHeaderTimeout = 300 * time.Millisecond
	})
	idle := dialRaw(t, s)
	idle.send("GET /ns/a HTTP/1.1\r\nHost: x\r\n\r\n")
	idle.expectStatus(302, "before idling")
	slow := dialRaw(t, s)
	slow.send("GET /ns/a HTTP/1.1\r\nHost: x\r\n")
	idle.expectEOF("idle connection")
	slow.expectEOF("slow headers")
}

func TestEpollGracefulShutdown(t *testing.T) {
	_, s, stop := epollHarness(t)
	idle := dialRaw(t, s)
	idle.send("GET /ns/a HTTP/1.1\r\nHost: x\r\n\r\n")
	idle.expectStatus(302, "before shutdown")
	// A request in progress is answered (with Connection: close) once its
	// rest arrives during the drain.
	busy := dialRaw(t, s)
	busy.send("GET /ns/a HTTP/1.1\r\nHost: x\r\n\r\n") // accepted before the listeners close
	busy.expectStatus(302, "busy connection before shutdown")
	busy.send("GET /ns/a HTTP/1.1\r\n")
	busy.send("Host: x\r\n")
	addr := s.Addr().String()

	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	idle.expectEOF("idle connection on shutdown")
	// New connections are refused once the listeners are closed.
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return true, nil
		}
		_ = c.Close()
		return false, nil
	})
	if err != nil {
		t.Errorf("still accepting after shutdown began: %v", err)
	}
	busy.send("\r\n")
	if resp := busy.expectStatus(302, "in progress"); !resp.Close {
		t.Error("response during the drain lacks Connection: close")
	}
	busy.expectEOF("after the drain's response")
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return")
	}
}

func TestEpollShutdownTimeout(t *testing.T) {
	_, s, stop := epollHarness(t, func(s *EpollServer) { s.ShutdownTimeout = 200 * time.Millisecond })
	busy := dialRaw(t, s)
	busy.send("GET /ns/a HTTP/1.1\r\nHost: x\r\n\r\n")
	busy.expectStatus(302, "before shutdown")
	busy.send("GET /ns/a HTTP/1.1\r\n")
	stop() // returns after the timeout, closing the busy connection
	busy.expectEOF("busy connection after the shutdown timeout")
}

// 50 clients, 200 requests each over keep-alive connections, all answered
// right.
func TestEpollConcurrency(t *testing.T) {
	h := newHarness(t)
	const links = 100
	for i := range links {
		h.add(link("ns", "l"+strconv.Itoa(i), "c"+strconv.Itoa(i), "https://example.com/"+strconv.Itoa(i)))
	}
	s, _ := startEpoll(t, h.r)
	addr := s.Addr().String()
	c := newClient()
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for g := range 50 {
		wg.Go(func() {
			for i := range 200 {
				n := (g*200 + i) % (links + 10) // some 404s
				resp, err := c.Get("http://" + addr + "/ns/c" + strconv.Itoa(n) + "?g=" + strconv.Itoa(g))
				if err != nil {
					errs <- err
					return
				}
				body, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				want, loc := 302, "https://example.com/"+strconv.Itoa(n)
				if n >= links {
					want, loc = 404, ""
				}
				if resp.StatusCode != want || resp.Header.Get("Location") != loc || len(body) == 0 {
					errs <- fmt.Errorf("/ns/c%d: %d %q %q", n, resp.StatusCode, resp.Header.Get("Location"), body)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestEpollZeroAllocs(t *testing.T) {
	h := newHarness(t)
	h.add(link("ns", "a", "a", "https://example.com/a"))
	h.r.accessLog = nil
	l := &loop{s: &EpollServer{r: h.r}}
	l.tick()
	c := &conn{}
	req := []byte("GET /ns/a HTTP/1.1\r\nHost: x\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n")
	if n := testing.AllocsPerRun(1000, func() {
		c.wbuf = c.wbuf[:0]
		if n, bad := l.request(c, req); n != len(req) || bad != nil {
			t.Fatal("not parsed")
		}
	}); n != 0 {
		t.Errorf("a request allocates %v times", n)
	}
}
