package redirect

import (
	"bytes"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/qr/qrtest"
	"github.com/linkforge/linkforge/internal/testenv"
)

// newHarnessWith is newHarness with options of its own (fallbacks, a
// public base URL, a recorder).
func newHarnessWith(t *testing.T, opts Options) *harness {
	t.Helper()
	h := &harness{t: t, clock: clocktesting.NewFakeClock(epoch), links: &fakeInformer{}, nss: &fakeInformer{}, log: &testenv.SyncBuffer{}}
	opts.TombstoneTTL, opts.Clock, opts.Registry = 24*time.Hour, h.clock, prometheus.NewRegistry()
	h.r = New(opts)
	if err := h.r.WatchShortLinks(h.links); err != nil {
		t.Fatal(err)
	}
	if err := h.r.WatchNamespaces(h.nss); err != nil {
		t.Fatal(err)
	}
	h.links.synced, h.nss.synced = true, true
	return h
}

// nsWith is a namespace with annotations.
func nsWith(name string, annotations map[string]string) *corev1.Namespace {
	ns := nsObj(name, epoch.Add(-48*time.Hour), "")
	ns.Annotations = annotations
	return ns
}

type got struct {
	status int
	header http.Header
	body   []byte
}

func (h *harness) get(method, host, target string, header ...string) got {
	h.t.Helper()
	req, _ := http.NewRequest(method, "http://redirector"+target, nil)
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp := h.do2(req)
	body, _ := io.ReadAll(resp.Body)
	return got{resp.StatusCode, resp.Header, body}
}

func (h *harness) do2(req *http.Request) *http.Response {
	rec := httptest.NewRecorder()
	h.r.ServeHTTP(rec, req)
	return rec.Result()
}

func (g got) String() string {
	return http.StatusText(g.status) + " " + g.header.Get("Location")
}

func activatesAt(at time.Time) func(*linkv1.ShortLink) {
	return func(l *linkv1.ShortLink) { l.Spec.ActivatesAt = ptr.To(metav1.NewTime(at)) }
}

func TestActivationOnTheRedirectorsClock(t *testing.T) {
	h := newHarness(t)
	at := epoch.Add(time.Hour)
	h.add(link("ns", "later", "later", "https://example.com/later", activatesAt(at)))
	h.add(link("ns", "earlier", "earlier", "https://example.com/earlier", activatesAt(epoch.Add(-time.Minute))))
	h.addNS(nsObj("ns", epoch.Add(-48*time.Hour), "go.ns.example"))

	for _, p := range []struct{ host, target string }{{"", "/ns/later"}, {"go.ns.example", "/later"}, {"", "/ns/later+"}, {"", "/ns/later/qr"}} {
		for _, method := range []string{"GET", "HEAD"} {
			if g := h.get(method, p.host, p.target); g.status != http.StatusNotFound || g.header.Get("Cache-Control") != "no-store" {
				t.Errorf("%s %s%s before activatesAt: %d %q, want 404 no-store", method, p.host, p.target, g.status, g.header.Get("Cache-Control"))
			}
		}
	}
	if g := h.get("GET", "", "/ns/earlier"); g.status != http.StatusFound {
		t.Errorf("a link past its activatesAt: %d, want 302", g.status)
	}

	h.clock.SetTime(at.Add(-time.Nanosecond))
	if g := h.get("GET", "", "/ns/later"); g.status != http.StatusNotFound {
		t.Errorf("a nanosecond before activatesAt: %d, want 404", g.status)
	}
	// No informer event: the redirector reads the activation on each request.
	h.clock.SetTime(at)
	if g := h.get("GET", "", "/ns/later"); g.String() != "Found https://example.com/later" {
		t.Errorf("at activatesAt: %s, want a redirect", g)
	}
	if g := h.get("GET", "go.ns.example", "/later"); g.status != http.StatusFound {
		t.Errorf("at activatesAt on the vanity host: %d, want 302", g.status)
	}
}

