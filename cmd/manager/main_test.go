package main

import (
	"flag"
	"os"
	"strconv"
	"testing"

	"github.com/linkforge/linkforge/controllers"
)

// TestFlagDefaults runs the manager's flag setup (run with --version, which
// returns after parsing) and checks that the scaling flags default to
// controllers.Defaults, which the convergence benchmark runs, and to the
// values the README documents.
func TestFlagDefaults(t *testing.T) {
	args, flags := os.Args, flag.CommandLine
	defer func() { os.Args, flag.CommandLine = args, flags }()
	// run defines its flags on the command line's set: a fresh one each
	// run, so the test passes when run again (go test -count).
	flag.CommandLine = flag.NewFlagSet("manager", flag.ContinueOnError)
	os.Args = []string{"manager", "--version"}
	if err := run(); err != nil {
		t.Fatal(err)
	}
	def := func(name string) string {
		f := flag.CommandLine.Lookup(name)
		if f == nil {
			t.Fatalf("no flag --%s", name)
		}
		return f.DefValue
	}
	for _, c := range []struct{ flag, want, documented string }{
		{"kube-api-qps", strconv.FormatFloat(float64(controllers.Defaults.QPS), 'g', -1, 64), "-1"},
		{"kube-api-burst", strconv.Itoa(controllers.Defaults.Burst), "0"},
		{"max-concurrent-reconciles", strconv.Itoa(controllers.Defaults.MaxConcurrentReconciles), "16"},
		{"reap-rate", strconv.FormatFloat(controllers.DefaultReapRate, 'g', -1, 64), "0"},
		{"reap-workers", strconv.Itoa(controllers.DefaultReapWorkers), "16"},
		{"namespaces", "", ""},
		{"leader-election-id", "", ""},
		{"dedup", "true", "true"},
		{"code-metrics-namespaces", strconv.Itoa(controllers.DefaultMetricsNamespaceLimit), "500"},
	} {
		if got := def(c.flag); got != c.want || got != c.documented {
			t.Errorf("--%s defaults to %q, want %q (controllers.Defaults) and %q (README)", c.flag, got, c.want, c.documented)
		}
	}
}

func TestMetricsNamespaceLimit(t *testing.T) {
	for flagValue, want := range map[int]int{0: -1, -3: -1, 1: 1, 500: 500} {
		if got := metricsNamespaceLimit(flagValue); got != want {
			t.Errorf("--code-metrics-namespaces=%d: limit %d, want %d", flagValue, got, want)
		}
	}
}
