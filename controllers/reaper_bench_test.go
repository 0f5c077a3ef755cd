package controllers

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/progress"
)

// BenchmarkReaper measures how long the reaper takes to delete N finished
// links (spec.expiresAt in the past, ttlSecondsAfterFinished 0, reapPolicy
// Delete), from the start of its manager until the last delete, against a
// floor measured in the same run: a plain client deleting N links by name
// with as many workers as the reaper has (MaxConcurrentReconciles). The
// reaper runs with the manager's defaults (16 workers, no client-side rate
// limit; the 15m sweep does not fire: the deadline path does the work). It is
// measured twice: as configured by default (a read from the API server, then
// the delete), and with OptimisticDelete (the delete alone, with the cached
// copy's preconditions).
//
// Then with the reaper running and synced (OptimisticDelete, as the manager
// runs it), N links that all fall due at one instant: the time from that
// instant until the last delete, against the same floor. The instant is
// set after the time creating them takes at the slowest rate measured in
// the same run, twice over: a busy machine creates them slower, and the
// instant moves with it. If creating them still ran past it (the machine
// slowed down more than twice), that measure is not reported and the log
// says why; the links must still all be reaped.
//
// Then the deletion lag in steady state: with the reaper running (as
// configured by default), REAPER_BENCH_STEADY_N links are created
// at REAPER_BENCH_STEADY_RATE a second (default 200), each expiring two
// seconds after its creation (expiresAt has whole seconds, so the links of a
// second fall due together); the lag is the time from each link's deadline to
// its deletion, measured at the delete call (created-after-due counts the
// links whose create returned after their deadline: their lag includes the
// create's).
//
// No wait is bounded by a total time, which a slow machine exceeds: a wait
// for the reaper fails only when its count of deletes stood still for
// reaperBenchStall.
//
//	go test ./controllers -run '^$' -bench Reaper -benchtime 1x
//
// Environment: REAPER_BENCH_N (default 10000), REAPER_BENCH_STEADY_N
// (default N), REAPER_BENCH_WORKERS (default 16), REAPER_BENCH_RATE (default
// 0: no limit), REAPER_BENCH_CREATORS (parallel creates, default 16),
// REAPER_BENCH_ROUNDS (default 1: each round measures the floor and both
// modes, in a rotating order; medians are reported), REAPER_BENCH_STEADY_RATE.
func BenchmarkReaper(b *testing.B) {
	n := reaperBenchEnvInt(b, "REAPER_BENCH_N", 10000)
	steadyN := reaperBenchEnvInt(b, "REAPER_BENCH_STEADY_N", n)
	workers := reaperBenchEnvInt(b, "REAPER_BENCH_WORKERS", DefaultReapWorkers)
	creators := reaperBenchEnvInt(b, "REAPER_BENCH_CREATORS", 16)
	deleteRate := float64(reaperBenchEnvInt(b, "REAPER_BENCH_RATE", int(DefaultReapRate)))
	rounds := reaperBenchEnvInt(b, "REAPER_BENCH_ROUNDS", 1)
	steadyRate := reaperBenchEnvInt(b, "REAPER_BENCH_STEADY_RATE", 200)
	cfg, c := benchEnv(b)
	ctx := b.Context()
	// The reaper logs each delete, as in production (JSON, info level), to nowhere.
	logf.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	opts := ReaperOptions{DeletesPerSecond: deleteRate, MaxConcurrentReconciles: workers}

	for i := 0; i < b.N; i++ {
		run := fmt.Sprintf("%d-%d", time.Now().UnixNano()%1e9, i)
		past := time.Now().Add(-time.Hour)
		finished := func(l *linkv1.ShortLink) { l.Spec.ExpiresAt = &metav1.Time{Time: past} }
		var floors, reaps, optimistic, syncs []time.Duration
		var burst []time.Duration
		var createRates []float64

		phases := []string{"floor", "reaper", "optimistic"}
		for round := range rounds {
			for _, phase := range phases {
				ns := reaperBenchNamespace(b, c, fmt.Sprintf("bench-%s-%s-%d", phase, run, round))
				created := time.Now()
				names := reaperBenchCreate(b, c, ns, n, creators, finished)
				createRates = append(createRates, float64(n)/time.Since(created).Seconds())
				if phase == "floor" {
					start := time.Now()
					reaperBenchParallel(b, len(names), workers, func(j int) error {
						return c.Delete(ctx, &linkv1.ShortLink{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names[j]}})
					})
					floors = append(floors, time.Since(start))
					continue
				}
				o := opts
				o.OptimisticDelete = phase == "optimistic"
				lags := &reaperBenchLags{}
				start := time.Now()
				reaper, synced, stop := reaperBenchStart(b, cfg, o, lags, start)
				reaperBenchWait(b, phase, reaper, n, time.Time{})
				took := time.Since(start)
				stop()
				if left := reaperBenchCount(b, c, ns); left != 0 {
					b.Fatalf("%d links left after the reaper counted %d deletes", left, reaper.Stats().TotalReaped)
				}
				if phase == "reaper" {
					reaps, syncs = append(reaps, took), append(syncs, synced)
					burst = append(burst, lags.take()...)
				} else {
					optimistic = append(optimistic, took)
				}
			}
			phases = append(phases[1:], phases[0])
		}
		slices.Sort(burst)

		// Due together: the reaper is running and synced (as the manager
		// runs it: OptimisticDelete) when all n links fall due at one
		// instant; timed from that instant to the last delete, so the
		// initial list of a starting manager is not in it.
		dueNS := reaperBenchNamespace(b, c, "bench-due-"+run)
		dueOpts := opts
		dueOpts.OptimisticDelete = true
		dueReaper, _, dueStop := reaperBenchStart(b, cfg, dueOpts, &reaperBenchLags{}, time.Now())
		margin := reaperBenchDueMargin(n, createRates)
		dueAt := time.Now().Add(margin).Truncate(time.Second)
		created := time.Now()
		reaperBenchCreate(b, c, dueNS, n, creators, func(l *linkv1.ShortLink) { l.Spec.ExpiresAt = &metav1.Time{Time: dueAt} })
		dueMeasured := !time.Now().After(dueAt)
		createdIn := time.Since(created)
		reaperBenchWait(b, "due together", dueReaper, n, dueAt)
		dueTook := time.Since(dueAt)
		dueStop()
		if left := reaperBenchCount(b, c, dueNS); left != 0 {
			b.Fatalf("%d links left after the reaper counted %d deletes", left, dueReaper.Stats().TotalReaped)
		}

		// Steady state: links become due while the reaper runs, at a paced rate.
		steadyNS := reaperBenchNamespace(b, c, "bench-steady-"+run)
		lags := &reaperBenchLags{}
		reaper, _, stop := reaperBenchStart(b, cfg, opts, lags, time.Now())
		steadyStart := time.Now()
		pace := rate.NewLimiter(rate.Limit(steadyRate), 1)
		var late atomic.Int64
		reaperBenchCreateThen(b, c, steadyNS, steadyN, creators, func(l *linkv1.ShortLink) {
			if err := pace.Wait(ctx); err != nil {
				b.Error(err)
			}
			l.Spec.ExpiresAt = &metav1.Time{Time: time.Now().Add(2 * time.Second)}
		}, func(l *linkv1.ShortLink) {
			// expiresAt is written in whole seconds: due then.
			if time.Now().After(l.Spec.ExpiresAt.Truncate(time.Second)) {
				late.Add(1)
			}
		})
		reaperBenchWait(b, "steady", reaper, steadyN, time.Time{})
		steadyTook := time.Since(steadyStart)
		stop()
		steady := lags.take()

		floor, reap, opt := reaperBenchMedian(floors), reaperBenchMedian(reaps), reaperBenchMedian(optimistic)
		b.ReportMetric(floor.Seconds(), "floor-s")
		b.ReportMetric(reap.Seconds(), "reaper-s")
		b.ReportMetric(reap.Seconds()/floor.Seconds(), "ratio")
		b.ReportMetric(opt.Seconds(), "optimistic-s")
		b.ReportMetric(opt.Seconds()/floor.Seconds(), "optimistic-ratio")
		if dueMeasured {
			b.ReportMetric(dueTook.Seconds(), "due-s")
			b.ReportMetric(dueTook.Seconds()/floor.Seconds(), "due-ratio")
		}
		b.ReportMetric(reaperBenchQuantile(steady, 0.99).Seconds(), "lag-p99-s")
		b.ReportMetric(float64(late.Load()), "created-after-due")
		b.ReportMetric(reaperBenchQuantile(burst, 0.99).Seconds(), "burst-lag-p99-s")
		b.Logf("n=%d workers=%d rate=%.0f/s rounds=%d (medians): floor %s; reaper %s (cache synced after %s), ratio %.2f; optimistic %s, ratio %.2f",
			n, workers, deleteRate, rounds, floor.Round(time.Millisecond), reap.Round(time.Millisecond), reaperBenchMedian(syncs).Round(time.Millisecond),
			reap.Seconds()/floor.Seconds(), opt.Round(time.Millisecond), opt.Seconds()/floor.Seconds())
		b.Logf("each round: floor %v reaper %v optimistic %v; creates/s %.0f", reaperBenchRound(floors), reaperBenchRound(reaps), reaperBenchRound(optimistic), createRates)
		if dueMeasured {
			b.Logf("due together (reaper running, OptimisticDelete): all %d deleted %s after their deadline, ratio to the floor %.2f (created in %s, the deadline %s after the start)",
				n, dueTook.Round(time.Millisecond), dueTook.Seconds()/floor.Seconds(), createdIn.Round(time.Millisecond), margin.Round(time.Millisecond))
		} else {
			b.Logf("due together: NOT MEASURED: creating the %d links took %s, past the instant they fell due (%s after the start: twice what the slowest rate of this run, %.0f/s, needed); the machine slowed down further. All were reaped, %s after that instant",
				n, createdIn.Round(time.Millisecond), margin.Round(time.Millisecond), slices.Min(createRates), dueTook.Round(time.Millisecond))
		}
		b.Logf("burst (all due at the reaper's start): time to each delete p50 %s p99 %s max %s",
			reaperBenchQuantile(burst, 0.5), reaperBenchQuantile(burst, 0.99), reaperBenchQuantile(burst, 1))
		b.Logf("steady: %d links created at %d/s (each due 1-2s later) and reaped in %s; lag after the deadline p50 %s p99 %s max %s; %d created after their deadline (their lag includes the create's)",
			steadyN, steadyRate, steadyTook.Round(time.Millisecond), reaperBenchQuantile(steady, 0.5), reaperBenchQuantile(steady, 0.99), reaperBenchQuantile(steady, 1), late.Load())
	}
	b.ReportMetric(0, "ns/op")
}

