package events

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The names of the pipeline's metrics: linkforge_events_*.
const (
	metricsNamespace = "linkforge"
	metricsSubsystem = "events"
)

// Reasons of linkforge_events_dropped_total.
const (
	// DropHandoffFull: the ring between the redirector and the batcher was
	// full (the batcher fell behind: CPU starved).
	DropHandoffFull = "handoff_full"
	// DropBufferFull: the sink's buffer was full (the sink down or slower
	// than the clicks).
	DropBufferFull = "buffer_full"
	// DropShutdown: still buffered when Close's deadline passed, or offered
	// after Close.
	DropShutdown = "shutdown"
)

var dropReasons = []string{DropHandoffFull, DropBufferFull, DropShutdown}

// Reasons of linkforge_events_failed_total.
const (
	// FailRefused: the receiver refused the request with a status that
	// is not retried, or it could not be encoded.
	FailRefused = "refused"
	// FailRejected: the receiver took the request (2xx) but rejected
	// some of its events: an OTLP partial success's rejected_log_records.
	FailRejected = "rejected"
)

// sinkLabel names the sink of a metric: cloudevents or otlp.
const sinkLabel = "sink"

// metrics of the pipeline. For each sink, at every moment (give or take
// the updates in flight):
//
//	offered = sent + failed + dropped (all reasons) + handoff depth + buffer depth
//
// since a record in the hand-off ring waits for every sink.
type metrics struct {
	// handoffDropped and closedDropped are each sink's dropped counter of
	// that reason: a record lost before the batcher is lost for all sinks.
	handoffDropped, closedDropped []prometheus.Counter
	sinks                         map[string]*sinkMetrics
}

type sinkMetrics struct {
	// failed and rejected are failed_total's reasons refused and
	// rejected.
	sent, failed, rejected, retries prometheus.Counter
	dropped                         map[string]prometheus.Counter
}

// newMetrics registers the metrics of sinks (their names), with the count
// of records offered (read from the pipeline when scraped: no counter to
// update on the request path), and the gauges of the hand-off ring's depth
// and of each sink's buffer.
func newMetrics(reg prometheus.Registerer, sinks []string, offered, handoffDepth func() float64, bufferDepth []func() float64) *metrics {
	offeredTotal := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "offered_total",
		Help: "Click events the redirector offered (one per answered request while events are on), kept or not.",
	}, offered)
	sent := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "sent_total",
		Help: "Click events the sink's receiver acknowledged (2xx), by sink.",
	}, []string{sinkLabel})
	failed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "failed_total",
		Help: "Click events the sink's receiver will never take, not retried, by sink and reason: refused (a status that is not retried, or not encodable), rejected (taken in a 2xx whose OTLP partial_success rejected them).",
	}, []string{sinkLabel, "reason"})
	retries := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "retries_total",
		Help: "Requests to the sink retried after a network error, a timeout, 429 or a retried 5xx, by sink.",
	}, []string{sinkLabel})
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "dropped_total",
		Help: "Click events the sink will never get, by sink and reason: handoff_full (the batcher fell behind), buffer_full (the sink down or slow and its buffer full), shutdown.",
	}, []string{sinkLabel, "reason"})
	collectors := make([]prometheus.Collector, 0, 6+len(sinks))
	collectors = append(collectors, offeredTotal, sent, failed, retries, dropped,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "handoff_depth",
			Help: "Click events between the redirector and the batcher (at most the hand-off ring's size).",
		}, handoffDepth))
	m := &metrics{sinks: map[string]*sinkMetrics{}}
	for i, s := range sinks {
		sm := &sinkMetrics{
			sent: sent.WithLabelValues(s), failed: failed.WithLabelValues(s, FailRefused), rejected: failed.WithLabelValues(s, FailRejected),
			retries: retries.WithLabelValues(s),
			dropped: map[string]prometheus.Counter{},
		}
		for _, r := range dropReasons {
			sm.dropped[r] = dropped.WithLabelValues(s, r)
		}
		m.sinks[s] = sm
		m.handoffDropped = append(m.handoffDropped, sm.dropped[DropHandoffFull])
		m.closedDropped = append(m.closedDropped, sm.dropped[DropShutdown])
		collectors = append(collectors, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "buffer_depth",
			Help:        "Click events in the sink's buffer, the batch being sent included (at most --events-buffer).",
			ConstLabels: prometheus.Labels{sinkLabel: s},
		}, bufferDepth[i]))
	}
	if reg != nil {
		reg.MustRegister(collectors...)
	}
	return m
}

// dropAll counts n events lost for every sink, before the batcher.
func dropAll(counters []prometheus.Counter) {
	for _, c := range counters {
		c.Inc()
	}
}

// SinkCounts are a sink's counts of events, as its metrics have them
// (linkforge_events_*{sink}).
type SinkCounts struct {
	Sink string
	// Sent: acknowledged (sent_total). Failed: refused or rejected
	// (failed_total). Dropped: lost for any reason (dropped_total), of
	// which DroppedAtShutdown for reason shutdown. Buffered: in the
	// sink's buffer (buffer_depth).
	Sent, Failed, Dropped, DroppedAtShutdown, Buffered int
}

// Counts returns each sink's counts, in the order of the sinks
// (CloudEvents first); nil for a nil Pipeline.
func (p *Pipeline) Counts() []SinkCounts {
	if p == nil {
		return nil
	}
	out := make([]SinkCounts, 0, len(p.sinks))
	for _, s := range p.sinks {
		m := s.m
		c := SinkCounts{Sink: s.sink.name(), Sent: counterValue(m.sent), Failed: counterValue(m.failed) + counterValue(m.rejected),
			DroppedAtShutdown: counterValue(m.dropped[DropShutdown]), Buffered: s.buf.len()}
		for _, r := range dropReasons {
			c.Dropped += counterValue(m.dropped[r])
		}
		out = append(out, c)
	}
	return out
}

func counterValue(c prometheus.Counter) int {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return int(m.GetCounter().GetValue())
}
