package redirect

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/valyala/fasthttp"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// startServer serves r with a Server on 127.0.0.1:0 until the test ends or
// stop is called.
func startServer(t testing.TB, r *Redirector, mut ...func(*ServerOptions)) (s *Server, stop func()) {
	t.Helper()
	return startServerOn(t, nil, r, mut...)
}

// startServerOn is startServer on the listener ln (nil: 127.0.0.1:0). Its
// connections are timed as the redirector's own.
func startServerOn(t testing.TB, ln net.Listener, r *Redirector, mut ...func(*ServerOptions)) (s *Server, stop func()) {
	t.Helper()
	opts := DefaultServerOptions()
	opts.ShutdownTimeout = 5 * time.Second
	for _, m := range mut {
		m(&opts)
	}
	s = NewServer("127.0.0.1:0", r, opts)
	if ln != nil {
		s.ln = &retryListener{Listener: ln, log: s.log, clock: &s.clock}
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
				t.Error("server did not stop")
			}
		})
	}
	t.Cleanup(stop)
	return s, stop
}

func startFrontEnd(t *testing.T, r *Redirector) string {
	s, _ := startServer(t, r)
	return s.Addr().String()
}

type rawConn struct {
	t *testing.T
	net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, s *Server) *rawConn {
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

// expectEOF checks that the server closes the connection (within the
// connection's deadline) without sending anything more.
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

func serverHarness(t *testing.T, mut ...func(*ServerOptions)) (*harness, *Server, func()) {
	h := newHarness(t)
	h.add(link("ns", "a", "a", "https://example.com/a"))
	h.add(link("ns", "b", "b", "https://example.com/b?x=1", func(l *linkv1.ShortLink) { l.Spec.ForwardQuery = true }))
	s, stop := startServer(t, h.r, mut...)
	return h, s, stop
}

func TestServerProtocol(t *testing.T) {
	_, s, _ := serverHarness(t)

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
	})

	t.Run("no Server header; Date, Content-Type and Content-Length", func(t *testing.T) {
		c := dialRaw(t, s)
		c.send("GET /ns/a HTTP/1.1\r\nHost: x\r\n\r\n")
		resp := c.expectStatus(302, "headers")
		if resp.Header.Get("Server") != "" || resp.Header.Get("Date") == "" ||
			resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" || resp.ContentLength != 10 {
			t.Errorf("headers %v", resp.Header)
		}
	})

	t.Run("405 with Allow, body skipped", func(t *testing.T) {
		c := dialRaw(t, s)
		c.send("PUT /ns/a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
		if resp := c.expectStatus(405, "PUT"); resp.Header.Get("Allow") != "GET, HEAD" || resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("405 headers %v", resp.Header)
		}
		c.send("GET /ns/a HTTP/1.1\r\nHost: x\r\n\r\n")
		c.expectStatus(302, "after a skipped body")
	})

	t.Run("GET with a small body is answered", func(t *testing.T) {
		c := dialRaw(t, s)
		c.send("GET /ns/a HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + strings.Repeat("GET /ns/b HTTP/1.1\r\n\r\n", 1000/22) + strings.Repeat("x", 1000%22))
		c.expectStatus(302, "GET with a body")
		c.send("GET /ns/b HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp := c.expectStatus(302, "after the body"); resp.Header.Get("Location") != "https://example.com/b?x=1" {
			t.Errorf("after the body: Location %q", resp.Header.Get("Location"))
		}
	})

	t.Run("GET with a large body is refused with 413 and closed", func(t *testing.T) {
		c := dialRaw(t, s)
		c.send("GET /ns/a HTTP/1.1\r\nHost: x\r\nContent-Length: 65537\r\n\r\n")
		if resp := c.expectStatus(413, "large body"); !resp.Close {
			t.Error("413 without Connection: close")
		}
		c.expectEOF("large body")
	})

	for _, tc := range []struct{ name, req string }{
		{"garbage", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"},
		{"no version", "GET /ns/a\r\n\r\n"},
		{"header without colon", "GET /ns/a HTTP/1.1\r\nHost: x\r\nnonsense\r\n\r\n"},
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

}

// TestServerHeadsAndVersions: heads up to the limit, and the HTTP versions
// and connection options of RFC 9112.
func TestServerHeadsAndVersions(t *testing.T) {
	_, s, _ := serverHarness(t)

	// Defect 7: the epoll server refused heads over 8 KiB (431) and HTTP/1.2
	// to 1.9 (400).
	t.Run("a 16 KiB head is accepted", func(t *testing.T) {
		c := dialRaw(t, s)
		head := "GET /ns/a HTTP/1.1\r\nHost: x\r\n"
		for len(head) < 16<<10-1100 {
			head += "X-Filler: " + strings.Repeat("a", 1000) + "\r\n"
		}
		c.send(head + "\r\n")
		c.expectStatus(302, fmt.Sprintf("%d-byte head", len(head)+2))
	})

	// Defect 6: the epoll server parsed a head again from its start on every
	// read (quadratic in the reads of a large head).
	t.Run("a 15 KiB head in 64-byte writes", func(t *testing.T) {
		c := dialRaw(t, s)
		head := "GET /ns/a HTTP/1.1\r\nHost: x\r\nX-Filler: " + strings.Repeat("a", 15<<10) + "\r\n\r\n"
		for i := 0; i < len(head); i += 64 {
			c.send(head[i:min(i+64, len(head))])
		}
		c.expectStatus(302, "head in small writes")
	})

	t.Run("431 above the header limit", func(t *testing.T) {
		c := dialRaw(t, s)
		// fasthttp closes without draining what it did not read, so the
		// client may see a reset instead of the 431 (noted in the README).
		_, _ = io.WriteString(c, "GET /ns/a HTTP/1.1\r\nHost: x\r\nX-Filler: "+strings.Repeat("a", 17<<10)+"\r\n\r\n")
		resp, err := http.ReadResponse(c.br, nil)
		if err == nil {
			if resp.StatusCode != 431 || !resp.Close {
				t.Errorf("huge head: %d, close %v; want 431 and close", resp.StatusCode, resp.Close)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			c.expectEOF("huge head")
		} else if !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("huge head: %v, want 431 or a reset", err)
		}
	})

	t.Run("HTTP/1.2 to 1.9 are answered", func(t *testing.T) {
		for _, v := range []string{"1.2", "1.9"} {
			c := dialRaw(t, s)
			c.send("GET /ns/a HTTP/" + v + "\r\nHost: x\r\n\r\n")
			c.expectStatus(302, "HTTP/"+v)
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

	// Defect 5: the epoll server kept an HTTP/1.0 connection that asked for
	// "close, keep-alive", and its keep-alive answers lacked Connection:
	// keep-alive (so HTTP/1.0 clients closed anyway).
	t.Run("HTTP/1.0", func(t *testing.T) {
		c := dialRaw(t, s)
		c.send("GET /ns/a HTTP/1.0\r\n\r\n")
		c.expectStatus(302, "HTTP/1.0")
		c.expectEOF("HTTP/1.0")

		c = dialRaw(t, s)
		c.send("GET /ns/a HTTP/1.0\r\nConnection: close, keep-alive\r\n\r\n")
		c.expectStatus(302, "HTTP/1.0 close, keep-alive")
		c.expectEOF("HTTP/1.0 close, keep-alive")

		c = dialRaw(t, s)
		c.send("GET /ns/a HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
		if resp := c.expectStatus(302, "HTTP/1.0 keep-alive"); resp.Header.Get("Connection") != "keep-alive" {
			t.Errorf("HTTP/1.0 keep-alive answered with Connection %q", resp.Header.Get("Connection"))
		}
		c.send("HEAD /ns/a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
		if resp, body := c.read(true); resp.StatusCode != 302 || body != "" {
			t.Errorf("HTTP/1.0 keep-alive HEAD: %d %q", resp.StatusCode, body)
		}
	})

	t.Run("OPTIONS *", func(t *testing.T) {
		c := dialRaw(t, s)
		c.send("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n")
		c.expectStatus(200, "OPTIONS *")
	})

	// Defect 3: the epoll server never restarted the header timeout of a
	// connection whose reads ended part-way into a pipelined request.
	t.Run("pipelined requests split across reads", func(t *testing.T) {
		// Each write ends in the middle of the next request; the whole
		// exchange (16 requests at the client's pace of 200ms) takes three
		// header timeouts, each request a fifth of one: 800ms to spare for
		// a busy machine's scheduling (run 23 of issue 41 took more than
		// the 300ms that a 500ms timeout left).
		const headerTimeout, pace = time.Second, 200 * time.Millisecond
		_, s, _ := serverHarness(t, func(o *ServerOptions) { o.HeaderTimeout = headerTimeout })
		c := dialRaw(t, s)
		req := "GET /ns/a HTTP/1.1\r\nHost: x\r\n\r\n"
		for i := range 16 {
			first, rest := req, req[:10]
			if i > 0 {
				first = req[10:]
			}
			c.send(first + rest)
			c.expectStatus(302, fmt.Sprintf("pipelined request %d", i))
			time.Sleep(pace) // the client's pace, not synchronisation
		}
	})

}

// Defect 2: the epoll server kept a connection that never sent a byte for
// the idle timeout (120s), not the header timeout.
func TestServerTimeouts(t *testing.T) {
	h, s, _ := serverHarness(t, func(o *ServerOptions) {
		o.HeaderTimeout = 300 * time.Millisecond
		// Far longer than the header timeout: the silent connection must not
		// get the idle one.
		o.IdleTimeout = 3 * time.Second
	})
	silent := dialRaw(t, s)
	slow := dialRaw(t, s)
	slow.send("GET /ns/a HTTP/1.1\r\nHost: x\r\n")
	idle := dialRaw(t, s)
	idle.send("GET /ns/a HTTP/1.1\r\nHost: x\r\n\r\n")
	idle.expectStatus(302, "before idling")

	began := time.Now()
	// The silent connection gets a 408 at the header timeout, or nothing.
	_ = silent.SetDeadline(time.Now().Add(3 * time.Second))
	if b, err := io.ReadAll(silent.br); err != nil || (len(b) > 0 && !strings.HasPrefix(string(b), "HTTP/1.1 408 ")) {
		t.Errorf("silent connection: %q %v", b, err)
	}
	// The header timeout (300ms) and up to two ticks, about six times over
	// for a loaded machine: 2s, still under the idle timeout (3s) that the
	// defect gave a silent connection.
	if d := time.Since(began); d > 2*time.Second {
		t.Errorf("silent connection closed after %v, want about the header timeout", d)
	}
	slow.expectStatus(408, "slow headers")
	slow.expectEOF("slow headers")
	idle.expectEOF("idle connection")
	// Counted (refused_requests_total): the slow one, and the silent one if
	// it got a 408 too.
	if n := testutil.ToFloat64(h.r.metrics.refused[http.StatusRequestTimeout]); n < 1 || n > 2 {
		t.Errorf("refused_requests_total{code=\"408\"} = %v, want 1 or 2", n)
	}
}

func TestServerGracefulShutdown(t *testing.T) {
	// active counts the connections the server has seen a request begin on.
	var active atomic.Int32
	_, s, stop := serverHarness(t, func(o *ServerOptions) {
		o.connState = func(_ net.Conn, st fasthttp.ConnState) {
			if st == fasthttp.StateActive {
				active.Add(1)
			}
		}
	})
	g := NewWithT(t)
	idle := dialRaw(t, s)
	idle.send("GET /ns/a HTTP/1.1\r\nHost: x\r\n\r\n")
	idle.expectStatus(302, "before shutdown")
	busy := dialRaw(t, s)
	busy.send("GET /ns/a HTTP/1.1\r\nHost: x\r\n\r\n")
	busy.expectStatus(302, "busy connection before shutdown")
	busy.send("GET /ns/a HTTP/1.1\r\n")
	// Draining closes idle connections: wait until the server has begun
	// reading the busy one's request.
	g.Eventually(active.Load).Should(BeNumerically("==", 3))
	addr := s.Addr().String()

	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	idle.expectEOF("idle connection on shutdown")
	g.Eventually(func() error {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
		}
		return err
	}).WithTimeout(5*time.Second).WithPolling(10*time.Millisecond).ShouldNot(Succeed(), "still accepting after shutdown began")
	busy.send("Host: x\r\n\r\n")
	if resp := busy.expectStatus(302, "in progress"); !resp.Close {
		t.Error("response during the drain lacks Connection: close")
	}
	busy.expectEOF("after the drain's response")
	g.Eventually(stopped).WithTimeout(10 * time.Second).Should(BeClosed())
}

func TestServerShutdownTimeout(t *testing.T) {
	_, s, stop := serverHarness(t, func(o *ServerOptions) { o.ShutdownTimeout = 200 * time.Millisecond })
	busy := dialRaw(t, s)
	busy.send("GET /ns/a HTTP/1.1\r\nHost: x\r\n\r\n")
	busy.expectStatus(302, "before shutdown")
	busy.send("GET /ns/a HTTP/1.1\r\n")
	stop() // returns after the timeout, closing the busy connection
	busy.expectEOF("busy connection after the shutdown timeout")
}

// Defect 4: the epoll server bound with SO_REUSEPORT, so a second process
// on the same port started and silently took part of the traffic.
func TestServerSecondBindFails(t *testing.T) {
	h, s, _ := serverHarness(t)
	second := NewServer(s.Addr().String(), h.r, DefaultServerOptions())
	err := second.Listen()
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("second Listen on %s: %v, want address already in use", s.Addr(), err)
	}
}

// Defect 8: stopping the epoll server twice wrote to its closed eventfd.
// A second shutdown after Start has returned is harmless.
func TestServerStopTwice(t *testing.T) {
	_, s, stop := serverHarness(t)
	stop()
	if err := s.srv.ShutdownWithContext(context.Background()); err != nil && !errors.Is(err, net.ErrClosed) {
		t.Errorf("second shutdown: %v", err)
	}
}

// 50 clients, 200 requests each over keep-alive connections, all answered
// right.
func TestServerConcurrency(t *testing.T) {
	h := newHarness(t)
	const links = 100
	for i := range links {
		h.add(link("ns", "l"+strconv.Itoa(i), "c"+strconv.Itoa(i), "https://example.com/"+strconv.Itoa(i)))
	}
	s, _ := startServer(t, h.r)
	addr := s.Addr().String()
	c := &http.Client{
		Transport:     &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       10 * time.Second,
	}
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

func TestHandleDoesNotAllocate(t *testing.T) {
	h := newHarness(t)
	h.add(link("ns", "a", "a", "https://example.com/a"))
	h.add(link("ns", "p", "p", "https://example.com/p", func(l *linkv1.ShortLink) { l.Spec.RedirectStatus = 301 }))
	// Rules and variants (routing_test.go's appLink; TestRoutedClicksDoNotAllocate
	// has more of them, with counting).
	h.add(link("ns", "r", "r", "https://example.com/r", appLink))
	h.r.accessLog = nil
	for _, target := range []string{"/ns/a", "/ns/p?utm=1", "/ns/missing", "/ns/r", "/ns/r?beta=1"} {
		ctx := requestCtx("GET", "x", target)
		ctx.Request.Header.SetUserAgent(uaDesktop)
		ctx.Request.Header.Set("Accept-Language", "en-US,en;q=0.9")
		if n := testing.AllocsPerRun(1000, func() {
			ctx.Response.Reset()
			h.r.handle(ctx)
		}); n != 0 {
			t.Errorf("GET %s allocates %v times", target, n)
		}
	}
}

// The access log never holds up a request: with its output blocked,
// requests are answered and the records that do not fit are counted.
func TestAccessLogNeverBlocks(t *testing.T) {
	unblock := make(chan struct{})
	w := &gatedWriter{gate: unblock}
	h := newHarness(t)
	h.r = New(Options{Clock: h.clock, AccessLog: w, AccessLogBuffer: 4})
	if err := h.r.WatchShortLinks(h.links); err != nil {
		t.Fatal(err)
	}
	if err := h.r.WatchNamespaces(h.nss); err != nil {
		t.Fatal(err)
	}
	h.add(link("ns", "a", "a", "https://example.com/a"))
	s, stop := startServer(t, h.r)
	c := dialRaw(t, s)
	for range 50 {
		c.send("GET /ns/a HTTP/1.1\r\nHost: x\r\n\r\n")
		c.expectStatus(302, "with the access log blocked")
	}
	if got := counterValue(t, h.r.metrics.accessLogDropped); got < 40 {
		t.Errorf("%v records dropped, want at least 40 (50 requests, 4 queued, 1 being written)", got)
	}
	close(unblock)
	stop()
	h.r.Close()
	if n := strings.Count(w.String(), "\n"); n < 1 || n > 10 {
		t.Errorf("%d lines written after the unblock, want the few that were queued", n)
	}
}

type gatedWriter struct {
	gate chan struct{}
	mu   sync.Mutex
	b    strings.Builder
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	<-w.gate
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *gatedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// A client that sends requests but stops reading the answers holds its
// connection no longer than the write timeout: the server's write blocks
// once the socket buffers are full, and the watchdog times it out.
func TestServerWriteTimeout(t *testing.T) {
	closed := make(chan time.Time, 1)
	_, s, _ := serverHarness(t, func(o *ServerOptions) {
		o.WriteTimeout = 300 * time.Millisecond
		o.MaxRequestsPerConnection = 0
		o.connState = func(_ net.Conn, st fasthttp.ConnState) {
			if st == fasthttp.StateClosed {
				select {
				case closed <- time.Now():
				default:
				}
			}
		}
	})
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
	// Pipelined requests, never read: their answers (~250 bytes each)
	// outgrow the socket buffers on both sides long before the writer stops.
	req := []byte(strings.Repeat("GET /ns/a HTTP/1.1\r\nHost: x\r\n\r\n", 1000))
	go func() {
		for {
			if _, err := c.Write(req); err != nil {
				return
			}
		}
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("a connection whose client stopped reading was still open after 10s (write timeout 300ms)")
	}
}

// pipeListener accepts the server ends of net.Pipe connections: a write on
// one blocks until the client reads it, byte for byte, so a test controls
// exactly which of the server's writes block.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

// dial returns the client end of a new connection.
func (l *pipeListener) dial(t *testing.T) net.Conn {
	t.Helper()
	client, server := net.Pipe()
	select {
	case l.conns <- server:
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not accept a pipe connection")
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// The bound: a client that stops reading holds a connection at most
// --write-timeout plus two watchdog ticks, whatever fasthttp is doing when
// it writes. Each case makes the server write in the head phase (fasthttp
// flushing queued pipelined responses once the buffered input ends inside
// the next request, a 100 Continue, an error response for a head) to a
// client that never reads; over a pipe that write blocks, every run. The
// header timeout is off, so a write timed as a head would block forever.
func TestServerWriteTimeoutInHeadPhase(t *testing.T) {
	const writeTimeout = 300 * time.Millisecond
	cases := []struct{ name, send string }{
		{"pipelined responses flushed inside the next head",
			"GET /ns/a HTTP/1.1\r\nHost: x\r\n\r\nGET /ns/b HTTP/1.1\r\nHost: x\r\n\r\nGET /ns/a HT"},
		{"100 Continue",
			"GET /ns/a HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n"},
		{"an error response to a head",
			"GET /ns/a HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			closed := make(chan struct{})
			var once sync.Once
			h := newHarness(t)
			h.add(link("ns", "a", "a", "https://example.com/a"))
			h.add(link("ns", "b", "b", "https://example.com/b"))
			ln := newPipeListener()
			s, _ := startServerOn(t, ln, h.r, func(o *ServerOptions) {
				o.HeaderTimeout = 0
				o.IdleTimeout = time.Hour
				o.WriteTimeout = writeTimeout
				o.connState = func(_ net.Conn, st fasthttp.ConnState) {
					if st == fasthttp.StateClosed {
						once.Do(func() { close(closed) })
					}
				}
			})
			c := ln.dial(t)
			sent := time.Now()
			go func() { _, _ = io.WriteString(c, tc.send) }()
			// The write starts once the request is read (within
			// milliseconds) and ends at the write timeout plus up to two
			// ticks; four times that for a busy machine's scheduling, far
			// under the 10s that tell a connection kept open.
			bound := 4 * (writeTimeout + 2*s.tick)
			select {
			case <-closed:
				if d := time.Since(sent); d > bound {
					t.Errorf("closed after %v, want at most %v", d, bound)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("a client that stopped reading still held its connection after 10s (write timeout %v)", writeTimeout)
			}
		})
	}
}

// The first request's head is timed from the accept: a byte sent late
// does not start the header timeout again (as fasthttp's own ReadTimeout
// did not), so a client cannot hold a connection for twice the timeout.
func TestServerHeaderTimeoutFromAccept(t *testing.T) {
	// The server promises the timeout plus up to two ticks (a tenth of it):
	// 2.4 s from the accept. Timed from the late byte it would be 3.8 s or
	// more; 3.4 s between the two (1.4 times the promise, the most that
	// still tells them apart) leaves a busy machine 1 s of scheduling.
	const headerTimeout, lateBy, limit = 2 * time.Second, 1800 * time.Millisecond, 3400 * time.Millisecond
	_, s, _ := serverHarness(t, func(o *ServerOptions) { o.HeaderTimeout = headerTimeout })
	c := dialRaw(t, s)
	dialed := time.Now()
	late := time.AfterFunc(lateBy, func() { _, _ = io.WriteString(c.Conn, "G") })
	defer late.Stop()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := io.ReadAll(c.br); err != nil || (len(b) > 0 && !strings.HasPrefix(string(b), "HTTP/1.1 408 ")) {
		t.Errorf("connection with a late first byte: %q %v", b, err)
	}
	if d := time.Since(dialed); d > limit {
		t.Errorf("closed %v after the accept, want about the header timeout (%v)", d, headerTimeout)
	}
}

// With no idle timeout set, an idle keep-alive connection gets the header
// timeout, as with fasthttp's own IdleTimeout; it is not kept forever.
func TestServerIdleTimeoutZeroFallsBack(t *testing.T) {
	_, s, _ := serverHarness(t, func(o *ServerOptions) {
		o.HeaderTimeout = 300 * time.Millisecond
		o.IdleTimeout = 0
	})
	c := dialRaw(t, s)
	c.send("GET /ns/a HTTP/1.1\r\nHost: x\r\n\r\n")
	c.expectStatus(302, "before idling")
	idled := time.Now()
	c.expectEOF("idle connection with --idle-timeout 0")
	// The header timeout (300ms) and up to two ticks, about six times over
	// for a loaded machine; never closed, expectEOF fails first.
	if d := time.Since(idled); d > 2*time.Second {
		t.Errorf("idle connection closed after %v, want about the header timeout (300ms)", d)
	}
}
