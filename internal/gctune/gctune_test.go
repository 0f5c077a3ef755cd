package gctune

import (
	"context"
	"runtime/debug"
	"testing"
	"time"
)

func TestGCTunerStep(t *testing.T) {
	tuner := Tuner{BusyPercent: 50, QuietPercent: 10, BusyRate: 1000, QuietAfter: 2 * time.Second, Interval: time.Second}
	t0 := time.Unix(1000, 0)
	// A tick: seconds since t0, bytes allocated since the start, live heap.
	type tick struct {
		sec          int
		allocs, live uint64
		want         gcAction
	}
	for _, tc := range []struct {
		name  string
		ticks []tick
	}{{
		name: "a start, then quiet: GOGC 10 and the memory returned",
		ticks: []tick{
			{1, 5000, 4000, gcAction{}},
			{2, 5500, 4000, gcAction{}},
			{3, 5600, 4000, gcAction{percent: 10, release: true}},
			{4, 5700, 4000, gcAction{}},
			{10, 5800, 4000, gcAction{}},
		},
	}, {
		name: "quiet, then a burst: GOGC 50 again from its first busy tick; quiet again 2 s after its last",
		ticks: []tick{
			{2, 100, 4000, gcAction{percent: 10}},
			{3, 5000, 4000, gcAction{percent: 50}},
			{4, 9000, 5000, gcAction{}},
			{5, 9100, 5000, gcAction{}},
			{6, 9200, 5000, gcAction{percent: 10, release: true}},
		},
	}, {
		name: "a rate just below BusyRate is quiet; at BusyRate busy",
		ticks: []tick{
			{1, 999, 100000, gcAction{}},
			{2, 1998, 100000, gcAction{percent: 10, release: false}},
			{3, 2997, 100000, gcAction{}},
			{4, 3998, 100000, gcAction{percent: 50}},
		},
	}, {
		name: "back to quiet after less than 10% of the live heap allocated since the last release: no release",
		ticks: []tick{
			{2, 1500, 100000, gcAction{percent: 10}},
			{3, 5000, 100000, gcAction{percent: 50}},
			{5, 5500, 100000, gcAction{percent: 10}},
			{6, 12000, 100000, gcAction{percent: 50}},
			{8, 12500, 100000, gcAction{percent: 10, release: true}},
		},
	}, {
		name: "a busy tick resets the quiet delay",
		ticks: []tick{
			{1, 2000, 4000, gcAction{}},
			{2, 2100, 4000, gcAction{}},
			{3, 4000, 4000, gcAction{}},
			{4, 4100, 4000, gcAction{}},
			{5, 4200, 4000, gcAction{percent: 10, release: true}},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newGCTunerState(heapSample{at: t0})
			for i, tk := range tc.ticks {
				got := tuner.step(&s, heapSample{at: t0.Add(time.Duration(tk.sec) * time.Second), allocs: tk.allocs, live: tk.live})
				if got != tk.want {
					t.Fatalf("tick %d (%ds): %+v, want %+v", i, tk.sec, got, tk.want)
				}
			}
		})
	}
}

// The zero Tuner (what a binary runs when GOGC is set in the environment)
// returns at once and leaves GOGC as it is.
func TestZeroTunerDoesNothing(t *testing.T) {
	before := debug.SetGCPercent(77)
	defer debug.SetGCPercent(before)
	done := make(chan error, 1)
	go func() { done <- Tuner{}.Start(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second): // "at once", with a busy machine's margin
		t.Fatal("the zero Tuner did not return")
	}
	if got := debug.SetGCPercent(77); got != 77 {
		t.Errorf("GOGC %d after the zero Tuner, want 77 kept", got)
	}
}
