package redirect

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/events"
)

// clickData is what the tests read of a click event's data.
type clickData struct {
	Namespace     string `json:"namespace"`
	Name          string `json:"name"`
	UID           string `json:"uid"`
	Code          string `json:"code"`
	Orphan        bool   `json:"orphan"`
	Target        string `json:"target"`
	Rule          int    `json:"rule"`
	Variant       int    `json:"variant"`
	Status        int    `json:"status"`
	RefererHost   string `json:"refererHost"`
	Bot           bool   `json:"bot"`
	Device        string `json:"device"`
	Country       string `json:"country"`
	ClientAddress string `json:"clientAddress"`
}

// clickReceiver is a CloudEvents batch receiver that keeps the events' data
// in the order they arrived.
type clickReceiver struct {
	mu   sync.Mutex
	data []clickData
}

func (c *clickReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	var batch []struct{ Data clickData }
	if err := json.Unmarshal(b, &batch); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, e := range batch {
		c.data = append(c.data, e.Data)
	}
	c.mu.Unlock()
}

func (c *clickReceiver) received() []clickData {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.data)
}

// clickHarness is a harness whose redirector offers click events to a
// pipeline that sends them to a clickReceiver every 10ms.
func clickHarness(t *testing.T) (*harness, *events.Pipeline, *clickReceiver) {
	return clickHarnessWith(t, events.Config{FlushInterval: 10 * time.Millisecond})
}

// clickHarnessWith is clickHarness with the pipeline's cfg.
func clickHarnessWith(t *testing.T, cfg events.Config) (*harness, *events.Pipeline, *clickReceiver) {
	t.Helper()
	recv := &clickReceiver{}
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	cfg.CloudEvents.URL, cfg.Registerer = srv.URL, prometheus.NewRegistry()
	p, err := events.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	h := newHarnessWith(t, Options{ClickEvents: p, CountryHeader: "CF-IPCountry"})
	return h, p, recv
}

// clickCtx is a request for host x from 198.51.100.23 with a Referer, a phone's
// User-Agent and a country.
func clickCtx(method, target string) *fasthttp.RequestCtx {
	ctx := requestCtx(method, "x", target)
	ctx.Request.Header.Set("Referer", "https://news.example.org/item?id=1")
	ctx.Request.Header.Set("User-Agent", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) Mobile/15E148")
	ctx.Request.Header.Set("Cf-Ipcountry", "de")
	ctx.SetRemoteAddr(&net.TCPAddr{IP: net.ParseIP("198.51.100.23"), Port: 40000})
	return ctx
}

