package controllers

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/compactlink"
)

// codeIndexName is the ShortLink informers' index of the codes a link holds
// or declares (status.code, spec.code) and, while it is in CodeConflict, the
// codes it waits for. Finding the rivals of a code is a lookup, not a list
// of the namespace.
const codeIndexName = "linkforge.io/code-bucket"

// codeBuckets is how many values the code index files links under: a code
// is filed under a hash of its namespace and itself, not under itself.
// client-go keeps a set per index value, and a set of one link costs about
// 200 bytes (a map header and a group of eight slots): 20 MB at 100,000
// links, for codes that are nearly all distinct. In 2,048 buckets a link
// costs a slot of a shared set: the index held 74 bytes a link at 10,000
// links and 52 at 100,000 (126 and 58 in 4,096 buckets, whose sets were
// mostly empty slots below 30,000 links), and a lookup reads the bucket's
// links, about 50 at 100,000 links and 500 at a million, and keeps those
// that do have the code.
const codeBuckets = 2048

// bucketNames are the index values, made once so that indexing allocates none.
var bucketNames = func() []string {
	names := make([]string, codeBuckets)
	for i := range names {
		names[i] = strconv.Itoa(i)
	}
	return names
}()

// codeBucket is the index value of code in namespace: FNV-1a of
// "<namespace>/<code>", without building that string.
func codeBucket(namespace, code string) string {
	const offset, prime = 2166136261, 16777619
	h := uint32(offset)
	for i := 0; i < len(namespace); i++ {
		h = (h ^ uint32(namespace[i])) * prime
	}
	h = (h ^ '/') * prime
	for i := 0; i < len(code); i++ {
		h = (h ^ uint32(code[i])) * prime
	}
	return bucketNames[h%codeBuckets]
}

// CodeIndex reads the code index of one manager's ShortLink informers: one
// for the cluster, or one per namespace of a shard. controller-runtime's
// cache List would copy every link of a bucket into a list, and a shard's
// per-namespace informers are not reachable through the cache at all, so
// the index records each informer's indexer as the cache creates it: build
// the cache with ManagerCacheOptions(namespaces, index) and give the same
// index to the ShortLinkReconciler (one index per cache).
type CodeIndex struct {
	mu       sync.RWMutex
	indexers []toolscache.Indexer
}

// NewCodeIndex returns an index with no informers yet.
func NewCodeIndex() *CodeIndex { return &CodeIndex{} }

// NewInformer is the cache's informer constructor (client-go's), recording
// the indexer of every ShortLink informer.
func (c *CodeIndex) NewInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	informer := toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
	if _, ok := obj.(*linkv1.ShortLink); ok {
		c.mu.Lock()
		c.indexers = append(c.indexers, informer.GetIndexer())
		c.mu.Unlock()
	}
	return informer
}

// errNoCodeIndex: the cache was not built with this index's NewInformer.
var errNoCodeIndex = errors.New("the code index has no ShortLink informer: build the manager's cache with ManagerCacheOptions(namespaces, index) and give the reconciler the same index")

// bucket returns the cached links filed under the bucket of namespace/code,
// from every informer: links with the code and others, of namespace and
// others. The objects are the cache's own: read only.
func (c *CodeIndex) bucket(namespace, code string) ([]any, error) {
	return c.bucketOf(codeBucket(namespace, code))
}

// bucketOf returns the cached links filed under one bucket (a value of
// bucketNames), from every informer. The objects are the cache's own: read
// only.
func (c *CodeIndex) bucketOf(value string) ([]any, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.indexers) == 0 {
		return nil, errNoCodeIndex
	}
	var out []any
	for _, indexer := range c.indexers {
		objs, err := indexer.ByIndex(codeIndexName, value)
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = objs
		} else {
			out = append(out, objs...)
		}
	}
	return out, nil
}

// addCodeIndex adds the code index to the ShortLink informers (creating
// them, so that r.Index records them).
func (r *ShortLinkReconciler) addCodeIndex(ctx context.Context, c cache.Cache) error {
	if r.Index == nil {
		return errors.New("ShortLinkReconciler.Index is nil: " + errNoCodeIndex.Error())
	}
	informer, err := c.GetInformer(ctx, &linkv1.ShortLink{}, cache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	if err := informer.AddIndexers(toolscache.Indexers{codeIndexName: r.indexBuckets}); err != nil {
		return err
	}
	return r.Index.checkIndexed()
}

// checkIndexed says whether the index has informers, all with the code
// index: an index shared with another manager's cache would hold informers
// without this reconciler's index function.
func (c *CodeIndex) checkIndexed() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.indexers) == 0 {
		return errNoCodeIndex
	}
	for _, indexer := range c.indexers {
		if _, ok := indexer.GetIndexers()[codeIndexName]; !ok {
			return errors.New("the code index holds a ShortLink informer of another cache: give each manager's cache and reconciler a CodeIndex of their own")
		}
	}
	return nil
}

// indexBuckets is the index function: the buckets of the link's codes.
func (r *ShortLinkReconciler) indexBuckets(obj any) ([]string, error) {
	s, codes, ok := r.cachedLinkCodes(obj)
	if !ok {
		return nil, fmt.Errorf("code index: %T is not a ShortLink", obj)
	}
	var buckets []string
	for code := range codes {
		if b := codeBucket(s.Namespace, code); !slices.Contains(buckets, b) {
			buckets = append(buckets, b)
		}
	}
	return buckets, nil
}

// cachedWithCode looks up, in the code index, the cached links of namespace
// that hold, declare or wait for code, as the cache keeps them (a
// compactlink.Link, or a ShortLink in a cache without the manager's
// transform): read only. Most lookups read only their summaries.
func (r *ShortLinkReconciler) cachedWithCode(namespace, code string) ([]any, error) {
	objs, err := r.Index.bucket(namespace, code)
	if err != nil {
		return nil, fmt.Errorf("looking up the links with code %s: %w", code, err)
	}
	var out []any
	for _, obj := range objs {
		s, codes, ok := r.cachedLinkCodes(obj)
		if !ok || s.Namespace != namespace {
			continue
		}
		for c := range codes {
			if c == code {
				out = append(out, obj)
				break
			}
		}
	}
	return out, nil
}

// cachedLinkCodes reads the codes of a cached link (a compactlink.Link or a
// ShortLink) from its summary; it unpacks a Link only for the codes a
// hashed link in conflict waits for. ok is false if obj is neither.
func (r *ShortLinkReconciler) cachedLinkCodes(obj any) (s compactlink.Summary, codes iter.Seq[string], ok bool) {
	if s, ok = compactlink.SummaryOf(obj); !ok {
		return s, nil, false
	}
	return s, r.linkCodes(s, func() string {
		link, _ := compactlink.Of(obj)
		return link.Status.CanonicalURL
	}), true
}

// linkCodes yields the codes a link holds or declares and, if it is a hashed
// link in conflict, the ten codes it waits for (a code may come twice):
// those of its canonical URL, which only such a link reads.
func (r *ShortLinkReconciler) linkCodes(s compactlink.Summary, canonicalURL func() string) iter.Seq[string] {
	return func(yield func(string) bool) {
		if s.SpecCode != "" && !yield(s.SpecCode) {
			return
		}
		if s.StatusCode != "" && !yield(s.StatusCode) {
			return
		}
		if s.SpecCode == "" && stateInConflict(s.State) {
			if canonical := canonicalURL(); canonical != "" {
				for _, c := range r.hashedCodes(canonical, s.Namespace) {
					if !yield(c) {
						return
					}
				}
			}
		}
	}
}