func TestActivationWithFallbackAndExpiry(t *testing.T) {
	h := newHarness(t)
	h.addNS(nsWith("ns", map[string]string{NotFoundRedirectAnnotation: "https://example.com/soon"}))
	h.add(link("ns", "window", "window", "https://example.com/window", activatesAt(epoch.Add(time.Hour)),
		func(l *linkv1.ShortLink) { l.Spec.ExpiresAt = ptr.To(metav1.NewTime(epoch.Add(2 * time.Hour))) }))
	if g := h.get("GET", "", "/ns/window"); g.String() != "Found https://example.com/soon" {
		t.Errorf("before activation, with a not-found fallback: %s", g)
	}
	h.clock.SetTime(epoch.Add(90 * time.Minute))
	if g := h.get("GET", "", "/ns/window"); g.String() != "Found https://example.com/window" {
		t.Errorf("between activation and expiry: %s", g)
	}
	h.clock.SetTime(epoch.Add(2 * time.Hour))
	if g := h.get("GET", "", "/ns/window"); g.status != http.StatusGone {
		t.Errorf("after expiry: %s, want 410", g)
	}
}

// qrHarness serves a few links, with fallbacks that the QR route must not take.
func qrHarness(t *testing.T) *harness {
	h := newHarnessWith(t, Options{PublicBaseURL: "https://go.example.com",
		Fallbacks: Fallbacks{"https://example.com/root", "https://example.com/nf", "https://example.com/gone"}})
	h.add(link("team-a", "docs", "LUMLV6n3To", "https://example.com/docs"))
	h.add(link("team-a", "qr", "qr", "https://example.com/qr-code"))
	h.add(link("team-a", "old", "old", "https://example.com/old", decided(linkv1.ReasonExpired)))
	h.add(link("team-a", "limited", "limited", "https://example.com/l", func(l *linkv1.ShortLink) { l.Spec.MaxUses = ptr.To[int64](1) }))
	h.add(link("docs", "x", "qr", "https://example.com/docs-ns-code-qr"))
	h.addNS(nsObj("team-a", epoch.Add(-48*time.Hour), "go.a.example"))
	return h
}

func TestQRCode(t *testing.T) {
	h := qrHarness(t)
	g := h.get("GET", "go.example.com", "/team-a/LUMLV6n3To/qr")
	if g.status != http.StatusOK || g.header.Get("Content-Type") != "image/png" {
		t.Fatalf("GET /team-a/LUMLV6n3To/qr: %d %s %q", g.status, g.header.Get("Content-Type"), g.body)
	}
	if u := qrtest.ScanPNG(t, g.body); u != "https://go.example.com/team-a/LUMLV6n3To" {
		t.Errorf("the QR code reads %q", u)
	}
	if g.header.Get("Vary") != "Accept" || g.header.Get("X-Content-Type-Options") != "nosniff" || g.header.Get("Cache-Control") != "public, max-age=3600" {
		t.Errorf("headers %v", g.header)
	}
	if g := h.get("GET", "go.a.example", "/LUMLV6n3To/qr"); g.status != http.StatusOK || qrtest.ScanPNG(t, g.body) != "https://go.a.example/LUMLV6n3To" {
		t.Errorf("vanity host: %d %q", g.status, qrtest.ScanPNG(t, g.body))
	}
	if g := h.get("GET", "go.a.example", "/docs/qr"); g.String() != "Found https://example.com/docs-ns-code-qr" {
		t.Errorf("/docs/qr on the vanity host, where team-a has no code docs: %s, want namespace docs's code qr", g)
	}
	if g := h.get("GET", "go.a.example", "/qr"); g.String() != "Found https://example.com/qr-code" {
		t.Errorf("/qr on the vanity host: %s, want team-a's code qr", g)
	}
}

