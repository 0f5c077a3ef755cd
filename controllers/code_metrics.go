package controllers

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/claim"
	"github.com/linkforge/linkforge/internal/compactlink"
	"github.com/linkforge/linkforge/internal/shortcode"
)

// The code metrics of the manager, linkforge_codes_* (docs/concepts.md,
// "Metrics"). None has a per-link label. The counters count status writes
// that succeeded, so a retried reconcile or a restart over unchanged links
// counts nothing twice; the gauges are read from the manager's cache when
// Prometheus scrapes.
const (
	codeMetricsNamespace = "linkforge"
	codeMetricsSubsystem = "codes"
)

// DefaultMetricsNamespaceLimit is how many namespaces get series of their
// own in the per-namespace code gauges, by default.
const DefaultMetricsNamespaceLimit = 500

// OtherNamespaces is the namespace label of the series that sums the
// namespaces beyond the limit. No namespace can have this name: namespace
// names are DNS labels, without "_".
const OtherNamespaces = "_other"

// Conflict kinds, the label of linkforge_codes_conflicts_total.
const (
	conflictCustom = "custom"
	conflictHashed = "hashed"
)

type codeMetrics struct {
	dedupHits prometheus.Counter
	salted    *prometheus.CounterVec
	conflicts *prometheus.CounterVec
	invalid   prometheus.Counter
	gauges    *codeGauges
}

func newCodeMetrics(r *ShortLinkReconciler) *codeMetrics {
	m := &codeMetrics{
		dedupHits: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: codeMetricsNamespace, Subsystem: codeMetricsSubsystem, Name: "dedup_hits_total",
			Help: "ShortLinks that took a code another link of the same target already held, and share it (dedup).",
		}),
		salted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: codeMetricsNamespace, Subsystem: codeMetricsSubsystem, Name: "salted_total",
			Help: "ShortLinks that took a hashed code at a salt above 0 (1-9): the lower salts were held by other targets, or by links of the same target while dedup was off.",
		}, []string{"salt"}),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: codeMetricsNamespace, Subsystem: codeMetricsSubsystem, Name: "conflicts_total",
			Help: "ShortLinks that entered CodeConflict, by kind: custom (spec.code held by a link with precedence) or hashed (all ten salts held).",
		}, []string{"kind"}),
		invalid: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: codeMetricsNamespace, Subsystem: codeMetricsSubsystem, Name: "invalid_urls_total",
			Help: "ShortLinks whose spec.url or another target the canonicalizer refused (state Invalid, reason InvalidURL).",
		}),
		gauges: newCodeGauges(r),
	}
	// Every series exists from the start, so a rate over them reads 0, not nothing.
	for salt := 1; salt <= shortcode.MaxSalt; salt++ {
		m.salted.WithLabelValues(strconv.Itoa(salt))
	}
	m.conflicts.WithLabelValues(conflictCustom)
	m.conflicts.WithLabelValues(conflictHashed)
	return m
}

// register adds m to reg (nil: controller-runtime's registry). Tests run
// several managers in one process: a registry keeps the first reconciler's
// metrics, and the others count into theirs unregistered.
func (m *codeMetrics) register(reg prometheus.Registerer) error {
	if reg == nil {
		reg = metrics.Registry
	}
	for _, c := range []prometheus.Collector{m.dedupHits, m.salted, m.conflicts, m.invalid, m.gauges} {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return fmt.Errorf("registering the code metrics: %w", err)
			}
		}
	}
	return nil
}

// observe counts what a successful status write changed: before is the
// link as read, after as written, d the code decision (zero for an invalid
// URL).
func (m *codeMetrics) observe(before, after *linkv1.ShortLink, d claim.Decision) {
	if m == nil {
		return
	}
	was, st := &before.Status, &after.Status
	if st.State != was.State {
		switch st.State {
		case linkv1.StateInvalid:
			m.invalid.Inc()
		case linkv1.StateConflict, linkv1.StateKept:
			// A link that keeps its earlier code is in conflict too, unless
			// it waits for a younger holder that is moving (as Pending);
			// going from one of the two states to the other is the same
			// conflict.
			if d.Outcome == claim.Kept && d.Moving || was.State == linkv1.StateConflict || was.State == linkv1.StateKept {
				break
			}
			kind := conflictHashed
			if after.Spec.Code != "" {
				kind = conflictCustom
			}
			m.conflicts.WithLabelValues(kind).Inc()
		}
	}
	if st.Code == "" || st.Code == was.Code {
		return
	}
	// The link took a new code (its first, or after its URL changed).
	switch {
	case d.Twin != "":
		m.dedupHits.Inc()
	case st.Salt > 0:
		m.salted.WithLabelValues(strconv.Itoa(int(st.Salt))).Inc()
	}
}

