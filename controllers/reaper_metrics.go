package controllers

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

const (
	reaperSweepResultOK     = "success"
	reaperSweepResultFailed = "failure"
)

// reaperMetrics are one reaper's Prometheus metrics; the /reaper summary is
// read from them, so the two cannot disagree.
type reaperMetrics struct {
	reaped        prometheus.Counter
	failures      prometheus.Counter
	deletionLag   prometheus.Histogram
	sweeps        *prometheus.CounterVec
	sweepDuration prometheus.Histogram
	lastSweep     prometheus.Gauge
	lastBatch     prometheus.Gauge
}

// The names of the reaper's metrics: linkforge_reaper_*.
const (
	reaperMetricsNamespace = "linkforge"
	reaperMetricsSubsystem = "reaper"
)

func newReaperMetrics() *reaperMetrics {
	return &reaperMetrics{
		reaped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: reaperMetricsNamespace, Subsystem: reaperMetricsSubsystem, Name: "reaped_total",
			Help: "Finished ShortLinks the reaper deleted.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: reaperMetricsNamespace, Subsystem: reaperMetricsSubsystem, Name: "failures_total",
			Help: "Failed reads or deletes of the reaper. Precondition conflicts are not failures.",
		}),
		deletionLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: reaperMetricsNamespace, Subsystem: reaperMetricsSubsystem, Name: "deletion_lag_seconds",
			Help:    "Time from a link's deletion deadline (finish + ttlSecondsAfterFinished) to its deletion.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600},
		}),
		sweeps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: reaperMetricsNamespace, Subsystem: reaperMetricsSubsystem, Name: "sweeps_total",
			Help: "Reaper sweeps, by result (success or failure).",
		}, []string{"result"}),
		sweepDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: reaperMetricsNamespace, Subsystem: reaperMetricsSubsystem, Name: "sweep_duration_seconds",
			Help:    "Wall time of a reaper sweep.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}),
		lastSweep: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: reaperMetricsNamespace, Subsystem: reaperMetricsSubsystem, Name: "last_sweep_timestamp_seconds",
			Help: "Unix time when the last reaper sweep started.",
		}),
		lastBatch: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: reaperMetricsNamespace, Subsystem: reaperMetricsSubsystem, Name: "last_sweep_batch",
			Help: "Due links the last reaper sweep queued for deletion.",
		}),
	}
}

// register adds m to reg. A manager runs one reaper; tests run several in
// one process, and then reg keeps the first one's while each reaper's Stats
// reads its own.
func (m *reaperMetrics) register(reg prometheus.Registerer) {
	for _, c := range []prometheus.Collector{m.reaped, m.failures, m.deletionLag, m.sweeps, m.sweepDuration, m.lastSweep, m.lastBatch} {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				panic(fmt.Sprintf("registering reaper metrics: %v", err))
			}
		}
	}
}

func (m *reaperMetrics) recordReaped(lag time.Duration) {
	m.reaped.Inc()
	m.deletionLag.Observe(max(0, lag.Seconds()))
}

func (m *reaperMetrics) recordSweep(at time.Time, took time.Duration, queued int, err error) {
	result := reaperSweepResultOK
	if err != nil {
		result = reaperSweepResultFailed
	}
	// The run counter last: Stats takes a counted run to have its time and batch.
	m.lastSweep.Set(float64(at.Unix()))
	m.lastBatch.Set(float64(queued))
	m.sweepDuration.Observe(took.Seconds())
	m.sweeps.WithLabelValues(result).Inc()
}

// ReaperStats is the reaper's cleanup statistics as JSON (when it last ran,
// how many links it deleted, how large the last batch was, how many runs
// succeeded or failed and how long one takes), read from its Prometheus
// metrics. A run is a sweep; totalReaped counts all the reaper's deletes since
// the manager started, whatever queued them.
type ReaperStats struct {
	// LastRun is when the last sweep started (RFC 3339, UTC, whole seconds), or null.
	LastRun *time.Time `json:"lastRun"`
	// TotalReaped is how many links this reaper deleted.
	TotalReaped int64 `json:"totalReaped"`
	// LastBatch is how many due links the last sweep queued for deletion.
	LastBatch int `json:"lastBatch"`
	// RunsSucceeded and RunsFailed count sweeps.
	RunsSucceeded int64 `json:"runsSucceeded"`
	RunsFailed    int64 `json:"runsFailed"`
	// MeanDurationSeconds is the mean wall time of a sweep.
	MeanDurationSeconds float64 `json:"meanDurationSeconds"`
}

// Stats returns the summary that StatsHandler serves.
func (r *Reaper) Stats() ReaperStats {
	m := r.metrics
	s := ReaperStats{
		TotalReaped:   int64(metricValue(m.reaped).GetCounter().GetValue()),
		LastBatch:     int(metricValue(m.lastBatch).GetGauge().GetValue()),
		RunsSucceeded: int64(metricValue(m.sweeps.WithLabelValues(reaperSweepResultOK)).GetCounter().GetValue()),
		RunsFailed:    int64(metricValue(m.sweeps.WithLabelValues(reaperSweepResultFailed)).GetCounter().GetValue()),
	}
	if s.RunsSucceeded+s.RunsFailed == 0 {
		return s
	}
	last := time.Unix(int64(metricValue(m.lastSweep).GetGauge().GetValue()), 0).UTC()
	s.LastRun = &last
	if h := metricValue(m.sweepDuration).GetHistogram(); h.GetSampleCount() > 0 {
		s.MeanDurationSeconds = h.GetSampleSum() / float64(h.GetSampleCount())
	}
	return s
}

func metricValue(c prometheus.Metric) *dto.Metric {
	var out dto.Metric
	// Write fails only for malformed label pairs, which these metrics do not have.
	_ = c.Write(&out)
	return &out
}

// StatsHandler serves Stats as JSON (the manager mounts it at /reaper).
func (r *Reaper) StatsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		body, err := json.Marshal(r.Stats())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if req.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(append(body, '\n'))
	})
}
