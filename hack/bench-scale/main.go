// Command bench-scale measures linkforge at N links on this machine (make
// bench-scale): a local control plane (envtest's etcd and kube-apiserver),
// the real bin/manager and bin/redirector with their default flags, and N
// ShortLinks created by 8 parallel clients. It prints one table: convergence
// against a floor measured in the same run, memory per link, the
// redirector's start with N links, a manager restart with N unchanged links,
// and the reaper deleting 10% of N at once against its floor.
package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/devenv"
	"github.com/linkforge/linkforge/internal/testenv"
)

var scheme = runtime.NewScheme()

func init() {
	_ = clientgoscheme.AddToScheme(scheme)
	_ = linkv1.AddToScheme(scheme)
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		os.Exit(1)
	}
}

type bench struct {
	n, clients int
	root, dir  string
	env        *envtest.Environment
	cfg        *rest.Config
	kubeconfig string
	c          client.WithWatch
	rows       [][2]string
	mgr, rdr   *proc
	mgrProbe   string
	mgrMetrics string
	rdrProbe   string
	conv       time.Duration
	rounds     int
	// profiles, if set, is where the manager's heap profile is saved after
	// convergence (it then also gets --pprof-bind-address).
	profiles string
	mgrPprof string
}

func (b *bench) row(name, format string, args ...any) {
	v := fmt.Sprintf(format, args...)
	b.rows = append(b.rows, [2]string{name, v})
	fmt.Printf("    %s: %s\n", name, v)
}

func step(format string, args ...any) {
	fmt.Printf("==> %s  (load %s)\n", fmt.Sprintf(format, args...), loadavg())
}

func run() error {
	defN := 100000
	if v := os.Getenv("N"); v != "" {
		var err error
		if defN, err = strconv.Atoi(v); err != nil {
			return fmt.Errorf("environment variable N=%q: %w", v, err)
		}
	}
	defRounds := 2
	if v := os.Getenv("ROUNDS"); v != "" {
		var err error
		if defRounds, err = strconv.Atoi(v); err != nil {
			return fmt.Errorf("environment variable ROUNDS=%q: %w", v, err)
		}
	}
	b := &bench{}
	flag.IntVar(&b.n, "n", defN, "Links to create (or N=).")
	flag.IntVar(&b.clients, "clients", 8, "Parallel clients creating links, on both sides of each comparison.")
	flag.IntVar(&b.rounds, "rounds", defRounds, "Rounds of floor and convergence (or ROUNDS=): 1, or 2 in the order floor, convergence, convergence, floor.")
	flag.StringVar(&b.root, "root", ".", "Repository root (bin/manager and bin/redirector are run from root/bin).")
	flag.StringVar(&b.profiles, "heap-profiles", "", "Save a heap profile of bin/manager after convergence into this directory "+
		"(it then also runs with --pprof-bind-address on a free local port, the one flag added to its defaults).")
	flag.Parse()
	if b.rounds != 1 && b.rounds != 2 {
		return fmt.Errorf("-rounds %d: 1 or 2", b.rounds)
	}
	var err error
	if b.root, err = filepath.Abs(b.root); err != nil {
		return err
	}
	b.dir = filepath.Join(b.root, ".bench-scale")
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return err
	}
	start := time.Now()
	fmt.Printf("bench-scale N=%d clients=%d, %s, load %s, %d CPUs\n", b.n, b.clients, time.Now().UTC().Format(time.RFC3339), loadavg(), numCPU())

	step("starting the control plane")
	if err := b.startControlPlane(); err != nil {
		return err
	}
	defer func() {
		for _, p := range []*proc{b.rdr, b.mgr} {
			if p != nil {
				_ = p.stop(10 * time.Second)
			}
		}
		_ = b.env.Stop()
	}()
	err = b.measure()
	fmt.Printf("\nN=%d clients=%d, took %s, load at the end %s (logs in %s)\n", b.n, b.clients, time.Since(start).Round(time.Second), loadavg(), b.dir)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(w, "| measure\t| value\t|")
	_, _ = fmt.Fprintln(w, "|---\t|---\t|")
	for _, r := range b.rows {
		_, _ = fmt.Fprintf(w, "| %s\t| %s\t|\n", r[0], r[1])
	}
	_ = w.Flush()
	return err
}