func reaperBenchMedian(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	switch {
	case len(s) == 0:
		return 0
	case len(s)%2 == 0:
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

func reaperBenchRound(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

func reaperBenchEnvInt(b *testing.B, key string, def int) int {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", key, v)
	}
	return n
}

func reaperBenchNamespace(b *testing.B, c client.Client, name string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(b.Context(), ns); err != nil {
		b.Fatalf("creating namespace: %v", err)
	}
	return name
}

// reaperBenchDueMargin is how long after the start the links of the due
// phase fall due: twice what creating n took at the slowest rate measured
// (links a second), and 5 s.
func reaperBenchDueMargin(n int, rates []float64) time.Duration {
	slowest := slices.Min(rates)
	return 2*time.Duration(float64(n)/slowest*float64(time.Second)) + 5*time.Second
}

// reaperBenchCreate creates n finished links with parallel workers and returns their names.
func reaperBenchCreate(b *testing.B, c client.Client, ns string, n, workers int, mutate func(*linkv1.ShortLink)) []string {
	return reaperBenchCreateThen(b, c, ns, n, workers, mutate, func(*linkv1.ShortLink) {})
}

// reaperBenchCreateThen is reaperBenchCreate, calling created after each create.
func reaperBenchCreateThen(b *testing.B, c client.Client, ns string, n, workers int, mutate, created func(*linkv1.ShortLink)) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("l-%06d", i)
	}
	reaperBenchParallel(b, n, workers, func(i int) error {
		l := &linkv1.ShortLink{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names[i]},
			Spec: linkv1.ShortLinkSpec{
				URL:                     fmt.Sprintf("https://example.com/%d", i),
				ReapPolicy:              linkv1.ReapPolicyDelete,
				TTLSecondsAfterFinished: ptr.To[int32](0),
			},
		}
		mutate(l)
		if err := c.Create(b.Context(), l); err != nil {
			return err
		}
		created(l)
		return nil
	})
	return names
}

