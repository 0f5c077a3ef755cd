package events

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/linkforge/linkforge/internal/otelcoltest"
)

// The tests in this file run a real OpenTelemetry Collector, built from
// hack/tools/otelcol (the tools module: the OTLP receiver and the file and debug
// exporters, from the Go module proxy; internal/otelcoltest builds and runs
// it): its first build takes minutes, and $LINKFORGE_OTELCOL names a
// binary built already (make otelcol builds bin/otelcol).

// collectorStart is how long a collector may take to listen: 100 times what
// it takes on an idle machine (about 0.2 s).
const collectorStart = 20 * time.Second

// startCollector starts col and waits until it listens.
func startCollector(t *testing.T, col *otelcoltest.Collector) {
	t.Helper()
	col.Start(t)
	waitForCollector(t, col.Listening, "the collector listens")
}

// waitForCollector waits up to collectorStart for cond: what a Collector
// does once started.
func waitForCollector(t *testing.T, cond func() bool, what string) {
	t.Helper()
	NewWithT(t).Eventually(cond).WithTimeout(collectorStart).WithPolling(10*time.Millisecond).Should(BeTrue(), what)
}

// TestCollectorReceivesEvents: events reach a real Collector with the
// documented attributes; with the Collector down for a while, the buffer
// holds up to its bound, the rest is dropped and counted, and the buffered
// events arrive once it is back.
func TestCollectorReceivesEvents(t *testing.T) {
	col := otelcoltest.New(t, otelcoltest.Binary(t, "../.."))
	startCollector(t, col)
	p := start(t, otlpConfig(col.Endpoint))
	offer(t, p, 0, 20)
	waitForCollector(t, func() bool { return len(col.Records(t)) == 20 }, "20 records in the collector's file")
	for i, r := range col.Records(t) {
		want := map[string]string{
			"eventName": EventType, AttrNamespace: "team-a", AttrName: "link-" + itoa(i), AttrCode: code(i),
			AttrStatus: "302", AttrRule: "-1", AttrVariant: "-1", AttrClientAddress: "198.51.100.0", AttrDevice: DeviceMobile,
			AttrBot: "false", AttrCountry: "DE", AttrRefererHost: "news.example.org", AttrOrphan: "false",
		}
		for k, v := range want {
			if r[k] != v {
				t.Errorf("record %d: %s = %q, want %q", i, k, r[k], v)
			}
		}
		if len(r[AttrEventID]) != 36 {
			t.Errorf("record %d: event id %q", i, r[AttrEventID])
		}
	}

	col.Stop()
	offer(t, p, 20, 320) // the buffer holds 100
	waitFor(t, func() bool { return countsOf(p, SinkOTLP).bufferFull == 200 }, "200 events dropped while the collector is down")
	if c := countsOf(p, SinkOTLP); c.depth != 100 || c.retries == 0 {
		t.Errorf("counts %+v: want 100 buffered and retries", c)
	}
	startCollector(t, col)
	waitForCollector(t, func() bool { return countsOf(p, SinkOTLP).sent == 120 }, "the buffered events sent once the collector is back")
	// Sent is the Collector's answer; its file exporter writes after it.
	waitForCollector(t, func() bool { return len(col.Records(t)) >= 120 }, "120 records in the collector's file")
	recs := col.Records(t)
	if len(recs) != 120 {
		t.Fatalf("the collector has %d records, want 120", len(recs))
	}
	for i, r := range recs[20:] {
		if r[AttrCode] != code(20+i) {
			t.Fatalf("record %d after the outage has code %s, want %s (the oldest kept, in order)", 20+i, r[AttrCode], code(20+i))
		}
	}
	countsOf(p, SinkOTLP).conserved(t)
}

// TestCollectorBasePath: a real Collector whose OTLP receiver takes logs
// under a base path (logs_url_path /otlp/v1/logs, as behind a gateway that
// routes /otlp) gets the events from the base URL (--events-otlp-endpoint,
// /v1/logs appended as to OTEL_EXPORTER_OTLP_ENDPOINT) and from the whole
// URL (--events-otlp-logs-endpoint, used as it is).
func TestCollectorBasePath(t *testing.T) {
	col := otelcoltest.New(t, otelcoltest.Binary(t, "../.."), otelcoltest.LogsPath("/otlp/v1/logs"))
	startCollector(t, col)
	for i, cfg := range []Config{
		otlpConfig(col.Endpoint + "/otlp"),
		func() Config { c := otlpConfig(""); c.OTLP.LogsEndpoint = col.Endpoint + "/otlp/v1/logs"; return c }(),
	} {
		p := start(t, cfg)
		offer(t, p, 10*i, 10*i+10)
		waitForCollector(t, func() bool { return countsOf(p, SinkOTLP).sent == 10 }, "10 events delivered")
		if c := countsOf(p, SinkOTLP); c.failed != 0 || c.retries != 0 {
			t.Errorf("%+v: counts %+v, want 10 sent, none failed or retried", cfg.OTLP, c)
		}
	}
	waitForCollector(t, func() bool { return len(col.Records(t)) == 20 }, "20 records in the collector's file")
	for i, r := range col.Records(t) {
		if r[AttrCode] != code(i) {
			t.Errorf("record %d has code %s, want %s", i, r[AttrCode], code(i))
		}
	}
}
