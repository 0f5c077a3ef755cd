package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/linkforge/linkforge/internal/gctune"
	"github.com/linkforge/linkforge/internal/redirect"
)

// These tests run the built binary: it starts, serves probes and redirects,
// and exits 0 on SIGTERM after draining.

func buildBinary(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg)+".bin")
	out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	done   chan error
	output *strings.Builder
}

func start(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, cmd: exec.Command(bin, args...), done: make(chan error, 1), output: &strings.Builder{}}
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			t.Logf("killed after the test: %v", <-p.done)
		}
	})
	return p
}

// get polls url until it answers want or 20s pass.
func get(t *testing.T, url string, want int) *http.Response {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var last *http.Response
	var lastErr error
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		last, lastErr = client.Get(url)
		if lastErr != nil {
			return false, nil
		}
		_, _ = io.Copy(io.Discard, last.Body)
		_ = last.Body.Close()
		return last.StatusCode == want, nil
	})
	if err != nil {
		t.Fatalf("GET %s: %v %v, want %d", url, last, lastErr, want)
	}
	return last
}

func (p *proc) terminate() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			p.t.Fatalf("exit: %v\n%s", err, p.output)
		}
	case <-time.After(20 * time.Second):
		p.t.Fatalf("no exit after SIGTERM\n%s", p.output)
	}
}