// reaperBenchParallel runs do(0..n-1) on workers goroutines and fails on the first error.
func reaperBenchParallel(b *testing.B, n, workers int, do func(i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := do(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// reaperBenchStart runs a manager with only the reaper, whose deletes are
// timed by lags. It returns once the reaper's cache has synced, with the time
// that took since start.
func reaperBenchStart(b *testing.B, cfg *rest.Config, o ReaperOptions, lags *reaperBenchLags, start time.Time) (*Reaper, time.Duration, func()) {
	// The manager's cache, as bin/manager builds it: compact links.
	index := NewCodeIndex()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  ManagerCacheOptions(nil, index),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		b.Fatal(err)
	}
	reaper := NewReaper(mgr, o)
	reaper.Links = index
	reaper.Client = &reaperBenchClient{Client: reaper.Client, reaper: reaper, lags: lags, start: start}
	if err := reaper.SetupWithManager(mgr); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.Context())
	if _, err := mgr.GetCache().GetInformer(ctx, &linkv1.ShortLink{}); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		b.Fatal("the reaper's cache did not sync")
	}
	synced := time.Since(start)
	return reaper, synced, func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("manager: %v", err)
		}
	}
}

// reaperBenchClient times each successful delete against the link's
// deadline, or against the reaper's start when that is later.
type reaperBenchClient struct {
	client.Client
	reaper *Reaper
	lags   *reaperBenchLags
	start  time.Time
}

