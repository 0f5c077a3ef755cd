package redirect

import (
	"fmt"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/agent"
	"github.com/linkforge/linkforge/internal/rules"
	"github.com/linkforge/linkforge/internal/uses"
)

const (
	uaIPhone  = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1"
	uaAndroid = "Mozilla/5.0 (Linux; Android 14; Pixel 8 Pro) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/121.0.6167.101 Mobile Safari/537.36"
	uaDesktop = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/121.0.0.0 Safari/537.36"
)

// appLink is the example: iOS, Android, German and ?beta=1 clicks
// each to their own target, the others split 70/30.
func appLink(l *linkv1.ShortLink) {
	l.Spec.Rules = []linkv1.RedirectRule{
		{URL: "https://apps.apple.com/app/x", Devices: []linkv1.DeviceClass{linkv1.DeviceIOS}},
		{URL: "https://play.google.com/store/apps/details?id=x", Devices: []linkv1.DeviceClass{linkv1.DeviceAndroid}},
		{URL: "https://example.com/de/", Languages: []string{"de"}},
		{URL: "https://beta.example.com/", QueryParams: []linkv1.QueryParamMatch{{Name: "beta", Value: ptr.To("1")}}},
		{URL: "https://example.com/fr-campaign", Countries: []string{"FR"}},
	}
	l.Spec.Variants = []linkv1.Variant{{URL: "https://example.com/b", Weight: 30}}
}

// click answers a GET of target with the given header pairs through the
// handler.
func (h *harness) click(target string, headers ...string) (status int, location string) {
	h.t.Helper()
	ctx := requestCtx("GET", "x", target)
	for i := 0; i+1 < len(headers); i += 2 {
		ctx.Request.Header.Set(headers[i], headers[i+1])
	}
	h.r.handle(ctx)
	return ctx.Response.StatusCode(), string(ctx.Response.Header.Peek("Location"))
}

func TestRulesChooseTheTarget(t *testing.T) {
	h := newHarnessWith(t, Options{CountryHeader: "X-Country", ClientAddressHeader: "X-Real-IP", TrustedProxies: trusted(t, "0.0.0.0")})
	h.add(link("ns", "app", "app", "https://example.com/", appLink))
	for _, c := range []struct {
		name, target string
		headers      []string
		want         string
	}{
		{"iPhone", "/ns/app", []string{"User-Agent", uaIPhone}, "https://apps.apple.com/app/x"},
		{"Android", "/ns/app", []string{"User-Agent", uaAndroid}, "https://play.google.com/store/apps/details?id=x"},
		{"German", "/ns/app", []string{"User-Agent", uaDesktop, "Accept-Language", "de-DE,de;q=0.9,en;q=0.5"}, "https://example.com/de/"},
		{"German iPhone: the first rule wins", "/ns/app", []string{"User-Agent", uaIPhone, "Accept-Language", "de"}, "https://apps.apple.com/app/x"},
		{"beta", "/ns/app?beta=1", []string{"User-Agent", uaDesktop}, "https://beta.example.com/"},
		{"beta=2 is not beta", "/ns/app?beta=2", []string{"User-Agent", uaDesktop, "X-Real-IP", "10.0.0.1"}, ""},
		{"France by the operator's header", "/ns/app", []string{"User-Agent", uaDesktop, "X-Country", "fr"}, "https://example.com/fr-campaign"},
	} {
		status, loc := h.click(c.target, c.headers...)
		if status != 302 {
			t.Errorf("%s: status %d", c.name, status)
		}
		if c.want == "" {
			if loc != "https://example.com/" && loc != "https://example.com/b" {
				t.Errorf("%s: Location %q, want the split's", c.name, loc)
			}
			continue
		}
		if loc != c.want {
			t.Errorf("%s: Location %q, want %q", c.name, loc, c.want)
		}
	}
	// A redirect that depends on who asks is never cached by others.
	ctx := requestCtx("GET", "x", "/ns/app")
	h.r.handle(ctx)
	if cc := string(ctx.Response.Header.Peek("Cache-Control")); cc != ccNoCache {
		t.Errorf("Cache-Control %q, want %q", cc, ccNoCache)
	}
}

