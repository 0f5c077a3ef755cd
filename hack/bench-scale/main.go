// Command bench-scale measures linkforge at N links on this machine (make
// bench-scale): a local control plane (envtest's etcd and kube-apiserver),
// the real bin/manager and bin/redirector with their default flags, and N
// ShortLinks created by 8 parallel clients. It prints one table: convergence
// against a floor measured in the same run, memory per link, the
// redirector's start with N links, a manager restart with N unchanged links,
// and the reaper deleting 10% of N at once against its floor.
package main

import (
	"cmp"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
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
	// profiles, if set, is where both binaries' heap profiles are saved,
	// before the first link and with N (they then also get
	// --pprof-bind-address, and GODEBUG=memprofilerate; account.go).
	profiles           string
	mgrPprof, rdrPprof string
	// kind is what the links have besides spec.url (linkKinds).
	kind string
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
	b := &bench{kind: cmp.Or(os.Getenv("LINKS"), kindPlain)}
	flag.IntVar(&b.n, "n", defN, "Links to create (or N=).")
	flag.IntVar(&b.clients, "clients", 8, "Parallel clients creating links, on both sides of each comparison.")
	flag.IntVar(&b.rounds, "rounds", defRounds, "Rounds of floor and convergence (or ROUNDS=): 1, or 2 in the order floor, convergence, convergence, floor.")
	flag.StringVar(&b.root, "root", ".", "Repository root (bin/manager and bin/redirector are run from root/bin).")
	flag.StringVar(&b.profiles, "heap-profiles", "", "Save heap profiles of bin/manager and bin/redirector into this directory, before the first link and with N, "+
		"and split the live bytes per link by what holds them (both then run with --pprof-bind-address on a free local port, the one flag added to their defaults, "+
		"and with GODEBUG=memprofilerate=4096).")
	flag.StringVar(&b.kind, "links", b.kind, "What the links have besides spec.url (or LINKS=): "+strings.Join(slices.Sorted(maps.Keys(linkKinds)), ", ")+".")
	flag.Parse()
	if b.rounds != 1 && b.rounds != 2 {
		return fmt.Errorf("-rounds %d: 1 or 2", b.rounds)
	}
	if _, ok := linkKinds[b.kind]; !ok {
		return fmt.Errorf("-links %q: one of %s", b.kind, strings.Join(slices.Sorted(maps.Keys(linkKinds)), ", "))
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
	fmt.Printf("bench-scale N=%d clients=%d links=%s, %s, load %s, %d CPUs\n", b.n, b.clients, b.kind, time.Now().UTC().Format(time.RFC3339), loadavg(), numCPU())

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
	fmt.Printf("\nN=%d clients=%d links=%s, took %s, load at the end %s (logs in %s)\n", b.n, b.clients, b.kind, time.Since(start).Round(time.Second), loadavg(), b.dir)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(w, "| measure\t| value\t|")
	_, _ = fmt.Fprintln(w, "|---\t|---\t|")
	for _, r := range b.rows {
		_, _ = fmt.Fprintf(w, "| %s\t| %s\t|\n", r[0], r[1])
	}
	_ = w.Flush()
	return err
}