func (b *bench) measure() error {
	ctx := context.Background()
	n := b.n

	// A fresh API server is slow on its first requests (connections, the
	// CRD's handlers, etcd's first pages): warm it up outside the clocks.
	if err := b.namespace(ctx, "warmup"); err != nil {
		return err
	}
	if err := b.parallel(min(n, 500), func(i int) error { return b.c.Create(ctx, link("warmup", i)) }); err != nil {
		return err
	}
	if err := b.deleteAll(ctx, "warmup"); err != nil {
		return err
	}

	// The control plane's memory before any link; the floor's links, deleted
	// before the binaries start, leave garbage and history behind.
	time.Sleep(2 * time.Second)
	cold := b.memory()

	// The floor and convergence alternate, floor-convergence-convergence-
	// floor with two rounds: the machine's speed drifts over minutes (the
	// floor's CPU for the same work varied by 40% between runs), and the
	// sums of an ABBA sequence cancel a linear drift. The first round runs
	// beside no other links; in the second, convergence runs after N deletes
	// and the floor beside the N links the restarts below need.
	var floors, convs []time.Duration
	floor, err := b.floorRound(ctx, "floor", 1)
	if err != nil {
		return err
	}
	floors = append(floors, floor)

	step("starting bin/manager and bin/redirector (default flags)")
	if err := b.startManager(ctx); err != nil {
		return err
	}
	if err := b.startRedirector(ctx); err != nil {
		return err
	}
	idle := b.settledMemory()
	conv, err := b.convergenceRound(ctx, "links", 1, floor)
	if err != nil {
		return err
	}
	convs = append(convs, conv)
	b.conv = conv

	full := b.settledMemory() // the watchers caught up, the heaps settled
	perLink := func(after, before int64) string {
		return fmt.Sprintf("%.0f MiB (before %.0f MiB): %.2f KiB/link", mib(after), mib(before), float64(after-before)/1024/float64(n))
	}
	if b.profiles != "" {
		if err := b.saveHeapProfile(ctx, "manager", b.mgrPprof); err != nil {
			return err
		}
	}
	b.row("manager RSS", "%s", perLink(full.manager, idle.manager))
	b.row("redirector RSS", "%s", perLink(full.redirector, idle.redirector))
	// The control plane against its memory before the floor: an upper bound,
	// as the floor's deleted links are in it too (garbage, etcd history).
	b.row("kube-apiserver RSS (vs before the floor)", "%s", perLink(full.apiserver, cold.apiserver))
	b.row("etcd RSS (vs before the floor)", "%s", perLink(full.etcd, cold.etcd))
	b.row("etcd DB size (vs before the floor)", "%s", perLink(full.etcdDB, cold.etcdDB))

	linksNS := "links"
	if b.rounds > 1 {
		// Round 2, in the other order: the first round's links go, then the
		// binaries (still running) make N new links Ready; then they stop, and
		// the floor runs beside those N links (as the first convergence ran
		// beside none): the restarts below find N unchanged links.
		if err := b.deleteAll(ctx, linksNS); err != nil {
			return err
		}
		linksNS = "links2"
		conv, err := b.convergenceRound(ctx, linksNS, 2, floor)
		if err != nil {
			return err
		}
		convs = append(convs, conv)
		if err := b.rdr.stop(30 * time.Second); err != nil {
			return err
		}
		if err := b.mgr.stop(30 * time.Second); err != nil {
			return err
		}
		floor, err := b.floorRound(ctx, "floor2", 2)
		if err != nil {
			return err
		}
		floors = append(floors, floor)
	}
	var sumFloor, sumConv time.Duration
	var perRound []string
	for i := range floors {
		sumFloor, sumConv = sumFloor+floors[i], sumConv+convs[i]
		perRound = append(perRound, fmt.Sprintf("%.2f", convs[i].Seconds()/floors[i].Seconds()))
	}
	ratioText := fmt.Sprintf("%.2f", sumConv.Seconds()/sumFloor.Seconds())
	if len(floors) > 1 {
		ratioText += fmt.Sprintf(" (all rounds' convergence / all rounds' floor; round by round %s)", strings.Join(perRound, ", "))
	}
	b.row("ratio convergence / floor", "%s", ratioText)

	step("redirector restart with %d links", n)
	restart, err := b.restartRedirector(ctx)
	if err != nil {
		return err
	}
	b.row("redirector start to ready", "%s", restart)

	step("manager restart with %d unchanged links", n)
	if err := b.mgr.stop(30 * time.Second); err != nil {
		return err
	}
	time.Sleep(2 * time.Second) // the last writes of the old manager land
	before, err := b.apiMetrics(ctx)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := b.startManager(ctx); err != nil {
		return err
	}
	mgrReady := time.Since(t0)
	if err := b.waitReconciled(ctx, n); err != nil {
		return err
	}
	mgrReconciled := time.Since(t0)
	time.Sleep(5 * time.Second)
	after, err := b.apiMetrics(ctx)
	if err != nil {
		return err
	}
	writes := after.writes() - before.writes()
	b.row("manager restart: ready / all N reconciled", "%.1fs / %.1fs; peak RSS %d MiB", mgrReady.Seconds(), mgrReconciled.Seconds(), peakRSS(b.mgr.cmd.Process.Pid)>>20)
	b.row("manager restart: API writes (goal 0)", "%d (%s)", writes, after.writeDetail(before))

	return b.reaper(ctx)
}

