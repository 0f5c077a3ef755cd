package redirect

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// benchWriter is a ResponseWriter that keeps nothing, so the benchmarks
// measure the handler, not a recorder.
type benchWriter struct {
	h      http.Header
	status int
}

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *benchWriter) WriteHeader(s int)           { w.status = s }

const benchLinks = 100_000

func benchRedirector(b *testing.B) (*Redirector, []*http.Request) {
	b.Helper()
	r := New(Options{TombstoneTTL: time.Hour, Registry: prometheus.NewRegistry()})
	links, nss := &fakeInformer{synced: true}, &fakeInformer{synced: true}
	if err := r.WatchShortLinks(links); err != nil {
		b.Fatal(err)
	}
	if err := r.WatchNamespaces(nss); err != nil {
		b.Fatal(err)
	}
	created := time.Now().Add(-time.Hour)
	reqs := make([]*http.Request, 4096)
	for i := range benchLinks {
		links.h.OnAdd(transformed(syntheticLink(i, 100, created)), true)
	}
	for i := range reqs {
		n := i * (benchLinks / len(reqs))
		reqs[i] = httptest.NewRequest("GET", "/"+SyntheticNamespace(n%100)+"/"+SyntheticCode(n), nil)
	}
	return r, reqs
}

// BenchmarkServeHTTP is the handler's share of a request: routing, index
// lookup, expiry check, headers, metrics (net/http's own work excluded).
func BenchmarkServeHTTP(b *testing.B) {
	r, reqs := benchRedirector(b)
	w := &benchWriter{h: http.Header{}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		clear(w.h)
		r.ServeHTTP(w, reqs[i%len(reqs)])
		if w.status != http.StatusFound {
			b.Fatalf("status %d", w.status)
		}
	}
}

// BenchmarkLookupParallel reads the index from every P at once.
func BenchmarkLookupParallel(b *testing.B) {
	r, reqs := benchRedirector(b)
	keys := make([][2]string, len(reqs))
	for i, req := range reqs {
		ns, code, _ := r.route(req)
		keys[i] = [2]string{ns, code}
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