// Without --country-header no header tells the country, whatever the
// client sends.
func TestCountryNeedsTheOperatorsHeader(t *testing.T) {
	h := newHarness(t)
	h.add(link("ns", "app", "app", "https://example.com/", appLink, func(l *linkv1.ShortLink) { l.Spec.Variants = nil }))
	if _, loc := h.click("/ns/app", "User-Agent", uaDesktop, "X-Country", "FR", "CF-IPCountry", "FR"); loc != "https://example.com/" {
		t.Errorf("Location %q, want spec.url", loc)
	}
}

// The split: about 70/30 over distinct clients, the same variant for a
// client on every click, counted per variant in the metric.
func TestSplitIsStickyAndWeighted(t *testing.T) {
	// requestCtx's peer is 0.0.0.0 (no connection): the proxy here.
	h := newHarnessWith(t, Options{ClientAddressHeader: "X-Real-IP", TrustedProxies: trusted(t, "0.0.0.0")})
	h.add(link("ns", "app", "app", "https://example.com/", appLink))
	const clients = 4000
	b := 0
	for i := range clients {
		ip := fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)
		_, first := h.click("/ns/app", "User-Agent", uaDesktop, "X-Real-IP", ip)
		if _, again := h.click("/ns/app", "User-Agent", uaDesktop, "X-Real-IP", ip); again != first {
			t.Fatalf("client %s: %q, then %q", ip, first, again)
		}
		if first == "https://example.com/b" {
			b++
		}
	}
	// 30% of 4000: the standard deviation is 29 clicks; 5 of them is a
	// bound a correct split misses once in millions of runs.
	if share := float64(b) / clients; math.Abs(share-0.30) > 5*math.Sqrt(0.3*0.7/clients) {
		t.Errorf("variant b took %.3f of the clients, want 0.30", share)
	}
	if got := counterValue(t, h.r.metrics.split[1]); got != 2*float64(b) {
		t.Errorf("split metric of variant 0: %v, want %d", got, 2*b)
	}
	if got := counterValue(t, h.r.metrics.split[0]); got != 2*float64(clients-b) {
		t.Errorf("split metric of the default: %v, want %d", got, 2*(clients-b))
	}
}

// The redirector splits by the buckets the controller assigned in
// status.splitBuckets (rules.Assign), and ends the split at
// spec.variantsEnd.at: a link whose assignment changes to the other half
// sends every client to the other destination; after the end all go to
// the winner, counted in no variant.
func TestSplitFollowsStatusBuckets(t *testing.T) {
	h := newHarnessWith(t, Options{ClientAddressHeader: "X-Real-IP", TrustedProxies: trusted(t, "0.0.0.0")})
	assigned := func(buckets string) func(l *linkv1.ShortLink) {
		return func(l *linkv1.ShortLink) {
			abLink(l)
			l.Status.SplitBuckets = []linkv1.SplitBuckets{{URL: "https://example.com/b", Buckets: buckets}}
		}
	}
	low := h.add(link("ns", "ab", "ab", "https://example.com/a", assigned("0-49")))
	const clients = 200
	var first [clients]string
	for i := range clients {
		_, first[i] = h.click("/ns/ab", "User-Agent", uaDesktop, "X-Real-IP", fmt.Sprintf("198.51.100.%d", i))
	}
	high := link("ns", "ab", "ab", "https://example.com/a", assigned("50-99"), func(l *linkv1.ShortLink) { l.ResourceVersion = "2" })
	h.update(low, high)
	for i := range clients {
		if _, loc := h.click("/ns/ab", "User-Agent", uaDesktop, "X-Real-IP", fmt.Sprintf("198.51.100.%d", i)); loc == first[i] {
			t.Fatalf("client %d: %s by both assignments", i, loc)
		}
	}
	h.add(link("ns", "ended", "ended", "https://example.com/a", abLink, func(l *linkv1.ShortLink) {
		l.Spec.VariantsEnd = &linkv1.VariantsEnd{At: metav1.NewTime(epoch), URL: "https://example.com/b"}
	}))
	before := counterValue(t, h.r.metrics.split[1]) + counterValue(t, h.r.metrics.split[0])
	for i := range 20 {
		if _, loc := h.click("/ns/ended", "User-Agent", uaDesktop, "X-Real-IP", fmt.Sprintf("192.0.2.%d", i)); loc != "https://example.com/b" {
			t.Fatalf("after the end: %s, want the winner", loc)
		}
	}
	if after := counterValue(t, h.r.metrics.split[1]) + counterValue(t, h.r.metrics.split[0]); after != before {
		t.Errorf("clicks after the end counted in the split: %v more", after-before)
	}
}

