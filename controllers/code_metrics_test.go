package controllers

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// BenchmarkCodeGauges is one scrape of the per-namespace code gauges over
// 100,000 cached links (compact, as the manager's cache keeps them) in 100
// namespaces, a tenth of them shared by two.
func BenchmarkCodeGauges(b *testing.B) {
	r := &ShortLinkReconciler{Index: NewCodeIndex()}
	indexer := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{codeIndexName: r.indexBuckets})
	r.Index.indexers = append(r.Index.indexers, indexer)
	for i := range 100_000 {
		code := fmt.Sprintf("code%06d", i)
		if i%10 == 1 {
			code = fmt.Sprintf("code%06d", i-1) // shares the code of the link before it
		}
		l := &linkv1.ShortLink{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%02d", i%100), Name: fmt.Sprintf("l%d", i), Generation: 1},
			Spec:       linkv1.ShortLinkSpec{URL: "https://example.com/"},
			Status:     linkv1.ShortLinkStatus{Code: code, ConfirmedGeneration: 1, CanonicalURL: "https://example.com/"},
		}
		if i%10 == 1 {
			l.Namespace = fmt.Sprintf("ns-%02d", (i-1)%100)
		}
		addCached(b, indexer, l)
	}
	g := newCodeGauges(r)
	b.ReportAllocs()
	for b.Loop() {
		counts, err := g.count()
		if err != nil {
			b.Fatal(err)
		}
		held, shared := 0, 0
		for _, c := range counts {
			held, shared = held+c.held, shared+c.shared
		}
		if held != 90_000 || shared != 20_000 {
			b.Fatalf("held %d, shared %d; want 90000 and 20000", held, shared)
		}
	}
}
