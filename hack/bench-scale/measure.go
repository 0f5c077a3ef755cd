package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// The convergence, memory and restart measurements, and their rounds.

func (b *bench) measure() error {
	ctx := context.Background()
	n := b.n

	// A fresh API server is slow on its first requests (connections, the
	// CRD's handlers, etcd's first pages): warm it up outside the clocks.
	if err := b.namespace(ctx, "warmup"); err != nil {
		return err
	}
	if err := b.parallel(min(n, 500), func(i int) error { return b.c.Create(ctx, b.link("warmup", i)) }); err != nil {
		return err
	}
	if err := b.deleteAll(ctx, "warmup"); err != nil {
		return err
	}

	// The control plane's memory before any link; the floor's links, deleted
	// before the binaries start, leave garbage and history behind.
	time.Sleep(2 * time.Second)
	coldPlane := b.memory()

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
	// The binaries' memory before any link, then after a few hundred links
	// came and went: the first links page in the code that serves them and
	// grow what every process keeps once (buffers, pools, the runtime's
	// own), which counted 0.37 KiB a link more for the manager and 0.54 for
	// the redirector at 10,000 links. Memory per link is counted from the
	// second; the row gives the first too.
	cold := b.settledMemory()
	if err := b.warmBinaries(ctx); err != nil {
		return err
	}
	idle := b.settledMemory()
	idleMgrHeap, idleRdrHeap := b.goHeaps(ctx)
	if b.profiles != "" {
		if err := b.saveHeapProfiles(ctx, "idle"); err != nil {
			return err
		}
	}
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
	binaryRSS := func(after, before, beforeCold, afterAnon, beforeAnon int64) string {
		return fmt.Sprintf("%s; anonymous %.2f KiB/link, the rest file pages; from before the first link (%.0f MiB): %.2f KiB/link",
			perLink(after, before), float64(afterAnon-beforeAnon)/1024/float64(n), mib(beforeCold), float64(after-beforeCold)/1024/float64(n))
	}
	fullMgrHeap, fullRdrHeap := b.goHeaps(ctx)
	b.row("manager RSS", "%s", binaryRSS(full.manager, idle.manager, cold.manager, full.managerAnon, idle.managerAnon))
	b.heapRow("manager", idleMgrHeap, fullMgrHeap)
	b.row("redirector RSS", "%s", binaryRSS(full.redirector, idle.redirector, cold.redirector, full.redirectorAnon, idle.redirectorAnon))
	b.heapRow("redirector", idleRdrHeap, fullRdrHeap)
	if b.profiles != "" {
		if err := b.saveHeapProfiles(ctx, "full"); err != nil {
			return err
		}
		if err := b.accountRows(); err != nil {
			return err
		}
	}
	// The control plane against its memory before the floor: an upper bound,
	// as the floor's deleted links are in it too (garbage, etcd history).
	b.row("kube-apiserver RSS (vs before the floor)", "%s", perLink(full.apiserver, coldPlane.apiserver))
	b.row("etcd RSS (vs before the floor)", "%s", perLink(full.etcd, coldPlane.etcd))
	b.row("etcd DB size (vs before the floor)", "%s", perLink(full.etcdDB, coldPlane.etcdDB))

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

// warmBinaries has the binaries make min(n, 500) links Ready and serve
// them, then forget them.
func (b *bench) warmBinaries(ctx context.Context) error {
	const ns = "warmup-binaries"
	m := min(b.n, 500)
	step("warming the binaries up: %d links made Ready, served and deleted", m)
	if err := b.namespace(ctx, ns); err != nil {
		return err
	}
	served := b.waitServed(ctx, m)
	if err := b.parallel(m, func(i int) error { return b.c.Create(ctx, b.link(ns, i)) }); err != nil {
		return err
	}
	if err := <-served; err != nil {
		return err
	}
	if err := b.deleteAll(ctx, ns); err != nil {
		return err
	}
	return <-b.waitIndex(ctx, func(links float64) bool { return links == 0 })
}

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
		l := b.link(ns, i)
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
	if err := b.parallel(n, func(i int) error { return b.c.Create(ctx, b.link(ns, i)) }); err != nil {
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
