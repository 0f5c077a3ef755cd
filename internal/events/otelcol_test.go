//go:build otelcol

package events

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// The tests in this file run a real OpenTelemetry Collector, built from
// hack/otelcol (its own module: the OTLP receiver and the file and debug
// exporters, from the Go module proxy): hack/otelcol/test.sh, or
//
//	go test -tags otelcol ./internal/events -run Collector
//
// The first build takes minutes; $OTELCOL names a binary built already.

// collectorStart is how long a collector may take to listen: 100 times what
// it takes on an idle machine (about 0.2 s).
const collectorStart = 20 * time.Second

func collectorBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("OTELCOL"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "otelcol")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = "../../hack/otelcol"
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the collector: %v\n%s", err, out)
	}
	return bin
}

// otelCollector is a running Collector writing the logs it receives to file.
type otelCollector struct {
	bin, config, file, endpoint string
	cmd                         *exec.Cmd
	log                         bytes.Buffer
}

func newCollector(t *testing.T, bin string) *otelCollector {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	c := &otelCollector{bin: bin, config: filepath.Join(dir, "config.yaml"), file: filepath.Join(dir, "logs.jsonl"), endpoint: "http://" + addr}
	config := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
exporters:
  file:
    path: %s
    flush_interval: 10ms
    append: true # a restart keeps what came before
  debug:
    verbosity: basic
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    logs:
      receivers: [otlp]
      exporters: [file, debug]
`, addr, c.file)
	if err := os.WriteFile(c.config, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stop)
	return c
}

func (c *otelCollector) start(t *testing.T) {
	t.Helper()
	c.cmd = exec.Command(c.bin, "--config", c.config)
	c.cmd.Stdout, c.cmd.Stderr = &c.log, &c.log
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitForWithin(t, collectorStart, func() bool {
		conn, err := net.Dial("tcp", c.endpoint[len("http://"):])
		if err == nil {
			_ = conn.Close()
		}
		return err == nil
	}, "the collector listens")
}

func (c *otelCollector) stop() {
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	_ = c.cmd.Process.Signal(os.Interrupt)
	_ = c.cmd.Wait()
	c.cmd = nil
}

// records reads the log records the file exporter wrote (OTLP/JSON, a
// request per line), by their attributes.
func (c *otelCollector) records(t *testing.T) []map[string]string {
	t.Helper()
	f, err := os.Open(c.file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var out []map[string]string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var req struct {
			ResourceLogs []struct {
				ScopeLogs []struct {
					LogRecords []struct {
						EventName  string `json:"eventName"`
						Attributes []struct {
							Key   string                     `json:"key"`
							Value map[string]json.RawMessage `json:"value"`
						} `json:"attributes"`
					} `json:"logRecords"`
				} `json:"scopeLogs"`
			} `json:"resourceLogs"`
		}
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			t.Fatalf("the file exporter wrote %q: %v", sc.Text(), err)
		}
		for _, rl := range req.ResourceLogs {
			for _, sl := range rl.ScopeLogs {
				for _, lr := range sl.LogRecords {
					m := map[string]string{"eventName": lr.EventName}
					for _, a := range lr.Attributes {
						for _, v := range a.Value {
							s := string(v)
							if u, err := strconv.Unquote(s); err == nil {
								s = u
							}
							m[a.Key] = s
						}
					}
					out = append(out, m)
				}
			}
		}
	}
	return out
}

func waitForWithin(t *testing.T, d time.Duration, cond func() bool, what string) {
	t.Helper()
	NewWithT(t).Eventually(cond).WithTimeout(d).WithPolling(10*time.Millisecond).Should(BeTrue(), what)
}

// TestCollectorReceivesEvents: events reach a real Collector with the
// documented attributes; with the Collector down for a while, the buffer
// holds up to its bound, the rest is dropped and counted, and the buffered
// events arrive once it is back.
func TestCollectorReceivesEvents(t *testing.T) {
	col := newCollector(t, collectorBinary(t))
	col.start(t)
	p := start(t, otlpConfig(col.endpoint))
	offer(t, p, 0, 20)
	waitForWithin(t, collectorStart, func() bool { return len(col.records(t)) == 20 }, "20 records in the collector's file")
	for i, r := range col.records(t) {
		want := map[string]string{
			"eventName": EventType, AttrNamespace: "team-a", AttrName: "link-" + itoa(i), AttrCode: code(i),
			AttrStatus: "302", AttrRule: "-1", AttrClientAddress: "198.51.100.0", AttrDevice: DeviceMobile,
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

	col.stop()
	offer(t, p, 20, 320) // the buffer holds 100
	waitFor(t, func() bool { return countsOf(p, SinkOTLP).bufferFull == 200 }, "200 events dropped while the collector is down")
	if c := countsOf(p, SinkOTLP); c.depth != 100 || c.retries == 0 {
		t.Errorf("counts %+v: want 100 buffered and retries", c)
	}
	col.start(t)
	waitForWithin(t, collectorStart, func() bool { return countsOf(p, SinkOTLP).sent == 120 }, "the buffered events sent once the collector is back")
	recs := col.records(t)
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