func TestQRCodeFormats(t *testing.T) {
	h := qrHarness(t)
	t.Run("format", func(t *testing.T) {
		for _, c := range []struct {
			target, accept, contentType, vary string
		}{
			{"/team-a/LUMLV6n3To/qr?format=svg", "", "image/svg+xml", ""},
			{"/team-a/LUMLV6n3To/qr?format=png", "image/svg+xml", "image/png", ""},
			{"/team-a/LUMLV6n3To/qr", "image/svg+xml", "image/svg+xml", "Accept"},
			{"/team-a/LUMLV6n3To/qr", "image/png;q=0.5, image/svg+xml;q=0.9", "image/svg+xml", "Accept"},
			{"/team-a/LUMLV6n3To/qr", "image/*;q=0.9, image/svg+xml;q=0.2", "image/png", "Accept"},
			{"/team-a/LUMLV6n3To/qr", "text/html,application/xhtml+xml,*/*;q=0.8", "image/png", "Accept"},
		} {
			g := h.get("GET", "", c.target, "Accept", c.accept)
			if g.status != http.StatusOK || g.header.Get("Content-Type") != c.contentType || g.header.Get("Vary") != c.vary {
				t.Errorf("%s Accept %q: %d %s Vary %q, want %s Vary %q", c.target, c.accept, g.status, g.header.Get("Content-Type"), g.header.Get("Vary"), c.contentType, c.vary)
			}
			if c.contentType == "image/svg+xml" && !bytes.HasPrefix(g.body, []byte("<svg ")) {
				t.Errorf("%s: not an SVG: %.60q", c.target, g.body)
			}
		}
		if g := h.get("GET", "", "/team-a/LUMLV6n3To/qr", "Accept", "text/html"); g.status != http.StatusNotAcceptable {
			t.Errorf("Accept text/html: %d, want 406", g.status)
		}
	})

}

func TestQRCodeBoundsAndAnswers(t *testing.T) {
	h := qrHarness(t)
	t.Run("bounds", func(t *testing.T) {
		for target, msg := range map[string]string{
			"/team-a/LUMLV6n3To/qr?size=63":       "size must be a number of pixels from 64 to 1024, got 63",
			"/team-a/LUMLV6n3To/qr?size=1025":     "size must be a number of pixels from 64 to 1024, got 1025",
			"/team-a/LUMLV6n3To/qr?size=big":      `size must be a whole number, got "big"`,
			"/team-a/LUMLV6n3To/qr?margin=17":     "margin must be a number of modules from 0 to 16, got 17",
			"/team-a/LUMLV6n3To/qr?margin=-1":     "margin must be a number of modules from 0 to 16, got -1",
			"/team-a/LUMLV6n3To/qr?format=gif":    `format must be png or svg, got "gif"`,
			"/team-a/LUMLV6n3To/qr?size=%zz":      "the query string is malformed",
			"/team-a/LUMLV6n3To/qr?size=64&x=%zz": "the query string is malformed",
		} {
			g := h.get("GET", "", target)
			if g.status != http.StatusBadRequest || !strings.Contains(string(g.body), msg) || g.header.Get("Cache-Control") != "no-store" {
				t.Errorf("%s: %d %q, want 400 with %q", target, g.status, g.body, msg)
			}
		}
		g := h.get("GET", "", "/team-a/LUMLV6n3To/qr?size=1024&margin=0&utm_source=x")
		img, err := png.Decode(bytes.NewReader(g.body))
		if err != nil || img.Bounds().Dx() > 1024 || img.Bounds().Dx() < 1024-40 {
			t.Errorf("size 1024, margin 0: %v %v", err, img.Bounds())
		}
	})

	t.Run("only for links that redirect, no fallback", func(t *testing.T) {
		for target, status := range map[string]int{
			"/team-a/old/qr":      http.StatusGone,
			"/team-a/nope/qr":     http.StatusNotFound,
			"/nope/LUMLV6n3To/qr": http.StatusNotFound,
		} {
			if g := h.get("GET", "", target); g.status != status || g.header.Get("Location") != "" {
				t.Errorf("%s: %s, want %d without a redirect", target, g, status)
			}
		}
		if g := h.get("GET", "", "/team-a/limited/qr"); g.status != http.StatusOK || g.header.Get("Cache-Control") != "public, max-age=3600" {
			t.Errorf("a link with maxUses (not a use): %d %q", g.status, g.header.Get("Cache-Control"))
		}
	})

	t.Run("cached: drawn once per size bucket", func(t *testing.T) {
		m := h.r.metrics
		drawn, cached := testutil.ToFloat64(m.qrDrawn), testutil.ToFloat64(m.qrCached)
		first := h.get("GET", "", "/team-a/LUMLV6n3To/qr?size=200")
		second := h.get("GET", "", "/team-a/LUMLV6n3To/qr?size=129")
		if !bytes.Equal(first.body, second.body) || first.status != http.StatusOK {
			t.Errorf("sizes 200 and 129 (bucket 128) differ, or %d", first.status)
		}
		if d, c := testutil.ToFloat64(m.qrDrawn)-drawn, testutil.ToFloat64(m.qrCached)-cached; d != 1 || c != 1 {
			t.Errorf("drawn %v, cached %v; want 1 and 1", d, c)
		}
		if img, err := png.Decode(bytes.NewReader(first.body)); err != nil || img.Bounds().Dx() > 128 {
			t.Errorf("size 200 is drawn at bucket 128: %v %v", err, img.Bounds())
		}
		// HEAD of a drawing not made yet: its headers, without drawing it.
		g := h.get("HEAD", "", "/team-a/LUMLV6n3To/qr?size=600")
		if d := testutil.ToFloat64(m.qrDrawn) - drawn; d != 1 || g.status != http.StatusOK || g.header.Get("Content-Type") != "image/png" {
			t.Errorf("HEAD: %d %q, drawn %v times in all, want 200 image/png and no new drawing", g.status, g.header.Get("Content-Type"), d)
		}
		if g := h.get("HEAD", "", "/team-a/LUMLV6n3To/qr?size=200"); g.status != http.StatusOK || g.header.Get("Content-Length") != strconv.Itoa(len(first.body)) {
			t.Errorf("HEAD of a cached drawing: %d, Content-Length %q, want %d", g.status, g.header.Get("Content-Length"), len(first.body))
		}
	})
}

