// Command redirector serves linkforge short links: GET /<namespace>/<code>
// (and /<code> on a namespace's linkforge.io/domain host) answered from an
// informer-fed in-memory index. It runs without leader election, any number
// of replicas, and never writes to the API server on the request path.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/clientaddr"
	"github.com/linkforge/linkforge/internal/events"
	"github.com/linkforge/linkforge/internal/gctune"
	"github.com/linkforge/linkforge/internal/peer"
	"github.com/linkforge/linkforge/internal/redirect"
	"github.com/linkforge/linkforge/internal/uses"
)

var version = "dev"

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
		accessLogKeep   bool
		shutdownDelay   time.Duration
		shutdownTimeout time.Duration
		showVersion     bool
		pprofAddr       string
		publicBaseURL   string
		rootRedirect    string
		notFoundRedir   string
		goneRedirect    string
		renderSlots     int
		renderShare     float64
		srvOpts         = redirect.DefaultServerOptions()
		usesOpts        uses.Options
		peerBind        string
		peerAdvertise   string
		peerOpts        peerFlags
		countryHeader   string
		clientHeader    string
		trustedProxies  string
	)
	flag.StringVar(&bindAddr, "bind-address", ":8080", "Address of the redirect server.")
	flag.DurationVar(&srvOpts.HeaderTimeout, "header-timeout", srvOpts.HeaderTimeout,
		"Time a request may take to arrive: from accepting a connection to the end of its first request, and from the first byte of each later request to its end.")
	flag.DurationVar(&srvOpts.IdleTimeout, "idle-timeout", srvOpts.IdleTimeout, "Close a keep-alive connection that sends no new request for this long (0: the header timeout).")
	flag.DurationVar(&srvOpts.WriteTimeout, "write-timeout", srvOpts.WriteTimeout, "Time allowed to write a response to a client that stops reading.")
	flag.IntVar(&srvOpts.MaxHeaderBytes, "max-header-bytes", srvOpts.MaxHeaderBytes, "Largest request line plus headers; larger heads are answered 431.")
	flag.IntVar(&srvOpts.MaxConnections, "max-connections", srvOpts.MaxConnections,
		"Connections served at once; more are answered 503 and closed.")
	flag.IntVar(&srvOpts.MaxRequestsPerConnection, "max-requests-per-connection", srvOpts.MaxRequestsPerConnection,
		"Close a keep-alive connection after this many requests, so clients spread over new replicas; 0: no limit.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of /healthz, /readyz and /metrics.")
	flag.StringVar(&namespaces, "namespaces", "", "Comma-separated namespaces to serve; empty serves all namespaces.")
	flag.DurationVar(&tombstoneTTL, "tombstone-ttl", 24*time.Hour,
		"How long the code of a deleted expired or exhausted link keeps answering 410 Gone (then 404) in this replica. 0 disables.")
	flag.BoolVar(&accessLog, "access-log", false,
		"Write one JSON access-log line per request to stdout: the time, the client's network (as click events have it: IPv4 /24, IPv6 /32), the method, host, request URI with its query, status, Location, duration and User-Agent. See docs/events.md#the-access-log.")
	flag.BoolVar(&accessLogKeep, "access-log-keep-client-address", false,
		"Write the client's whole address and port in the access log and in the log line of a refused request, instead of its network.")
	flag.DurationVar(&shutdownDelay, "shutdown-delay", 0,
		"On SIGTERM, report not ready and keep serving this long before draining, so load balancers stop sending traffic first.")
	flag.DurationVar(&shutdownTimeout, "shutdown-timeout", 30*time.Second,
		"How long shutdown may take after --shutdown-delay: the drain of in-flight requests, then the delivery of the click events still buffered in what is left (those left are dropped and counted). The last uses are written within a timeout of their own.")
	flag.DurationVar(&usesOpts.FlushInterval, "uses-flush-interval", 10*time.Second,
		"How often this replica writes the uses it counted to the links' status.uses: at most one write per link per interval. A SIGKILL loses at most the uses not yet written.")
	flag.Float64Var(&usesOpts.WritesPerSecond, "uses-writes-per-second", 20,
		"This replica's budget of API writes for uses and reservations (a token bucket), however much traffic there is; uses that do not fit wait for the next round.")
	flag.IntVar(&usesOpts.ReserveBurst, "uses-reserve-burst", 0,
		"How many writes requests may make at once beyond --uses-writes-per-second, for the first clicks of many limited links (a campaign's invitations); flush rounds never use it. 0: half a flush interval's budget (100 with the defaults).")
	flag.DurationVar(&usesOpts.Lease, "uses-lease", time.Minute,
		"How long a reservation of maxUses quota lasts unless renewed; quota of a replica that stopped without returning it is taken back once another replica has seen it unchanged for this plus --uses-flush-interval. At least twice --uses-flush-interval.")
	flag.DurationVar(&usesOpts.ReserveTimeout, "uses-reserve-timeout", 2*time.Second,
		"How long a GET of a link with maxUses waits for a reservation before it answers 503.")
	flag.DurationVar(&usesOpts.ReserveAhead, "uses-reserve-ahead", 10*time.Minute,
		"For this long after a link with maxUses is created, and until its first click, one replica holds a use of it in reserve, so that a campaign's first clicks need no status write; clicks on the other replicas are forwarded to it over the peer port. Renewed about once per --uses-lease; at most as many links per replica as a quarter of --uses-writes-per-second can renew (250 with the defaults). 0 disables it.")
	flag.StringVar(&peerBind, "peer-bind-address", ":8082",
		"Address of the peer port, where the other replicas ask this one for uses of limited links whose quota it holds (it serves nothing a click could not). \"0\" disables it: this replica then neither forwards nor takes forwarded uses.")
	flag.StringVar(&peerAdvertise, "peer-advertise-address", "",
		"host:port at which the other replicas reach the peer port, written in this replica's reservations. Empty: the bound address if it names an IP, else $POD_IP (else the host name) with the bound port.")
	flag.StringVar(&peerOpts.secret, "peer-key-secret", "linkforge-peer-key",
		"Secret that holds the installation's peer key, which authenticates the peer port's requests and answers both ways. The manager creates it with a random key (or this replica, if it may) and re-creates it if it is deleted; this replica watches it and loads a new key without a restart. Rotate it with `kubectl linkforge rotate-peer-key`.")
	flag.StringVar(&peerOpts.namespace, "peer-key-namespace", "",
		"Namespace of --peer-key-secret. Empty: $POD_NAMESPACE, else the namespace of the kubeconfig's context (in a pod: its own).")
	flag.BoolVar(&peerOpts.allowLocal, "peer-allow-local", false,
		"Forward to peer addresses on loopback and link-local networks. Off: a reservation naming one (127.0.0.1, 169.254.169.254, fe80::...) is not asked; for a single machine and tests.")
	flag.StringVar(&publicBaseURL, "public-base-url", "",
		"Public base URL of the redirector, e.g. https://go.example.com (as the manager's --redirect-base-url): the URL that QR codes of /<namespace>/<code> show, never the request's Host. Empty: those QR codes answer 404 (/<code>/qr on a namespace's domain still works).")
	flag.IntVar(&renderSlots, "render-concurrency", 0,
		"QR codes and preview pages drawn at once; more are answered 503 with Retry-After, so they cannot starve the redirects. 0: half of GOMAXPROCS, at least 1.")
	flag.Float64Var(&renderShare, "render-cpu-share", redirect.DefaultRenderCPUShare,
		"Share of the CPUs (GOMAXPROCS) that drawing QR codes and preview pages may use over time, in (0, 1]; beyond it they are answered 503 with Retry-After.")
	flag.StringVar(&rootRedirect, "root-redirect", "",
		"Redirect GET / here (302) instead of answering 404, on hosts whose namespace sets no "+redirect.RootRedirectAnnotation+" annotation.")
	flag.StringVar(&notFoundRedir, "not-found-redirect", "",
		"Redirect requests for unknown (or not yet active) codes here (302) instead of answering 404, unless their namespace sets "+redirect.NotFoundRedirectAnnotation+".")
	flag.StringVar(&goneRedirect, "gone-redirect", "",
		"Redirect requests for expired or exhausted codes here (302) instead of answering 410, unless their namespace sets "+redirect.GoneRedirectAnnotation+".")
	flag.StringVar(&countryHeader, "country-header", "",
		"Request header that holds the client's country (ISO 3166-1 alpha-2), for the countries conditions of spec.rules, e.g. CF-IPCountry or X-Country-Code. Name only a header that the ingress or CDN in front of the redirector sets and overwrites: a client can send any header. Empty (the default): no header is read and countries conditions never hold.")
	flag.StringVar(&clientHeader, "client-address-header", "",
		"Request header in which the proxies of --trusted-proxies name the client, e.g. X-Forwarded-For or X-Real-IP as the ingress sets it: read only from a trusted peer, from the right, skipping trusted proxies. The one client address it gives is what the variant split, click events and the access log read. Empty (the default): the client is the peer (behind a proxy, the proxy).")
	flag.StringVar(&trustedProxies, "trusted-proxies", "",
		"Comma-separated CIDRs (or addresses) of the proxies in front of the redirector, e.g. the ingress controller's pod network 10.244.0.0/16: the only peers whose --client-address-header is read, and the hops skipped in it. Needs --client-address-header, and it needs this.")
	var authFlags authOptions
	authFlags.bind(flag.CommandLine)
	flag.StringVar(&pprofAddr, "pprof-bind-address", "0", "Address of the pprof endpoints (/debug/pprof); \"0\" disables them.")
	flag.BoolVar(&showVersion, "version", false, "Print the version and exit.")
	var eventFlags events.Flags
	eventFlags.Bind(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()

	if showVersion {
		fmt.Println(version)
		return nil
	}
	if err := checkUsesFlags(usesOpts, peerAdvertise); err != nil {
		return err
	}
	if err := redirect.CheckPublicBaseURL(publicBaseURL); err != nil {
		return fmt.Errorf("--public-base-url: %w", err)
	}
	fallbacks, err := fallbackFlags(rootRedirect, notFoundRedir, goneRedirect, publicBaseURL)
	if err != nil {
		return err
	}
	proxies, err := clientAddressFlags(clientHeader, trustedProxies)
	authProxies, authErr := authFlags.check()
	if err := errors.Join(checkRenderFlags(renderSlots, renderShare), checkRequestFlags(countryHeader, clientHeader), err, authErr); err != nil {
		return err
	}
	eventsCfg, err := clickEventsConfig(&eventFlags)
	if err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("redirector")

	tuner := gcTuner()

	nsList := splitNamespaces(namespaces)

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := linkv1.AddToScheme(scheme); err != nil {
		return err
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
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
		Cache:                   redirect.CacheOptions(),
		GracefulShutdownTimeout: &shutdownTimeout,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}

	if err := mgr.Add(tuner); err != nil {
		return err
	}

	opts := redirect.Options{
		TombstoneTTL:        tombstoneTTL,
		Namespaces:          nsList,
		Registry:            reg,
		Gatherer:            reg,
		Log:                 log,
		PublicBaseURL:       publicBaseURL,
		Fallbacks:           fallbacks,
		RenderConcurrency:   renderSlots,
		RenderCPUShare:      renderShare,
		CountryHeader:       countryHeader,
		ClientAddressHeader: clientHeader,
		TrustedProxies:      proxies,
		AuthUserHeader:      authFlags.userHeader,
		AuthGroupsHeader:    authFlags.groupsHeader,
		AuthProxies:         authProxies,
		SignInURL:           authFlags.signInURL,
	}
	if accessLog {
		opts.AccessLog = os.Stdout
	}
	opts.AccessLogKeepClientAddress = accessLogKeep
	clicks, err := startClickEvents(eventsCfg, countryHeader, reg, log.WithName("events"), &opts)
	if err != nil {
		return err
	}
	opts.Recorder = mgr.GetEventRecorder("linkforge-redirector")
	// Uses are written with a client of their own: the manager's cache
	// holds no ShortLinks (the redirector's informers hold stripped Links),
	// and reservations read the live object.
	usesClient, err := uses.NewClient(cfg, scheme)
	if err != nil {
		return fmt.Errorf("creating the uses client: %w", err)
	}
	usesOpts.Client, usesOpts.Holder, usesOpts.Log, usesOpts.Registry = usesClient, holderName(), log.WithName("uses"), reg
	peerLn, err := listenPeers(peerBind, peerAdvertise, &usesOpts)
	if err != nil {
		return err
	}
	var keyring *peer.Keyring
	if peerLn != nil {
		defer func() { _ = peerLn.Close() }()
		if keyring, err = peerOpts.forwarding(mgr, cfg, &usesOpts, log.WithName("peers")); err != nil {
			return err
		}
	}
	counting := uses.New(usesOpts)
	opts.Uses = counting
	if err := mgr.Add(counting); err != nil {
		return err
	}
	r := redirect.New(opts)
	defer r.Close()
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	if peerLn != nil {
		if err := mgr.Add(peer.NewServer(peerLn, r, peer.ServerOptions{Keyring: keyring, Holder: usesOpts.Holder, Log: log.WithName("peers"), Registry: reg})); err != nil {
			return err
		}
	}

	// Bind now, so that a port in use (another redirector) fails the start.
	srvOpts.ShutdownTimeout = shutdownTimeout
	srv := redirect.NewServer(bindAddr, r, srvOpts)
	if err := srv.Listen(); err != nil {
		return err
	}
	if err := mgr.Add(srv); err != nil {
		return err
	}
	// The probe port (/healthz, /readyz, /metrics) is no runnable of the
	// manager: it serves until the process exits, so that /metrics shows
	// what shutdown delivered and dropped (below).
	probeLn, err := net.Listen("tcp", probeAddr)
	if err != nil {
		return fmt.Errorf("the probe port (--health-probe-bind-address): %w", err)
	}
	probes := &http.Server{Handler: r.ProbeHandler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = probes.Serve(probeLn) }()
	defer func() { _ = probes.Close() }()

	// SIGTERM: report not ready, keep serving for --shutdown-delay, then stop
	// the manager, whose servers drain in-flight requests before it returns.
	// --shutdown-timeout runs from that stop: the drain and the click
	// events' delivery share it (planShutdown).
	signalCtx := ctrl.SetupSignalHandler()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	stopping := make(chan time.Time, 1)
	go func() {
		select {
		case <-signalCtx.Done():
		case <-ctx.Done():
			return
		}
		r.Drain()
		counting.StopAhead()
		log.Info("shutting down", "delay", shutdownDelay, "timeout", shutdownTimeout)
		if shutdownDelay > 0 {
			time.Sleep(shutdownDelay)
		}
		stopping <- time.Now()
		stop()
	}()

	log.Info("starting redirector", "version", version, "bind", bindAddr, "probes", probeAddr, "peer", usesOpts.Peer, "namespaces", nsList)
	// Start returns once the redirect port has stopped, with an error too
	// when a runnable outlived the manager's graceful shutdown: the uses
	// are written and the quota given back either way, or it would be lost
	// as on a kill (taken back after a lease, counted as used).
	startErr := mgr.Start(ctx)
	stoppedAt := time.Now() // a manager that ended by itself
	select {
	case stoppedAt = <-stopping:
	default:
	}
	plan := planShutdown(stoppedAt, shutdownTimeout, clicks != nil)
	// Write the last uses and give back unused quota, within a timeout of
	// their own: a drain that took all of --shutdown-timeout (a client
	// that never finished its request) must not lose them, since quota
	// not given back is counted as used.
	usesCtx, cancelUses := context.WithTimeout(context.Background(), shutdownTimeout)
	left := counting.Stop(usesCtx)
	cancelUses()
	// Then deliver the click events still buffered, in what is left of
	// --shutdown-timeout, never more: those it cannot deliver by then are
	// dropped and counted (reason shutdown).
	before := clicks.Counts()
	final, cancel := context.WithDeadline(context.Background(), plan.work)
	closeClickEvents(final, clicks, log)
	cancel()
	log.Info("stopped", append([]any{"usesUnwritten", left}, clickEventsAtShutdown(before, clicks.Counts())...)...)
	// /metrics shows the final counts for the last scrape's window; then
	// the probe port closes with the process.
	time.Sleep(time.Until(plan.lastScrape(time.Now())))
	return startErr
}

