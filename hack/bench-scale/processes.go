package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/linkforge/linkforge/internal/devenv"
	"github.com/linkforge/linkforge/internal/testenv"
)

// The processes: the control plane, the manager and the redirector, started
// and stopped as their binaries, and waits for their readiness.

func (b *bench) saveHeapProfile(ctx context.Context, name, addr string) error {
	body, err := get(ctx, http.DefaultClient, "http://"+addr+"/debug/pprof/heap?gc=1")
	if err != nil {
		return fmt.Errorf("heap profile of %s: %w", name, err)
	}
	if err := os.MkdirAll(b.profiles, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(b.profiles, name+".heap"), []byte(body), 0o644)
}

// restartRedirector restarts bin/redirector and says how long it took to be ready, how it synced, the
// CPU it and the API server spent meanwhile, and its peak RSS.
func (b *bench) restartRedirector(ctx context.Context) (string, error) {
	before, err := b.apiMetrics(ctx)
	if err != nil {
		return "", err
	}
	if err := b.rdr.stop(30 * time.Second); err != nil {
		return "", err
	}
	apiPid := findPid("kube-apiserver", "--secure-port="+b.env.ControlPlane.APIServer.Port)
	apiCPU := cpuSeconds(apiPid)
	t0 := time.Now()
	if err := b.startRedirector(ctx); err != nil {
		return "", err
	}
	took := time.Since(t0)
	rdrCPU, apiCPU := cpuSeconds(b.rdr.cmd.Process.Pid), cpuSeconds(apiPid)-apiCPU
	after, err := b.apiMetrics(ctx)
	if err != nil {
		return "", err
	}
	lists := after.sum("shortlinks", "LIST") - before.sum("shortlinks", "LIST")
	streamed := int64(after.watchList - before.watchList)
	how := "one unpaged LIST, then WATCH"
	switch {
	case lists == 0 && streamed > 0:
		how = "WatchList (streaming watch, sendInitialEvents)"
	case lists > 1:
		how = fmt.Sprintf("a paginated LIST (%d pages), then WATCH", lists)
	}
	apiCPUText := fmt.Sprintf("%.1fs", apiCPU)
	if apiPid == 0 {
		apiCPUText = "unknown (process not found)"
	}
	return fmt.Sprintf("%.1fs; initial sync by %s (shortlinks: %d LIST, %d watch-list requests); CPU meanwhile: redirector %.1fs, kube-apiserver %s; redirector peak RSS %d MiB",
		took.Seconds(), how, lists, streamed, rdrCPU, apiCPUText, peakRSS(b.rdr.cmd.Process.Pid)>>20), nil
}

func (b *bench) startControlPlane() error {
	var err error
	b.env, b.cfg, err = testenv.StartAt(b.root)
	if err != nil {
		return err
	}
	user, err := b.env.ControlPlane.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return err
	}
	b.kubeconfig = filepath.Join(b.dir, "kubeconfig")
	if err := os.WriteFile(b.kubeconfig, kc, 0o600); err != nil {
		return err
	}
	b.cfg = rest.CopyConfig(b.cfg)
	b.cfg.QPS, b.cfg.Burst = -1, 0 // the floor is not throttled on the client
	b.c, err = client.NewWithWatch(b.cfg, client.Options{Scheme: scheme})
	return err
}

func (b *bench) startManager(ctx context.Context) error {
	var err error
	if b.mgrProbe == "" {
		if b.mgrProbe, err = devenv.FreeAddr(); err != nil {
			return err
		}
		if b.mgrMetrics, err = devenv.FreeAddr(); err != nil {
			return err
		}
	}
	// Default flags, but for where to listen: metrics over plain HTTP, to
	// read the reconcile count.
	args := []string{"--kubeconfig", b.kubeconfig, "--health-probe-bind-address", b.mgrProbe,
		"--metrics-bind-address", b.mgrMetrics, "--metrics-secure=false"}
	args, env, err := b.profiled(&b.mgrPprof, args)
	if err != nil {
		return err
	}
	b.mgr, err = start("manager", filepath.Join(b.dir, "manager.log"), filepath.Join(b.root, "bin", "manager"), env, args...)
	if err != nil {
		return err
	}
	return b.waitReady(ctx, b.mgr, b.mgrProbe)
}

func (b *bench) startRedirector(ctx context.Context) error {
	var err error
	if b.rdrProbe == "" {
		if b.rdrProbe, err = devenv.FreeAddr(); err != nil {
			return err
		}
	}
	addr, err := devenv.FreeAddr()
	if err != nil {
		return err
	}
	args, env, err := b.profiled(&b.rdrPprof, []string{"--kubeconfig", b.kubeconfig, "--bind-address", addr,
		"--health-probe-bind-address", b.rdrProbe, "--peer-bind-address", "127.0.0.1:0", "--peer-allow-local"})
	if err != nil {
		return err
	}
	b.rdr, err = start("redirector", filepath.Join(b.dir, "redirector.log"), filepath.Join(b.root, "bin", "redirector"), env, args...)
	if err != nil {
		return err
	}
	return b.waitReady(ctx, b.rdr, b.rdrProbe)
}

// profiled adds to a binary's arguments and environment what its heap
// profiles need with -heap-profiles: its pprof endpoints on a free local
// port (kept in *addr across restarts), and the sampling of account.go.
func (b *bench) profiled(addr *string, args []string) ([]string, []string, error) {
	if b.profiles == "" {
		return args, nil, nil
	}
	if *addr == "" {
		var err error
		if *addr, err = devenv.FreeAddr(); err != nil {
			return nil, nil, err
		}
	}
	return append(args, "--pprof-bind-address", *addr), []string{"GODEBUG=memprofilerate=" + strconv.Itoa(memProfileRate)}, nil
}

func (b *bench) waitReady(ctx context.Context, p *proc, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := devenv.WaitHTTP(ctx, "http://"+addr+"/readyz", http.StatusOK); err != nil {
		return fmt.Errorf("%s (log %s): %w", p.name, p.log, err)
	}
	return nil
}

// waitServed reports on the channel when the redirector's index serves at
// least n links, polling its metrics (a request every 100ms, at the cost of
// a scrape).

type proc struct {
	name, log string
	cmd       *exec.Cmd
	done      chan struct{}
}

// start runs bin with args, its environment plus env, logging to logPath.
func start(name, logPath, bin string, env []string, args ...string) (*proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = f.Close(); close(p.done) }()
	return p, nil
}

func (p *proc) stop(grace time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("%s did not exit within %s of SIGTERM", p.name, grace)
	}
}
