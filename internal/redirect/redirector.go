package redirect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"

	"github.com/linkforge/linkforge/internal/clientaddr"
	clickevents "github.com/linkforge/linkforge/internal/events"
	"github.com/linkforge/linkforge/internal/gate"
	"github.com/linkforge/linkforge/internal/pages"
	"github.com/linkforge/linkforge/internal/uses"
)

// RBAC of the redirector alone (config/rbac/redirector, role redirector-role):
// it reads ShortLinks and Namespaces, records events, and writes the status
// of ShortLinks for uses (status.uses, status.useReservations; see
// internal/uses): merge patches of the status subresource only, never the
// spec (update stays granted for redirectors of earlier releases during an
// upgrade, which wrote reservations with it).
// +kubebuilder:rbac:groups=linkforge.io,resources=shortlinks,verbs=get;list;watch
// +kubebuilder:rbac:groups=linkforge.io,resources=shortlinks/status,verbs=update;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// GCPercent is the redirector's GOGC unless the environment sets one, while
// it allocates (cmd/redirector runs gctune.Default(GCPercent): GOGC 10
// once it allocates less than 2 MiB/s, and the freed memory returned).
// Most of the heap is the long-lived index and informer cache. Go's default
// GOGC=100 lets the heap grow to twice the live data; 50 keeps it at 1.5x,
// which cut RSS per link by about a quarter (about 1000 -> 750 bytes) for
// ~4% more GC CPU under full load (hack/bench-redirect.sh).
const GCPercent = 50

// Options configure a Redirector.
type Options struct {
	// TombstoneTTL is how long the code of a deleted finished link keeps
	// answering 410 before it answers 404. 0 disables tombstones.
	TombstoneTTL time.Duration
	// Namespaces, if not empty, are the only namespaces whose ShortLinks
	// are served (SetupWithManager watches only them) and whose domain
	// annotations are honoured.
	Namespaces []string
	// Clock decides expiry and tombstones. Nil means the wall clock.
	Clock clock.PassiveClock
	// Registry receives the redirector's metrics. Nil registers none.
	Registry prometheus.Registerer
	// Gatherer serves /metrics on the probe handler. Nil serves the
	// default Prometheus gatherer.
	Gatherer prometheus.Gatherer
	// AccessLog, if set, receives one JSON line per request, written by its
	// own goroutine (see Close).
	AccessLog io.Writer
	// AccessLogBuffer is how many records may wait for AccessLog before
	// new ones are dropped; 0 means 4096.
	AccessLogBuffer int
	// AccessLogKeepClientAddress writes the client's address and port
	// whole in the access log and in the log line of a refused request;
	// by default they have its network (events.ReduceClientAddress), as
	// click events do.
	AccessLogKeepClientAddress bool
	// Recorder records the Warning event of a domain conflict. Nil records none.
	Recorder events.EventRecorder
	// Uses counts uses and enforces maxUses. Nil counts nothing and serves
	// limited links without a limit (tests of routing only).
	Uses *uses.Uses
	// Log is the logger; the zero value discards.
	Log logr.Logger
	// PublicBaseURL is the public base of the long form of short URLs (as
	// the manager's --redirect-base-url), for the URLs QR codes show; empty:
	// the request's own. Check it with CheckPublicBaseURL.
	PublicBaseURL string
	// Fallbacks are the default fallback redirects (NewFallbacks), for
	// namespaces whose annotations set none.
	Fallbacks Fallbacks
	// RenderConcurrency bounds the QR codes and preview pages rendered at
	// once (pages.Budget); 0: DefaultRenderConcurrency.
	RenderConcurrency int
	// RenderCPUShare is the share of the CPUs (GOMAXPROCS) that rendering
	// may use over time, in (0, 1]; 0: DefaultRenderCPUShare.
	RenderCPUShare float64
	// CountryHeader names the request header that holds the client's
	// country (ISO 3166-1 alpha-2) for the countries conditions of
	// spec.rules, as the ingress or CDN in front sets it; empty: none is
	// read, and countries conditions never hold. Only a header that the
	// proxy overwrites is trustworthy: a client can send any.
	CountryHeader string
	// ClientAddressHeader names the request header in which the proxies
	// in front (TrustedProxies) name the client, such as X-Forwarded-For
	// or X-Real-IP as the ingress sets it: read only from a trusted peer,
	// as a list from the right (internal/clientaddr). Empty: the client is
	// the peer. The one client address of a request is what the split,
	// click events and the access log read (clientAddress).
	ClientAddressHeader string
	// TrustedProxies are the peers whose ClientAddressHeader is read, and
	// the proxies skipped in it; none: the header is never read.
	TrustedProxies clientaddr.Proxies
	// AuthUserHeader and AuthGroupsHeader name the headers in which a
	// trusted auth proxy (AuthProxies: the socket's peer) names the
	// signed-in user and their groups, for gated links' users and groups
	// (gate.go); "": no request is signed in.
	AuthUserHeader, AuthGroupsHeader string
	AuthProxies                      clientaddr.Proxies
	// SignInURL is where a request not signed in is sent by a sign-in
	// gate ({url}: the short URL, to come back to); "": 403. Someone
	// signed in whom the gate does not allow gets 403 either way.
	SignInURL string
	// GateLimits bound password attempts (zero: gate.DefaultLimits).
	GateLimits gate.Limits
	// ClickEvents, when set, gets a click event of every answered request
	// of a link (clicks.go); nil: none.
	ClickEvents *clickevents.Pipeline
}