// shutdownPlan is how a shutdown's last steps use --shutdown-timeout,
// which runs from the manager's stop: the click events' delivery ends by
// work, the end of the timeout; then, with events on, /metrics serves
// their final counts for scrape more.
type shutdownPlan struct {
	work   time.Time
	scrape time.Duration
}

// planShutdown plans a shutdown whose manager stopped at began: the
// events get what is left of the timeout, never more, and with events on
// /metrics keeps serving for lastScrapeWindow after them.
func planShutdown(began time.Time, timeout time.Duration, eventsOn bool) shutdownPlan {
	p := shutdownPlan{work: began.Add(timeout)}
	if eventsOn {
		p.scrape = lastScrapeWindow(timeout)
	}
	return p
}

// lastScrape is when the probe port may close, the work done at done.
func (p shutdownPlan) lastScrape(done time.Time) time.Time { return done.Add(p.scrape) }

// lastScrapeWindow is how long /metrics serves the final counts of a
// shutdown with click events on, after --shutdown-timeout if the events
// took all of it: a tenth of the timeout, at most a second.
func lastScrapeWindow(timeout time.Duration) time.Duration {
	return min(timeout/10, time.Second)
}

// splitNamespaces is the list of --namespaces.
// gcTuner sets GOGC to redirect.GCPercent and returns the tuner that makes
// it follow the allocation rate from then on (as in the manager:
// gctune.Tuner), unless GOGC is set in the environment, which is kept as
// given (the zero Tuner, which does nothing).
func gcTuner() gctune.Tuner {
	if _, set := os.LookupEnv("GOGC"); set {
		return gctune.Tuner{}
	}
	debug.SetGCPercent(redirect.GCPercent)
	return gctune.Default(redirect.GCPercent)
}