// A finished link sends its clicks to spec.expiredURL, ahead of the
// namespace's gone fallback; its preview names it; after deletion the
// tombstone keeps sending them there.
func TestExpiredURL(t *testing.T) {
	h := newHarnessWith(t, Options{Fallbacks: Fallbacks{"", "", "https://example.com/gone"}})
	l := h.add(link("ns", "old", "old", "https://example.com/sale", func(l *linkv1.ShortLink) {
		l.Spec.ExpiredURL = "https://example.com/sale-is-over"
		l.Spec.ExpiresAt = &metav1.Time{Time: epoch.Add(time.Minute)}
	}))
	if _, loc := h.click("/ns/old"); loc != "https://example.com/sale" {
		t.Fatalf("before expiry: Location %q", loc)
	}
	h.clock.Step(2 * time.Minute)
	status, loc := h.click("/ns/old")
	if status != 302 || loc != "https://example.com/sale-is-over" {
		t.Errorf("expired: %d %q, want 302 to the expiredURL", status, loc)
	}
	ctx := requestCtx("GET", "x", "/ns/old+")
	h.r.handle(ctx)
	if body := string(ctx.Response.Body()); !strings.Contains(body, "https://example.com/sale-is-over") || strings.Contains(body, "https://example.com/sale\"") {
		t.Errorf("preview of the finished link: %s", body)
	}
	h.del(l)
	if status, loc := h.click("/ns/old"); status != 302 || loc != "https://example.com/sale-is-over" {
		t.Errorf("deleted: %d %q, want 302 to the expiredURL", status, loc)
	}
	// Without one, the namespace's fallback as before.
	h.add(link("ns", "plain", "plain", "https://example.com/p", decided(linkv1.ReasonExpired)))
	if _, loc := h.click("/ns/plain"); loc != "https://example.com/gone" {
		t.Errorf("finished plain link: Location %q, want the gone fallback", loc)
	}
}

