package redirect

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/agent"
	"github.com/linkforge/linkforge/internal/clientaddr"
)

// metrics of the redirect path. Counters are resolved once, so a request
// costs one atomic add. There is no latency histogram: the handler takes
// about a microsecond, and the latency a client sees (queues, network) is
// measured where it arrives (the load balancer or ingress), not here.
type metrics struct {
	byClass [6]prometheus.Counter // index: status / 100
	// accessLogDropped counts access-log records dropped because the
	// writer fell behind.
	accessLogDropped prometheus.Counter
	// fallbacks counts fallback redirects, by kind.
	fallbacks [numFallbacks]prometheus.Counter
	// qrCached, qrDrawn and qrMerged count QR codes served from the
	// cache, drawn, and taken from an identical request's drawing.
	qrCached, qrDrawn, qrMerged prometheus.Counter
	// renderRefused counts QR codes and previews refused for want of
	// render budget (503), by view.
	renderRefused [numViews]prometheus.Counter
	// refused counts requests the HTTP layer could not read, by status.
	refused map[int]prometheus.Counter
	// split counts the split clicks, by rules.SplitSlot.
	split [splitMetricSlots]prometheus.Counter
	// previewerFetches counts the GETs of links by the clients that read
	// them (agent.Agent.Reads), by agent.Class and answer (0 a redirect,
	// 1 a card): a person's GET pays for no metric here.
	previewerFetches [8][2]prometheus.Counter
	// fromProxies counts the client addresses read for requests from a
	// trusted proxy, by clientaddr.Result (peer unused) and, last, those
	// of chunked requests (clientChunked).
	fromProxies [len(clientaddr.Results) + 1]prometheus.Counter
}

// splitMetricSlots are the destinations of a split: spec.url and the variants.
const splitMetricSlots = linkv1.MaxVariants + 1

// refusedStatuses are the answers to requests the server cannot read.
var refusedStatuses = []int{http.StatusBadRequest, http.StatusRequestTimeout, http.StatusRequestEntityTooLarge, http.StatusRequestHeaderFieldsTooLarge}

// qrResultLabel labels linkforge_redirector_qr_codes_total.
const qrResultLabel = "result"

// The names of the redirector's metrics: linkforge_redirector_*.
const (
	metricsNamespace = "linkforge"
	metricsSubsystem = "redirector"
)