func splitNamespaces(flagValue string) []string {
	var list []string
	for _, ns := range strings.Split(flagValue, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			list = append(list, ns)
		}
	}
	return list
}

// clickEventsConfig is the Config of the --events-* flags, with what is
// wrong with them in one error.
func clickEventsConfig(f *events.Flags) (events.Config, error) {
	cfg, err := f.Config()
	if err != nil {
		return events.Config{}, fmt.Errorf("click events: %w", err)
	}
	return cfg, nil
}

// closeClickEvents delivers the click events still buffered until ctx
// ends; those left are dropped and counted.
func closeClickEvents(ctx context.Context, p *events.Pipeline, log logr.Logger) {
	if err := p.Close(ctx); err != nil {
		log.Info("click events left undelivered at shutdown (linkforge_events_dropped_total{reason=\"shutdown\"})", "reason", err.Error())
	}
}

// clickEventsAtShutdown are the final log line's fields of click events,
// by sink: those delivered after the redirect port stopped (before are
// the counts then) and those dropped at shutdown; none when events are
// off.
func clickEventsAtShutdown(before, after []events.SinkCounts) []any {
	if len(after) == 0 {
		return nil
	}
	delivered, dropped := map[string]int{}, map[string]int{}
	for i, c := range after {
		delivered[c.Sink], dropped[c.Sink] = c.Sent, c.DroppedAtShutdown
		if i < len(before) {
			delivered[c.Sink] -= before[i].Sent
		}
	}
	return []any{"clickEventsDeliveredAtShutdown", delivered, "clickEventsDroppedAtShutdown", dropped}
}