// reaper: N/10 links that fall due for deletion at one instant, from that
// instant until all are gone, against the floor: the same number of deletes
// (with preconditions, as the reaper sends them) by plain clients.
//
// The links finish (expire) first and fall due ttlSecondsAfterFinished
// later, as with the default TTL of an hour: the controller's marking of
// the expiry (a status write and an event per link) happens before the
// deadline and is not the reaper's work, so the clock starts at the
// deletion deadline, once every link shows status.finishedAt.
func (b *bench) reaper(ctx context.Context) error {
	m := max(1, b.n/10)
	step("reaper: %d links falling due at once", m)
	if err := b.namespace(ctx, "reap"); err != nil {
		return err
	}
	allReady, stopWatch, err := b.watchLinks(ctx, "reap", m, isReady)
	if err != nil {
		return err
	}
	// Expiring a while after they are created and Ready, and due for
	// deletion a while after the controller has marked them: each wait is
	// twice the time the first N took, scaled to m, and 30s more.
	t0 := time.Now()
	est := time.Duration(2*float64(b.conv)*float64(m)/float64(b.n)) + 30*time.Second
	expiry := metav1.NewTime(time.Now().Add(est).Truncate(time.Second))
	ttl := int32(est.Seconds())
	due := expiry.Add(time.Duration(ttl) * time.Second)
	if err := b.parallel(m, func(i int) error {
		l := link("reap", i)
		l.Spec.ExpiresAt = &expiry
		l.Spec.TTLSecondsAfterFinished = ptr.To(ttl)
		return b.c.Create(ctx, l)
	}); err != nil {
		return err
	}
	select {
	case <-allReady:
	case <-time.After(time.Until(expiry.Time)):
	}
	stopWatch()
	if time.Now().After(expiry.Time) {
		return fmt.Errorf("the %d reap links were not Ready %s after their creation, before they expired", m, time.Since(t0).Round(time.Second))
	}
	allFinished, stopWatch, err := b.watchLinks(ctx, "reap", m, isFinished)
	if err != nil {
		return err
	}
	select {
	case <-allFinished:
	case <-time.After(time.Until(due)):
	}
	stopWatch()
	if time.Now().After(due) {
		return fmt.Errorf("the %d reap links were not all marked finished before they fell due", m)
	}
	time.Sleep(time.Until(due))
	gone, err := b.waitGone(ctx, "reap", 30*time.Minute)
	if err != nil {
		return err
	}
	b.row("reaper: N/10 due at once, until all deleted", "%d links in %.1fs (%.0f/s; default --reap-rate and --reap-workers), load %s", m, gone.Seconds(), float64(m)/gone.Seconds(), loadavg())

	step("reaper floor: %d deletes with preconditions by %d plain clients", m, b.clients)
	if err := b.namespace(ctx, "reapfloor"); err != nil {
		return err
	}
	// Created and reconciled before the clock starts, so the manager is as
	// idle as it is when the reaper's links fall due.
	allReady, stopWatch, err = b.watchLinks(ctx, "reapfloor", m, isReady)
	if err != nil {
		return err
	}
	links := make([]*linkv1.ShortLink, m)
	if err := b.parallel(m, func(i int) error {
		links[i] = link("reapfloor", i)
		return b.c.Create(ctx, links[i])
	}); err != nil {
		return err
	}
	select {
	case <-allReady:
	case <-time.After(30 * time.Minute):
		stopWatch()
		return errors.New("the reaper floor's links did not become Ready")
	}
	stopWatch()
	start := time.Now()
	if err := b.parallel(m, func(i int) error {
		l := links[i]
		return client.IgnoreNotFound(b.c.Delete(ctx, l, client.Preconditions{UID: &l.UID}))
	}); err != nil {
		return err
	}
	fl := time.Since(start)
	b.row("reaper floor: N/10 deletes (plain client)", "%.1fs (%.0f/s); reaper/floor %.2f", fl.Seconds(), float64(m)/fl.Seconds(), gone.Seconds()/fl.Seconds())
	return nil
}