func TestQRCodePublicBaseURL(t *testing.T) {
	h := newHarnessWith(t, Options{PublicBaseURL: "https://go.example.com/s/"})
	h.add(link("team-a", "docs", "LUMLV6n3To", "https://example.com/docs"))
	h.addNS(nsObj("team-a", epoch.Add(-48*time.Hour), "go.a.example"))
	if g := h.get("GET", "10.0.0.7:8080", "/team-a/LUMLV6n3To/qr"); qrtest.ScanPNG(t, g.body) != "https://go.example.com/s/team-a/LUMLV6n3To" {
		t.Errorf("long form: %q", qrtest.ScanPNG(t, g.body))
	}
	if g := h.get("GET", "go.a.example", "/LUMLV6n3To/qr"); qrtest.ScanPNG(t, g.body) != "https://go.a.example/LUMLV6n3To" {
		t.Errorf("vanity form: %q", qrtest.ScanPNG(t, g.body))
	}
	for _, bad := range []string{"go.example.com", "ftp://go.example.com", "https://go.example.com/?a=1", "https://u@go.example.com", "https://go.example.com:65536", "https://go.example.com:" + strings.Repeat("9", 2200)} {
		if CheckPublicBaseURL(bad) == nil {
			t.Errorf("CheckPublicBaseURL(%q) = nil", bad)
		}
	}
}