// startClickEvents starts the click events' pipeline when a sink is set
// and hands it to the redirector's opts; nil (no events) otherwise. The
// events' country comes from the header of --country-header, the one the
// countries conditions of rules read: one header, one truth.
func startClickEvents(cfg events.Config, countryHeader string, reg prometheus.Registerer, log logr.Logger, opts *redirect.Options) (*events.Pipeline, error) {
	if !cfg.Enabled() {
		log.Info("click events are off (no --events-cloudevents-url, --events-otlp-endpoint or --events-otlp-logs-endpoint)")
		return nil, nil
	}
	cfg.Registerer, cfg.Log, cfg.Instance = reg, log, os.Getenv("POD_NAME")
	p, err := events.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("click events: %w", err)
	}
	opts.ClickEvents = p
	otlp, _ := cfg.OTLP.LogsURL() // checked by events.New
	if !cfg.OTLP.Enabled() {
		otlp = ""
	}
	log.Info("click events on", "cloudevents", cfg.CloudEvents.URL, "otlp", otlp, "buffer", cfg.Buffer, "countryHeader", countryHeader)
	return p, nil
}

// checkUsesFlags refuses counting and peer flags that cannot work.
func checkUsesFlags(o uses.Options, peerAdvertise string) error {
	if peerAdvertise != "" && !peer.ValidAddress(peerAdvertise) {
		return fmt.Errorf("--peer-advertise-address=%q is not a host:port", peerAdvertise)
	}
	if o.Lease < 2*o.FlushInterval {
		return fmt.Errorf("--uses-lease=%s must be at least twice --uses-flush-interval=%s: a reservation is renewed once per flush", o.Lease, o.FlushInterval)
	}
	if o.WritesPerSecond <= 0 {
		return fmt.Errorf("--uses-writes-per-second=%v must be positive", o.WritesPerSecond)
	}
	if o.ReserveAhead < 0 {
		return fmt.Errorf("--uses-reserve-ahead=%s must not be negative", o.ReserveAhead)
	}
	return nil
}

