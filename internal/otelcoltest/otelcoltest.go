// Package otelcoltest runs the test OpenTelemetry Collector of hack/tools/otelcol
// (the OTLP receiver, the file and debug exporters, built from the Go module
// proxy) for the tests of internal/events (the OTLP sink against a real
// Collector) and internal/e2e (the real redirector's click events), which
// run in every go test: Binary builds the Collector unless
// $LINKFORGE_OTELCOL names one.
package otelcoltest

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
	"sync"
	"syscall"
	"testing"
	"time"
)

// BinaryEnv names a Collector built already (make otelcol: bin/otelcol);
// without it, Binary builds one.
const BinaryEnv = "LINKFORGE_OTELCOL"

var built struct {
	once sync.Once
	bin  string
	err  error
}

// Binary is the Collector that $LINKFORGE_OTELCOL names, or else the one
// built from root/hack/tools/otelcol into root/bin/otelcol, once per test
// process: minutes the first time (hack/tools/otelcol/README.md), seconds when
// it is up to date. It never skips: a test that needs the Collector fails
// when it cannot be built.
func Binary(t testing.TB, root string) string {
	t.Helper()
	if bin := os.Getenv(BinaryEnv); bin != "" {
		return bin
	}
	built.once.Do(func() { built.bin, built.err = build(t, root) })
	if built.err != nil {
		t.Fatalf("build the OpenTelemetry Collector of hack/tools/otelcol: %v", built.err)
	}
	return built.bin
}

// build runs go build of hack/tools/otelcol (in the tools module) into bin/otelcol, holding a lock on
// bin/ so that test processes of several packages at once build it once
// and never run a half-written one.
func build(t testing.TB, root string) (string, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".otelcol.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer func() { _ = lock.Close() }() // and with it the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	bin := filepath.Join(dir, "otelcol")
	say := func(format string, args ...any) {
		t.Logf(format, args...)
		fmt.Fprintf(os.Stderr, "otelcoltest: "+format+"\n", args...)
	}
	say("building the OpenTelemetry Collector of hack/tools/otelcol into %s (minutes the first time, seconds after; $%s names one built already: make otelcol)", bin, BinaryEnv)
	start := time.Now()
	cmd := exec.Command("go", "build", "-o", bin, "./otelcol")
	cmd.Dir = filepath.Join(root, "hack", "tools")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w\n%s", err, out)
	}
	say("built %s in %s", bin, time.Since(start).Round(100*time.Millisecond))
	return bin, nil
}

// Collector is a Collector (stopped until Start) whose OTLP/HTTP receiver
// listens on Endpoint and whose file exporter writes the logs it receives
// to a file that Records reads.
type Collector struct {
	// Endpoint is the OTLP/HTTP base URL, http://127.0.0.1:<port>.
	Endpoint string

	bin, config, file string
	mu                sync.Mutex
	cmd               *exec.Cmd
	log               bytes.Buffer
}

// Option changes the configuration New writes.
type Option func(*config)

type config struct{ logsPath string }

// LogsPath is the path of the OTLP/HTTP receiver's logs (logs_url_path;
// default /v1/logs): a Collector behind a base path, such as
// /otlp/v1/logs for the base URL Endpoint+"/otlp".
func LogsPath(path string) Option { return func(c *config) { c.logsPath = path } }

// New writes the configuration of a Collector on a free loopback port; it
// is stopped when t ends.
func New(t testing.TB, bin string, opts ...Option) *Collector {
	t.Helper()
	cfg := config{logsPath: "/v1/logs"}
	for _, o := range opts {
		o(&cfg)
	}
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	c := &Collector{bin: bin, config: filepath.Join(dir, "config.yaml"), file: filepath.Join(dir, "logs.jsonl"), Endpoint: "http://" + addr}
	config := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
        logs_url_path: %s
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
`, addr, cfg.logsPath, c.file)
	if err := os.WriteFile(c.config, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// Start runs the Collector; Listening says when it takes requests.
func (c *Collector) Start(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cmd = exec.Command(c.bin, "--config", c.config)
	c.cmd.Stdout, c.cmd.Stderr = &c.log, &c.log
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
}

// Listening reports whether the receiver accepts connections.
func (c *Collector) Listening() bool {
	conn, err := net.Dial("tcp", c.Endpoint[len("http://"):])
	if err == nil {
		_ = conn.Close()
	}
	return err == nil
}

// Stop stops the Collector (SIGINT, then waits), if it runs.
func (c *Collector) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	_ = c.cmd.Process.Signal(os.Interrupt)
	_ = c.cmd.Wait()
	c.cmd = nil
}

// Log is what the Collector wrote to stdout and stderr (after Stop).
func (c *Collector) Log() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.log.String()
}

// Records reads the log records the file exporter wrote (OTLP/JSON, a
// request per line), each as its attributes (values as JSON text, strings
// unquoted) and "eventName". A last line without its newline is one the
// exporter is still writing: it is read once it is whole (a CI run at
// load 12 read half a line and failed).
func (c *Collector) Records(t testing.TB) []map[string]string {
	t.Helper()
	data, err := os.ReadFile(c.file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	var out []map[string]string
	sc := bufio.NewScanner(bytes.NewReader(data))
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
