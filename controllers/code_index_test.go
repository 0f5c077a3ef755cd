package controllers

import (
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/compactlink"
)

// indexedReconciler is a reconciler whose code index is one client-go
// indexer (what a cluster-wide cache's ShortLink informer keeps), holding links.
func indexedReconciler(t *testing.T, codes func(canonical, namespace string) []string, links ...*linkv1.ShortLink) (*ShortLinkReconciler, toolscache.Indexer) {
	t.Helper()
	r := &ShortLinkReconciler{Codes: codes, Index: NewCodeIndex()}
	indexer := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{codeIndexName: r.indexBuckets})
	r.Index.indexers = append(r.Index.indexers, indexer)
	for _, l := range links {
		addCached(t, indexer, l)
	}
	return r, indexer
}

// addCached adds a link to indexer as the manager's cache keeps it
// (ManagerCacheTransform: a compact link).
func addCached(t testing.TB, indexer toolscache.Indexer, l *linkv1.ShortLink) {
	t.Helper()
	packed, err := ManagerCacheTransform()(l.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	if err := indexer.Add(packed); err != nil {
		t.Fatal(err)
	}
}

func indexLink(ns, name, specCode, statusCode string) *linkv1.ShortLink {
	return &linkv1.ShortLink{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       linkv1.ShortLinkSpec{Code: specCode},
		Status:     linkv1.ShortLinkStatus{Code: statusCode},
	}
}

func names(links []any) []string {
	out := make([]string, 0, len(links))
	for _, obj := range links {
		l, _ := compactlink.SummaryOf(obj)
		out = append(out, l.Namespace+"/"+l.Name)
	}
	slices.Sort(out)
	return out
}

// sameBucket finds a code other than code filed in the same bucket of ns.
func sameBucket(t *testing.T, ns, code string) string {
	t.Helper()
	for i := 0; i < 100*codeBuckets; i++ {
		other := fmt.Sprintf("c%d", i)
		if other != code && codeBucket(ns, other) == codeBucket(ns, code) {
			return other
		}
	}
	t.Fatal("no code shares the bucket")
	return ""
}

func TestCachedWithCode(t *testing.T) {
	// A code and another in its bucket; the same code in another namespace
	// whose bucket holds it too.
	const ns, code = "team-a", "abc"
	neighbour := sameBucket(t, ns, code)
	other := "team-b"
	for i := 0; codeBucket(other, code) != codeBucket(ns, code); i++ {
		other = fmt.Sprintf("team-b%d", i)
	}
	conflicted := indexLink(ns, "waiting", "", "")
	conflicted.Status.CanonicalURL, conflicted.Status.State = "https://example.com/", linkv1.StateConflict
	waitsFor := func(canonical, namespace string) []string { return []string{"x1", code, "x3"} }

	r, indexer := indexedReconciler(t, waitsFor,
		indexLink(ns, "holder", "", code),
		indexLink(ns, "declarer", code, "elsewhere"),
		indexLink(ns, "neighbour", "", neighbour),
		indexLink(other, "same-code-other-namespace", "", code),
		conflicted,
	)

	got, err := r.cachedWithCode(ns, code)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{ns + "/declarer", ns + "/holder", ns + "/waiting"}
	if !slices.Equal(names(got), want) {
		t.Fatalf("cachedWithCode(%s, %s) = %v, want %v", ns, code, names(got), want)
	}

	// A link that lets go of the code leaves the lookup.
	addCached(t, indexer, indexLink(ns, "holder", "", "moved")) // an update: the same key
	if got, _ = r.cachedWithCode(ns, code); slices.Contains(names(got), ns+"/holder") {
		t.Fatalf("after the update, cachedWithCode still has the old holder: %v", names(got))
	}
	if got, _ = r.cachedWithCode(ns, "moved"); !slices.Equal(names(got), []string{ns + "/holder"}) {
		t.Fatalf("cachedWithCode(moved) = %v", names(got))
	}
}

// A shard's cache has an informer per namespace: a lookup reads the bucket
// of every one and keeps the links of its namespace.
func TestCachedWithCodeAcrossInformers(t *testing.T) {
	const a, code = "shard-a", "abc"
	b := "shard-b"
	for i := 0; codeBucket(b, code) != codeBucket(a, code); i++ {
		b = fmt.Sprintf("shard-b%d", i)
	}
	r, _ := indexedReconciler(t, nil, indexLink(a, "holder", "", code), indexLink(a, "neighbour", "", sameBucket(t, a, code)))
	second := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{codeIndexName: r.indexBuckets})
	r.Index.indexers = append(r.Index.indexers, second)
	addCached(t, second, indexLink(b, "holder", "", code))
	for _, ns := range []string{a, b} {
		got, err := r.cachedWithCode(ns, code)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{ns + "/holder"}; !slices.Equal(names(got), want) {
			t.Fatalf("cachedWithCode(%s, %s) = %v, want %v", ns, code, names(got), want)
		}
	}
}