// listenPeers binds the peer port (unless bind is "0") before counting
// starts, since reservations carry its address (port 0 picks one), and
// sets the counting's peer address.
func listenPeers(bind, advertise string, o *uses.Options) (net.Listener, error) {
	if bind == "0" {
		return nil, nil
	}
	ln, err := peer.Listen(bind)
	if err != nil {
		return nil, err
	}
	o.Peer = peerAdvertiseAddress(ln.Addr(), advertise)
	if !peer.ValidAddress(o.Peer) {
		_ = ln.Close()
		return nil, fmt.Errorf("peer address %q (--peer-advertise-address, or $POD_IP and the bound port) is not a host:port", o.Peer)
	}
	return ln, nil
}

// peerAdvertiseAddress is the address the other replicas reach the peer
// port at: advertise if set, else the bound address if its host is an IP,
// else $POD_IP (else the host name) with the bound port.
func peerAdvertiseAddress(bound net.Addr, advertise string) string {
	if advertise != "" {
		return advertise
	}
	host, port, _ := net.SplitHostPort(bound.String())
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		return bound.String()
	}
	host = os.Getenv("POD_IP")
	if host == "" {
		host, _ = os.Hostname()
	}
	return net.JoinHostPort(host, port)
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

// peerFlags are the peer protocol's key and address policy.
type peerFlags struct {
	secret, namespace string
	allowLocal        bool
}