// CheckPublicBaseURL says what is wrong with a PublicBaseURL, if anything:
// it must be an absolute http(s) URL without a query or fragment.
func CheckPublicBaseURL(base string) error {
	if base == "" {
		return nil
	}
	u, err := url.Parse(base)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || normalizeHost(u.Host) == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("%q is not an absolute http or https URL of a host (and path), without a query", base)
	}
	return nil
}

// DefaultRenderCPUShare is the default of Options.RenderCPUShare.
const DefaultRenderCPUShare = pages.DefaultCPUShare

// DefaultRenderConcurrency is the default of Options.RenderConcurrency:
// half the CPUs Go uses, at least one.
func DefaultRenderConcurrency() int { return pages.DefaultConcurrency() }

// Redirector is the redirect HTTP handler and the index behind it.
type Redirector struct {
	index      *Index
	domains    *Domains
	fallbacks  *fallbackTable
	qr         *pages.QRDrawer
	render     *pages.Budget
	nsCards    *pages.CardCache // namespaces' cards, rendered
	publicBase *url.URL
	metrics    *metrics
	agents     *agentMemo
	// countryHeader and clientHeader are Options.CountryHeader and
	// ClientAddressHeader in canonical form (PeekCanonical).
	countryHeader, clientHeader string
	clock                       clock.PassiveClock
	log                         logr.Logger
	opts                        Options

	allowedNS  map[string]bool
	namespaces sync.Map // name -> *corev1.Namespace (stripped), for events

	ready    atomic.Bool
	draining atomic.Bool
	syncMu   sync.Mutex
	// The informers' HasSynced, by kind, and how many ShortLink informers
	// to wait for (one per namespace served; see SetupWithManager).
	linksSynced, nssSynced []func() bool
	linkInformers          int

	// gateLimiter bounds password attempts; verifyTime is how long a
	// verification takes on average (ns); gateMetrics counts the gates'
	// results (gate.go).
	gateLimiter *gate.Limiter
	verifyTime  atomic.Int64
	gateMetrics [numGateResults]prometheus.Counter

	accessLog *accessLog
	// refusedLog samples the log lines of refused requests;
	// clientHeaderLog those of invalid client-address headers.
	refusedLog, clientHeaderLog sampler

	warnMu sync.Mutex
	warned map[string]string // namespace/annotation -> the invalid value warned about
}

// New returns a Redirector with an empty index. It is not ready until the
// informers given to WatchShortLinks and WatchNamespaces have synced.
func New(opts Options) *Redirector {
	r := &Redirector{
		clock:           opts.Clock,
		log:             opts.Log,
		opts:            opts,
		index:           NewIndex(opts.TombstoneTTL),
		linkInformers:   1,
		refusedLog:      sampler{every: refusedLogEvery},
		clientHeaderLog: sampler{every: refusedLogEvery},
		agents:          newAgentMemo(),
		countryHeader:   canonicalHeader(opts.CountryHeader),
		clientHeader:    canonicalHeader(opts.ClientAddressHeader),
	}
	r.domains = NewDomains(r.domainConflict)
	r.fallbacks = newFallbackTable()
	r.metrics = newMetrics(opts.Registry, r.index, r.domains, func() bool { return !r.draining.Load() && r.Ready() })
	r.render = pages.NewBudget(opts.RenderConcurrency, opts.RenderCPUShare, time.Now)
	r.qr = pages.NewQRDrawer(r.render, pages.QRMetrics{
		Cached: r.metrics.qrCached, Drawn: r.metrics.qrDrawn, Merged: r.metrics.qrMerged,
		Refused: r.metrics.renderRefused[viewQR],
	})
	r.nsCards = pages.NewCardCache()
	limits := opts.GateLimits
	if limits == (gate.Limits{}) {
		limits = gate.DefaultLimits
	}
	r.gateLimiter = gate.NewLimiter(limits, time.Now)
	r.verifyTime.Store(int64(verifyEstimate))
	r.gateMetrics = newGateMetrics(opts.Registry)
	if opts.PublicBaseURL == "" {
		r.log.Info("no public base URL (--public-base-url): QR codes of /<namespace>/<code> answer 404, since the redirector draws only hosts it is told are its own")
	} else {
		// Checked by the caller (CheckPublicBaseURL); an invalid one is unused.
		if u, err := url.Parse(opts.PublicBaseURL); err == nil && CheckPublicBaseURL(opts.PublicBaseURL) == nil {
			r.publicBase = u
		}
	}
	if opts.AccessLog != nil {
		r.accessLog = newAccessLog(opts.AccessLog, opts.AccessLogBuffer, opts.AccessLogKeepClientAddress, r.metrics.accessLogDropped)
	}
	if len(opts.Namespaces) > 0 {
		r.allowedNS = map[string]bool{}
		for _, ns := range opts.Namespaces {
			r.allowedNS[ns] = true
		}
	}
	return r
}