func TestPreview(t *testing.T) {
	h := newHarness(t)
	h.add(link("team-a", "docs", "docs", "https://example.com/a?x=1&y='2'", func(l *linkv1.ShortLink) {
		l.Spec.RedirectStatus = 308
		l.Spec.MaxUses = ptr.To[int64](10)
		l.Spec.ExpiresAt = ptr.To(metav1.NewTime(epoch.Add(time.Hour)))
	}))
	h.add(link("team-a", "old", "old", "https://example.com/old", func(l *linkv1.ShortLink) {
		l.Spec.ExpiresAt = ptr.To(metav1.NewTime(epoch.Add(-time.Minute)))
	}))
	h.add(link("team-a", "used", "used", "https://example.com/used", func(l *linkv1.ShortLink) {
		l.Spec.MaxUses = ptr.To[int64](1)
		l.Status.Uses = 1
	}))
	gone := link("team-a", "deleted", "deleted", "https://example.com/deleted", decided(linkv1.ReasonExpired))
	h.add(gone)
	h.del(gone)
	h.addNS(nsObj("team-a", epoch.Add(-48*time.Hour), "go.a.example"))

	g := h.get("GET", "", "/team-a/docs+")
	page := string(g.body)
	if g.status != http.StatusOK || g.header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("%d %s", g.status, g.header.Get("Content-Type"))
	}
	for _, want := range []string{
		`<meta name="robots" content="noindex, nofollow">`,
		`<a href="https://example.com/a?x=1&amp;y=%272%27" rel="nofollow noopener noreferrer">https://example.com/a?x=1&amp;y=&#39;2&#39;</a>`,
		"State: <strong>Active</strong>. It redirects to https://example.com/a?x=1&amp;y=&#39;2&#39; with 308 Permanent Redirect until 2026-06-01T13:00:00Z, for at most 10 uses.",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "<script") || strings.Contains(page, "y='2'") {
		t.Errorf("script or unescaped text:\n%s", page)
	}
	for k, v := range map[string]string{
		"X-Robots-Tag": "noindex, nofollow", "Cache-Control": "no-store", "Referrer-Policy": "no-referrer",
		"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	} {
		if g.header.Get(k) != v {
			t.Errorf("%s: %q, want %q", k, g.header.Get(k), v)
		}
	}
	if g.header.Get("Location") != "" {
		t.Error("the preview redirects")
	}
	if g := h.get("GET", "go.a.example", "/docs+"); g.status != http.StatusOK || !bytes.Contains(g.body, []byte("Short link /docs")) {
		t.Errorf("on the vanity host: %d %s", g.status, g.body)
	}
	if g := h.get("HEAD", "", "/team-a/docs+"); g.status != http.StatusOK || len(g.body) != 0 {
		t.Errorf("HEAD: %d with %d bytes", g.status, len(g.body))
	}
	for target, want := range map[string]string{
		"/team-a/old+":     "State: <strong>Expired</strong>. It expired at 2026-06-01T11:59:00Z and answers 410 Gone.",
		"/team-a/used+":    "State: <strong>Exhausted</strong>",
		"/team-a/deleted+": "State: <strong>Removed</strong>",
	} {
		if g := h.get("GET", "", target); g.status != http.StatusGone || !strings.Contains(string(g.body), want) {
			t.Errorf("%s: %d, want 410 with %q:\n%s", target, g.status, want, g.body)
		}
	}
	if g := h.get("GET", "", "/team-a/nope+"); g.status != http.StatusNotFound {
		t.Errorf("unknown: %d, want 404", g.status)
	}
}

