// Command redirector-bench is the redirector of hack/bench-redirect.sh: the
// production redirect.Redirector, index, informer transform and fasthttp
// server (redirect.NewServer with the production defaults), fed synthetic
// links instead of an API server (see synthetic.go). It keeps benchmark
// scaffolding out of bin/redirector.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/linkforge/linkforge/internal/events"
	"github.com/linkforge/linkforge/internal/redirect"
	"github.com/linkforge/linkforge/internal/uses"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "redirector-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	links := flag.Int("links", 100_000, "Synthetic links to serve.")
	nss := flag.Int("namespaces", 100, "Namespaces the links are spread over.")
	table := flag.String("table", "", "Write 'namespace code url' of the links to this file and exit.")
	bindAddr := flag.String("bind-address", "127.0.0.1:18080", "Address of the redirect server.")
	probeAddr := flag.String("health-probe-bind-address", "127.0.0.1:18081", "Address of /healthz, /readyz and /metrics.")
	accessLog := flag.Bool("access-log", false, "Write one JSON access-log line per request to stdout.")
	cpuProfile := flag.String("cpuprofile", "", "Write a CPU profile of the whole run to this file.")
	countUses := flag.Bool("count-uses", true,
		"Count uses on the request path as bin/redirector does (in memory; with no API server, nothing is written). false measures the path without counting.")
	publicBaseURL := flag.String("public-base-url", "", "As bin/redirector's --public-base-url: the host of the QR codes of /<namespace>/<code>.")
	kind := flag.String("link-kind", kindPlain, "The synthetic links: plain (spec.url only), or rules (8 rules and 3 variants each, see benchlinks.WithRules).")
	// bin/redirector's --events-* flags: click events on with a sink set
	// (hack/callgrind-bench's "events" server sends them to a receiver
	// that discards them).
	var eventFlags events.Flags
	eventFlags.Bind(flag.CommandLine)
	handoff := flag.Int("events-handoff-buffer", 0,
		"Records between the handler and the batcher (events.Config.HandoffBuffer; 0: its default). Not a flag of bin/redirector: hack/callgrind-bench's events server makes it hold every record of a measurement.")
	flag.Parse()
	if *kind != kindPlain && *kind != kindRules {
		return fmt.Errorf("--link-kind=%q: use plain or rules", *kind)
	}

	if *table != "" {
		f, err := os.Create(*table)
		if err != nil {
			return err
		}
		if err := writeSyntheticTable(f, *links, max(*nss, 1), *kind); err != nil {
			_ = f.Close()
			return err
		}
		return f.Close()
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(redirect.GCPercent)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := redirect.CheckPublicBaseURL(*publicBaseURL); err != nil {
		return fmt.Errorf("--public-base-url: %w", err)
	}
	opts := redirect.Options{TombstoneTTL: 24 * time.Hour, Registry: reg, Gatherer: reg, Log: logr.Discard(), PublicBaseURL: *publicBaseURL}
	if *accessLog {
		opts.AccessLog = os.Stdout
	}
	if *countUses {
		// No Start: the counts stay in memory, as between two flushes.
		opts.Uses = uses.New(uses.Options{Registry: reg})
	}
	eventsCfg, err := eventFlags.Config()
	if err != nil {
		return fmt.Errorf("click events: %w", err)
	}
	if eventsCfg.Enabled() {
		eventsCfg.Registerer, eventsCfg.HandoffBuffer = reg, *handoff
		clicks, err := events.New(eventsCfg)
		if err != nil {
			return fmt.Errorf("click events: %w", err)
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = clicks.Close(ctx)
		}()
		opts.ClickEvents = clicks
	}
	r := redirect.New(opts)
	defer r.Close()

	srv := redirect.NewServer(*bindAddr, r, redirect.DefaultServerOptions())
	if err := srv.Listen(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() { _ = runSynthetic(ctx, r, *links, *nss, *kind) }()
	probes := &http.Server{Addr: *probeAddr, Handler: r.ProbeHandler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = probes.ListenAndServe() }()
	defer func() { _ = probes.Close() }()
	return srv.Start(ctx)
}