// saveHeapProfile saves the heap profile of the binary whose pprof
// endpoints are at addr (after a GC, as /debug/pprof/heap?gc=1 does).
func (b *bench) saveHeapProfile(ctx context.Context, name, addr string) error {
	body, err := get(ctx, http.DefaultClient, "http://"+addr+"/debug/pprof/heap?gc=1")
	if err != nil {
		return fmt.Errorf("heap profile of %s: %w", name, err)
	}
	if err := os.MkdirAll(b.profiles, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(b.profiles, name+".heap"), []byte(body), 0o644)
}

// restartRedirector restarts bin/redirector and says how long it took to be ready, how it synced, the
// CPU it and the API server spent meanwhile, and its peak RSS.
func (b *bench) restartRedirector(ctx context.Context) (string, error) {
	before, err := b.apiMetrics(ctx)
	if err != nil {
		return "", err
	}
	if err := b.rdr.stop(30 * time.Second); err != nil {
		return "", err
	}
	apiPid := findPid("kube-apiserver", "--secure-port="+b.env.ControlPlane.APIServer.Port)
	apiCPU := cpuSeconds(apiPid)
	t0 := time.Now()
	if err := b.startRedirector(ctx); err != nil {
		return "", err
	}
	took := time.Since(t0)
	rdrCPU, apiCPU := cpuSeconds(b.rdr.cmd.Process.Pid), cpuSeconds(apiPid)-apiCPU
	after, err := b.apiMetrics(ctx)
	if err != nil {
		return "", err
	}
	lists := after.sum("shortlinks", "LIST") - before.sum("shortlinks", "LIST")
	streamed := int64(after.watchList - before.watchList)
	how := "one unpaged LIST, then WATCH"
	switch {
	case lists == 0 && streamed > 0:
		how = "WatchList (streaming watch, sendInitialEvents)"
	case lists > 1:
		how = fmt.Sprintf("a paginated LIST (%d pages), then WATCH", lists)
	}
	apiCPUText := fmt.Sprintf("%.1fs", apiCPU)
	if apiPid == 0 {
		apiCPUText = "unknown (process not found)"
	}
	return fmt.Sprintf("%.1fs; initial sync by %s (shortlinks: %d LIST, %d watch-list requests); CPU meanwhile: redirector %.1fs, kube-apiserver %s; redirector peak RSS %d MiB",
		took.Seconds(), how, lists, streamed, rdrCPU, apiCPUText, peakRSS(b.rdr.cmd.Process.Pid)>>20), nil
}

func (b *bench) startControlPlane() error {
	var err error
	b.env, b.cfg, err = testenv.StartAt(b.root)
	if err != nil {
		return err
	}
	user, err := b.env.ControlPlane.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return err
	}
	b.kubeconfig = filepath.Join(b.dir, "kubeconfig")
	if err := os.WriteFile(b.kubeconfig, kc, 0o600); err != nil {
		return err
	}
	b.cfg = rest.CopyConfig(b.cfg)
	b.cfg.QPS, b.cfg.Burst = -1, 0 // the floor is not throttled on the client
	b.c, err = client.NewWithWatch(b.cfg, client.Options{Scheme: scheme})
	return err
}

func (b *bench) startManager(ctx context.Context) error {
	var err error
	if b.mgrProbe == "" {
		if b.mgrProbe, err = devenv.FreeAddr(); err != nil {
			return err
		}
		if b.mgrMetrics, err = devenv.FreeAddr(); err != nil {
			return err
		}
	}
	// Default flags, but for where to listen: metrics over plain HTTP, to
	// read the reconcile count.
	args := []string{"--kubeconfig", b.kubeconfig, "--health-probe-bind-address", b.mgrProbe,
		"--metrics-bind-address", b.mgrMetrics, "--metrics-secure=false"}
	if b.profiles != "" {
		if b.mgrPprof == "" {
			if b.mgrPprof, err = devenv.FreeAddr(); err != nil {
				return err
			}
		}
		args = append(args, "--pprof-bind-address", b.mgrPprof)
	}
	b.mgr, err = start("manager", filepath.Join(b.dir, "manager.log"), filepath.Join(b.root, "bin", "manager"), nil, args...)
	if err != nil {
		return err
	}
	return b.waitReady(ctx, b.mgr, b.mgrProbe)
}