// forwarding reads the peer key (a Runnable of mgr) and forwards uses
// with it.
func (f peerFlags) forwarding(mgr manager.Manager, cfg *rest.Config, o *uses.Options, log logr.Logger) (*peer.Keyring, error) {
	keyring, err := f.keyring(cfg, log, o.Registry)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(keyring); err != nil {
		return nil, err
	}
	o.Forwarder = peer.NewClient(peer.ClientOptions{Keyring: keyring, AllowLocal: f.allowLocal, Log: log})
	o.PeerReady = func() bool { return keyring.Key() != nil }
	return keyring, nil
}

// keyring reads the peer key from its Secret with a client of its own,
// whose REST mapping of Secret is fixed (no discovery).
func (f peerFlags) keyring(cfg *rest.Config, log logr.Logger, reg prometheus.Registerer) (*peer.Keyring, error) {
	ns := f.namespace
	if ns == "" {
		var err error
		if ns, err = peer.DefaultNamespace(kubeconfigFlag()); err != nil {
			return nil, fmt.Errorf("the namespace of --peer-key-secret: set --peer-key-namespace: %w", err)
		}
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Secret"), meta.RESTScopeNamespace)
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme, Mapper: mapper})
	if err != nil {
		return nil, err
	}
	return peer.NewKeyring(c, types.NamespacedName{Namespace: ns, Name: f.secret}, log, reg), nil
}

