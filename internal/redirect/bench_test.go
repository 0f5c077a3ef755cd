package redirect

import (
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
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
