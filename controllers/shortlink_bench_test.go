package controllers

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/progress"
)

// benchWorkers is the client concurrency of both sides of a comparison.
const benchWorkers = 8

func benchN(b *testing.B, env string, def int) int {
	if v := os.Getenv(env); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want a positive integer", env, v)
		}
		return n
	}
	return def
}

func benchNamespace(b *testing.B, c client.Client, prefix string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := c.Create(context.Background(), ns); err != nil {
		b.Fatal(err)
	}
	return ns.Name
}

// parallel runs f(i) for i in [0, n) on benchWorkers goroutines.
func parallel(b *testing.B, n int, f func(i int) error) {
	var wg sync.WaitGroup
	errs := make(chan error, benchWorkers)
	next := make(chan int)
	for w := 0; w < benchWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

func benchLink(ns string, i int) *linkv1.ShortLink {
	return &linkv1.ShortLink{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("l%05d", i)},
		Spec:       linkv1.ShortLinkSpec{URL: fmt.Sprintf("https://example.com/articles/%d?utm_source=bench&b=2&a=1", i)},
	}
}

// readyBenchStall is how long no link may become Ready while some are not.
const readyBenchStall = 2 * time.Minute

// BenchmarkShortLinksReady creates N ShortLinks and measures the time until
// the controller has made all of them Ready, beside a floor measured in the
// same run: the same creates and one status patch each, by a plain client.
// It waits for as long as links keep becoming Ready, and fails when none
// has for readyBenchStall.
//
//	go test ./controllers -run '^$' -bench ShortLinksReady -benchtime 1x
func BenchmarkShortLinksReady(b *testing.B) {
	n := benchN(b, "READY_BENCH_N", 2000)
	// The binary's defaults; READY_BENCH_QPS and READY_BENCH_WORKERS try others.
	qps := float64(Defaults.QPS)
	if v := os.Getenv("READY_BENCH_QPS"); v != "" {
		var err error
		if qps, err = strconv.ParseFloat(v, 64); err != nil {
			b.Fatalf("READY_BENCH_QPS=%q: %v", v, err)
		}
	}
	workers := benchN(b, "READY_BENCH_WORKERS", Defaults.MaxConcurrentReconciles)
	cfg, c := benchEnv(b)
	ctx := context.Background()

	for iter := 0; iter < b.N; iter++ {
		// Floor: what the API server needs for N creates and N status patches.
		floorNS := benchNamespace(b, c, "floor")
		start := time.Now()
		parallel(b, n, func(i int) error {
			l := benchLink(floorNS, i)
			if err := c.Create(ctx, l); err != nil {
				return err
			}
			base := l.DeepCopy()
			l.Status.Code, l.Status.CanonicalURL, l.Status.ObservedGeneration = fmt.Sprintf("c%09d", i), l.Spec.URL, l.Generation
			meta.SetStatusCondition(&l.Status.Conditions, metav1.Condition{Type: linkv1.ConditionReady, Status: metav1.ConditionTrue, Reason: linkv1.ReasonCodeAssigned, Message: "bench"})
			return c.Status().Patch(ctx, l, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		})
		floor := time.Since(start)

		// The controller as bin/manager runs it (Defaults: client limits,
		// workers; its cache options; an event recorder), started and synced
		// before the clock starts.
		ns := benchNamespace(b, c, "ready")
		mcfg := rest.CopyConfig(cfg)
		mcfg.QPS, mcfg.Burst = float32(qps), Defaults.Burst
		index := NewCodeIndex()
		mgr, err := ctrl.NewManager(mcfg, ctrl.Options{
			Scheme:                 scheme,
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
			Cache:                  ManagerCacheOptions([]string{ns}, index),
		})
		if err != nil {
			b.Fatal(err)
		}
		mctx, stop := context.WithCancel(ctx)
		r := &ShortLinkReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("linkforge-manager"),
			Clock: clock.RealClock{}, MaxConcurrentReconciles: workers, Index: index}
		if err := r.SetupWithManager(mctx, mgr); err != nil {
			b.Fatal(err)
		}
		go func() { _ = mgr.Start(mctx) }()
		if !mgr.GetCache().WaitForCacheSync(mctx) {
			b.Fatal("cache did not sync")
		}
		wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		if err != nil {
			b.Fatal(err)
		}
		w, err := wc.Watch(ctx, &linkv1.ShortLinkList{}, client.InNamespace(ns))
		if err != nil {
			b.Fatal(err)
		}
		var readyCount atomic.Int64
		allReady := make(chan time.Time, 1)
		go func() {
			ready := map[string]bool{}
			for ev := range w.ResultChan() {
				l, ok := ev.Object.(*linkv1.ShortLink)
				if !ok || ev.Type == watch.Deleted {
					continue
				}
				if meta.IsStatusConditionTrue(l.Status.Conditions, linkv1.ConditionReady) && !ready[l.Name] {
					ready[l.Name] = true
					readyCount.Store(int64(len(ready)))
					if len(ready) == n {
						allReady <- time.Now()
						return
					}
				}
			}
		}()

		start = time.Now()
		parallel(b, n, func(i int) error { return c.Create(ctx, benchLink(ns, i)) })
		// As long as links keep becoming Ready: a busy machine slows the
		// controller, only a defect stops it.
		var readyAt time.Time
		err = progress.Wait(ctx, "links Ready", 10*time.Millisecond, readyBenchStall, func(context.Context) (int64, bool, error) {
			select {
			case readyAt = <-allReady:
				return int64(n), true, nil
			default:
				return readyCount.Load(), false, nil
			}
		})
		if err != nil {
			b.Fatalf("%v, of %d", err, n)
		}
		withController := readyAt.Sub(start)
		w.Stop()
		stop()

		b.ReportMetric(floor.Seconds(), "floor-s")
		b.ReportMetric(withController.Seconds(), "controller-s")
		b.ReportMetric(withController.Seconds()/floor.Seconds(), "ratio")
		b.Logf("N=%d clients=%d qps=%g reconcilers=%d: floor (plain creates + status patches) %.2fs, controller (creates until all Ready) %.2fs, ratio %.2f",
			n, benchWorkers, qps, workers, floor.Seconds(), withController.Seconds(), withController.Seconds()/floor.Seconds())
	}
}
