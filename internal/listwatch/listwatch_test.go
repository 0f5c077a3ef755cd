package listwatch

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// firstRequest runs an informer built by newInformer on a fake ListWatch and
// returns the first request its reflector makes: "list" with its options, or
// "watch" with whether it asked for the initial events (a watch-list).
func firstRequest(t *testing.T, newInformer func(toolscache.ListerWatcher) toolscache.SharedIndexInformer) (string, bool, metav1.ListOptions) {
	t.Helper()
	type request struct {
		verb          string
		initialEvents bool
		list          metav1.ListOptions
	}
	var once sync.Once
	first := make(chan request, 1)
	record := func(r request) { once.Do(func() { first <- r }) }
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(_ context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			record(request{verb: "list", list: opts})
			return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
		},
		WatchFuncWithContext: func(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			record(request{verb: "watch", initialEvents: ptr.Deref(opts.SendInitialEvents, false)})
			return watch.NewFake(), nil
		},
	}
	informer := newInformer(lw)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go informer.RunWithContext(ctx)
	select {
	case r := <-first:
		return r.verb, r.initialEvents, r.list
	case <-time.After(30 * time.Second):
		t.Fatal("the informer made no request")
		return "", false, metav1.ListOptions{}
	}
}

func TestNewInformerListsThenWatches(t *testing.T) {
	verb, _, opts := firstRequest(t, func(lw toolscache.ListerWatcher) toolscache.SharedIndexInformer {
		return NewInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{})
	})
	if verb != "list" {
		t.Fatalf("first request = %s, want list", verb)
	}
	// A consistent, paged list: resourceVersion "0" would be answered whole.
	if opts.ResourceVersion != "" || opts.Limit <= 0 {
		t.Fatalf("first list: resourceVersion %q, limit %d; want \"\" and a limit", opts.ResourceVersion, opts.Limit)
	}
}

// The control: client-go's own informer streams the initial list (its
// WatchListClient default), so the test above does test the switch; and
// WatchListEnv=true gives that default back.
func TestPlainInformerStreamsWatchList(t *testing.T) {
	for name, newInformer := range map[string]func(toolscache.ListerWatcher) toolscache.SharedIndexInformer{
		"client-go": func(lw toolscache.ListerWatcher) toolscache.SharedIndexInformer {
			return toolscache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{})
		},
		WatchListEnv + "=true": func(lw toolscache.ListerWatcher) toolscache.SharedIndexInformer {
			t.Setenv(WatchListEnv, "true")
			return NewInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{})
		},
	} {
		verb, initialEvents, _ := firstRequest(t, newInformer)
		if verb != "watch" || !initialEvents {
			t.Fatalf("%s: first request = %s (initial events %v), want a watch-list; has client-go's default changed?", name, verb, initialEvents)
		}
	}
}

func TestPaged(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      metav1.ListOptions
		wantRV  string
		wantLim int64
	}{
		{"first list, paged", metav1.ListOptions{ResourceVersion: "0", Limit: 500}, "", 500},
		{"first list, unpaged: left to the watch cache", metav1.ListOptions{ResourceVersion: "0"}, "0", 0},
		{"relist at a version", metav1.ListOptions{ResourceVersion: "42", Limit: 500}, "42", 500},
		{"consistent list", metav1.ListOptions{Limit: 500}, "", 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := paged(tc.in)
			if got.ResourceVersion != tc.wantRV || got.Limit != tc.wantLim {
				t.Fatalf("paged(%+v) = resourceVersion %q, limit %d; want %q, %d", tc.in, got.ResourceVersion, got.Limit, tc.wantRV, tc.wantLim)
			}
		})
	}
}

func TestListThenWatchKeepsOtherListerWatchers(t *testing.T) {
	var other toolscache.ListerWatcher = otherLW{}
	wrapped := toolscache.ToListerWatcherWithContext(ListThenWatch(other))
	list, err := wrapped.ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "0", Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	if rv := list.(*corev1.ConfigMapList).ResourceVersion; rv != "" {
		t.Fatalf("the first list reached the ListerWatcher with resourceVersion %q, want a consistent one", rv)
	}
	if s, ok := wrapped.(interface{ IsWatchListSemanticsUnSupported() bool }); !ok || !s.IsWatchListSemanticsUnSupported() {
		t.Fatal("a ListerWatcher that is not a *ListWatch is not marked")
	}
}

// otherLW answers a list with the resourceVersion it was asked for.
type otherLW struct{}

func (otherLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: opts.ResourceVersion}}, nil
}
func (otherLW) Watch(metav1.ListOptions) (watch.Interface, error) {
	return watch.NewFake(), nil
}