// spec.forwardPath: what follows the code goes to the target's path, from
// the raw request path, safely; /qr and + keep their meaning; a link
// without forwardPath answers 404 for a longer path.
func TestForwardPath(t *testing.T) {
	h := newHarness(t)
	h.addNS(nsWith("ns", map[string]string{DomainAnnotation: "go.example.com"}))
	h.add(link("ns", "docs", "docs", "https://docs.example.com/v2?lang=en", func(l *linkv1.ShortLink) { l.Spec.ForwardPath = true }))
	h.add(link("ns", "q", "q", "https://docs.example.com/q", func(l *linkv1.ShortLink) {
		l.Spec.ForwardPath, l.Spec.ForwardQuery = true, true
	}))
	h.add(link("ns", "plain", "plain", "https://example.com/p"))
	h.add(link("ns", "utm", "utm", "https://example.com/p?utm_source=link&a=1", func(l *linkv1.ShortLink) { l.Spec.ForwardQuery = true }))
	for _, c := range []struct {
		host, target string
		status       int
		want         string
	}{
		{"x", "/ns/docs", 302, "https://docs.example.com/v2?lang=en"},
		{"x", "/ns/docs/guide/intro", 302, "https://docs.example.com/v2/guide/intro?lang=en"},
		{"x", "/ns/docs/guide/", 302, "https://docs.example.com/v2/guide/?lang=en"},
		{"x", "/ns/docs/a%20b/c%2Fd", 302, "https://docs.example.com/v2/a%20b/c/d?lang=en"},
		{"x", "/ns/docs/../../../etc/passwd", 302, "https://docs.example.com/v2/etc/passwd?lang=en"},
		{"x", "/ns/docs/%2e%2e/%2E%2E/x", 302, "https://docs.example.com/v2/x?lang=en"},
		{"x", "/ns/docs/c++", 302, "https://docs.example.com/v2/c++?lang=en"},
		{"x", "/ns/docs/rest+", 302, "https://docs.example.com/v2/rest+?lang=en"},
		{"x", "/ns/q/a?x=1", 302, "https://docs.example.com/q/a?x=1"},
		{"go.example.com", "/docs/guide", 302, "https://docs.example.com/v2/guide?lang=en"},
		{"x", "http://x/ns/docs/abs?y=1", 302, "https://docs.example.com/v2/abs?lang=en"}, // absolute form
		{"x", "/ns/docs/%zz/%", 400, ""},                                                  // a broken escape: not a URL
		{"x", "/ns/docs/" + strings.Repeat("a/", 2000), 302, "https://docs.example.com/v2/" + strings.Repeat("a/", 2000) + "?lang=en"},
		{"x", "/ns/docs/\\evil.example/x", 302, "https://docs.example.com/v2/evil.example/x?lang=en"},
		// Every spelling of a dot segment that lenient servers honour (issue 53).
		{"x", "/ns/docs/..;/admin", 302, "https://docs.example.com/v2/admin?lang=en"},
		{"x", "/ns/docs/%252e%252e/%c0%ae%c0%ae/%ef%bc%8e%ef%bc%8e/%25u002e%25u002e/x", 302, "https://docs.example.com/v2/x?lang=en"},
		{"x", "/ns/docs/a%252f..%252f..%252fadmin", 302, "https://docs.example.com/v2/admin?lang=en"},
		{"x", "/ns/docs/%252525252e%252525252e/x", 400, ""}, // encoded five times over
		{"x", "/ns/q/a?x=1", 302, "https://docs.example.com/q/a?x=1"},
		{"x", "/ns/utm?utm_source=newsletter&b=2", 302, "https://example.com/p?a=1&utm_source=newsletter&b=2"},
		{"x", "/ns/plain/extra", 404, ""},
		{"x", "/ns/missing/extra", 404, ""},
		{"x", "/ns%2Fdocs/x", 404, ""},
		{"x", "/ns/docs/qr", 404, ""}, // the QR code (none without a public base URL), not a forwarded "qr"
		{"x", "/ns/docs+", 200, ""},   // the preview
	} {
		ctx := requestCtx("GET", c.host, c.target)
		h.r.handle(ctx)
		status, loc := ctx.Response.StatusCode(), string(ctx.Response.Header.Peek("Location"))
		if status != c.status || loc != c.want {
			t.Errorf("%s %s: %d %q, want %d %q", c.host, c.target, status, loc, c.status, c.want)
		}
		if body := string(ctx.Response.Body()); c.status == 400 && strings.Contains(c.target, "%2525") && !strings.Contains(body, "percent-encoded more than 4 times") {
			t.Errorf("%s: body %q does not say why", c.target, body)
		}
	}
}

// The preview page says where the clicks go, in words.
func TestPreviewDescribesRouting(t *testing.T) {
	h := newHarness(t)
	h.add(link("ns", "app", "app", "https://example.com/", appLink))
	ctx := requestCtx("GET", "x", "/ns/app+")
	h.r.handle(ctx)
	body := string(ctx.Response.Body())
	for _, want := range []string{"Where its clicks go", "apps.apple.com", "30% to https://example.com/b", "70% to https://example.com/"} {
		if !strings.Contains(body, want) {
			t.Errorf("preview lacks %q:\n%s", want, body)
		}
	}
}