func (c *reaperBenchClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	err := c.Client.Delete(ctx, obj, opts...)
	if err == nil {
		now := time.Now()
		from := c.reaper.plan(obj.(*linkv1.ShortLink), now).deadline
		if from.Before(c.start) {
			from = c.start
		}
		c.lags.add(now.Sub(from))
	}
	return err
}

type reaperBenchLags struct {
	mu   sync.Mutex
	lags []time.Duration
}

func (l *reaperBenchLags) add(d time.Duration) {
	l.mu.Lock()
	l.lags = append(l.lags, d)
	l.mu.Unlock()
}

func (l *reaperBenchLags) take() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.lags
	l.lags = nil
	slices.Sort(out)
	return out
}

func reaperBenchQuantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)].Round(time.Millisecond)
}

// reaperBenchStall is how long the reaper's count of deletes may stand
// still while links it must delete remain: a busy machine slows the
// deletes, only a defect (or an API server that stopped) stops them.
const reaperBenchStall = 2 * time.Minute

// reaperBenchWait waits until the reaper has deleted n links, for as long
// as its deletes go on once the links are due (from due on: before it, no
// delete is a stall).
func reaperBenchWait(b *testing.B, phase string, reaper *Reaper, n int, due time.Time) {
	select {
	case <-b.Context().Done():
		b.Fatal(b.Context().Err())
	case <-time.After(time.Until(due)):
	}
	err := progress.Wait(b.Context(), "the reaper's deletes ("+phase+")", 5*time.Millisecond, reaperBenchStall,
		func(context.Context) (int64, bool, error) {
			reaped := reaper.Stats().TotalReaped
			return reaped, reaped >= int64(n), nil
		})
	if err != nil {
		b.Fatalf("%v, of %d links", err, n)
	}
}

func reaperBenchCount(b *testing.B, c client.Client, ns string) int {
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(linkv1.GroupVersion.WithKind("ShortLinkList"))
	if err := c.List(b.Context(), &list, client.InNamespace(ns)); err != nil && !apierrors.IsNotFound(err) {
		b.Fatal(err)
	}
	return len(list.Items)
}

// TestReaperBenchDueMargin: the due phase's links fall due after twice the
// time creating them takes at the slowest rate measured, and 5 s.
func TestReaperBenchDueMargin(t *testing.T) {
	for _, tc := range []struct {
		n     int
		rates []float64
		want  time.Duration
	}{
		{10000, []float64{1000}, 25 * time.Second},
		{10000, []float64{2000, 250, 1000}, 85 * time.Second}, // the slowest, 40 s, twice
		{500, []float64{100, 100}, 15 * time.Second},
	} {
		if got := reaperBenchDueMargin(tc.n, tc.rates); got != tc.want {
			t.Errorf("%d links at %v/s: %s, want %s", tc.n, tc.rates, got, tc.want)
		}
	}
}
