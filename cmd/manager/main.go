// Command manager runs the linkforge controllers: the ShortLink reconciler
// (codes, expiry, conditions) and the reaper (deletes finished links).
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/controllers"
	"github.com/linkforge/linkforge/internal/gctune"
	"github.com/linkforge/linkforge/internal/peer"
)

var version = "dev"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
}

type options struct {
	peerKeySecret, peerKeyNamespace string
	metricsAddr                     string
	metricsSecure                   bool
	probeAddr                       string
	pprofAddr                       string
	leaderElect                     bool
	leaderElectionNamespace         string
	leaderElectionID                string
	namespaces                      string
	redirectBaseURL                 string
	dedup                           bool
	idleGrace                       time.Duration
	codeMetricsNamespaces           int
	maxConcurrentReconciles         int
	qps                             float64
	burst                           int
	reaper                          controllers.ReaperOptions
	gateway, gatewaySecret          string
	gatewayRedirector               string
	gatewayRedirectorPort           int
	gatewayListenerPort             int
}

func run() error {
	var o options
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", "0", "Address of /metrics and the reaper's /reaper summary, e.g. :8443 (HTTPS) or :8080 (with --metrics-secure=false); 0 disables both.")
	flag.BoolVar(&o.metricsSecure, "metrics-secure", true, "Serve metrics over HTTPS, to callers the API server authenticates and authorizes for GET /metrics.")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz (no authentication: for the kubelet).")
	flag.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "Address of the pprof endpoints (/debug/pprof), e.g. 127.0.0.1:6060; \"0\" disables them.")
	flag.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader, so only one manager replica is active.")
	flag.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the pod's namespace).")
	flag.StringVar(&o.peerKeySecret, "peer-key-secret", "linkforge-peer-key",
		"Secret of the redirectors' peer key, which the manager creates with a random key if there is none (in --peer-key-namespace); \"\" creates none.")
	flag.StringVar(&o.peerKeyNamespace, "peer-key-namespace", "", "Namespace of --peer-key-secret (default: $POD_NAMESPACE, else the kubeconfig's namespace: in a pod, its own).")
	flag.StringVar(&o.redirectBaseURL, "redirect-base-url", "", "Public base URL of the redirector, e.g. https://go.example.com; fills status.shortURL.")
	flag.BoolVar(&o.dedup, "dedup", true, "Links of one namespace with the same target (canonical URL, expiry, activation, idleTimeout, maxUses, redirectStatus, forwardQuery) share one code, "+
		"unless a link's spec.dedupPolicy says otherwise. false: every link without a dedupPolicy gets a code of its own (a link that shared one moves to the next free salt; the oldest keeps it).")
	flag.DurationVar(&o.idleGrace, "idle-grace", controllers.DefaultIdleGrace, "Added to the idle deadline of links with spec.idleTimeout (status.lastUsedAt + idleTimeout): "+
		"the redirectors write lastUsedAt with their batched uses, so a use reaches the API up to a flush round (--uses-flush-interval) plus the round's writes later. "+
		"At least twice the redirectors' --uses-flush-interval, so that a link is never finished while a use of it waits to be written.")
	flag.IntVar(&o.codeMetricsNamespaces, "code-metrics-namespaces", controllers.DefaultMetricsNamespaceLimit,
		`Namespaces with series of their own in linkforge_codes_held and linkforge_codes_shared_links: those holding the most codes; the others are summed as namespace="_other". 0 sums them all.`)
	flag.StringVar(&o.leaderElectionID, "leader-election-id", "", "Name of the leader election Lease (default: "+controllers.DefaultLeaderElectionID+
		", or one derived from --namespaces, so each shard elects its own leader).")
	flag.StringVar(&o.namespaces, "namespaces", "", "Comma-separated namespaces whose ShortLinks this manager caches and reconciles (a shard); empty: all. "+
		"Run one manager per disjoint set of namespaces.")
	// The scaling defaults live in controllers.Defaults, which the
	// convergence benchmark runs too; see there and the README for why.
	flag.IntVar(&o.maxConcurrentReconciles, "max-concurrent-reconciles", controllers.Defaults.MaxConcurrentReconciles,
		"ShortLinks reconciled in parallel. A reconcile is about one status patch, so this bounds the manager's writes in flight.")
	flag.Float64Var(&o.qps, "kube-api-qps", float64(controllers.Defaults.QPS), "Client-side rate limit of API requests per second; negative: none. "+
		"The default is none, as in controller-runtime: the API server's Priority and Fairness queues and sheds load across all clients, "+
		"while a client-side limit only slows this manager (N new links need N status patches and N Events).")
	flag.IntVar(&o.burst, "kube-api-burst", controllers.Defaults.Burst, "Client-side burst of API requests, with a non-negative --kube-api-qps (0: client-go's 10).")
	flag.DurationVar(&o.reaper.DefaultTTLAfterFinished, "default-ttl-after-finished", time.Hour, "How long a finished link is kept when it sets no ttlSecondsAfterFinished.")
	flag.DurationVar(&o.reaper.SweepInterval, "reap-interval", 15*time.Minute, "Interval of the reaper's sweep for finished links that are due.")
	flag.IntVar(&o.reaper.BatchSize, "reap-batch-size", 1000, "Most links one sweep deletes.")
	flag.Float64Var(&o.reaper.DeletesPerSecond, "reap-rate", controllers.DefaultReapRate, "Most deletes per second the reaper sends; 0: no client-side limit. "+
		"The default is none: --reap-workers bounds the deletes in flight and the API server's Priority and Fairness shares its capacity, "+
		"so a mass expiry is deleted as fast as the API server allows.")
	flag.IntVar(&o.reaper.MaxConcurrentReconciles, "reap-workers", controllers.DefaultReapWorkers, "Finished links the reaper handles in parallel, so the most deletes in flight.")
	readBeforeDelete := flag.Bool("reap-read-before-delete", false, "Read each link from the API server before deleting it, as Kubernetes' TTL-after-finished controller does. "+
		"Off by default: the delete carries the UID and resourceVersion of the copy judged due, so the API server refuses it for any other version, and a refused delete is re-read and re-checked.")
	flag.StringVar(&o.gateway, "gateway", "", "<namespace>/<name> of a Gateway (Gateway API) the manager may program: for every host a namespace claims with linkforge.io/domain, "+
		"an HTTPS listener on it and an HTTPRoute to the redirector (docs/operations.md, \"Gateway hosts\"); empty: none. Needs the component config/gateway-hosts (its Roles).")
	flag.StringVar(&o.gatewaySecret, "gateway-certificate-secret", controllers.DefaultGatewayCertificateSecret,
		"Name of each host's certificate Secret in the Gateway's namespace, which the listener refers to and cert-manager's gateway-shim fills; {host} is the host with dots as dashes.")
	flag.StringVar(&o.gatewayRedirector, "gateway-redirector-service", "linkforge-redirector",
		"The redirector's Service the --gateway routes go to: <namespace>/<name>, or <name> in the manager's namespace. The HTTPRoutes are in its namespace.")
	flag.IntVar(&o.gatewayRedirectorPort, "gateway-redirector-port", 80, "The port of --gateway-redirector-service the routes go to.")
	flag.IntVar(&o.gatewayListenerPort, "gateway-listener-port", 443, "The port of the --gateway's HTTPS listeners.")
	showVersion := flag.Bool("version", false, "Print the version and exit.")
	zapOpts := zap.Options{Development: false}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	if *showVersion {
		fmt.Println(version)
		return nil
	}
	o.reaper.OptimisticDelete = !*readBeforeDelete
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	_, gogcSet := os.LookupEnv("GOGC")
	if !gogcSet {
		debug.SetGCPercent(controllers.GCPercent)
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(linkv1.AddToScheme(scheme))
	utilruntime.Must(gatewayv1.Install(scheme))
	gateway, err := gatewayHostsOptions(o)
	if err != nil {
		return err
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	namespaces := controllers.ParseNamespaces(o.namespaces)
	leaderElectionID := o.leaderElectionID
	if leaderElectionID == "" {
		leaderElectionID = controllers.LeaderElectionID(namespaces)
	}

	codeIndex := controllers.NewCodeIndex()
	// Lean objects (no managedFields, no last-applied copy of the spec), of
	// the --namespaces shard if one is given; with --gateway, that Gateway
	// and the HTTPRoutes the manager keeps.
	cacheOptions := controllers.ManagerCacheOptions(namespaces, codeIndex)
	if gateway != nil {
		controllers.GatewayHostsCacheOptions(&cacheOptions, *gateway)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOptions,
		Metrics:                 metricsOptions(o),
		HealthProbeBindAddress:  "0", // served below, with /reaper beside the probes
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        leaderElectionID,
		LeaderElectionNamespace: o.leaderElectionNamespace,
		// The manager exits soon after losing the lease, so a new leader never
		// overlaps with it for long.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}

	ctx := ctrl.SetupSignalHandler()
	links := &controllers.ShortLinkReconciler{
		Client:                  mgr.GetClient(),
		Recorder:                mgr.GetEventRecorder("linkforge-manager"),
		Clock:                   clock.RealClock{},
		RedirectBaseURL:         o.redirectBaseURL,
		MaxConcurrentReconciles: o.maxConcurrentReconciles,
		Index:                   codeIndex,
		DisableDedup:            !o.dedup,
		IdleGrace:               o.idleGrace,
		MetricsNamespaceLimit:   metricsNamespaceLimit(o.codeMetricsNamespaces),
	}
	if err := links.SetupWithManager(ctx, mgr); err != nil {
		return err
	}
	// GOGC from the environment is kept as given; otherwise GOGC follows
	// the allocation rate (gctune.Tuner).
	if !gogcSet {
		if err := mgr.Add(gctune.Default(controllers.GCPercent)); err != nil {
			return err
		}
	}
	if err := addPeerKeyCreator(mgr, o); err != nil {
		return err
	}
	if gateway != nil {
		hosts := &controllers.GatewayHostsReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("linkforge-manager"), Options: *gateway}
		if err := hosts.SetupWithManager(mgr); err != nil {
			return err
		}
	}
	reaper := controllers.NewReaper(mgr, o.reaper)
	reaper.Links = codeIndex
	if err := reaper.SetupWithManager(mgr); err != nil {
		return err
	}

	// /reaper is served beside /metrics, behind the same authentication and
	// authorization: it tells what the manager deletes and when, which is
	// not for whoever reaches the pod. The probe port stays open for the kubelet.
	if o.metricsAddr != "0" {
		if err := mgr.AddMetricsServerExtraHandler("/reaper", reaper.StatsHandler()); err != nil {
			return err
		}
	}
	if o.probeAddr != "0" {
		if err := addProbeServer(mgr, o.probeAddr); err != nil {
			return err
		}
	}

	log.Info("starting manager", "version", version, "leaderElect", o.leaderElect, "leaderElectionID", leaderElectionID,
		"namespaces", namespaces, "maxConcurrentReconciles", o.maxConcurrentReconciles, "qps", o.qps, "gateway", o.gateway)
	return mgr.Start(ctx)
}

// metricsNamespaceLimit is the reconciler's MetricsNamespaceLimit for the
// flag --code-metrics-namespaces, whose 0 means none (the field's, default).
func metricsNamespaceLimit(flagValue int) int {
	if flagValue <= 0 {
		return -1
	}
	return flagValue
}

// metricsOptions serves metrics (and /reaper) the way kubebuilder's scaffold
// does: over HTTPS with a self-signed certificate, each caller checked with a
// TokenReview and a SubjectAccessReview for GET on the path (see
// config/rbac/metrics_*.yaml).
func metricsOptions(o options) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: o.metricsSecure}
	if o.metricsSecure {
		opts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return opts
}

