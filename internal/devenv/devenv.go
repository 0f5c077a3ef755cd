// Package devenv runs linkforge locally for `make dev` and the end-to-end
// tests: an envtest control plane (etcd + kube-apiserver) with the CRD
// installed and a kubeconfig on disk, and the real binaries as child
// processes that die with their parent.
package devenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/linkforge/linkforge/internal/testenv"
)

// ControlPlane is a local etcd + kube-apiserver with the ShortLink CRD.
type ControlPlane struct {
	Config     *rest.Config
	Kubeconfig string // path of an admin kubeconfig for kubectl and the binaries
	// Kubectl is the kubectl to drive it with: the one on PATH, else the one
	// hack/envtest-assets.sh built beside kube-apiserver.
	Kubectl string
	env     *envtest.Environment
}

// StartControlPlane starts etcd and kube-apiserver (found as
// internal/testenv finds them, which `make envtest-assets` provides), installs
// the CRDs of root/config/crd/bases and writes an admin kubeconfig into dir.
func StartControlPlane(root, dir string) (*ControlPlane, error) {
	env, cfg, err := testenv.StartAt(root)
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{Config: cfg, env: env, Kubectl: "kubectl"}
	if _, err := exec.LookPath("kubectl"); err != nil {
		cp.Kubectl = filepath.Join(env.BinaryAssetsDirectory, "kubectl")
	}
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("adding an admin user: %w", err), cp.Stop())
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("writing a kubeconfig: %w", err), cp.Stop())
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, errors.Join(err, cp.Stop())
	}
	cp.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(cp.Kubeconfig, kubeconfig, 0o600); err != nil {
		return nil, errors.Join(err, cp.Stop())
	}
	return cp, nil
}

// ServiceAccountKubeconfig writes into dir a copy of the admin kubeconfig that
// impersonates the service account namespace/name with the groups the API
// server gives a service account's token, and returns its path. A binary run
// with it has exactly the RBAC of that service account, as in a pod.
func (c *ControlPlane) ServiceAccountKubeconfig(dir, namespace, name string) (string, error) {
	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		return "", err
	}
	for _, user := range cfg.AuthInfos {
		user.Impersonate = "system:serviceaccount:" + namespace + ":" + name
		user.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace}
	}
	// A pod's default namespace is its service account's (the redirector
	// keeps its peer key there).
	for _, c := range cfg.Contexts {
		c.Namespace = namespace
	}
	path := filepath.Join(dir, "kubeconfig-"+namespace+"-"+name)
	return path, clientcmd.WriteToFile(*cfg, path)
}

// Stop stops kube-apiserver and etcd and removes their data.
func (c *ControlPlane) Stop() error {
	return c.env.Stop()
}

// StopAPIServer stops kube-apiserver alone (etcd keeps the data), to test
// what keeps working while the API server is down.
func (c *ControlPlane) StopAPIServer() error {
	return c.env.ControlPlane.APIServer.Stop()
}

// StartAPIServer starts kube-apiserver again after StopAPIServer, on the same address.
func (c *ControlPlane) StartAPIServer() error {
	return c.env.ControlPlane.APIServer.Start()
}

// Process is a child process whose output goes to a log file.
type Process struct {
	Name string
	Log  string
	bin  string
	args []string
	done chan struct{}

	mu       sync.Mutex
	cmd      *exec.Cmd
	err      error
	stopping bool
	restart  func(log []byte) bool
	restarts []string // why each restart happened: the log's last line
}

// Start runs bin with args, its output in logPath. The child gets SIGKILL if
// this process dies first, so nothing outlives a crashed test or dev session.
func Start(name, logPath, bin string, args ...string) (*Process, error) {
	return StartRestarting(name, logPath, bin, nil, args...)
}

// StartRestarting is Start, and starts the process again, as a
// Deployment's kubelet would, each time it exits by itself (not by Stop)
// and restartWhen says so of its log so far; Restarts lists each restart.
func StartRestarting(name, logPath, bin string, restartWhen func(log []byte) bool, args ...string) (*Process, error) {
	p := &Process{Name: name, Log: logPath, bin: bin, args: args, done: make(chan struct{}), restart: restartWhen}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	if err := p.run(logFile); err != nil {
		return nil, err
	}
	return p, nil
}