// The preview page names the link by its short URL where the operator
// vouches for the host (the public base URL; the domain the namespace
// claims), as its QR code does, and never by a host only the request
// named: a forged Host header is not reflected.
func TestPreviewNamesThePublicShortURL(t *testing.T) {
	h := newHarnessWith(t, Options{PublicBaseURL: "https://go.example.com"})
	h.add(link("team-a", "docs", "docs", "https://example.com/docs"))
	h.add(link("team-a", "old", "old", "https://example.com/old", func(l *linkv1.ShortLink) {
		l.Spec.ExpiresAt = ptr.To(metav1.NewTime(epoch.Add(-time.Minute)))
	}))
	h.addNS(nsObj("team-a", epoch.Add(-48*time.Hour), "go.a.example"))
	for _, tc := range []struct {
		host, target, want string
		status             int
	}{
		{"", "/team-a/docs+", "<h1>Short link https://go.example.com/team-a/docs</h1>", http.StatusOK},
		{"go.a.example", "/docs+", "<h1>Short link https://go.a.example/docs</h1>", http.StatusOK},
		{"GO.A.EXAMPLE:443", "/docs+", "<h1>Short link https://go.a.example/docs</h1>", http.StatusOK},
		{"forged.example", "/team-a/docs+", "<h1>Short link https://go.example.com/team-a/docs</h1>", http.StatusOK},
		{"", "/team-a/old+", "<h1>Short link https://go.example.com/team-a/old</h1>", http.StatusGone},
	} {
		g := h.get("GET", tc.host, tc.target)
		page := string(g.body)
		if g.status != tc.status || !strings.Contains(page, tc.want) {
			t.Errorf("%s%s: %d, want %d with %q:\n%s", tc.host, tc.target, g.status, tc.status, tc.want, page)
		}
		if strings.Contains(page, "forged") {
			t.Errorf("%s%s: the page names the request's host:\n%s", tc.host, tc.target, page)
		}
	}
	// Without a public base URL, a vanity host's scheme is only the proxy's
	// word: the path alone (TestPreview), as before.
	bare := newHarness(t)
	bare.add(link("team-a", "docs", "docs", "https://example.com/docs"))
	if g := bare.get("GET", "", "/team-a/docs+"); !strings.Contains(string(g.body), "<h1>Short link /team-a/docs</h1>") {
		t.Errorf("without a public base URL: %d\n%s", g.status, g.body)
	}
}