func newMetrics(reg prometheus.Registerer, idx *Index, domains *Domains, ready func() bool) *metrics {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace,
		Subsystem: metricsSubsystem,
		Name:      "requests_total",
		Help:      "Requests answered by the redirector, by status class (2xx, 3xx, 4xx, 5xx).",
	}, []string{"code"})
	m := &metrics{
		accessLogDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace,
			Subsystem: metricsSubsystem,
			Name:      "access_log_dropped_total",
			Help:      "Access-log lines dropped because the log output could not keep up (requests are never held up for the access log).",
		}),
	}
	for i, class := range []string{"1xx", "2xx", "3xx", "4xx", "5xx"} {
		m.byClass[i+1] = requests.WithLabelValues(class)
	}
	m.byClass[0] = m.byClass[5]
	fallbacks := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace,
		Subsystem: metricsSubsystem,
		Name:      "fallbacks_total",
		Help:      "Requests answered with a fallback redirect instead of 404 or 410, by kind (root, not_found, gone).",
	}, []string{"kind"})
	for k := range numFallbacks {
		m.fallbacks[k] = fallbacks.WithLabelValues(k.String())
	}
	qrCodes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace,
		Subsystem: metricsSubsystem,
		Name:      "qr_codes_total",
		Help:      "QR codes served, by result: cached (served from the cache), drawn (drawn for this request) or merged (drawn once for identical requests at the same time).",
	}, []string{qrResultLabel})
	m.qrCached, m.qrDrawn, m.qrMerged = qrCodes.WithLabelValues("cached"), qrCodes.WithLabelValues("drawn"), qrCodes.WithLabelValues("merged")
	renderRefused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace,
		Subsystem: metricsSubsystem,
		Name:      "renders_refused_total",
		Help:      "QR codes, preview pages, cards and gated links' password checks and forms answered 503 because the render budget (--render-concurrency, --render-cpu-share) was spent, by view (qr, preview, card, gate).",
	}, []string{"view"})
	m.renderRefused[viewQR], m.renderRefused[viewPreview] = renderRefused.WithLabelValues("qr"), renderRefused.WithLabelValues("preview")
	m.renderRefused[viewCard] = renderRefused.WithLabelValues("card")
	m.renderRefused[viewGate] = renderRefused.WithLabelValues("gate")
	previewers := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace,
		Subsystem: metricsSubsystem,
		Name:      "previewer_fetches_total",
		Help:      "GETs of links by the clients that read them without following them for a person (docs/uses.md), which are never uses: by class (previewer, crawler, prefetcher, monitor) and answer: card (the link has one, or maxUses) or redirect (to spec.url).",
	}, []string{"class", "answer"})
	for _, c := range []agent.Class{agent.Previewer, agent.Crawler, agent.Prefetcher, agent.Monitor} { // the classes that read links
		for i, answer := range []string{"redirect", "card"} {
			m.previewerFetches[c][i] = previewers.WithLabelValues(c.String(), answer)
		}
	}
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace,
		Subsystem: metricsSubsystem,
		Name:      "refused_requests_total",
		Help:      "Requests the redirect port could not read, by the status it answered: 400 (malformed), 408 (too slow), 413 (a body) or 431 (a head too large).",
	}, []string{"code"})
	m.refused = map[int]prometheus.Counter{}
	for _, code := range refusedStatuses {
		m.refused[code] = refused.WithLabelValues(strconv.Itoa(code))
	}
	m.split = newSplitMetric(reg)
	fromProxies := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace,
		Subsystem: metricsSubsystem,
		Name:      "client_addresses_from_proxies_total",
		Help:      "Requests from a trusted proxy (--trusted-proxies), by where their client address came from: header (--client-address-header), or the proxy's own address because the header was missing, invalid, or the request chunked (a trailer could add to it).",
	}, []string{"result"})
	for i, name := range clientaddr.Results {
		if clientaddr.Result(i) != clientaddr.Peer {
			m.fromProxies[i] = fromProxies.WithLabelValues(name)
		}
	}
	m.fromProxies[clientChunked] = fromProxies.WithLabelValues("chunked")
	if reg == nil {
		return m
	}
	reg.MustRegister(requests, m.accessLogDropped, fallbacks, qrCodes, renderRefused, refused, previewers, fromProxies,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: metricsNamespace,
			Subsystem: metricsSubsystem,
			Name:      "ready",
			Help:      "1 when the redirector serves (its informers have synced and it is not shutting down), else 0: what /readyz answers.",
		}, func() float64 {
			if ready() {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: metricsNamespace,
			Subsystem: metricsSubsystem,
			Name:      "index_links",
			Help:      "Namespace/code pairs the redirector serves from its index.",
		}, func() float64 { return float64(idx.Links()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: metricsNamespace,
			Subsystem: metricsSubsystem,
			Name:      "index_tombstones",
			Help:      "Codes of deleted finished links that still answer 410 Gone.",
		}, func() float64 { return float64(idx.Tombstones()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: metricsNamespace,
			Subsystem: metricsSubsystem,
			Name:      "domains",
			Help:      "Hosts served from a namespace's linkforge.io/domain annotation.",
		}, func() float64 { return float64(domains.Len()) }),
	)
	return m
}

// count counts an answer of status class c (statusClass).
func (m *metrics) count(c int) { m.byClass[c].Inc() }

// statusClass is the class of an HTTP status: 1 to 5, else 0.
func statusClass(status int) int {
	c := status / 100
	if c < 1 || c > 5 {
		c = 0
	}
	return c
}
