package controllers

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/compactlink"
)

// sweepSource is the sweep, as a source of the reaper controller: every
// SweepInterval it finds the due links in the cache and adds up to BatchSize
// of them, oldest deadline first, to the controller's queue. It deletes
// nothing itself: Reconcile does, and the queue hands a link to one worker at
// a time, so a swept link and its own deadline never race.
func (r *Reaper) sweepSource() source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		// Start must not block; ctx ends when the controller stops.
		go r.sweepEvery(ctx, q)
		return nil
	})
}

// sweepEvery sweeps after each interval until ctx ends. The first sweep
// comes one interval after the start: at the start, the controller sees
// every link anyway.
func (r *Reaper) sweepEvery(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	log := ctrl.Log.WithName("reaper").WithName("sweep")
	ctx = logf.IntoContext(ctx, log)
	for {
		t := r.Clock.NewTimer(r.opts.SweepInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		started, startedAt := time.Now(), r.Clock.Now()
		n, err := r.sweep(ctx, q)
		if ctx.Err() != nil {
			return
		}
		r.metrics.recordSweep(startedAt, time.Since(started), n, err)
		if err != nil {
			log.Error(err, "sweep failed")
		} else {
			log.Info("sweep done", "queued", n)
		}
	}
}

// cachedLinks yields the cached links, each a copy of its own: one at a
// time from the informers' stores (the manager's cache keeps compact links,
// internal/compactlink, unpacked here), or all listed at once without
// r.Links.
func (r *Reaper) cachedLinks(ctx context.Context) (iter.Seq[*linkv1.ShortLink], error) {
	if r.Links == nil {
		var list linkv1.ShortLinkList
		if err := r.Client.List(ctx, &list); err != nil {
			return nil, fmt.Errorf("listing ShortLinks: %w", err)
		}
		return func(yield func(*linkv1.ShortLink) bool) {
			for i := range list.Items {
				if !yield(&list.Items[i]) {
					return
				}
			}
		}, nil
	}
	objs, err := r.Links.links(metav1.NamespaceAll)
	if err != nil {
		return nil, fmt.Errorf("listing ShortLinks: %w", err)
	}
	return func(yield func(*linkv1.ShortLink) bool) {
		for _, obj := range objs {
			if s, ok := obj.(*linkv1.ShortLink); ok {
				obj = s.DeepCopy() // a cache without the manager's transform
			}
			if link, ok := compactlink.Of(obj); ok && !yield(link) {
				return
			}
		}
	}, nil
}

// sweep adds up to BatchSize due links to q, oldest deadline first, and
// warns about the held ones. It returns how many it added.
func (r *Reaper) sweep(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) (int, error) {
	links, err := r.cachedLinks(ctx)
	if err != nil {
		return 0, err
	}
	type dueLink struct {
		key      types.NamespacedName
		deadline time.Time
	}
	now := r.Clock.Now()
	var due []dueLink
	for link := range links {
		switch p := r.plan(link, now); p.verdict {
		case reapLink:
			due = append(due, dueLink{key: client.ObjectKeyFromObject(link), deadline: p.deadline})
		case holdLink:
			// With SweepOnly, no reconcile would see it.
			r.warnOnce(ctx, link, p)
		}
	}
	slices.SortFunc(due, func(a, b dueLink) int {
		return cmp.Or(a.deadline.Compare(b.deadline), cmp.Compare(a.key.Namespace, b.key.Namespace), cmp.Compare(a.key.Name, b.key.Name))
	})
	due = due[:min(len(due), r.opts.BatchSize)]
	for _, d := range due {
		q.Add(reconcile.Request{NamespacedName: d.key})
	}
	return len(due), nil
}