// codeGauges are the per-namespace gauges, computed from the manager's
// cache on each scrape:
//
//	linkforge_codes_held{namespace}          codes with a confirmed holder
//	linkforge_codes_shared_links{namespace}  links that share their code with a link of the same target
//
// Cardinality: one series per namespace that holds a code, for the limit
// namespaces that hold the most (ties by name); the others are summed in
// one series, namespace="_other". No per-link label.
type codeGauges struct {
	r      *ShortLinkReconciler // its cache's code index, and its targets
	limit  int
	held   *prometheus.Desc
	shared *prometheus.Desc
}

func newCodeGauges(r *ShortLinkReconciler) *codeGauges {
	limit := r.MetricsNamespaceLimit
	if limit == 0 {
		limit = DefaultMetricsNamespaceLimit
	}
	return &codeGauges{
		r: r, limit: max(limit, 0),
		held: prometheus.NewDesc(prometheus.BuildFQName(codeMetricsNamespace, codeMetricsSubsystem, "held"),
			`Codes that a ShortLink holds, confirmed (they redirect, are scheduled, or answer 410 Gone), by namespace; namespaces beyond the manager's --code-metrics-namespaces are summed as namespace="_other".`,
			[]string{"namespace"}, nil),
		shared: prometheus.NewDesc(prometheus.BuildFQName(codeMetricsNamespace, codeMetricsSubsystem, "shared_links"),
			`ShortLinks that share their code with another link of the same target (dedup), by namespace, as linkforge_codes_held.`,
			[]string{"namespace"}, nil),
	}
}

func (g *codeGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.held
	ch <- g.shared
}

// nsCodeCount is what the gauges say of one namespace.
type nsCodeCount struct {
	namespace    string
	held, shared int
}

func (g *codeGauges) Collect(ch chan<- prometheus.Metric) {
	counts, err := g.count()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(g.held, err)
		return
	}
	for _, c := range limitNamespaces(counts, g.limit) {
		ch <- prometheus.MustNewConstMetric(g.held, prometheus.GaugeValue, float64(c.held), c.namespace)
		ch <- prometheus.MustNewConstMetric(g.shared, prometheus.GaugeValue, float64(c.shared), c.namespace)
	}
}

// count reads the code index one bucket at a time: a link is counted in the
// bucket of the code it holds, and the links of one code are all in it, so
// a code's holders are grouped without a set of every code.
func (g *codeGauges) count() (map[string]*nsCodeCount, error) {
	counts := map[string]*nsCodeCount{}
	holders := map[nsCode][]any{}
	for _, bucket := range bucketNames {
		objs, err := g.r.Index.bucketOf(bucket)
		if err != nil {
			return nil, err
		}
		clear(holders)
		for _, obj := range objs {
			// The summary says it: a code shared by two links is rare, and
			// only its links are unpacked.
			l, ok := compactlink.SummaryOf(obj)
			if !ok || !l.HoldsConfirmedCode() || codeBucket(l.Namespace, l.StatusCode) != bucket {
				continue
			}
			k := nsCode{l.Namespace, l.StatusCode}
			holders[k] = append(holders[k], obj)
		}
		for k, links := range holders {
			c := counts[k.namespace]
			if c == nil {
				c = &nsCodeCount{namespace: k.namespace}
				counts[k.namespace] = c
			}
			c.held++
			c.shared += g.sharingLinks(links)
		}
	}
	return counts, nil
}

// sharingLinks counts the links of one code that share it with another of
// the same target.
func (g *codeGauges) sharingLinks(links []any) int {
	if len(links) < 2 {
		return 0
	}
	targets := make([]string, len(links))
	for i, obj := range links {
		l, _ := compactlink.Of(obj)
		targets[i] = g.r.claimLink(l, l.Status.CanonicalURL).Target
	}
	n := 0
	for i := range targets {
		for j := range targets {
			if i != j && targets[i] == targets[j] {
				n++
				break
			}
		}
	}
	return n
}

// limitNamespaces returns one count per namespace for the limit namespaces
// that hold the most codes (ties by name), and the sum of the others as
// namespace OtherNamespaces, if any.
func limitNamespaces(counts map[string]*nsCodeCount, limit int) []nsCodeCount {
	all := make([]nsCodeCount, 0, len(counts))
	for _, c := range counts {
		all = append(all, *c)
	}
	slices.SortFunc(all, func(a, b nsCodeCount) int {
		return cmp.Or(cmp.Compare(b.held, a.held), cmp.Compare(a.namespace, b.namespace))
	})
	if len(all) <= limit {
		return all
	}
	other := nsCodeCount{namespace: OtherNamespaces}
	for _, c := range all[limit:] {
		other.held += c.held
		other.shared += c.shared
	}
	return append(all[:limit], other)
}