// run starts the command with its output in logFile, and waits for it in
// the background: Done is closed when it ends and is not started again.
func (p *Process) run(logFile *os.File) error {
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("starting %s: %w", p.Name, err)
	}
	p.mu.Lock()
	p.cmd = cmd
	if p.stopping { // Stop came while this restart was starting
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		_ = logFile.Close()
		if p.restartAfter(err) {
			return
		}
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	return nil
}

// LostLeaderElection reports whether a manager's log ends with its exit
// after losing its leader election. On a busy machine the API server can
// stall beyond the renew deadline; in a cluster that costs the manager a
// restart, which StartLinkforge does too.
func LostLeaderElection(log []byte) bool {
	return bytes.HasSuffix(bytes.TrimSpace(log), []byte("leader election lost"))
}

// Restarts returns, for each restart, the log's last line before it.
func (p *Process) Restarts() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.restarts)
}

// restartAfter starts the process again after it exited with err, if its
// policy says so; it reports whether it did.
func (p *Process) restartAfter(err error) bool {
	p.mu.Lock()
	ok, stopping := p.restart, p.stopping
	p.mu.Unlock()
	if ok == nil || stopping || err == nil {
		return false
	}
	log, rerr := os.ReadFile(p.Log)
	if rerr != nil || !ok(log) {
		return false
	}
	logFile, oerr := os.OpenFile(p.Log, os.O_WRONLY|os.O_APPEND, 0)
	if oerr != nil {
		return false
	}
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	p.mu.Lock()
	p.restarts = append(p.restarts, lines[len(lines)-1])
	p.mu.Unlock()
	return p.run(logFile) == nil
}

// Done is closed when the process has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM, waits up to grace for a clean exit, then kills the
// process group. It returns the exit error of a process that did not exit 0
// after SIGTERM.
func (p *Process) Stop(grace time.Duration) error {
	p.mu.Lock()
	p.stopping = true
	cmd := p.cmd
	p.mu.Unlock()
	if p.Exited() {
		return p.exitErr()
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.exitErr()
	case <-time.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("%s did not exit within %s of SIGTERM", p.Name, grace)
	}
}

// current is the running command (the last one started).
func (p *Process) current() *exec.Cmd {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd
}

func (p *Process) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// handedOut holds the addresses FreeAddr returned: tests that run in
// parallel must not be handed the same port before its process binds it.
var handedOut sync.Map

// FreeAddr returns a free loopback address host:port, never one it returned
// before in this process.
func FreeAddr() (string, error) {
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		if _, taken := handedOut.LoadOrStore(addr, struct{}{}); !taken {
			return addr, nil
		}
	}
	return "", errors.New("no free loopback port that was not handed out already")
}

// WaitHTTP polls url with GET until it answers want (redirects are not
// followed) or ctx ends.
func WaitHTTP(ctx context.Context, url string, want int) error {
	return waitHTTP(ctx, http.MethodGet, url, want)
}

// WaitHEAD is WaitHTTP with HEAD requests: for a short link, where a GET
// is a click (a use of a limited link, a click event, lastUsedAt).
func WaitHEAD(ctx context.Context, url string, want int) error {
	return waitHTTP(ctx, http.MethodHead, url, want)
}

func waitHTTP(ctx context.Context, method, url string, want int) error {
	client := &http.Client{
		Timeout:       5 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, method, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
		} else {
			_ = resp.Body.Close()
			if resp.StatusCode == want {
				return nil
			}
			last = resp.Status
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer %d (last: %s): %w", url, want, last, ctx.Err())
		case <-tick.C:
		}
	}
}

// KubectlCmd is a kubectl command against the control plane.
func (c *ControlPlane) KubectlCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.Kubectl, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	return cmd
}

// Linkforge is bin/manager and bin/redirector running against a control plane.
type Linkforge struct {
	Manager, Redirector *Process
	// Addresses (host:port): the manager's probes (/readyz, /reaper), the
	// redirector's redirects and its probes (/readyz, /metrics).
	ManagerProbes, RedirectAddr, RedirectorProbes string
}

