package uses

import "github.com/prometheus/client_golang/prometheus"

// The redirector's metric names: linkforge_redirector_uses_*.
const (
	metricsNamespace = "linkforge"
	metricsSubsystem = "redirector"
)

const (
	resultLabel = "result"
	resultError = "error"
	// A reservation's: the replica's write budget was spent, or its writes
	// lost every race to the other replicas' until the reserve timeout.
	resultBudget    = "budget"
	resultContended = "contended"
)

// metrics count the writes of uses; none has a per-link label.
type metrics struct {
	writes       *prometheus.CounterVec
	reads        *prometheus.CounterVec
	reservations *prometheus.CounterVec
	settled      *prometheus.CounterVec
	unavailable  prometheus.Counter
	forfeited    prometheus.Counter
	limitLowered prometheus.Counter
	pending      prometheus.Gauge
	reserveWait  prometheus.Histogram
	forwards     *prometheus.CounterVec
	peerTakes    *prometheus.CounterVec
	ahead        *prometheus.CounterVec
	returns      *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: name, Help: help}
	}
	m := &metrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts(opts("uses_writes_total",
			"Status writes of uses and reservations, by result: ok, conflict (a 409, retried on a fresh read) or error (retried next round).")), []string{resultLabel}),
		reads: prometheus.NewCounterVec(prometheus.CounterOpts(opts("uses_write_bases_total",
			"What reservation writes started from: a live read of the link, or the informer's version (a first reservation of a link with none: no read).")), []string{"source"}),
		reservations: prometheus.NewCounterVec(prometheus.CounterOpts(opts("uses_reservations_total",
			"Reservations of maxUses quota asked by requests, by result: granted, denied (no quota left to reserve), budget (this replica's --uses-writes-per-second spent), contended (each write conflicted with another replica's until --uses-reserve-timeout) or error (the API server failed or did not answer).")), []string{resultLabel}),
		settled: prometheus.NewCounterVec(prometheus.CounterOpts(opts("uses_unconfirmed_writes_total",
			"Reservation writes whose response was lost, by what the next live read showed: applied, not-applied (its uses counted again) or taken-back.")), []string{"outcome"}),
		unavailable: prometheus.NewCounter(prometheus.CounterOpts(opts("uses_quota_denied_total",
			"GETs of a link with maxUses that this replica could not serve from its quota (answered 503, or 410 once the limit is reached)."))),
		forfeited: prometheus.NewCounter(prometheus.CounterOpts(opts("uses_forfeited_total",
			"Quota of lapsed reservations (their replica stopped without returning it) counted as used by this replica's writes."))),
		limitLowered: prometheus.NewCounter(prometheus.CounterOpts(opts("uses_limit_lowered_total",
			"Versions of a link whose maxUses is below the limit this replica's reservation was written under: its quota stopped at once, to be shrunk on a live read."))),
		pending: prometheus.NewGauge(prometheus.GaugeOpts(opts("uses_pending",
			"Uses served and not yet written to the API server, after the last flush round."))),
		reserveWait: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metricsNamespace, Subsystem: metricsSubsystem,
			Name: "uses_reserve_duration_seconds",
			Help: "How long requests of links with maxUses waited for a reservation (a write, after a live read unless the informer shows the link with no reservation; bounded by --uses-reserve-timeout).",
			// From a round trip on a quiet API server to the 2s timeout.
			Buckets: []float64{.002, .005, .01, .025, .05, .1, .25, .5, 1, 2, 5}}),
		forwards: prometheus.NewCounterVec(prometheus.CounterOpts(opts("uses_forwards_total",
			"GETs of a link with maxUses that this replica had no quota for, forwarded to the replica holding it, by result: served (there), refused (no quota there), gone (the link no longer answers), unreachable (nothing answers at its address, or the replica there proves it cannot take this one's requests; nothing served there: the holder is asked through the API server), no-key (this replica has no peer key yet: it asks through the API server alike), lost (written, and no authenticated answer: the holder may have served it, a use counted and served to nobody) or not-forwarded (nothing the holder could take was sent or read: no free connection, its port at its connection limits or its replay memory full).")), []string{resultLabel}),
		returns: prometheus.NewCounterVec(prometheus.CounterOpts(opts("uses_prompt_writes_total",
			"Reservation writes made at once rather than at the next round, by reason: asked (another replica could not reach this one and asked for its quota back) or used-up (the quota ran out: the count is written so that a reached limit answers 410 everywhere).")), []string{"reason"}),
		peerTakes: prometheus.NewCounterVec(prometheus.CounterOpts(opts("uses_peer_takes_total",
			"Uses other replicas forwarded to this one, by result: served from this replica's quota, or refused.")), []string{resultLabel}),
		ahead: prometheus.NewCounterVec(prometheus.CounterOpts(opts("uses_reserved_ahead_total",
			"Reservations ahead of a new link's first click, by result: granted, taken (another replica reserved first), full (this replica holds its most ahead) or error.")), []string{resultLabel}),
	}
	// Every label value exists from the start, at 0: rates and alerts need
	// no first event.
	for _, r := range []string{"ok", "conflict", resultError} {
		m.writes.WithLabelValues(r)
	}
	for _, s := range []string{"live", "informer"} {
		m.reads.WithLabelValues(s)
	}
	for _, r := range []string{"granted", "denied", resultBudget, resultContended, resultError} {
		m.reservations.WithLabelValues(r)
	}
	for _, o := range []string{"applied", "not-applied", "taken-back"} {
		m.settled.WithLabelValues(o)
	}
	for _, r := range forwardedNames {
		m.forwards.WithLabelValues(r)
	}
	for _, r := range []string{"served", "refused"} {
		m.peerTakes.WithLabelValues(r)
	}
	for _, r := range []string{"asked", "used-up"} {
		m.returns.WithLabelValues(r)
	}
	for _, r := range []string{"granted", "taken", "full", resultError} {
		m.ahead.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.writes, m.reads, m.reservations, m.settled, m.unavailable, m.forfeited, m.limitLowered, m.pending, m.reserveWait,
			m.forwards, m.peerTakes, m.ahead, m.returns)
	}
	return m
}