func TestBinary(t *testing.T) {
	bin := buildBinary(t, ".")

	// The benchmark's redirector: the same Redirector and server, fed
	// synthetic links, since this test has no API server.
	t.Run("the redirect server serves, then exits 0 on SIGTERM", func(t *testing.T) {
		bench := buildBinary(t, "../../hack/redirector-bench")
		table := filepath.Join(t.TempDir(), "links.txt")
		if out, err := exec.Command(bench, "--links=10", "--table="+table).CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		b, err := os.ReadFile(table)
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
		addr, probes := freeAddr(t), freeAddr(t)
		p := start(t, bench, "--links=10", "--bind-address="+addr, "--health-probe-bind-address="+probes)
		get(t, "http://"+probes+"/healthz", 200)
		get(t, "http://"+probes+"/readyz", 200)
		resp := get(t, "http://"+addr+"/"+f[0]+"/"+f[1], 302)
		if loc := resp.Header.Get("Location"); loc != f[2] {
			t.Errorf("Location %q, want %q", loc, f[2])
		}
		get(t, "http://"+addr+"/healthz", 404)
		get(t, "http://"+probes+"/metrics", 200)
		p.terminate()
	})

	t.Run("starts without an API server and is not ready", func(t *testing.T) {
		kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
		if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
users:
- name: u
  user: {token: t}
`), 0o600); err != nil {
			t.Fatal(err)
		}
		addr, probes := freeAddr(t), freeAddr(t)
		// With click events on, to a receiver that is not there: the
		// events of the 503s are not clicks, and SIGTERM still exits 0
		// within the shutdown timeout.
		p := start(t, bin, "--kubeconfig="+kubeconfig, "--bind-address="+addr, "--health-probe-bind-address="+probes, "--peer-bind-address=127.0.0.1:0",
			"--events-cloudevents-url=http://127.0.0.1:1/events", "--country-header=CF-IPCountry", "--shutdown-timeout=2s")
		get(t, "http://"+probes+"/healthz", 200)
		get(t, "http://"+probes+"/readyz", 503)
		get(t, "http://"+addr+"/ns/code", 503)

		// Defect 4: no SO_REUSEPORT, so a second redirector on the port
		// fails to start instead of taking part of the traffic.
		out, err := exec.Command(bin, "--kubeconfig="+kubeconfig, "--bind-address="+addr, "--health-probe-bind-address="+freeAddr(t), "--peer-bind-address=127.0.0.1:0").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "address already in use") {
			t.Errorf("second redirector on %s: %v\n%s", addr, err, out)
		}
		p.terminate()
		if out := p.output.String(); !strings.Contains(out, "click events on") {
			t.Errorf("no \"click events on\" in the log:\n%s", out)
		}
	})

	t.Run("--help shows production flags only", func(t *testing.T) {
		out, _ := exec.Command(bin, "--help").CombinedOutput()
		for _, f := range []string{"-synthetic", "-server ", "-header-timeout", "-max-header-bytes"} {
			if want := !strings.HasPrefix(f, "-s"); strings.Contains(string(out), f) != want {
				t.Errorf("--help mentions %s: %v, want %v\n%s", f, !want, want, out)
			}
		}
	})
}

// Bad fallback or base URLs stop the start with a message naming the flag
// ("|" separates flags given together).
func TestBadURLFlags(t *testing.T) {
	bin := buildBinary(t, "./")
	for flag, want := range map[string]string{
		"--gone-redirect=javascript:alert(1)":               `--gone-redirect: invalid URL "javascript:alert(1)"`,
		"--not-found-redirect=https://a b.example/":         `--not-found-redirect: invalid URL`,
		"--root-redirect=ftp://example.com/":                `--root-redirect: invalid URL`,
		"--public-base-url=go.example.com":                  `--public-base-url: "go.example.com" is not an absolute http or https URL`,
		"--peer-advertise-address=evil.example/x:1":         `--peer-advertise-address="evil.example/x:1" is not a host:port`,
		"--uses-reserve-ahead=-1s":                          `--uses-reserve-ahead=-1s must not be negative`,
		"--public-base-url=https://go.example.com:99999999": `--public-base-url: "https://go.example.com:99999999" is not an absolute http or https URL`,
		// A fallback on the redirector's own host loops (issue 40).
		"--public-base-url=https://go.example.com|--not-found-redirect=https://go.example.com/team-a/missing": `not_found redirect: "https://go.example.com/team-a/missing" points back at the redirector`,
		"--public-base-url=https://go.example.com|--root-redirect=http://GO.example.com:8080/":                `root redirect: "http://GO.example.com:8080/" points back at the redirector`,
		"--render-cpu-share=0":       `--render-cpu-share=0 must be more than 0 and at most 1`,
		"--render-concurrency=-1":    `--render-concurrency=-1 must not be negative`,
		"--country-header=X Country": `--country-header="X Country" is not a header name`,
		"--client-address-header=X-Real-IP:|--trusted-proxies=10.0.0.0/8":    `--client-address-header="X-Real-IP:" is not a header name`,
		"--client-address-header=X-Real-IP\r\n|--trusted-proxies=10.0.0.0/8": `is not a header name`,
		// One client address: a header read only from proxies the operator names (issue 53).
		"--client-address-header=X-Forwarded-For":                           `--client-address-header=X-Forwarded-For needs --trusted-proxies`,
		"--trusted-proxies=10.0.0.0/8":                                      `--trusted-proxies=10.0.0.0/8 needs --client-address-header`,
		"--client-address-header=X-Forwarded-For|--trusted-proxies=ingress": `--trusted-proxies: "ingress" is neither a CIDR such as 10.0.0.0/8 nor an IP address`,
		// Gated links' sign-in: headers read only from the auth proxies named (issue 55).
		"--auth-user-header=X-Forwarded-User":                             `--auth-user-header=X-Forwarded-User needs --auth-proxies`,
		"--auth-groups-header=X-Forwarded-Groups":                         `need --auth-user-header`,
		"--auth-user-header=X User|--auth-proxies=10.0.0.0/8":             `--auth-user-header="X User" is not a header name`,
		"--auth-user-header=X-Forwarded-User|--auth-proxies=oauth2-proxy": `--auth-proxies: "oauth2-proxy" is neither a CIDR`,
		"--auth-sign-in-url=/oauth2/start":                                `--auth-sign-in-url="/oauth2/start": want an absolute http or https URL`,
		// Click events (docs/events.md).
		"--events-cloudevents-url=ftp://events.example.com":            `click events: --events-cloudevents-url: "ftp://events.example.com": want an http or https URL`,
		"--events-otlp-endpoint=https://user:pw@otel.example.com":      `holds a user or password: give credentials in a Secret's file`,
		"--events-otlp-endpoint=http://otel:4318|--country-header=a b": `--country-header="a b" is not a header name`,
		// One country header for rules and events: the events' own flag
		// never made a release.
		"--events-country-header=CF-IPCountry":                                             `flag provided but not defined: -events-country-header`,
		"--events-signing-key-file=/nonexistent/key":                                       `need --events-cloudevents-url`,
		"--events-cloudevents-url=http://e|--events-signing-key-file=/nonexistent/key":     `--events-signing-key-file: read the events credential: open /nonexistent/key`,
		"--events-otlp-endpoint=http://otel:4318|--events-buffer=10|--events-max-batch=20": `a batch of 20 events is larger than the buffer of 10`,
	} {
		out, err := exec.Command(bin, strings.Split(flag, "|")...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("%s: %v, output %q; want a failure with %q", flag, err, out, want)
		}
	}
}

func TestPeerAdvertiseAddress(t *testing.T) {
	t.Setenv("POD_IP", "10.1.2.3")
	host, _ := os.Hostname()
	for _, tc := range []struct {
		bound, advertise, podIP, want string
	}{
		{"127.0.0.1:8082", "", "10.1.2.3", "127.0.0.1:8082"},                // an IP: as bound
		{"[::]:8082", "", "10.1.2.3", "10.1.2.3:8082"},                      // every address: the pod's
		{"0.0.0.0:43211", "", "10.1.2.3", "10.1.2.3:43211"},                 // the port bound
		{"[::]:8082", "peer.example:9000", "10.1.2.3", "peer.example:9000"}, // the flag wins
		{"[::]:8082", "", "", net.JoinHostPort(host, "8082")},               // no POD_IP: the host name
	} {
		t.Setenv("POD_IP", tc.podIP)
		addr, err := net.ResolveTCPAddr("tcp", tc.bound)
		if err != nil {
			t.Fatal(err)
		}
		if got := peerAdvertiseAddress(addr, tc.advertise); got != tc.want {
			t.Errorf("bound %s, advertise %q, POD_IP %q: %q, want %q", tc.bound, tc.advertise, tc.podIP, got, tc.want)
		}
	}
}

// Without GOGC in the environment the redirector starts at GCPercent and
// runs the tuner; with one, GOGC is the operator's and nothing tunes it.
func TestGCTuner(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	t.Setenv("GOGC", "80")
	if got := gcTuner(); got != (gctune.Tuner{}) {
		t.Errorf("with GOGC set: tuner %+v, want none", got)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set: GOGC changed to %d", got)
	}
	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	if got := gcTuner(); got != gctune.Default(redirect.GCPercent) {
		t.Errorf("without GOGC: tuner %+v, want gctune.Default(%d)", got, redirect.GCPercent)
	}
	if got := debug.SetGCPercent(100); got != redirect.GCPercent {
		t.Errorf("without GOGC: GOGC %d, want %d", got, redirect.GCPercent)
	}
}
