package redirect

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/qr/qrtest"
	"github.com/linkforge/linkforge/internal/testenv"
)

// Hostile tests of the answers that are not redirects (issue 40): QR codes
// and previews carry only hosts the operator configured, cost a bounded
// budget, and bad input gets a 4xx without an error log.

// withLog is newHarnessWith whose redirector logs into the harness's
// buffer (h.log then holds log lines, not the access log).
func withLog(t *testing.T, opts Options) *harness {
	buf := &testenv.SyncBuffer{}
	opts.Log = funcr.New(func(prefix, args string) { _, _ = fmt.Fprintf(buf, "%s %s\n", prefix, args) }, funcr.Options{})
	h := newHarnessWith(t, opts)
	h.log = buf
	return h
}

func TestQRCodeCarriesOnlyHostsWeVouchFor(t *testing.T) {
	h := qrHarness(t) // --public-base-url=https://go.example.com; team-a claims go.a.example
	const long = "https://go.example.com/team-a/LUMLV6n3To"
	for _, c := range []struct{ name, host string }{
		{"another Host", "evil.example"},
		{"a 2,000-byte Host", strings.Repeat("a", 2000) + ".example"},
		{"a Host with userinfo", "user@evil.example"},
	} {
		// Straight to the handler: net/http's client sends no such Host.
		ctx := requestCtx("GET", c.host, "/team-a/LUMLV6n3To/qr")
		h.r.handle(ctx)
		if ctx.Response.StatusCode() != http.StatusOK || qrtest.ScanPNG(t, ctx.Response.Body()) != long {
			t.Errorf("%s: %d, reads %q, want %s", c.name, ctx.Response.StatusCode(), qrtest.ScanPNG(t, ctx.Response.Body()), long)
		}
	}
	// An absolute-form target names a host of its own (RFC 9112, 3.2.2).
	ctx := requestCtx("GET", "go.example.com", "http://evil.example/team-a/LUMLV6n3To/qr")
	h.r.handle(ctx)
	if got := qrtest.ScanPNG(t, ctx.Response.Body()); got != long {
		t.Errorf("absolute-form target on evil.example: reads %q, want %s", got, long)
	}

	// Vanity hosts: the claimed domain, normalized, whatever the Host says
	// around it; a host with a port that is not one, or with userinfo, is
	// not the domain (issue 40: a 2,200-digit port was drawn into the code).
	if g := h.get("GET", "GO.A.Example.:8443", "/LUMLV6n3To/qr"); g.status != http.StatusOK || qrtest.ScanPNG(t, g.body) != "https://go.a.example/LUMLV6n3To" {
		t.Errorf("the vanity host with a port: %d %q", g.status, qrtest.ScanPNG(t, g.body))
	}
	for _, host := range []string{
		"go.a.example:" + strings.Repeat("9", 2200),
		"go.a.example:65536",
		"go.a.example:80x",
		"user@go.a.example",
	} {
		for _, target := range []string{"/LUMLV6n3To/qr", "/LUMLV6n3To+", "HEAD /LUMLV6n3To/qr"} {
			method := "GET"
			if m, t, ok := strings.Cut(target, " "); ok {
				method, target = m, t
			}
			ctx := requestCtx(method, host, target)
			h.r.handle(ctx)
			// Not the claimed domain: an unknown path, sent to the not-found fallback.
			if loc := string(ctx.Response.Header.Peek("Location")); loc != "https://example.com/nf" {
				t.Errorf("Host %.40q... %s: %d %s %q, want the not-found fallback", host, target, ctx.Response.StatusCode(), ctx.Response.Header.ContentType(), loc)
			}
		}
	}
	ctx = requestCtx("GET", "go.a.example", "http://go.a.example:"+strings.Repeat("1", 2200)+"/LUMLV6n3To/qr")
	h.r.handle(ctx)
	if loc := string(ctx.Response.Header.Peek("Location")); loc != "https://example.com/nf" {
		t.Errorf("absolute-form target with a 2,200-digit port: %d %q, want the not-found fallback", ctx.Response.StatusCode(), loc)
	}
}