func (b *bench) startRedirector(ctx context.Context) error {
	var err error
	if b.rdrProbe == "" {
		if b.rdrProbe, err = devenv.FreeAddr(); err != nil {
			return err
		}
	}
	addr, err := devenv.FreeAddr()
	if err != nil {
		return err
	}
	b.rdr, err = start("redirector", filepath.Join(b.dir, "redirector.log"), filepath.Join(b.root, "bin", "redirector"), nil,
		"--kubeconfig", b.kubeconfig, "--bind-address", addr, "--health-probe-bind-address", b.rdrProbe)
	if err != nil {
		return err
	}
	return b.waitReady(ctx, b.rdr, b.rdrProbe)
}

func (b *bench) waitReady(ctx context.Context, p *proc, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := devenv.WaitHTTP(ctx, "http://"+addr+"/readyz", http.StatusOK); err != nil {
		return fmt.Errorf("%s (log %s): %w", p.name, p.log, err)
	}
	return nil
}

// waitServed reports on the channel when the redirector's index serves at
// least n links, polling its metrics (a request every 100ms, at the cost of
// a scrape).
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

func link(ns string, i int) *linkv1.ShortLink {
	return &linkv1.ShortLink{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("l%07d", i)},
		Spec:       linkv1.ShortLinkSpec{URL: fmt.Sprintf("https://example.com/articles/%d?utm_source=bench&b=2&a=1", i)},
	}
}

// Memory.

type usage struct{ manager, redirector, apiserver, etcd, etcdDB int64 }

// settledMemory is memory once the manager's and the redirector's RSS have
// stopped falling (the Go scavenger returns the garbage of a burst to the
// OS over seconds): read every second until neither falls by 256 KiB, at
// least 3 s and at most 30 s. hack/bench-redirect.sh settles the same way.
func (b *bench) settledMemory() usage {
	time.Sleep(2 * time.Second)
	prev := b.memory()
	for i := 0; i < 28; i++ {
		time.Sleep(time.Second)
		cur := b.memory()
		if prev.manager-cur.manager < 256<<10 && prev.redirector-cur.redirector < 256<<10 {
			return cur
		}
		prev = cur
	}
	return prev
}

func (b *bench) memory() usage {
	var u usage
	if b.mgr != nil && b.rdr != nil {
		u.manager, u.redirector = rss(b.mgr.cmd.Process.Pid), rss(b.rdr.cmd.Process.Pid)
	}
	port := b.env.ControlPlane.APIServer.Port
	u.apiserver = rss(findPid("kube-apiserver", "--secure-port="+port))
	etcdDir := b.env.ControlPlane.Etcd.DataDir
	u.etcd = rss(findPid("etcd", etcdDir))
	if fi, err := os.Stat(filepath.Join(etcdDir, "member", "snap", "db")); err == nil {
		u.etcdDB = fi.Size()
	}
	return u
}

// cpuUse is the CPU time used so far by each process of the benchmark.
type cpuUse struct{ apiserver, etcd, manager, redirector, bench float64 }

func (b *bench) cpu() cpuUse {
	u := cpuUse{
		apiserver: cpuSeconds(findPid("kube-apiserver", "--secure-port="+b.env.ControlPlane.APIServer.Port)),
		etcd:      cpuSeconds(findPid("etcd", b.env.ControlPlane.Etcd.DataDir)),
		bench:     cpuSeconds(os.Getpid()),
	}
	if b.mgr != nil && b.rdr != nil {
		u.manager, u.redirector = cpuSeconds(b.mgr.cmd.Process.Pid), cpuSeconds(b.rdr.cmd.Process.Pid)
	}
	return u
}

// since is the CPU each process used from before to u, in seconds.
func (u cpuUse) since(before cpuUse) string {
	return fmt.Sprintf("kube-apiserver %.0fs, etcd %.0fs, manager %.0fs, redirector %.0fs, the benchmark %.0fs",
		u.apiserver-before.apiserver, u.etcd-before.etcd, u.manager-before.manager, u.redirector-before.redirector, u.bench-before.bench)
}