// StartLinkforge runs the manager and the redirector of binDir against cp,
// their logs in logDir, the redirector on redirectAddr (empty: a free port),
// and returns once both are ready. managerArgs are added to the manager's flags.
// Both use the admin kubeconfig.
func StartLinkforge(ctx context.Context, cp *ControlPlane, binDir, logDir, redirectAddr string, managerArgs ...string) (*Linkforge, error) {
	return StartLinkforgeAs(ctx, cp, Kubeconfigs{}, binDir, logDir, redirectAddr, managerArgs...)
}

// Kubeconfigs are the kubeconfigs the binaries run with; empty means the
// control plane's admin kubeconfig.
type Kubeconfigs struct {
	Manager, Redirector string
}

// StartLinkforgeAs is StartLinkforge with each binary's own kubeconfig, e.g.
// one from ServiceAccountKubeconfig.
func StartLinkforgeAs(ctx context.Context, cp *ControlPlane, kc Kubeconfigs, binDir, logDir, redirectAddr string, managerArgs ...string) (*Linkforge, error) {
	return StartLinkforgeWith(ctx, cp, kc, binDir, logDir, redirectAddr, managerArgs, nil)
}

// StartLinkforgeWith is StartLinkforgeAs with flags for the redirector too
// (make dev's REDIRECTOR_FLAGS). Both lists come after the flags set here,
// so that a flag given again there wins (the flag packages keep the last).
func StartLinkforgeWith(ctx context.Context, cp *ControlPlane, kc Kubeconfigs, binDir, logDir, redirectAddr string, managerArgs, redirectorArgs []string) (*Linkforge, error) {
	for _, path := range []*string{&kc.Manager, &kc.Redirector} {
		if *path == "" {
			*path = cp.Kubeconfig
		}
	}
	l := &Linkforge{RedirectAddr: redirectAddr}
	var err error
	for _, addr := range []*string{&l.ManagerProbes, &l.RedirectorProbes, &l.RedirectAddr} {
		if *addr == "" {
			if *addr, err = FreeAddr(); err != nil {
				return nil, err
			}
		}
	}
	args := append([]string{"--kubeconfig", kc.Manager, "--health-probe-bind-address", l.ManagerProbes,
		"--redirect-base-url", "http://" + l.RedirectAddr}, managerArgs...)
	if l.Manager, err = StartRestarting("manager", filepath.Join(logDir, "manager.log"), filepath.Join(binDir, "manager"), LostLeaderElection, args...); err != nil {
		return nil, err
	}
	redirector := append([]string{"--kubeconfig", kc.Redirector, "--bind-address", l.RedirectAddr,
		"--health-probe-bind-address", l.RedirectorProbes, "--peer-bind-address", "127.0.0.1:0", "--peer-allow-local",
		// The public URL, as the manager's --redirect-base-url: QR codes of
		// /<namespace>/<code> draw only it (docs/serving.md#qr-codes).
		"--public-base-url", "http://" + l.RedirectAddr}, redirectorArgs...)
	if l.Redirector, err = Start("redirector", filepath.Join(logDir, "redirector.log"), filepath.Join(binDir, "redirector"), redirector...); err != nil {
		return nil, errors.Join(err, l.Stop(10*time.Second))
	}
	for _, probe := range []string{l.ManagerProbes, l.RedirectorProbes} {
		if err := WaitHTTP(ctx, "http://"+probe+"/readyz", http.StatusOK); err != nil {
			return nil, errors.Join(fmt.Errorf("%w (see the logs in %s)", err, logDir), l.Stop(10*time.Second))
		}
	}
	return l, nil
}

// Stop stops the redirector, then the manager; each must exit cleanly on SIGTERM.
func (l *Linkforge) Stop(grace time.Duration) error {
	var errs []error
	for _, p := range []*Process{l.Redirector, l.Manager} {
		if p == nil {
			continue
		}
		if err := p.Stop(grace); err != nil {
			errs = append(errs, fmt.Errorf("%s (log %s): %w", p.Name, p.Log, err))
		}
	}
	return errors.Join(errs...)
}

// Done is closed when either process has ended.
func (l *Linkforge) Done() <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		select {
		case <-l.Manager.Done():
		case <-l.Redirector.Done():
		}
		close(ch)
	}()
	return ch
}