// The index keeps a set per bucket, not per code: that is its memory bound.
func TestCodeIndexSharesSets(t *testing.T) {
	var links []*linkv1.ShortLink
	const n = 20000
	for i := 0; i < n; i++ {
		links = append(links, indexLink("ns", fmt.Sprintf("l%d", i), "", fmt.Sprintf("code%d", i)))
	}
	_, indexer := indexedReconciler(t, nil, links...)
	values := indexer.ListIndexFuncValues(codeIndexName)
	if len(values) >= n/2 {
		t.Fatalf("%d index values (sets) for %d links with distinct codes, want one per bucket (%d)", len(values), n, codeBuckets)
	}
	// FNV spreads codes evenly: no bucket holds more than four times its share.
	for _, v := range values {
		keys, _ := indexer.IndexKeys(codeIndexName, v)
		if len(keys) > 4*n/codeBuckets {
			t.Fatalf("bucket %s holds %d links, share %d", v, len(keys), n/codeBuckets)
		}
	}
}

// addCodeIndex refuses an index it cannot read: none of this cache's
// informers, or one of another cache (without this index function).
func TestCodeIndexCheckIndexed(t *testing.T) {
	if err := NewCodeIndex().checkIndexed(); err == nil {
		t.Fatal("an index without informers passed")
	}
	r, _ := indexedReconciler(t, nil)
	if err := r.Index.checkIndexed(); err != nil {
		t.Fatalf("an index of indexed informers failed: %v", err)
	}
	r.Index.indexers = append(r.Index.indexers, toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{}))
	if err := r.Index.checkIndexed(); err == nil {
		t.Fatal("an index holding an informer without the code index passed")
	}
}

func TestCodeIndexWithoutInformers(t *testing.T) {
	r := &ShortLinkReconciler{Index: NewCodeIndex()}
	if _, err := r.cachedWithCode("ns", "abc"); err == nil {
		t.Fatal("a lookup in an index without informers succeeded")
	}
}

// rivalsHandler reads the summaries of compact links (as the manager's
// cache keeps them): a change of a link's codes wakes the links that hold
// them; a change of its uses wakes none.
func TestRivalsHandlerOnCompactLinks(t *testing.T) {
	const ns = "team-a"
	r, _ := indexedReconciler(t, nil, indexLink(ns, "holder", "", "abc"), indexLink(ns, "other", "", "xyz"))
	h := &rivalsHandler{r: r}
	cached := func(l *linkv1.ShortLink) client.Object {
		t.Helper()
		c, err := ManagerCacheTransform()(l.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		return c.(client.Object)
	}
	before := indexLink(ns, "mover", "", "old")
	for _, tc := range []struct {
		name   string
		change func(*linkv1.ShortLink)
		want   []string
	}{
		{"uses only", func(l *linkv1.ShortLink) { l.Status.Uses = 7 }, nil},
		{"asks for a held code", func(l *linkv1.ShortLink) { l.Spec.Code, l.Generation = "abc", 2 }, []string{"holder"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			after := before.DeepCopy()
			tc.change(after)
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			h.Update(t.Context(), event.UpdateEvent{ObjectOld: cached(before), ObjectNew: cached(after)}, q)
			var got []string
			for q.Len() > 0 {
				req, _ := q.Get()
				got = append(got, req.Name)
				q.Done(req)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("queued %v, want %v", got, tc.want)
			}
		})
	}
}