// addProbeServer serves /healthz and /readyz, unauthenticated, as the kubelet
// calls them; nothing else is on this port. readyz waits for the informer caches.
func addProbeServer(mgr manager.Manager, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s for probes: %w", addr, err)
	}
	synced := func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return fmt.Errorf("informer caches not synced")
		}
		return nil
	}
	mux := http.NewServeMux()
	// healthz.Handler serves the aggregate at its root and one check per
	// subpath (/readyz/informers), so it is mounted with the prefix stripped.
	probe := func(path string, checks map[string]healthz.Checker) {
		h := http.StripPrefix(path, &healthz.Handler{Checks: checks})
		mux.Handle(path, h)
		mux.Handle(path+"/", h)
	}
	probe("/healthz", map[string]healthz.Checker{"ping": healthz.Ping})
	probe("/readyz", map[string]healthz.Checker{"ping": healthz.Ping, "informers": synced})
	return mgr.Add(&manager.Server{
		Name:     "probes",
		Server:   &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		Listener: ln,
	})
}

// gatewayHostsOptions are the Gateway hosts controller's options from the
// flags; nil without --gateway.
func gatewayHostsOptions(o options) (*controllers.GatewayHostsOptions, error) {
	if o.gateway == "" {
		return nil, nil
	}
	gw, err := controllers.ParseGatewayRef("--gateway", o.gateway)
	if err != nil {
		return nil, err
	}
	redirector := o.gatewayRedirector
	if !strings.Contains(redirector, "/") {
		ns, err := peer.DefaultNamespace(kubeconfigFlag())
		if err != nil {
			return nil, fmt.Errorf("the namespace of --gateway-redirector-service: give it as <namespace>/<name>: %w", err)
		}
		redirector = ns + "/" + redirector
	}
	svc, err := controllers.ParseGatewayRef("--gateway-redirector-service", redirector)
	if err != nil {
		return nil, err
	}
	g := &controllers.GatewayHostsOptions{Gateway: gw, SecretTemplate: o.gatewaySecret, Redirector: svc,
		RedirectorPort: int32(min(max(o.gatewayRedirectorPort, 0), 1<<16)), ListenerPort: int32(min(max(o.gatewayListenerPort, 0), 1<<16))}
	if err := g.Check(); err != nil {
		return nil, err
	}
	return g, nil
}

// kubeconfigFlag is the value of controller-runtime's --kubeconfig.
func kubeconfigFlag() string {
	if f := flag.Lookup("kubeconfig"); f != nil {
		return f.Value.String()
	}
	return ""
}

// addPeerKeyCreator has the manager create the redirectors' peer key
// (peer.KeyCreator): the redirectors may read it and create no Secret.
func addPeerKeyCreator(mgr ctrl.Manager, o options) error {
	if o.peerKeySecret == "" {
		return nil
	}
	ns := o.peerKeyNamespace
	if ns == "" {
		var err error
		if ns, err = peer.DefaultNamespace(kubeconfigFlag()); err != nil {
			return fmt.Errorf("the namespace of --peer-key-secret: set --peer-key-namespace: %w", err)
		}
	}
	return mgr.Add(&peer.KeyCreator{Client: mgr.GetClient(), Secret: types.NamespacedName{Namespace: ns, Name: o.peerKeySecret},
		Log: ctrl.Log.WithName("peer-key")})
}
