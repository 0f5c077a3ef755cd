package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/devenv"
	"github.com/linkforge/linkforge/internal/progress"
)

// benchStall is how long the count a benchmark waits for (uses written,
// links reserved) may stand still before it fails: a busy machine slows
// the work, only a defect (or an API server that stopped) stops it. The
// benchmarks bound no wait by a total time, which a slow machine exceeds.
const benchStall = 2 * time.Minute

// BenchmarkUsesDrain clicks N links (USES_BENCH_N, default 10,000) once each
// on a real bin/redirector with its default flags, then measures how its
// counts reach the API server: the time until the sum of status.uses is N,
// the most writes it made in any one second (its budget is 20/s), and its
// RSS before and after the clicks (pending counts live in memory until
// written). No manager runs: the benchmark writes the links' status itself,
// so that only the redirector writes during the drain. It waits for as long
// as the sum keeps growing (a busy machine writes slower), and fails when it
// has not for benchStall, or when it passes N (a use counted twice).
func BenchmarkUsesDrain(b *testing.B) {
	n := 10_000
	if v, err := strconv.Atoi(os.Getenv("USES_BENCH_N")); err == nil && v > 0 {
		n = v
	}
	bin, tmp, cp := newCluster(b)

	c := benchClient(b, cp)
	ctx := context.Background()
	ns := "drain"
	if out, err := cp.KubectlCmd(ctx, "create", "namespace", ns).CombinedOutput(); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	parallel(n, 8, func(i int) error {
		l := &linkv1.ShortLink{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("l-%06d", i)},
			Spec:       linkv1.ShortLinkSpec{URL: fmt.Sprintf("https://example.com/%d", i)},
		}
		if err := c.Create(ctx, l); err != nil {
			return err
		}
		l.Status = linkv1.ShortLinkStatus{Code: fmt.Sprintf("c%06d", i), ObservedGeneration: l.Generation, ConfirmedGeneration: l.Generation}
		return c.Status().Update(ctx, l)
	})

	addr, _ := devenv.FreeAddr()
	probes, _ := devenv.FreeAddr()
	red, err := devenv.Start("redirector", filepath.Join(tmp, "redirector.log"), filepath.Join(bin, "redirector"),
		"--kubeconfig", cp.Kubeconfig, "--bind-address", addr, "--health-probe-bind-address", probes, "--peer-bind-address", "127.0.0.1:0", "--peer-allow-local")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = red.Stop(30 * time.Second) }()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := devenv.WaitHTTP(wctx, "http://"+probes+"/readyz", http.StatusOK); err != nil {
		b.Fatal(err)
	}
	rssBefore := rssKiB(red.Pid())

	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	clickStart := time.Now()
	parallel(n, 8, func(i int) error {
		resp, err := hc.Get(fmt.Sprintf("http://%s/%s/c%06d", addr, ns, i))
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusFound {
			return fmt.Errorf("link %d: %d", i, resp.StatusCode)
		}
		return nil
	})
	clicked := time.Now()
	rssAfter := rssKiB(red.Pid())

	// Poll the total and the write counter once a second until all arrived.
	var peak, lastWrites float64
	lastAt := clicked
	var drained time.Time
	err = progress.Wait(ctx, "uses written", time.Second, benchStall, func(ctx context.Context) (int64, bool, error) {
		writes, at := metric(probes, "linkforge_redirector_uses_writes_total"), time.Now()
		peak = max(peak, (writes-lastWrites)/at.Sub(lastAt).Seconds())
		lastWrites, lastAt = writes, at
		var list linkv1.ShortLinkList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return 0, false, err
		}
		var total int64
		for _, l := range list.Items {
			total += l.Status.Uses
		}
		if total > int64(n) {
			b.Fatalf("status.uses sum %d > %d clicks", total, n)
		}
		drained = time.Now()
		return total, total == int64(n), nil
	})
	if err != nil {
		b.Fatalf("%v, of %d, %s after the clicks", err, n, time.Since(clicked).Round(time.Second))
	}
	drain := drained.Sub(clicked)
	for b.Loop() {
	}
	b.ReportMetric(float64(n), "links")
	b.ReportMetric(clicked.Sub(clickStart).Seconds(), "s-clicking")
	b.ReportMetric(drain.Seconds(), "s-until-all-written")
	b.ReportMetric(float64(n)/drain.Seconds(), "links-written/s")
	b.ReportMetric(peak, "peak-writes/s")
	b.ReportMetric(float64(rssAfter-rssBefore)*1024/float64(n), "B-RSS-growth/link")
}

// parallel runs f(0..n-1) on workers goroutines, retrying any error for
// about 40 seconds (a conflict, or an API server that a busy machine makes
// time out now and then).
func parallel(n, workers int, f func(i int) error) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				if err := retry.OnError(benchBackoff, func(error) bool { return true }, func() error { return f(i) }); err != nil {
					panic(err)
				}
			}
		})
	}
	wg.Wait()
}

// benchBackoff: 10 tries over about 40 seconds (0.1 s doubling, up to 15 s).
var benchBackoff = wait.Backoff{Steps: 10, Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Cap: 15 * time.Second}

// metric is the sum of a counter's samples on a /metrics page.
func metric(addr, name string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer func() { _ = resp.Body.Close() }()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
				sum += v
			}
		}
	}
	return sum
}

func rssKiB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return 0
}
