package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/benchlinks"
)

// Links: creating them in parallel and waiting for their states.

func (b *bench) waitServed(ctx context.Context, n int) <-chan error {
	return b.waitIndex(ctx, func(links float64) bool { return links >= float64(n) })
}

// waitIndex reports on the channel when the redirector's index_links gauge
// satisfies done.
func (b *bench) waitIndex(ctx context.Context, done func(links float64) bool) <-chan error {
	result := make(chan error, 1)
	go func() {
		url := "http://" + b.rdrProbe + "/metrics"
		for {
			body, err := get(ctx, http.DefaultClient, url)
			if err != nil {
				result <- fmt.Errorf("the redirector's metrics: %w", err)
				return
			}
			for _, line := range strings.Split(body, "\n") {
				if strings.HasPrefix(line, "linkforge_redirector_index_links ") && done(value(line)) {
					result <- nil
					return
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return result
}

// checkAllReady lists ns in pages and fails unless its n links are Ready:
// the redirector's index counts the codes it serves, this checks the
// links themselves.
func (b *bench) checkAllReady(ctx context.Context, ns string, n int) error {
	ready, cont := 0, ""
	for {
		var list linkv1.ShortLinkList
		if err := b.c.List(ctx, &list, client.InNamespace(ns), client.Limit(1000), client.Continue(cont)); err != nil {
			return err
		}
		for i := range list.Items {
			if isReady(&list.Items[i]) {
				ready++
			}
		}
		if cont = list.Continue; cont == "" {
			break
		}
	}
	if ready != n {
		return fmt.Errorf("the redirector serves %d links but %d of them are Ready", n, ready)
	}
	return nil
}

// waitReconciled waits until the manager's shortlink controller has
// reconciled n links since it started.
func (b *bench) waitReconciled(ctx context.Context, n int) error {
	deadline := time.Now().Add(30 * time.Minute)
	for time.Now().Before(deadline) {
		body, err := get(ctx, http.DefaultClient, "http://"+b.mgrMetrics+"/metrics")
		if err == nil {
			var total float64
			for _, line := range strings.Split(body, "\n") {
				if strings.HasPrefix(line, "controller_runtime_reconcile_total{") && strings.Contains(line, `controller="shortlink"`) {
					total += value(line)
				}
			}
			if total >= float64(n) {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return errors.New("the restarted manager did not reconcile every link")
}

func (b *bench) namespace(ctx context.Context, name string) error {
	return client.IgnoreAlreadyExists(b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
}

// deleteAll deletes the links of ns and waits until they are gone. A
// collection delete of tens of thousands outlives the API server's request
// timeout (60s) while the server goes on deleting: then it is sent again.
// At 100,000 links the timeout arrives as a reset HTTP/2 stream, not as a
// Status, so any error but a refusal is retried.
func (b *bench) deleteAll(ctx context.Context, ns string) error {
	for range 30 {
		err := b.c.DeleteAllOf(ctx, &linkv1.ShortLink{}, client.InNamespace(ns))
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsBadRequest(err) || ctx.Err() != nil {
			return err
		}
		if _, err := b.waitGone(ctx, ns, time.Minute); err == nil {
			return nil
		}
	}
	return fmt.Errorf("could not delete the links of %s", ns)
}

// waitGone waits until ns has no ShortLinks and returns how long that took.
func (b *bench) waitGone(ctx context.Context, ns string, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	for time.Since(start) < limit {
		var list metav1.PartialObjectMetadataList
		list.SetGroupVersionKind(linkv1.GroupVersion.WithKind("ShortLinkList"))
		if err := b.c.List(ctx, &list, client.InNamespace(ns), client.Limit(1)); err != nil {
			return 0, err
		}
		if len(list.Items) == 0 {
			return time.Since(start), nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return 0, fmt.Errorf("links left in %s after %s", ns, limit)
}

func isReady(l *linkv1.ShortLink) bool {
	return meta.IsStatusConditionTrue(l.Status.Conditions, linkv1.ConditionReady)
}

func isFinished(l *linkv1.ShortLink) bool { return l.Status.FinishedAt != nil }

// watchLinks reports when n links of ns have been seen to satisfy pred.
func (b *bench) watchLinks(ctx context.Context, ns string, n int, pred func(*linkv1.ShortLink) bool) (<-chan struct{}, func(), error) {
	w, err := b.c.Watch(ctx, &linkv1.ShortLinkList{}, client.InNamespace(ns))
	if err != nil {
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		seen := make(map[string]bool, n)
		for ev := range w.ResultChan() {
			l, ok := ev.Object.(*linkv1.ShortLink)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			if pred(l) && !seen[l.Name] {
				seen[l.Name] = true
				if len(seen) == n {
					close(done)
					return
				}
			}
		}
	}()
	return done, w.Stop, nil
}

func (b *bench) parallel(n int, f func(i int) error) error {
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	next := make(chan int)
	for range b.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					first.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := first.Load(); err != nil {
		return *err
	}
	return nil
}

// link is the i-th link of ns, of the benchmark's kind.
func (b *bench) link(ns string, i int) *linkv1.ShortLink {
	l := &linkv1.ShortLink{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("l%07d", i)},
		Spec:       linkv1.ShortLinkSpec{URL: fmt.Sprintf("https://example.com/articles/%d?utm_source=bench&b=2&a=1", i)},
	}
	linkKinds[b.kind](&l.Spec, i)
	return l
}

// The kinds of links (-links): what they have besides spec.url, for what
// each costs.
const (
	kindPlain   = "plain"
	kindLimited = "limited"
	kindRouted  = "routed"
)

var linkKinds = map[string]func(spec *linkv1.ShortLinkSpec, i int){
	kindPlain: func(*linkv1.ShortLinkSpec, int) {},
	// spec.maxUses: each replica counts and reserves (new links are
	// reserved ahead, a few hundred at most).
	kindLimited: func(spec *linkv1.ShortLinkSpec, _ int) { spec.MaxUses = ptr.To[int64](1000) },
	// 8 rules, 3 variants and a card, as hack/redirector-bench's rules.
	kindRouted: func(spec *linkv1.ShortLinkSpec, i int) {
		benchlinks.WithRules(spec, i)
		benchlinks.WithCard(spec, i)
	},
}

// Memory.
