package main

import (
	"flag"
	"io"
	"testing"

	"github.com/linkforge/linkforge/controllers"
)

// TestFlagDefaults checks that the scaling flags default to
// controllers.Defaults, which the convergence benchmark runs and the README
// documents.
func TestFlagDefaults(t *testing.T) {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var o options
	bindFlags(fs, &o)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if got, want := o.qps, float64(controllers.Defaults.QPS); got != want {
		t.Errorf("--kube-api-qps defaults to %v, want %v", got, want)
	}
	if got, want := o.burst, controllers.Defaults.Burst; got != want {
		t.Errorf("--kube-api-burst defaults to %v, want %v", got, want)
	}
	if got, want := o.maxConcurrentReconciles, controllers.Defaults.MaxConcurrentReconciles; got != want {
		t.Errorf("--max-concurrent-reconciles defaults to %v, want %v", got, want)
	}
	// The documented values (README, performance section).
	if o.qps >= 0 {
		t.Errorf("--kube-api-qps defaults to %v: want no client-side limit (negative), as documented", o.qps)
	}
	if o.maxConcurrentReconciles != 16 {
		t.Errorf("--max-concurrent-reconciles defaults to %d, want the documented 16", o.maxConcurrentReconciles)
	}
	if o.namespaces != "" || o.leaderElectionID != "" {
		t.Errorf("--namespaces=%q --leader-election-id=%q: want both empty (all namespaces, %s)", o.namespaces, o.leaderElectionID, controllers.DefaultLeaderElectionID)
	}
	if o.readBeforeDelete {
		t.Error("--reap-read-before-delete defaults to true, want false")
	}
}

func TestFlagsParse(t *testing.T) {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	var o options
	bindFlags(fs, &o)
	if err := fs.Parse([]string{"--namespaces", "a, b,,a", "--kube-api-qps", "50", "--max-concurrent-reconciles", "3"}); err != nil {
		t.Fatal(err)
	}
	if got := controllers.ParseNamespaces(o.namespaces); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("--namespaces %q parsed as %q, want [a b]", o.namespaces, got)
	}
	if o.qps != 50 || o.maxConcurrentReconciles != 3 {
		t.Errorf("qps=%v workers=%d, want 50 and 3", o.qps, o.maxConcurrentReconciles)
	}
}