// One event per GET of a link or of a path no link holds, with the fields
// of docs/events.md; none for HEAD, the QR code, the preview, "/" and 405.
func TestClickEvents(t *testing.T) {
	h, p, recv := clickHarness(t)
	h.add(link("ns", "docs", "docs", "https://example.com/docs?a=1", func(l *linkv1.ShortLink) { l.Spec.ForwardQuery = true }))
	h.add(link("ns", "old", "old", "https://example.com/old",
		func(l *linkv1.ShortLink) { l.Spec.ExpiresAt = ptr.To(metav1.NewTime(epoch.Add(-time.Second))) }))

	for _, req := range []struct{ method, target string }{
		{"GET", "/ns/docs?utm=secret"},
		{"HEAD", "/ns/docs"},
		{"GET", "/ns/docs/qr"},
		{"GET", "/ns/docs+"},
		{"GET", "/"},
		{"POST", "/ns/docs"},
		{"GET", "/ns/old"},
		{"GET", "/ns/nope"},
		{"GET", "/wp-login.php"},
	} {
		h.r.handle(clickCtx(req.method, req.target))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	common := clickData{Rule: -1, Variant: -1, RefererHost: "news.example.org", Device: "mobile", Country: "DE", ClientAddress: "198.51.100.0"}
	want := []clickData{common, common, common, common}
	want[0].Namespace, want[0].Name, want[0].UID, want[0].Code = "ns", "docs", "uid-docs", "docs"
	want[0].Target, want[0].Status = "https://example.com/docs?a=1", 302 // without the forwarded query
	want[1].Namespace, want[1].Name, want[1].UID, want[1].Code, want[1].Status = "ns", "old", "uid-old", "old", 410
	want[2].Code, want[2].Orphan, want[2].Status = "ns/nope", true, 404
	want[3].Code, want[3].Orphan, want[3].Status = "wp-login.php", true, 404
	if got := recv.received(); !slices.Equal(got, want) {
		t.Errorf("events:\n got %+v\nwant %+v", got, want)
	}
}

// A fallback redirect's event names the fallback as its target.
func TestClickEventFallbackTarget(t *testing.T) {
	recv := &clickReceiver{}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	p, err := events.New(events.Config{CloudEvents: events.CloudEventsConfig{URL: srv.URL}, FlushInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	fallbacks, err := NewFallbacks("", "https://example.com/missing", "")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, Options{ClickEvents: p, Fallbacks: fallbacks})
	h.r.handle(clickCtx("GET", "/ns/nope"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	got := recv.received()
	if len(got) != 1 || !got[0].Orphan || got[0].Status != 302 || got[0].Target != "https://example.com/missing" || got[0].Country != "" {
		t.Errorf("events %+v, want one orphan 302 to the fallback, no country (no header configured)", got)
	}
}

// With click events on, the hit path still allocates nothing: a redirect
// (with a query it does not forward), an orphan of a code, one of a path.
// (A link that forwards the query builds its Location, events or not.)
// The batcher, which allocates as it builds events, sleeps through the test
// (AllocsPerRun counts the whole process): no batch fills, no flush ticks,
// and the hand-off ring holds every record.
func TestHandleDoesNotAllocateWithClickEvents(t *testing.T) {
	h, _, _ := clickHarnessWith(t, events.Config{FlushInterval: time.Hour, MaxBatch: 100_000, Buffer: 100_000, HandoffBuffer: 1 << 14})
	h.add(link("ns", "a", "a", "https://example.com/a"))
	h.r.accessLog = nil
	for _, target := range []string{"/ns/a", "/ns/a?utm=1", "/ns/missing", "/favicon.ico"} {
		ctx := clickCtx("GET", target)
		if n := testing.AllocsPerRun(1000, func() {
			ctx.Response.Reset()
			h.r.handle(ctx)
		}); n != 0 {
			t.Errorf("GET %s with click events allocates %v times", target, n)
		}
	}
}

// A click event carries what answer decided: the target a rule or the
// split chose (not spec.url), without the forwarded query, and the link of
// a path it forwards (not an orphan of the whole path).
func TestClickEventsOfRoutedLinks(t *testing.T) {
	h, p, recv := clickHarness(t)
	h.add(link("ns", "app", "app", "https://example.com/", appLink, func(l *linkv1.ShortLink) { l.Spec.ForwardQuery = true }))
	h.add(link("ns", "docs", "docs", "https://example.com/docs/", func(l *linkv1.ShortLink) { l.Spec.ForwardPath = true }))
	h.r.handle(clickCtx("GET", "/ns/app?beta=1")) // clickCtx is an iPhone: the first rule, iOS
	h.r.handle(clickCtx("GET", "/ns/docs/guide/intro?x=1"))
	// Desktop clients no rule matches: the split sends about 30% to the
	// variant, the rest to spec.url.
	const desktops = 40
	for i := range desktops {
		ctx := clickCtx("GET", "/ns/app")
		ctx.Request.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0")
		ctx.SetRemoteAddr(&net.TCPAddr{IP: net.IPv4(198, 51, 100, byte(i+1)), Port: 40000})
		h.r.handle(ctx)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	got := recv.received()
	if len(got) != 2+desktops {
		t.Fatalf("events %+v, want %d", got, 2+desktops)
	}
	if got[0].Name != "app" || got[0].Orphan || got[0].Target != "https://apps.apple.com/app/x" || got[0].Status != 302 || got[0].Rule != 0 || got[0].Variant != -1 {
		t.Errorf("routed click %+v, want link app to the iOS rule's target without the query, rule 0, no variant", got[0])
	}
	if got[1].Name != "docs" || got[1].Orphan || got[1].Code != "docs" || got[1].Target != "https://example.com/docs/guide/intro" || got[1].Rule != -1 || got[1].Variant != -1 {
		t.Errorf("forwarded path's click %+v, want link docs to the target with the path, no rule or variant", got[1])
	}
	toVariant := 0
	for _, e := range got[2:] {
		switch {
		case e.Rule != -1:
			t.Errorf("desktop click %+v: a rule matched", e)
		case e.Variant == 0 && e.Target == "https://example.com/b":
			toVariant++
		case e.Variant != -1 || e.Target != "https://example.com/":
			t.Errorf("desktop click %+v, want variant 0 to https://example.com/b or none to spec.url", e)
		}
	}
	if toVariant == 0 || toVariant == desktops {
		t.Errorf("%d of %d desktop clicks named the variant, want some and not all (30%% of clients)", toVariant, desktops)
	}
}

// A link's strings are checked for click events once, when it is read
// (events.Plain): a link whose strings are plain is marked so, one whose
// URL needs escaping (its '&') is not, and both events arrive
// with the link's values.
func TestClickEventsOfPlainAndEscapedLinks(t *testing.T) {
	plainURL, escapedURL := "https://example.com/docs?a=1;b=2", "https://example.com/docs?a=1&b=<2>"
	for _, tc := range []struct {
		url          string
		linkPlain    bool
		locationFlag bool
	}{{plainURL, true, true}, {escapedURL, true, false}} {
		l := NewLink(link("ns", "docs", "docs", tc.url))
		if l.is(flagEventPlain) != tc.linkPlain || l.is(flagPlainLocation) != tc.locationFlag {
			t.Errorf("link of %s: flags %b, want plain strings %v, plain location %v", tc.url, l.flags, tc.linkPlain, tc.locationFlag)
		}
	}
	h, p, recv := clickHarness(t)
	h.add(link("ns", "plain", "plain", plainURL))
	h.add(link("ns", "escaped", "escaped", escapedURL))
	h.r.handle(clickCtx("GET", "/ns/plain"))
	h.r.handle(clickCtx("GET", "/ns/escaped"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	got := recv.received()
	if len(got) != 2 || got[0].Name != "plain" || got[0].Target != plainURL || got[0].UID != "uid-plain" ||
		got[1].Name != "escaped" || got[1].Target != Location(escapedURL) || got[1].UID != "uid-escaped" {
		t.Errorf("events: %+v", got)
	}
}
