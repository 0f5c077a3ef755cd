// Command redirector serves linkforge short links: GET /<namespace>/<code>
// (and /<code> on a namespace's linkforge.io/domain host) answered from an
// informer-fed in-memory index. It runs without leader election, any number
// of replicas, and never writes to the API server on the request path.
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"net/http"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/redirect"
)

var version = "dev"

const defaultGCPercent = 50

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "redirector:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		bindAddr        string
		probeAddr       string
		namespaces      string
		tombstoneTTL    time.Duration
		accessLog       bool
		shutdownDelay   time.Duration
		shutdownTimeout time.Duration
		syntheticLinks  int
		syntheticNS     int
		syntheticTable  string
		showVersion     bool
		pprofAddr       string
		serverKind      string
		usesOpts        redirect.UsesOptions
	)
	flag.StringVar(&bindAddr, "bind-address", ":8080", "Address of the redirect server.")
	flag.StringVar(&serverKind, "server", defaultServer(),
		"HTTP server of the redirect port: epoll (Linux: one epoll event loop per GOMAXPROCS on SO_REUSEPORT listeners; the default there) or net/http (same answers, about a third of the throughput).")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of /healthz, /readyz and /metrics.")
	flag.StringVar(&namespaces, "namespaces", "", "Comma-separated namespaces to serve; empty serves all namespaces.")
	flag.DurationVar(&tombstoneTTL, "tombstone-ttl", 24*time.Hour,
		"How long the code of a deleted expired or exhausted link keeps answering 410 Gone (then 404) in this replica. 0 disables.")
	flag.BoolVar(&accessLog, "access-log", false, "Write one JSON access-log line per request to stdout.")
	flag.DurationVar(&shutdownDelay, "shutdown-delay", 0,
		"On SIGTERM, report not ready and keep serving this long before draining, so load balancers stop sending traffic first.")
	flag.DurationVar(&shutdownTimeout, "shutdown-timeout", 30*time.Second, "How long to wait for in-flight requests to finish on shutdown.")
	flag.IntVar(&syntheticLinks, "synthetic-links", -1,
		"Benchmarks only: serve this many generated links (through the same informer transform and index) instead of watching an API server.")
	flag.IntVar(&syntheticNS, "synthetic-namespaces", 100, "Benchmarks only: namespaces the synthetic links are spread over.")
	flag.StringVar(&syntheticTable, "synthetic-table", "",
		"Benchmarks only: write 'namespace code url' of the --synthetic-links links to this file and exit.")
	flag.DurationVar(&usesOpts.FlushInterval, "uses-flush-interval", 10*time.Second,
		"How often this replica writes the uses it counted to the links' status.uses: at most one write per link per interval. A SIGKILL loses at most the uses not yet written.")
	flag.Float64Var(&usesOpts.WritesPerSecond, "uses-writes-per-second", 20,
		"This replica's budget of API writes for uses and reservations (a token bucket), however much traffic there is; uses that do not fit wait for the next round.")
	flag.DurationVar(&usesOpts.Lease, "uses-lease", 30*time.Second,
		"How long a reservation of maxUses quota lasts unless renewed; quota of a replica that stopped without returning it is taken back after this. At least twice --uses-flush-interval.")
	flag.DurationVar(&usesOpts.ReserveTimeout, "uses-reserve-timeout", 2*time.Second,
		"How long a GET of a link with maxUses waits for a reservation before it answers 503.")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "0", "Address of the pprof endpoints (/debug/pprof); \"0\" disables them.")
	flag.BoolVar(&showVersion, "version", false, "Print the version and exit.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()

	if showVersion {
		fmt.Println(version)
		return nil
	}
	if usesOpts.Lease < 2*usesOpts.FlushInterval {
		return fmt.Errorf("--uses-lease=%s must be at least twice --uses-flush-interval=%s: a reservation is renewed once per flush", usesOpts.Lease, usesOpts.FlushInterval)
	}
	if usesOpts.WritesPerSecond <= 0 {
		return fmt.Errorf("--uses-writes-per-second=%v must be positive", usesOpts.WritesPerSecond)
	}
	if serverKind != "net/http" && serverKind != "epoll" {
		return fmt.Errorf("--server=%q: want net/http or epoll", serverKind)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("redirector")

	// Most of the heap is the long-lived index and informer cache; the
	// garbage is per request. Go's default GOGC=100 lets the heap grow to
	// twice the live data; 50 keeps it at 1.5x, which cuts RSS per link by
	// about a quarter (about 1000 -> 750 bytes) for ~4% more GC CPU under
	// full load (hack/bench-redirect.sh). GOGC and GOMEMLIMIT still override.
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}

	synthetic := syntheticLinks >= 0
	if syntheticTable != "" {
		f, err := os.Create(syntheticTable)
		if err != nil {
			return err
		}
		if err := redirect.WriteSyntheticTable(f, max(syntheticLinks, 0), max(syntheticNS, 1)); err != nil {
			_ = f.Close()
			return err
		}
		return f.Close()
	}

	var nsList []string
	for _, ns := range strings.Split(namespaces, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			nsList = append(nsList, ns)
		}
	}

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := linkv1.AddToScheme(scheme); err != nil {
		return err
	}

	var cfg *rest.Config
	if synthetic {
		// No API server: the manager only runs the servers; nothing dials this.
		cfg = &rest.Config{Host: "http://127.0.0.1:1"}
	} else {
		var err error
		if cfg, err = ctrl.GetConfig(); err != nil {
			return fmt.Errorf("loading kubeconfig: %w", err)
		}
	}

	// controller-runtime's registry usually has the Go and process collectors
	// already (registered by its controller metrics); add them if not.
	reg := ctrlmetrics.Registry
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		_ = reg.Register(c)
	}

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		LeaderElection:          false,
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		PprofBindAddress:        pprofAddr,
		Cache:                   redirect.CacheOptions(nsList),
		GracefulShutdownTimeout: &shutdownTimeout,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}

	opts := redirect.Options{
		TombstoneTTL: tombstoneTTL,
		Namespaces:   nsList,
		Registry:     reg,
		Gatherer:     reg,
		Log:          log,
	}
	if accessLog {
		opts.AccessLog = os.Stdout
	}
	var uses *redirect.Uses
	if !synthetic {
		opts.Recorder = mgr.GetEventRecorder("linkforge-redirector")
		// Uses are written with a client of their own: the manager's cache
		// holds stripped Links, and reservations read the live object.
		c, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			return fmt.Errorf("creating the uses client: %w", err)
		}
		usesOpts.Client, usesOpts.Holder, usesOpts.Log, usesOpts.Registry = c, holderName(), log.WithName("uses"), reg
		uses = redirect.NewUses(usesOpts)
		opts.Uses = uses
		if err := mgr.Add(uses); err != nil {
			return err
		}
	}
	r := redirect.New(opts)

	if synthetic {
		log.Info("serving synthetic links, not watching an API server", "links", syntheticLinks, "namespaces", syntheticNS)
		err = mgr.Add(syntheticRunnable(func(ctx context.Context) error {
			return r.RunSynthetic(ctx, syntheticLinks, syntheticNS)
		}))
	} else {
		err = r.SetupWithManager(mgr)
	}
	if err != nil {
		return err
	}

	if serverKind == "epoll" {
		es := redirect.NewEpollServer(bindAddr, r)
		es.ShutdownTimeout = shutdownTimeout
		if err := es.Listen(); err != nil {
			return err
		}
		if err := mgr.Add(es); err != nil {
			return err
		}
	}
	servers := []*manager.Server{
		{Name: "probes", Server: &http.Server{Addr: probeAddr, Handler: r.ProbeHandler(), ReadHeaderTimeout: 5 * time.Second},
			ShutdownTimeout: &shutdownTimeout},
	}
	if serverKind == "net/http" {
		servers = append(servers, &manager.Server{Name: "redirect", Server: redirect.NewHTTPServer(bindAddr, r), ShutdownTimeout: &shutdownTimeout})
	}
	for _, s := range servers {
		if err := mgr.Add(s); err != nil {
			return err
		}
	}

	// SIGTERM: report not ready, keep serving for --shutdown-delay, then stop
	// the manager, whose servers drain in-flight requests before it returns.
	signalCtx := ctrl.SetupSignalHandler()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		select {
		case <-signalCtx.Done():
		case <-ctx.Done():
			return
		}
		r.Drain()
		log.Info("shutting down", "delay", shutdownDelay)
		if shutdownDelay > 0 {
			time.Sleep(shutdownDelay)
		}
		stop()
	}()

	log.Info("starting redirector", "version", version, "bind", bindAddr, "server", serverKind, "probes", probeAddr, "namespaces", nsList)
	if err := mgr.Start(ctx); err != nil {
		return err
	}
	if uses != nil {
		// The redirect port has stopped: write the last uses and give back
		// unused quota, within the shutdown timeout.
		final, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		left := uses.Stop(final)
		cancel()
		log.Info("wrote pending uses", "unwritten", left)
	}
	log.Info("stopped")
	return nil
}

// holderName names this process in status.useReservations: the pod name
// (or host name) and a random suffix, so a restarted container never
// mistakes its predecessor's reservation for its own.
func holderName() string {
	name := os.Getenv("POD_NAME")
	if name == "" {
		name, _ = os.Hostname()
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%x", name, b)
}

type syntheticRunnable func(ctx context.Context) error

func (f syntheticRunnable) Start(ctx context.Context) error { return f(ctx) }
func (syntheticRunnable) NeedLeaderElection() bool          { return false }

// defaultServer is the redirect port's server: the epoll loops where they
// exist (Linux), net/http elsewhere.
func defaultServer() string {
	if goruntime.GOOS == "linux" {
		return "epoll"
	}
	return "net/http"
}
