// Package listwatch chooses how the manager's and the redirector's informers
// sync: a paginated LIST, then a WATCH.
//
// client-go turns on streaming lists (WatchListClient) by default since 1.35:
// the initial state arrives as one watch event per object. For ShortLinks
// that costs more than a LIST on both sides. Measured by hack/bench-scale
// with 30,000 links, the redirector's initial sync took 3.8 s with
// WatchList (3.5 CPU-seconds in the redirector, 2.9 in kube-apiserver) and
// 2.7 s with a LIST (1.4 and 1.6): each event is framed, decoded and sniffed
// for its kind on its own, where a list is one decode.
//
// The reflector's first LIST asks for resourceVersion "0", which the API
// server answers whole from its watch cache, however many objects there
// are: one response body of hundreds of megabytes at 100,000 links, read
// whole by the client before it is decoded. The first LIST is therefore made
// a consistent one (resourceVersion ""), which the API server pages (500
// objects a page, client-go's default) and, since Kubernetes 1.34
// (ListFromCacheSnapshot), serves from its watch cache too.
package listwatch

import (
	"context"
	"os"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
)

// WatchListEnv is client-go's switch of streaming lists. Set to "true", it
// gives the informers back client-go's default (hack/bench-scale measures
// both ways in one run).
const WatchListEnv = "KUBE_FEATURE_WatchListClient"

// NewInformer is a controller-runtime cache.Options.NewInformer: a shared
// index informer whose reflector lists, then watches (unless WatchListEnv
// is "true").
func NewInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	if streaming, _ := strconv.ParseBool(os.Getenv(WatchListEnv)); !streaming {
		lw = ListThenWatch(lw)
	}
	return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
}

// ListThenWatch returns lw marked as not supporting watch-list semantics, the
// switch client-go's reflector reads (watchlist.DoesClientNotSupportWatchListSemantics)
// before it streams the initial list, and with its first list paged.
func ListThenWatch(lw toolscache.ListerWatcher) toolscache.ListerWatcher {
	l, ok := lw.(*toolscache.ListWatch)
	if !ok {
		ctxLW := toolscache.ToListerWatcherWithContext(lw)
		l = &toolscache.ListWatch{ListWithContextFunc: ctxLW.ListWithContext, WatchFuncWithContext: ctxLW.WatchWithContext}
	}
	return listThenWatch{l}
}

type listThenWatch struct{ *toolscache.ListWatch }

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

func (l listThenWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	return l.ListWatch.ListWithContext(ctx, paged(opts))
}

func (l listThenWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), opts)
}

// paged turns the reflector's first list (resourceVersion "0", which the API
// server never pages) into a consistent one, which it pages when the
// reflector's pager sets a limit. Relists name the version they last saw and
// are left alone.
func paged(opts metav1.ListOptions) metav1.ListOptions {
	if opts.ResourceVersion == "0" && opts.Limit > 0 && opts.Continue == "" {
		opts.ResourceVersion, opts.ResourceVersionMatch = "", ""
	}
	return opts
}