func TestQRCodeWithoutPublicBaseURL(t *testing.T) {
	h := newHarnessWith(t, Options{})
	h.add(link("team-a", "docs", "LUMLV6n3To", "https://example.com/docs"))
	h.addNS(nsObj("team-a", epoch.Add(-48*time.Hour), "go.a.example"))
	// The long form has no host we vouch for: no QR code, and it says why.
	g := h.get("GET", "go.example.com", "/team-a/LUMLV6n3To/qr")
	if g.status != http.StatusNotFound || !strings.Contains(string(g.body), "--public-base-url") || g.header.Get("Cache-Control") != "no-store" {
		t.Errorf("long form without --public-base-url: %d %q %q", g.status, g.body, g.header.Get("Cache-Control"))
	}
	// The vanity form: the domain; its scheme from X-Forwarded-Proto, which
	// the answer then varies by.
	for proto, want := range map[string]string{"": "http://go.a.example/LUMLV6n3To", "https": "https://go.a.example/LUMLV6n3To", "gopher": "http://go.a.example/LUMLV6n3To"} {
		g := h.get("GET", "go.a.example", "/LUMLV6n3To/qr", "X-Forwarded-Proto", proto)
		if got := qrtest.ScanPNG(t, g.body); got != want || g.header.Get("Vary") != "Accept, X-Forwarded-Proto" {
			t.Errorf("X-Forwarded-Proto %q: reads %q, Vary %q; want %s, Vary: Accept, X-Forwarded-Proto", proto, got, g.header.Get("Vary"), want)
		}
	}
	if g := h.get("GET", "go.a.example", "/LUMLV6n3To/qr?format=png"); g.header.Get("Vary") != "X-Forwarded-Proto" {
		t.Errorf("?format=png: Vary %q, want X-Forwarded-Proto", g.header.Get("Vary"))
	}
	// With --public-base-url the scheme is its own, and nothing varies.
	p := qrHarness(t)
	if g := p.get("GET", "go.a.example", "/LUMLV6n3To/qr?format=png", "X-Forwarded-Proto", "http"); g.header.Get("Vary") != "" || qrtest.ScanPNG(t, g.body) != "https://go.a.example/LUMLV6n3To" {
		t.Errorf("with a public base: Vary %q, reads %q", g.header.Get("Vary"), qrtest.ScanPNG(t, g.body))
	}
}

// holdRender takes one render slot of the redirector's budget until the
// returned release is called: with RenderConcurrency 1, every render that
// is not cached is refused meanwhile. release returns once the slot is
// free again.
func holdRender(h *harness) (release func()) {
	held, free, freed := make(chan bool), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(freed)
		// A slot is released on the goroutine that acquired it (which is
		// locked to its thread until then).
		rel, _, ok := h.r.render.Acquire()
		held <- ok
		if ok {
			<-free
			rel()
		}
	}()
	if !<-held {
		h.t.Fatal("the render budget refused the slot to hold")
	}
	var once sync.Once
	release = func() {
		once.Do(func() { close(free) })
		<-freed
	}
	h.t.Cleanup(release)
	return release
}

func TestRenderBudgetAnswers503(t *testing.T) {
	h := newHarnessWith(t, Options{PublicBaseURL: "https://go.example.com", RenderConcurrency: 1})
	h.add(link("team-a", "docs", "LUMLV6n3To", "https://example.com/docs"))
	h.add(link("team-a", "other", "other", "https://example.com/other"))
	warm := h.get("GET", "", "/team-a/other/qr")
	m := h.r.metrics
	refusedQR, refusedPreview := testutil.ToFloat64(m.renderRefused[viewQR]), testutil.ToFloat64(m.renderRefused[viewPreview])
	release := holdRender(h) // the only render slot is taken

	if g := h.get("GET", "", "/team-a/LUMLV6n3To/qr?size=64"); g.status != http.StatusServiceUnavailable || g.header.Get("Retry-After") == "" || g.header.Get("Cache-Control") != "no-store" {
		t.Errorf("another QR code while the budget is spent: %d Retry-After %q %q, want 503 with Retry-After, no-store", g.status, g.header.Get("Retry-After"), g.header.Get("Cache-Control"))
	}
	if g := h.get("GET", "", "/team-a/LUMLV6n3To+"); g.status != http.StatusServiceUnavailable || g.header.Get("Retry-After") == "" {
		t.Errorf("a preview while the budget is spent: %d, want 503 with Retry-After", g.status)
	}
	if d, p := testutil.ToFloat64(m.renderRefused[viewQR])-refusedQR, testutil.ToFloat64(m.renderRefused[viewPreview])-refusedPreview; d != 1 || p != 1 {
		t.Errorf("renders_refused_total: qr %v, preview %v; want 1 and 1", d, p)
	}
	// What costs nothing is still answered: cached drawings, HEAD (which
	// renders nothing), and redirects.
	if g := h.get("GET", "", "/team-a/other/qr"); g.status != http.StatusOK || !bytes.Equal(g.body, warm.body) {
		t.Errorf("a cached QR code: %d", g.status)
	}
	if g := h.get("HEAD", "", "/team-a/LUMLV6n3To+"); g.status != http.StatusOK || g.header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("HEAD of a preview: %d %q, want 200 text/html (not rendered)", g.status, g.header.Get("Content-Type"))
	}
	if g := h.get("HEAD", "", "/team-a/LUMLV6n3To/qr?size=64"); g.status != http.StatusOK {
		t.Errorf("HEAD of a QR code not drawn: %d, want 200 (not drawn)", g.status)
	}
	if g := h.get("GET", "", "/team-a/LUMLV6n3To"); g.status != http.StatusFound {
		t.Errorf("a redirect: %d", g.status)
	}
	release()
	if g := h.get("GET", "", "/team-a/LUMLV6n3To/qr?size=1024&margin=0"); g.status != http.StatusOK {
		t.Errorf("a QR code once the slot is free: %d", g.status)
	}
	if g := h.get("GET", "", "/team-a/LUMLV6n3To+"); g.status != http.StatusOK {
		t.Errorf("a preview once the slot is free: %d", g.status)
	}
}

