// Package gctune sets a binary's GOGC from how fast it allocates, for the
// manager and the redirector alike: their heaps are mostly long-lived
// caches that grow in bursts (new links, a restart's initial sync) and
// then stay quiet for hours.
package gctune

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// QuietPercent is GOGC while a binary allocates little (see Tuner): a
// collection every 10% of the live heap allocated.
const QuietPercent = 10

// Tuner sets GOGC from how fast the process allocates: BusyPercent while
// it works (a burst of new links, a restart's initial sync, a mass
// expiry), QuietPercent once it has allocated less than BusyRate for
// QuietAfter, and on that change it collects and returns the freed memory to
// the OS once (debug.FreeOSMemory).
//
// The Go runtime keeps about the heap goal, (1+GOGC/100) times the live heap
// of the last collection, plus 10%, and collects again only when that much
// has been allocated. With GOGC 50, a manager that has just reconciled 10,000
// new links keeps the heap goal of the burst's last collection (live links
// plus the burst's work in flight) for as long as it stays quiet, which may
// be hours: its RSS was 2.7 KiB a link for 1.3 KiB of live heap (make
// bench-scale). A collection's CPU is about proportional to the live heap, and
// there is one per GOGC% of it allocated, so the collector's share of the CPU
// follows the allocation rate times 100/GOGC, whatever the number of links:
// while the manager works it keeps GOGC 50, which the convergence benchmark
// needs; below BusyRate, GOGC 10 costs at most a few collections a second of a
// few milliseconds per MB of live heap. This is the JVM's answer too (JEP 346,
// G1 returns memory to the OS once the application is idle).
//
// The redirector's heap is the same kind (its informer's Links, the index
// and the use counters, which grow with each burst of new links) and it
// allocates nothing per redirect, so it runs the same tuner: without it,
// its Go heap in use grew 1.23 times its live heap over a burst of 10,000
// new links, settled; with it, 1.02 times (make bench-scale).
//
// GOGC set in the environment turns the tuner off (cmd/manager and
// cmd/redirector do not add it): an operator's GOGC is kept as given.
type Tuner struct {
	// BusyPercent and QuietPercent are GOGC while busy and while quiet.
	BusyPercent, QuietPercent int
	// BusyRate is the allocation rate, in bytes a second, from which the
	// process counts as busy.
	BusyRate float64
	// QuietAfter is how long the rate stays below BusyRate before the
	// process counts as quiet.
	QuietAfter time.Duration
	// Interval is how often the rate is read.
	Interval time.Duration
}

// Default is the tuner of both binaries, busy at GOGC busyPercent (their
// GCPercent). A new link costs the manager about 100 KB of allocations
// (decoding its events, the reconcile, the status patch; make
// bench-scale), so 2 MiB/s is about 20 new links a second; a scrape of
// /metrics allocates less than a MiB. Below it, GOGC 10 costs at most about
// 3% of a CPU (a collection marks about 1.6 ms per MB of live heap on the
// benchmark's machine: 10 collections per live heap allocated, 2 MiB/s).
// The memory is returned 2 to 3 s after the last busy second.
func Default(busyPercent int) Tuner {
	return Tuner{
		BusyPercent:  busyPercent,
		QuietPercent: QuietPercent,
		BusyRate:     2 << 20,
		QuietAfter:   2 * time.Second,
		Interval:     time.Second,
	}
}

// heapSample is what the tuner reads of the runtime: when, the bytes
// allocated on the heap since the start, and the live heap of the last
// collection.
type heapSample struct {
	at           time.Time
	allocs, live uint64
}

// gcAction is what a tick does: set GOGC to percent (0: leave it), then
// release (debug.FreeOSMemory) or not.
type gcAction struct {
	percent int
	release bool
}

// gcTunerState is the tuner between ticks. A binary starts busy (its main
// sets GCPercent): its start allocates the scheme, the caches and their
// initial lists.
type gcTunerState struct {
	quiet    bool
	lastBusy time.Time
	prev     heapSample
	// releasedAt is the allocation count at the last release.
	releasedAt uint64
}

func newGCTunerState(first heapSample) gcTunerState {
	return gcTunerState{lastBusy: first.at, prev: first}
}

// step decides a tick from the new sample. Busy from the first interval
// above BusyRate; quiet after QuietAfter below it. Going quiet releases the
// freed memory if more than QuietPercent of the live heap was allocated since
// the last release: less could not have grown the heap past the quiet goal,
// and a collection is skipped for the odd reconcile between quiet spells.
func (t Tuner) step(s *gcTunerState, now heapSample) gcAction {
	prev := s.prev
	s.prev = now
	elapsed := now.at.Sub(prev.at).Seconds()
	busy := elapsed > 0 && float64(now.allocs-prev.allocs)/elapsed >= t.BusyRate
	switch {
	case busy:
		s.lastBusy = now.at
		if s.quiet {
			s.quiet = false
			return gcAction{percent: t.BusyPercent}
		}
	case !s.quiet && now.at.Sub(s.lastBusy) >= t.QuietAfter:
		s.quiet = true
		a := gcAction{percent: t.QuietPercent}
		if now.allocs-s.releasedAt > now.live*uint64(t.QuietPercent)/100 {
			a.release = true
			s.releasedAt = now.allocs
		}
		return a
	}
	return gcAction{}
}

// Start runs the tuner until ctx ends (a manager.Runnable). The zero
// Tuner changes nothing: it returns at once.
func (t Tuner) Start(ctx context.Context) error {
	if t.Interval <= 0 {
		return nil
	}
	state := newGCTunerState(readHeapSample())
	_ = wait.PollUntilContextCancel(ctx, t.Interval, false, func(context.Context) (bool, error) {
		a := t.step(&state, readHeapSample())
		if a.percent != 0 {
			debug.SetGCPercent(a.percent)
		}
		if a.release {
			debug.FreeOSMemory()
		}
		return false, nil
	})
	return nil
}

// NeedLeaderElection is false: every replica holds the caches.
func (Tuner) NeedLeaderElection() bool { return false }

func readHeapSample() heapSample {
	samples := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(samples)
	return heapSample{at: time.Now(), allocs: samples[0].Value.Uint64(), live: samples[1].Value.Uint64()}
}