// canonicalHeader is a header name as fasthttp stores a request's.
func canonicalHeader(name string) string {
	return textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(name))
}

// Close writes out the access log's queued records and stops its writer.
// Call it once the redirect server has stopped.
func (r *Redirector) Close() {
	if r.accessLog != nil {
		r.accessLog.close()
	}
}

// Index is the redirector's index.
func (r *Redirector) Index() *Index { return r.index }

// Domains is the redirector's domain table.
func (r *Redirector) Domains() *Domains { return r.domains }

func (r *Redirector) now() time.Time {
	if r.clock != nil {
		return r.clock.Now()
	}
	return time.Now()
}

// Ready reports whether the ShortLink informers (one, or one per namespace
// SetupWithManager watches) and a Namespace informer have synced and their
// initial objects are in the index. Once true it stays true: an API server that
// becomes unreachable later does not make the redirector unready, since it
// keeps serving from its cache.
func (r *Redirector) Ready() bool {
	return r.ready.Load() || r.readySlow() // inlined: once ready, a load
}

// readySlow is Ready until the caches have synced.
func (r *Redirector) readySlow() bool {
	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	if len(r.linksSynced) < r.linkInformers || len(r.nssSynced) == 0 {
		return false
	}
	for _, synced := range [][]func() bool{r.linksSynced, r.nssSynced} {
		for _, f := range synced {
			if !f() {
				return false
			}
		}
	}
	r.ready.Store(true)
	return true
}

// Drain makes /readyz fail from now on, so that load balancers stop sending
// traffic; the redirect port keeps answering until the servers shut down.
func (r *Redirector) Drain() { r.draining.Store(true) }

// Informer is the part of an informer the redirector uses; controller-runtime's
// cache.Informer and client-go's SharedIndexInformer both have it.
type Informer interface {
	AddEventHandler(handler toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error)
}

func (r *Redirector) addSynced(to *[]func() bool, reg toolscache.ResourceEventHandlerRegistration) {
	r.syncMu.Lock()
	*to = append(*to, reg.HasSynced)
	r.syncMu.Unlock()
}

// waitForLinkInformers makes Ready wait for n ShortLink informers.
func (r *Redirector) waitForLinkInformers(n int) {
	r.syncMu.Lock()
	r.linkInformers = n
	r.syncMu.Unlock()
}

func asLink(obj any) *Link {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	l, _ := obj.(*Link)
	return l
}

func asNamespace(obj any) *corev1.Namespace {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	ns, _ := obj.(*corev1.Namespace)
	return ns
}

// WatchShortLinks feeds the index from a ShortLink informer whose transform
// is Transform or TransformShortLink (so that it holds Links).
func (r *Redirector) WatchShortLinks(inf Informer) error {
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if l := asLink(obj); l != nil {
				r.attachUses(nil, l)
				r.index.Add(l)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, cur := asLink(oldObj), asLink(newObj)
			if cur == nil || old == cur {
				return
			}
			// Before anything else: every version of a link counts into one
			// counter, whichever version the index serves.
			r.attachUses(old, cur)
			if old != nil && old.ResourceVersion == cur.ResourceVersion && old.ResourceVersion != "" {
				return
			}
			r.index.Update(old, cur)
		},
		DeleteFunc: func(obj any) {
			if l := asLink(obj); l != nil {
				r.index.Delete(l, r.now())
			}
		},
	})
	if err != nil {
		return err
	}
	r.addSynced(&r.linksSynced, reg)
	return nil
}

func (r *Redirector) attachUses(old, cur *Link) {
	if r.opts.Uses != nil {
		var prev *uses.Counter
		if old != nil {
			prev = old.counter
		}
		cur.counter = r.opts.Uses.Attach(prev, cur)
		if cur.is(flagMaxUses) && cur.Confirmed() && cur.answersNow(r.now().UnixNano()) {
			// A new limited link that answers: quota may be taken ahead of
			// its first click (the counting decides).
			r.opts.Uses.Ahead(cur.counter)
		}
	}
}