func TestQRCodeTooLongIsTheClients(t *testing.T) {
	// A public base whose path, with a code, does not fit in a QR code.
	h := withLog(t, Options{PublicBaseURL: "https://go.example.com/" + strings.Repeat("p", 2400)})
	h.add(link("team-a", "docs", "LUMLV6n3To", "https://example.com/docs"))
	g := h.get("GET", "", "/team-a/LUMLV6n3To/qr")
	if g.status != http.StatusRequestURITooLong || !strings.Contains(string(g.body), "does not fit in a QR code") || g.header.Get("Cache-Control") != "no-store" {
		t.Errorf("%d %q, want 414", g.status, g.body)
	}
	if log := string(h.log.Bytes()); strings.Contains(log, "error") || strings.Contains(log, "pppp") {
		t.Errorf("logged: %s", log)
	}
}

func TestPreviewOfAFinishedLinkBehindAGoneFallback(t *testing.T) {
	h := newHarnessWith(t, Options{})
	h.addNS(nsWith("team-a", map[string]string{GoneRedirectAnnotation: "https://a.example/expired"}))
	h.addNS(nsWith("team-b", nil))
	h.add(link("team-a", "old", "old", "https://example.com/secret-old", decided(linkv1.ReasonExpired)))
	h.add(link("team-a", "used", "used", "https://example.com/secret-used", func(l *linkv1.ShortLink) { l.Spec.MaxUses = ptr.To[int64](1); l.Status.Uses = 1 }))
	deleted := link("team-a", "deleted", "deleted", "https://example.com/secret-deleted", decided(linkv1.ReasonExpired))
	h.add(deleted)
	h.del(deleted)
	h.add(link("team-b", "old", "old", "https://example.com/b-old", decided(linkv1.ReasonExpired)))
	for _, target := range []string{"/team-a/old+", "/team-a/used+", "/team-a/deleted+"} {
		g := h.get("GET", "", target)
		if g.status != http.StatusGone || bytes.Contains(g.body, []byte("secret")) || !bytes.Contains(g.body, []byte("redirects to https://a.example/expired with 302 Found, the fallback page for finished links")) {
			t.Errorf("%s: %d, shows its old destination or does not say where it goes:\n%s", target, g.status, g.body)
		}
	}
	// Without a gone fallback the old destination is what 410 leaves: shown.
	if g := h.get("GET", "", "/team-b/old+"); !bytes.Contains(g.body, []byte("https://example.com/b-old")) {
		t.Errorf("no fallback: the old destination is not shown:\n%s", g.body)
	}
	// The redirector's default gone fallback hides it too.
	d := newHarnessWith(t, Options{Fallbacks: Fallbacks{"", "", "https://example.com/gone"}})
	d.add(link("team-b", "old", "old", "https://example.com/b-old", decided(linkv1.ReasonExpired)))
	if g := d.get("GET", "", "/team-b/old+"); bytes.Contains(g.body, []byte("b-old")) {
		t.Errorf("default gone fallback: the old destination is shown:\n%s", g.body)
	}
}

