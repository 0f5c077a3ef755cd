package redirect

import (
	"context"
	"errors"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// CacheOptions is the manager cache configuration of the redirector: every
// informer strips its objects with Transform. The cache holds Namespaces
// only; ShortLinks have informers of their own (newLinkInformer). It needs
// no API server until the informers are requested, so the process starts
// while the API server is unreachable.
func CacheOptions() cache.Options {
	return cache.Options{DefaultTransform: Transform}
}

// SetupWithManager feeds the redirector from informers on ShortLinks (one
// per namespace of Options.Namespaces, or one on all) and on Namespaces (the
// manager's cache), and sweeps tombstones while the manager runs. The
// informers start once the manager has started and retry while the API
// server cannot be reached, so the process starts (and answers /healthz)
// without one.
func (r *Redirector) SetupWithManager(mgr manager.Manager) error {
	c, err := linkRESTClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return err
	}
	namespaces := slices.Compact(slices.Sorted(slices.Values(r.opts.Namespaces)))
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	ir := &indexRunnable{r: r, cache: mgr.GetCache()}
	for _, ns := range namespaces {
		inf, err := newLinkInformer(c, ns)
		if err != nil {
			return err
		}
		ir.links = append(ir.links, inf)
	}
	r.waitForLinkInformers(len(ir.links))
	return mgr.Add(ir)
}

type indexRunnable struct {
	r     *Redirector
	cache cache.Cache
	links []toolscache.SharedIndexInformer
}

// NeedLeaderElection is false: every replica keeps its own index.
func (*indexRunnable) NeedLeaderElection() bool { return false }

func (ir *indexRunnable) Start(ctx context.Context) error {
	r := ir.r
	// The informers stop when Start returns, also on an error.
	ctx, cancel := context.WithCancel(ctx)
	var running sync.WaitGroup
	defer func() { cancel(); running.Wait() }()
	for _, inf := range ir.links {
		if err := r.WatchShortLinks(inf); err != nil {
			return err
		}
		running.Go(func() { inf.RunWithContext(ctx) })
	}
	var inf cache.Informer
	err := retry(ctx, r.log, "get Namespace informer", func() error {
		var err error
		inf, err = ir.cache.GetInformer(ctx, &corev1.Namespace{}, cache.BlockUntilSynced(false))
		return err
	})
	if err == nil {
		err = r.WatchNamespaces(inf)
	}
	if errors.Is(err, errStopped) {
		return nil
	}
	if err != nil {
		return err
	}
	r.log.Info("watching ShortLinks and Namespaces")
	r.RunTombstoneSweeper(ctx, r.sweepInterval())
	return nil
}