// WatchNamespaces feeds the domain table from a Namespace informer (whose
// transform should be TransformNamespace).
func (r *Redirector) WatchNamespaces(inf Informer) error {
	set := func(obj any) {
		ns := asNamespace(obj)
		if ns == nil {
			return
		}
		r.namespaces.Store(ns.Name, ns)
		if r.allowedNS != nil && !r.allowedNS[ns.Name] {
			return
		}
		r.domains.Set(ns.Name, ns.CreationTimestamp.Time, ns.Annotations[DomainAnnotation])
		r.setFallbacks(ns)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if ns := asNamespace(obj); ns != nil {
				r.namespaces.Delete(ns.Name)
				r.domains.Delete(ns.Name)
				r.fallbacks.set(ns.Name, Fallbacks{})
			}
		},
	})
	if err != nil {
		return err
	}
	r.addSynced(&r.nssSynced, reg)
	return nil
}

// ReasonDomainConflict is the reason of the Warning event a namespace gets
// when an older namespace claims the same domain.
const ReasonDomainConflict = "DomainConflict"

func (r *Redirector) domainConflict(host, loser, winner string) {
	r.log.Info("domain claimed by two namespaces; the older one serves it", "domain", host, "served", winner, "ignored", loser)
	if r.opts.Recorder == nil {
		return
	}
	obj, ok := r.namespaces.Load(loser)
	if !ok {
		return
	}
	r.opts.Recorder.Eventf(obj.(*corev1.Namespace), nil, corev1.EventTypeWarning, ReasonDomainConflict, "ServeDomain",
		"domain %q (annotation %s) is also claimed by namespace %q, which is older: /<code> on %q is served from %q, not from this namespace",
		host, DomainAnnotation, winner, host, winner)
}

// ReasonInvalidFallback is the reason of the Warning event a namespace gets
// when a fallback annotation does not hold a valid URL.
const ReasonInvalidFallback = "InvalidFallback"

// setFallbacks takes a namespace's fallback annotations into the table;
// an invalid one is left out, with a Warning event on the namespace (once
// per value).
func (r *Redirector) setFallbacks(ns *corev1.Namespace) {
	var self string
	if r.publicBase != nil {
		self = r.publicBase.Host
	}
	f, errs := namespaceFallbacks(ns.Annotations, self, ns.Annotations[DomainAnnotation])
	r.fallbacks.set(ns.Name, f)
	r.warnMu.Lock()
	defer r.warnMu.Unlock()
	if r.warned == nil {
		r.warned = map[string]string{}
	}
	for k, err := range errs {
		key := ns.Name + "/" + fallbackKind(k).annotation()
		value := ns.Annotations[fallbackKind(k).annotation()]
		if err == nil {
			delete(r.warned, key)
			continue
		}
		if r.warned[key] == value {
			continue
		}
		r.warned[key] = value
		r.log.Info("ignoring a fallback annotation", "namespace", ns.Name, "annotation", fallbackKind(k).annotation(), "error", err.Error())
		if r.opts.Recorder != nil {
			r.opts.Recorder.Eventf(ns, nil, corev1.EventTypeWarning, ReasonInvalidFallback, "ServeFallback",
				"annotation %s is ignored: %v; use an absolute http or https URL of a page outside linkforge", fallbackKind(k).annotation(), err)
		}
	}
}

// RunTombstoneSweeper forgets ended tombstones every interval until ctx ends.
func (r *Redirector) RunTombstoneSweeper(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.index.SweepTombstones(r.now())
		}
	}
}

// sweepInterval is how often tombstones are swept: a tenth of their TTL,
// between one second and one minute.
func (r *Redirector) sweepInterval() time.Duration {
	return min(max(r.opts.TombstoneTTL/10, time.Second), time.Minute)
}

// ProbeHandler serves /healthz, /readyz and /metrics. It belongs on its own
// port, so that no admin path can shadow a namespace on the redirect port.
func (r *Redirector) ProbeHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		plain(w, http.StatusOK, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if r.draining.Load() {
			plain(w, http.StatusServiceUnavailable, "shutting down\n")
			return
		}
		if !r.Ready() {
			plain(w, http.StatusServiceUnavailable, "link cache not synced\n")
			return
		}
		plain(w, http.StatusOK, "ok\n")
	})
	g := r.opts.Gatherer
	if g == nil {
		g = prometheus.DefaultGatherer
	}
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	return mux
}

func plain(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

var errStopped = errors.New("stopped")

// retry calls f until it succeeds or ctx ends, with capped exponential backoff.
func retry(ctx context.Context, log logr.Logger, what string, f func() error) error {
	backoff := 500 * time.Millisecond
	for {
		err := f()
		if err == nil {
			return nil
		}
		log.Info("cannot reach the API server yet; retrying", "step", what, "error", err.Error(), "after", backoff.String())
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, errStopped)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}