// fallbackFlags checks the fallback URL flags, naming the one that is
// wrong, and refuses one on the redirector's own public host (a loop).
func fallbackFlags(root, notFound, gone, publicBaseURL string) (redirect.Fallbacks, error) {
	for name, u := range map[string]string{"root-redirect": root, "not-found-redirect": notFound, "gone-redirect": gone} {
		if err := redirect.CheckFallbackURL(u); err != nil {
			return redirect.Fallbacks{}, fmt.Errorf("--%s: %w", name, err)
		}
	}
	f, err := redirect.NewFallbacks(root, notFound, gone)
	if err != nil {
		return f, err
	}
	if err := redirect.CheckFallbackLoops(f, publicBaseURL); err != nil {
		return redirect.Fallbacks{}, fmt.Errorf("--public-base-url=%s and the fallback flags: %w", publicBaseURL, err)
	}
	return f, nil
}

// checkRenderFlags refuses a render budget that cannot work.
func checkRenderFlags(slots int, share float64) error {
	if slots < 0 {
		return fmt.Errorf("--render-concurrency=%d must not be negative", slots)
	}
	if share <= 0 || share > 1 {
		return fmt.Errorf("--render-cpu-share=%v must be more than 0 and at most 1", share)
	}
	return nil
}

// checkRequestFlags checks the flags that name request headers.
func checkRequestFlags(countryHeader, clientHeader string) error {
	return checkHeaderFlags(map[string]string{"country-header": countryHeader, "client-address-header": clientHeader})
}

// clientAddressFlags reads --trusted-proxies and checks it goes with
// --client-address-header: a header read from any peer would let every
// client choose its address, and proxies without a header name nothing.
func clientAddressFlags(header, proxies string) (clientaddr.Proxies, error) {
	p, err := clientaddr.ParseProxies(proxies)
	switch {
	case err != nil:
		return p, fmt.Errorf("--trusted-proxies: %w", err)
	case header != "" && p.Empty():
		return p, fmt.Errorf("--client-address-header=%s needs --trusted-proxies: the CIDRs of the proxies that set it (e.g. the ingress controller's pods); it is read from those peers only, so that no client can choose its own address (docs/serving.md, \"The client address\")", header)
	case header == "" && !p.Empty():
		return p, fmt.Errorf("--trusted-proxies=%s needs --client-address-header: the header in which those proxies name the client, e.g. X-Forwarded-For", proxies)
	}
	return p, nil
}

// checkHeaderFlags refuses a header name flag (by flag name) that is not
// an HTTP field name (RFC 9110 token): no request could carry it.
func checkHeaderFlags(flags map[string]string) error {
	for name, v := range flags {
		if v == "" {
			continue
		}
		for i := 0; i < len(v); i++ {
			if c := v[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
				return fmt.Errorf("--%s=%q is not a header name: use letters, digits and -, such as X-Country-Code", name, v)
			}
		}
	}
	return nil
}

// kubeconfigFlag is controller-runtime's --kubeconfig ("": none given).
func kubeconfigFlag() string {
	if f := flag.Lookup("kubeconfig"); f != nil {
		return f.Value.String()
	}
	return ""
}