func TestSelfReferencingFallbacks(t *testing.T) {
	// At start-up: flags that point at the redirector's own public host.
	for _, f := range []Fallbacks{
		{"https://go.example.com/", "", ""},
		{"", "https://GO.example.com:443/team-a/missing", ""},
		{"", "", "http://go.example.com./x"},
	} {
		if err := CheckFallbackLoops(f, "https://go.example.com/s"); err == nil || !strings.Contains(err.Error(), "points back at the redirector") {
			t.Errorf("CheckFallbackLoops(%v) = %v, want a loop refused", f, err)
		}
	}
	for _, base := range []string{"https://go.example.com", ""} {
		if err := CheckFallbackLoops(Fallbacks{"https://www.example.com/", "https://example.com/missing", ""}, base); err != nil {
			t.Errorf("fallbacks elsewhere, base %q: %v", base, err)
		}
	}
	// Annotations: refused as an invalid value (a Warning event), whether
	// they point at the public host or at the namespace's own domain.
	rec := events.NewFakeRecorder(10)
	h := newHarnessWith(t, Options{PublicBaseURL: "https://go.example.com", Recorder: rec})
	h.addNS(nsWith("team-a", map[string]string{
		DomainAnnotation:           "go.a.example",
		RootRedirectAnnotation:     "https://go.a.example/home",
		NotFoundRedirectAnnotation: "https://go.example.com/team-a/missing",
		GoneRedirectAnnotation:     "https://a.example/expired",
	}))
	h.add(link("team-a", "old", "old", "https://example.com/old", decided(linkv1.ReasonExpired)))
	if g := h.get("GET", "go.a.example", "/"); g.status != http.StatusNotFound {
		t.Errorf("root fallback to the namespace's own domain: %s, want 404 (ignored)", g)
	}
	if g := h.get("GET", "", "/team-a/nope"); g.status != http.StatusNotFound {
		t.Errorf("not-found fallback to the public host: %s, want 404 (ignored)", g)
	}
	if g := h.get("GET", "", "/team-a/old"); g.String() != "Found https://a.example/expired" {
		t.Errorf("a fallback elsewhere: %s", g)
	}
	for range 2 {
		select {
		case e := <-rec.Events:
			if !strings.Contains(e, "Warning InvalidFallback") || !strings.Contains(e, "points back at the redirector") {
				t.Errorf("event %q", e)
			}
		default:
			t.Error("no Warning event for a self-referencing fallback")
		}
	}
}

func TestRefusedRequestsAreCountedAndLogSampled(t *testing.T) {
	h := withLog(t, Options{})
	h.r.refusedLog.every = time.Hour // one line for the whole test, however slow the machine
	s := NewServer("127.0.0.1:0", h.r, DefaultServerOptions())
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { _ = s.Start(ctx); close(stopped) }()
	t.Cleanup(func() { cancel(); <-stopped })

	m := h.r.metrics
	for _, c := range []struct {
		input  string
		status int
	}{
		{"NOT HTTP\r\n\r\n", http.StatusBadRequest},
		{"GET /ns/a HTTP/1.1\r\nHost: x\r\nX: " + strings.Repeat("y", 20000) + "\r\n\r\n", http.StatusRequestHeaderFieldsTooLarge},
		{"POST /ns/a HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n", http.StatusRequestEntityTooLarge},
		{"GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusBadRequest},
		{"NOT HTTP EITHER\r\n\r\n", http.StatusBadRequest},
	} {
		before := testutil.ToFloat64(m.refused[c.status])
		out := rawExchange(t, s.Addr().String(), c.input)
		if !strings.HasPrefix(out, fmt.Sprintf("HTTP/1.1 %d ", c.status)) {
			t.Errorf("%.30q: %.40q, want %d", c.input, out, c.status)
		}
		if d := testutil.ToFloat64(m.refused[c.status]) - before; d != 1 {
			t.Errorf("%.30q: refused_requests_total{code=%d} grew by %v, want 1", c.input, c.status, d)
		}
	}
	log := string(h.log.Bytes())
	if n := strings.Count(log, "refused a request the server could not read"); n != 1 {
		t.Errorf("%d log lines for 5 refused requests within the sampling interval, want 1:\n%s", n, log)
	}
	if strings.Contains(log, "yyyy") {
		t.Errorf("the log quotes the request:\n%s", log)
	}
	// The next line, once the interval has passed, says how many were not logged.
	h.r.refusedLog.every = 0
	rawExchange(t, s.Addr().String(), "NOT HTTP\r\n\r\n")
	if log := string(h.log.Bytes()); !strings.Contains(log, `"unloggedBefore"=4`) {
		t.Errorf("the next line does not count the 4 not logged:\n%s", log)
	}
}

// rawExchange sends input on a new connection and reads until the server closes it.
func rawExchange(t *testing.T, addr, input string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = c.Write([]byte(input))
	out, _ := io.ReadAll(c)
	return string(out)
}