// cpuSeconds is the CPU time (user and system) pid has used.
func cpuSeconds(pid int) float64 {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses.
	i := strings.LastIndexByte(string(stat), ')')
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ, 100 on Linux
}

// rss is a process's resident memory now; peakRSS its high-water mark.
func rss(pid int) int64     { return procStatusBytes(pid, "VmRSS:") }
func peakRSS(pid int) int64 { return procStatusBytes(pid, "VmHWM:") }

func procStatusBytes(pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if kb, ok := strings.CutPrefix(s.Text(), field); ok {
			v, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), 10, 64)
			return v * 1024
		}
	}
	return 0
}

// findPid finds the process whose executable is named exe and whose command
// line contains arg.
func findPid(exe, arg string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if filepath.Base(args[0]) == exe && strings.Contains(string(cmdline), arg) {
			return pid
		}
	}
	return 0
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// API server metrics.

type apiMetrics struct {
	requests  map[[2]string]float64 // resource, verb
	watchList float64
}

func (m apiMetrics) sum(resource, verb string) int64 {
	return int64(m.requests[[2]string{resource, verb}])
}

var writeVerbs = []string{"POST", "PUT", "PATCH", "DELETE", "APPLY", "DELETECOLLECTION"}

// writes counts writes of ShortLinks (and their status) and Events.
func (m apiMetrics) writes() int64 {
	var n int64
	for _, r := range []string{"shortlinks", "events"} {
		for _, v := range writeVerbs {
			n += m.sum(r, v)
		}
	}
	return n
}

func (m apiMetrics) writeDetail(before apiMetrics) string {
	var parts []string
	for _, r := range []string{"shortlinks", "events"} {
		for _, v := range writeVerbs {
			if d := m.sum(r, v) - before.sum(r, v); d != 0 {
				parts = append(parts, fmt.Sprintf("%s %s %d", v, r, d))
			}
		}
	}
	if len(parts) == 0 {
		return "apiserver_request_total: no PATCH/PUT/POST/DELETE of shortlinks or events"
	}
	return strings.Join(parts, ", ")
}

