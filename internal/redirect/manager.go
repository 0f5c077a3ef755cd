package redirect

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// CacheOptions is the manager cache configuration of the redirector: every
// informer strips its objects with Transform, and ShortLinks are watched in
// all namespaces or only the given ones (Namespaces, being cluster-scoped,
// are watched whole). It needs no API server until the informers are
// requested, so the process starts while the API server is unreachable.
func CacheOptions(namespaces []string) cache.Options {
	opts := cache.Options{DefaultTransform: Transform}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = make(map[string]cache.Config, len(namespaces))
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

// SetupWithManager feeds the redirector from the manager's cache (configure
// it with CacheByObject) and sweeps tombstones while the manager runs. The
// informers are requested once the manager has started, retrying while the
// API server cannot be reached, so the process starts (and answers
// /healthz) without one.
func (r *Redirector) SetupWithManager(mgr manager.Manager) error {
	return mgr.Add(&indexRunnable{r: r, cache: mgr.GetCache()})
}

type indexRunnable struct {
	r     *Redirector
	cache cache.Cache
}

// NeedLeaderElection is false: every replica keeps its own index.
func (*indexRunnable) NeedLeaderElection() bool { return false }

func (ir *indexRunnable) Start(ctx context.Context) error {
	r := ir.r
	watch := func(what string, obj client.Object, add func(Informer) error) error {
		var inf cache.Informer
		if err := retry(ctx, r.log, "get "+what+" informer", func() error {
			var err error
			inf, err = ir.cache.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
			return err
		}); err != nil {
			return err
		}
		return add(inf)
	}
	err := watch("ShortLink", &linkv1.ShortLink{}, r.WatchShortLinks)
	if err == nil {
		err = watch("Namespace", &corev1.Namespace{}, r.WatchNamespaces)
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
