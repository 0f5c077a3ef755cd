package redirect

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/hitpath"
	"github.com/linkforge/linkforge/internal/uses"
)

const benchLinks = 100_000

// benchRedirector serves benchLinks links over 100 namespaces and returns
// request contexts for 4096 of them, as the server would hand them over.
func benchRedirector(b *testing.B) (*Redirector, []*fasthttp.RequestCtx) {
	b.Helper()
	r := New(Options{TombstoneTTL: time.Hour, Registry: prometheus.NewRegistry()})
	links, nss := &fakeInformer{synced: true}, &fakeInformer{synced: true}
	if err := r.WatchShortLinks(links); err != nil {
		b.Fatal(err)
	}
	if err := r.WatchNamespaces(nss); err != nil {
		b.Fatal(err)
	}
	path := func(i int) (ns, code string) { return "bench-" + strconv.Itoa(i%100), "c" + strconv.Itoa(i*7919) }
	for i := range benchLinks {
		ns, code := path(i)
		links.h.OnAdd(transformed(link(ns, "link-"+strconv.Itoa(i), code, "https://www.example.com/articles/"+strconv.Itoa(i))), true)
	}
	ctxs := make([]*fasthttp.RequestCtx, 4096)
	for i := range ctxs {
		ns, code := path(i * (benchLinks / len(ctxs)))
		ctxs[i] = requestCtx("GET", "go.example.com", "/"+ns+"/"+code)
	}
	return r, ctxs
}

// requestCtx is a request as the server hands it to the handler.
func requestCtx(method, host, target string) *fasthttp.RequestCtx {
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.Header.SetMethod(method)
	ctx.Request.Header.SetHost(host)
	ctx.Request.Header.SetRequestURI(target)
	return ctx
}

// BenchmarkHandle is the handler's share of a request: routing, index
// lookup, expiry check, headers, metrics (fasthttp's own work excluded).
func BenchmarkHandle(b *testing.B) {
	r, ctxs := benchRedirector(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		ctx := ctxs[i%len(ctxs)]
		ctx.Response.Reset()
		r.handle(ctx)
		if ctx.Response.StatusCode() != 302 {
			b.Fatalf("status %d", ctx.Response.StatusCode())
		}
	}
}

// BenchmarkLookupParallel reads the index from every P at once.
func BenchmarkLookupParallel(b *testing.B) {
	r, ctxs := benchRedirector(b)
	keys := make([][2]string, len(ctxs))
	for i, ctx := range ctxs {
		rt := r.route("", string(ctx.Request.Header.RequestURI()))
		keys[i] = [2]string{rt.ns, rt.code}
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			k := keys[i%len(keys)]
			if r.Index().Lookup(k[0], k[1]) == nil {
				b.Fatal("missing")
			}
			i++
		}
	})
}

// campaignLink gives a link the routing of hack/redirector-bench's
// withRules: 8 rules (the stores for iOS and Android, German and French
// desktop pages, a beta by query, a campaign by header, a past promotion,
// bots with a referral) and a three-way split.
func campaignLink(l *linkv1.ShortLink) {
	past := metav1.NewTime(epoch.Add(-30 * 24 * time.Hour))
	older := metav1.NewTime(epoch.Add(-60 * 24 * time.Hour))
	l.Spec.Rules = []linkv1.RedirectRule{
		{URL: "https://apps.apple.com/app/id1", Devices: []linkv1.DeviceClass{linkv1.DeviceIOS}},
		{URL: "https://play.google.com/store/apps/details?id=com.example.app1", Devices: []linkv1.DeviceClass{linkv1.DeviceAndroid}},
		{URL: "https://www.example.com/de/articles/1", Languages: []string{"de"}},
		{URL: "https://www.example.com/fr/articles/1", Languages: []string{"fr"}, Devices: []linkv1.DeviceClass{linkv1.DeviceDesktop}},
		{URL: "https://beta.example.com/articles/1", QueryParams: []linkv1.QueryParamMatch{{Name: "beta", Value: ptr.To("1")}}},
		{URL: "https://www.example.com/spring/1", Headers: []linkv1.HeaderMatch{{Name: "X-Campaign", Value: "spring"}}},
		{URL: "https://www.example.com/promo/1", After: &older, Before: &past},
		{URL: "https://www.example.com/crawl/1", QueryParams: []linkv1.QueryParamMatch{{Name: "ref"}}, Devices: []linkv1.DeviceClass{linkv1.DeviceBot}},
	}
	l.Spec.Variants = []linkv1.Variant{
		{URL: "https://www.example.com/articles/2026/1/b", Weight: 30},
		{URL: "https://www.example.com/articles/2026/1/c", Weight: 30},
		{URL: "https://www.example.com/articles/2026/1/d", Weight: 20},
	}
}

// BenchmarkHandleRouted is the handler's share of a desktop browser's
// click from a newsletter (hitpath.Options.Browser's request) on a plain
// link and on one with 8 rules and 3 variants (campaignLink), uses
// counted: what routing adds to a request, the clock read included.
func BenchmarkHandleRouted(b *testing.B) {
	r := New(Options{Registry: prometheus.NewRegistry(), Uses: uses.New(uses.Options{})})
	links := &fakeInformer{synced: true}
	if err := r.WatchShortLinks(links); err != nil {
		b.Fatal(err)
	}
	if err := r.WatchNamespaces(&fakeInformer{synced: true}); err != nil {
		b.Fatal(err)
	}
	links.h.OnAdd(transformed(link("ns", "plain", "plain", "https://www.example.com/articles/2026/1")), true)
	links.h.OnAdd(transformed(link("ns", "rules", "rules", "https://www.example.com/articles/2026/1", campaignLink)), true)
	for _, code := range []string{"plain", "rules"} {
		b.Run(code, func(b *testing.B) {
			ctx := requestCtx("GET", "go.example.com", "/ns/"+code+"?"+hitpath.BrowserQuery)
			ctx.Request.Header.SetUserAgent(hitpath.BrowserUserAgent)
			ctx.Request.Header.Set("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
			ctx.Request.Header.Set("Accept-Language", hitpath.BrowserAcceptLanguage)
			ctx.Request.Header.Set("Accept-Encoding", "gzip, deflate, br")
			ctx.SetRemoteAddr(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000})
			b.ReportAllocs()
			for b.Loop() {
				ctx.Response.Reset()
				r.handle(ctx)
				if ctx.Response.StatusCode() != 302 {
					b.Fatalf("status %d", ctx.Response.StatusCode())
				}
			}
		})
	}
}