// Routed links keep the hit path free of allocations: rules, the split
// and counting per variant, with and without a device class remembered.
func TestRoutedClicksDoNotAllocate(t *testing.T) {
	h := newHarnessWith(t, Options{Uses: uses.New(uses.Options{}), CountryHeader: "X-Country"})
	h.add(link("ns", "app", "app", "https://example.com/", appLink))
	h.add(link("ns", "lim", "lim", "https://example.com/", appLink, func(l *linkv1.ShortLink) {
		l.Spec.ExpiredURL = "https://example.com/over"
	}))
	h.r.accessLog = nil
	for _, c := range []struct{ target, ua, lang string }{
		{"/ns/app", uaIPhone, ""},
		{"/ns/app", uaDesktop, "de"},
		{"/ns/app?beta=1", uaDesktop, "en"},
		{"/ns/app?utm_source=x", uaDesktop, "en-US,en;q=0.9"},
		{"/ns/lim", uaAndroid, "fr"},
	} {
		ctx := requestCtx("GET", "x", c.target)
		ctx.Request.Header.SetUserAgent(c.ua)
		ctx.Request.Header.Set("Accept-Language", c.lang)
		ctx.Request.Header.Set("X-Country", "DE")
		if n := testing.AllocsPerRun(1000, func() {
			ctx.Response.Reset()
			h.r.handle(ctx)
		}); n != 0 {
			t.Errorf("GET %s (%s) allocates %v times", c.target, c.lang, n)
		}
		if ctx.Response.StatusCode() != 302 {
			t.Errorf("GET %s: %d", c.target, ctx.Response.StatusCode())
		}
	}
}

// The agent memo answers as agent.Classify and rules.AgentSum do, for the
// agents it remembers and for those whose slot another agent took, and
// after its slots were written in halves (two writers at once).
func TestAgentMemo(t *testing.T) {
	m := newAgentMemo()
	agents := []string{uaIPhone, uaAndroid, uaDesktop, "curl/8.5.0", "", "x"}
	check := func() {
		t.Helper()
		for _, ua := range agents {
			d, sum := m.lookup([]byte(ua))
			if d != classifyDirect(ua) || sum != rules.AgentSum([]byte(ua)) {
				t.Errorf("%q: %v %#x, want %v %#x", ua, d, sum, classifyDirect(ua), rules.AgentSum([]byte(ua)))
			}
		}
	}
	for range 3 {
		check()
	}
	// Every slot's first word from one agent, its second from another.
	for i := range m.slots {
		m.slots[i][1].Store(m.slots[(i+1)%len(m.slots)][1].Load() ^ 1<<40)
	}
	check()
}

func classifyDirect(ua string) agent.Agent { return agent.Classify([]byte(ua)) }

// A connection remembers the agent of its last request (agentOf): each
// request of a keep-alive connection reads as its own agent does, whatever
// the connection's earlier requests sent, a previewer's or a person's, an
// empty one or one too long to remember.
func TestAgentOfConnection(t *testing.T) {
	r := &Redirector{agents: newAgentMemo()}
	server, client := net.Pipe()
	defer func() { _ = server.Close(); _ = client.Close() }()
	tc := newTimedConn(server, nil)
	long := strings.Repeat("Mozilla/5.0 ", connAgentMax/10)
	var ctx fasthttp.RequestCtx
	ctx.Init2(tc, nil, false)
	for _, ua := range []string{uaDesktop, uaDesktop, uaPreviewer, uaDesktop, "", uaIPhone,
		long, long, uaAndroid, uaAndroid[:len(uaAndroid)-1], "curl/8.5.0"} {
		ctx.Request.Header.SetUserAgent(ua)
		a, sum := r.agentOf(&ctx, ctx.Request.Header.UserAgent())
		if a != classifyDirect(ua) || sum != rules.AgentSum([]byte(ua)) {
			t.Errorf("%q: %v %#x, want %v %#x", ua, a, sum, classifyDirect(ua), rules.AgentSum([]byte(ua)))
		}
	}
	if got := string(tc.agent.ua); got != "curl/8.5.0" {
		t.Errorf("the connection remembers %q, want the last agent", got)
	}
}