func TestFallbacks(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	defaults, err := NewFallbacks("https://example.com/home", "https://example.com/not-found", "")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, Options{Fallbacks: defaults, Recorder: rec})
	h.addNS(nsWith("team-a", map[string]string{
		DomainAnnotation:           "go.a.example",
		RootRedirectAnnotation:     "https://a.example/",
		NotFoundRedirectAnnotation: "https://a.example/missing",
		GoneRedirectAnnotation:     "https://a.example/expired",
	}))
	h.addNS(nsWith("team-b", map[string]string{DomainAnnotation: "go.b.example"}))
	h.addNS(nsWith("team-c", map[string]string{GoneRedirectAnnotation: "javascript:alert(1)", NotFoundRedirectAnnotation: "https://c.example/none"}))
	h.add(link("team-a", "live", "live", "https://example.com/live"))
	h.add(link("team-a", "old", "old", "https://example.com/old", decided(linkv1.ReasonExpired)))
	h.add(link("team-a", "used", "used", "https://example.com/used", func(l *linkv1.ShortLink) { l.Spec.MaxUses = ptr.To[int64](1); l.Status.Uses = 1 }))
	h.add(link("team-b", "old", "old", "https://example.com/b-old", decided(linkv1.ReasonExpired)))
	h.add(link("team-c", "old", "old", "https://example.com/c-old", decided(linkv1.ReasonExpired)))
	deleted := link("team-a", "deleted", "deleted", "https://example.com/deleted", decided(linkv1.ReasonExpired))
	h.add(deleted)
	h.del(deleted)

	for _, c := range []struct{ name, host, target, want string }{
		{"root of a vanity host", "go.a.example", "/", "Found https://a.example/"},
		{"root of a vanity host without its own", "go.b.example", "/", "Found https://example.com/home"},
		{"root of the shared host", "go.example.com", "/", "Found https://example.com/home"},
		{"unknown code, long form", "", "/team-a/nope", "Found https://a.example/missing"},
		{"unknown code on the vanity host", "go.a.example", "/nope", "Found https://a.example/missing"},
		{"another path on the vanity host", "go.a.example", "/a/b/c", "Found https://example.com/not-found"},
		{"unknown code of a namespace without its own", "", "/team-b/nope", "Found https://example.com/not-found"},
		{"unknown namespace", "", "/nowhere/x", "Found https://example.com/not-found"},
		{"a code on an unclaimed host", "go.nowhere.example", "/live", "Found https://example.com/not-found"},
		{"expired", "", "/team-a/old", "Found https://a.example/expired"},
		{"expired, on the vanity host", "go.a.example", "/old", "Found https://a.example/expired"},
		{"exhausted", "", "/team-a/used", "Found https://a.example/expired"},
		{"deleted (tombstone)", "", "/team-a/deleted", "Found https://a.example/expired"},
		{"expired, no gone fallback anywhere: 410 stays", "", "/team-b/old", "Gone "},
		{"an invalid annotation is ignored", "", "/team-c/old", "Gone "},
		{"the other annotations of that namespace still count", "", "/team-c/nope", "Found https://c.example/none"},
		{"a link redirects as ever", "go.a.example", "/live", "Found https://example.com/live"},
		{"QR code: no fallback", "", "/team-a/nope/qr", "Not Found "},
		{"preview: no fallback", "", "/team-a/nope+", "Not Found "},
	} {
		for _, method := range []string{"GET", "HEAD"} {
			g := h.get(method, c.host, c.target)
			if g.String() != c.want {
				t.Errorf("%s: %s %s%s: %s, want %s", c.name, method, c.host, c.target, g, c.want)
			}
			if cc := g.header.Get("Cache-Control"); g.status == http.StatusFound && c.name != "a link redirects as ever" && cc != "no-store" {
				t.Errorf("%s: Cache-Control %q, want no-store", c.name, cc)
			}
		}
	}
	// After its tombstone ends, a deleted code is unknown.
	h.clock.Step(25 * time.Hour)
	if g := h.get("GET", "", "/team-a/deleted"); g.String() != "Found https://a.example/missing" {
		t.Errorf("after the tombstone: %s", g)
	}
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, "Warning InvalidFallback") || !strings.Contains(e, GoneRedirectAnnotation) {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no Warning event for the invalid annotation")
	}
	// The same invalid value again (a resync, another label): no new event.
	h.nss.h.OnUpdate(transformed(nsWith("team-c", nil)), transformed(nsWith("team-c", map[string]string{GoneRedirectAnnotation: "javascript:alert(1)"})))
	select {
	case e := <-rec.Events:
		t.Errorf("warned again: %q", e)
	default:
	}
	if n := testutil.ToFloat64(h.r.metrics.fallbacks[fallbackGone]); n != 8 {
		t.Errorf("fallbacks_total{kind=gone} = %v, want 8 (4 requests, GET and HEAD)", n)
	}
	// A namespace that drops its annotations has none.
	h.nss.h.OnUpdate(transformed(nsWith("team-a", nil)), transformed(nsWith("team-a", map[string]string{DomainAnnotation: "go.a.example"})))
	if g := h.get("GET", "", "/team-a/old"); g.status != http.StatusGone {
		t.Errorf("annotations removed: %s, want 410", g)
	}
	if _, err := NewFallbacks("", "ftp://example.com", ""); err == nil || !strings.Contains(err.Error(), "not_found redirect: invalid URL") {
		t.Errorf("NewFallbacks with ftp: %v", err)
	}
}

// Fallbacks and activation keep the redirect path free of allocations.
func TestFeaturesDoNotAllocate(t *testing.T) {
	h := newHarnessWith(t, Options{Fallbacks: Fallbacks{"", "https://example.com/nf", ""}})
	h.add(link("ns", "on", "on", "https://example.com/on", activatesAt(epoch.Add(-time.Hour))))
	h.add(link("ns", "later", "later", "https://example.com/later", activatesAt(epoch.Add(time.Hour))))
	h.r.accessLog = nil
	for _, target := range []string{"/ns/on", "/ns/later", "/ns/missing"} {
		ctx := requestCtx("GET", "x", target)
		if n := testing.AllocsPerRun(1000, func() {
			ctx.Response.Reset()
			h.r.handle(ctx)
		}); n != 0 {
			t.Errorf("GET %s allocates %v times", target, n)
		}
	}
}
