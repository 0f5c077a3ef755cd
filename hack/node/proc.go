package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// start starts a node process in its own session (it outlives up), its
// output appended to <state>/logs/<name>.log, its pid in <run>/<name>.pid.
func start(c *config, name, path string, args ...string) error {
	if err := os.MkdirAll(filepath.Dir(c.logFile(name)), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(c.runDir, 0o755); err != nil {
		return err
	}
	log, err := os.OpenFile(c.logFile(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = log.Close() }()
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = c.stateDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	logf("started %s (pid %d, log %s)", name, cmd.Process.Pid, c.logFile(name))
	if err := os.WriteFile(c.pidFile(name), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return err
	}
	// Reap it when it exits, so a crash shows as not running (not a zombie).
	go func() { _ = cmd.Wait() }()
	return nil
}

// running returns the pid of the node process name if it runs.
func running(c *config, name string) (int, bool) {
	b, err := os.ReadFile(c.pidFile(name))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0, false
	}
	return pid, alive(pid)
}

// alive reports whether pid is a live process (not a zombie).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// stop sends SIGTERM to the node process name, then SIGKILL after grace,
// and waits until it is gone.
func stop(c *config, name string, grace time.Duration) {
	pid, ok := running(c, name)
	if ok {
		stopPid(name, pid, grace)
	}
	_ = os.Remove(c.pidFile(name))
}

func stopPid(name string, pid int, grace time.Duration) {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if alive(pid) {
		logf("%s (pid %d) still runs after %s: SIGKILL", name, pid, grace)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		for i := 0; alive(pid) && i < 100; i++ {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// waitFor polls check every 200ms until it returns nil, the context ends,
// the process name stops running, or timeout passes.
func waitFor(ctx context.Context, c *config, name string, timeout time.Duration, check func() error) error {
	started := time.Now()
	deadline := started.Add(timeout)
	var err error
	for {
		if err = check(); err == nil {
			logf("%s ready after %.1fs", name, time.Since(started).Seconds())
			return nil
		}
		if _, ok := running(c, name); !ok {
			return fmt.Errorf("%s exited (%v); the end of %s:\n%s", name, err, c.logFile(name), tail(c.logFile(name), 20))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %v; the end of %s:\n%s", name, timeout, err, c.logFile(name), tail(c.logFile(name), 20))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// httpsOK returns a check that GETs url with a client certificate (user's)
// and wants 200.
func httpsOK(c *config, url, user string) (func() error, error) {
	ca, err := os.ReadFile(c.pki("ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if user != "" {
		cert, err := tls.LoadX509KeyPair(c.pki(user+".crt"), c.pki(user+".key"))
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{cert}
	} else {
		tc.InsecureSkipVerify = true //nolint:gosec // a component's own self-signed healthz on loopback
	}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	return func() error { return getOK(client, url) }, nil
}

func httpOK(url string) func() error {
	client := &http.Client{Timeout: 2 * time.Second}
	return func() error { return getOK(client, url) }
}

func getOK(client *http.Client, url string) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// run runs a command to its end, its output in the error.
func run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

var errNotRoot = errors.New("the node needs root (it starts containerd and the kubelet, and makes a bridge)")