// floorRound creates n links in ns and writes each one's status once, by
// plain clients, then deletes them (outside the clock).
func (b *bench) floorRound(ctx context.Context, ns string, round int) (time.Duration, error) {
	n := b.n
	step("floor, round %d: %d creates + %d status patches by %d plain clients", round, n, n, b.clients)
	if err := b.namespace(ctx, ns); err != nil {
		return 0, err
	}
	cpu := b.cpu()
	api, err := b.apiMetrics(ctx)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := b.parallel(n, func(i int) error {
		l := link(ns, i)
		if err := b.c.Create(ctx, l); err != nil {
			return err
		}
		base := l.DeepCopy()
		l.Status.Code, l.Status.CanonicalURL, l.Status.ObservedGeneration = fmt.Sprintf("c%09d", i), l.Spec.URL, l.Generation
		meta.SetStatusCondition(&l.Status.Conditions, metav1.Condition{Type: linkv1.ConditionReady, Status: metav1.ConditionTrue, Reason: linkv1.ReasonCodeAssigned, Message: "floor"})
		return b.c.Status().Patch(ctx, l, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	}); err != nil {
		return 0, err
	}
	floor := time.Since(t0)
	name := fmt.Sprintf("floor, round %d", round)
	b.row(name+": N creates + N status patches (plain client)", "%.1fs (%.0f links/s), load %s", floor.Seconds(), float64(n)/floor.Seconds(), loadavg())
	b.row(name+": CPU", "%s", b.cpu().since(cpu))
	if err := b.requestRow(ctx, name+": API requests", api); err != nil {
		return 0, err
	}
	// Gone before the manager starts, so it does not reconcile them.
	return floor, b.deleteAll(ctx, ns)
}

// convergenceRound creates n links in ns and waits until the redirector
// serves them all, then checks that all are Ready (outside the clock).
func (b *bench) convergenceRound(ctx context.Context, ns string, round int, floor time.Duration) (time.Duration, error) {
	n := b.n
	step("convergence, round %d: %d creates by %d clients until all Ready", round, n, b.clients)
	if err := b.namespace(ctx, ns); err != nil {
		return 0, err
	}
	// The index must not count the links of an earlier round.
	if err := <-b.waitIndex(ctx, func(links float64) bool { return links == 0 }); err != nil {
		return 0, err
	}
	// The end is read from the redirector's index (every link Ready and
	// served), not from a watch of the benchmark's own: a third watcher
	// would cost the API server and this process CPU that the floor does not
	// spend, on a machine where CPU is what both phases wait for.
	allServed := b.waitServed(ctx, n)
	cpu := b.cpu()
	api, err := b.apiMetrics(ctx)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := b.parallel(n, func(i int) error { return b.c.Create(ctx, link(ns, i)) }); err != nil {
		return 0, err
	}
	created := time.Since(t0)
	select {
	case err := <-allServed:
		if err != nil {
			return 0, err
		}
	case <-time.After(max(30*time.Minute, 20*floor)):
		return 0, errors.New("the redirector did not serve every link")
	}
	conv := time.Since(t0)
	name := fmt.Sprintf("convergence, round %d", round)
	b.row(name+": N creates until the redirector serves all (manager)", "%.1fs (creates done at %.1fs), load %s",
		conv.Seconds(), created.Seconds(), loadavg())
	b.row(name+": CPU", "%s", b.cpu().since(cpu))
	if err := b.requestRow(ctx, name+": API requests", api); err != nil {
		return 0, err
	}
	return conv, b.checkAllReady(ctx, ns, n)
}

// requestRow prints the API requests made since before.
func (b *bench) requestRow(ctx context.Context, name string, before apiMetrics) error {
	now, err := b.apiMetrics(ctx)
	if err != nil {
		return err
	}
	b.row(name, "%s (each at least N/100 times)", now.requestDetail(before, max(1, int64(b.n/100))))
	return nil
}

// requestDetail lists the API requests since before, by resource and verb,
// the most frequent first, leaving out those made fewer than atLeast times (the
// control plane's own, such as leases and relists).
func (m apiMetrics) requestDetail(before apiMetrics, atLeast int64) string {
	type count struct {
		key [2]string
		n   int64
	}
	var counts []count
	for k, v := range m.requests {
		if d := int64(v - before.requests[k]); d >= atLeast {
			counts = append(counts, count{k, d})
		}
	}
	slices.SortFunc(counts, func(a, b count) int { return cmp.Compare(b.n, a.n) })
	parts := make([]string, 0, len(counts))
	for _, c := range counts {
		parts = append(parts, fmt.Sprintf("%s %s %d", c.key[1], c.key[0], c.n))
	}
	return strings.Join(parts, ", ")
}

func (b *bench) apiMetrics(ctx context.Context) (apiMetrics, error) {
	hc, err := rest.HTTPClientFor(b.cfg)
	if err != nil {
		return apiMetrics{}, err
	}
	body, err := get(ctx, hc, strings.TrimRight(b.cfg.Host, "/")+"/metrics")
	if err != nil {
		return apiMetrics{}, err
	}
	m := apiMetrics{requests: map[[2]string]float64{}}
	for _, line := range strings.Split(body, "\n") {
		switch {
		case strings.HasPrefix(line, "apiserver_request_total{"):
			m.requests[[2]string{label(line, "resource"), label(line, "verb")}] += value(line)
		case strings.HasPrefix(line, "apiserver_watch_list_duration_seconds_count{") && strings.Contains(line, `resource="shortlinks"`):
			m.watchList += value(line)
		}
	}
	return m, nil
}

func get(ctx context.Context, hc *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(data), err
}

func label(line, name string) string {
	_, after, ok := strings.Cut(line, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(after, `"`)
	return v
}

func value(line string) float64 {
	i := strings.LastIndexByte(line, ' ')
	v, _ := strconv.ParseFloat(line[i+1:], 64)
	return v
}

// Processes.

type proc struct {
	name, log string
	cmd       *exec.Cmd
	done      chan struct{}
}

// start runs bin with args, its environment plus env, logging to logPath.
func start(name, logPath, bin string, env []string, args ...string) (*proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = f.Close(); close(p.done) }()
	return p, nil
}

func (p *proc) stop(grace time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("%s did not exit within %s of SIGTERM", p.name, grace)
	}
}

func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	return strings.Join(f[:3], " ")
}

func numCPU() int {
	data, _ := os.ReadFile("/proc/cpuinfo")
	return max(1, strings.Count(string(data), "processor\t:"))
}
