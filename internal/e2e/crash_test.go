package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/linkforge/linkforge/internal/devenv"
	"github.com/linkforge/linkforge/internal/testtiming"
)

// Crash backstops. Nothing promises how soon a restarted manager has
// decided every link: it lists them and reconciles what is undecided, and
// 2,000 links take about 4 s in the controller benchmark, so 400 take about
// 1 s plus a start and a cache sync of a few seconds. The waits below are
// backstops (as the suite's default timeout is), about ten times that; the
// test logs how long it took. A failover adds the bound the leader election
// does promise: the Lease the killed leader never released is taken at the
// first retry after its duration (controller-runtime's default
// LeaseDuration 15 s, RetryPeriod 2 s). A restarted redirector serves once
// its cache has synced: seconds; its backstop leaves the same room.
const (
	managerRecoveryBackstop    = 45 * time.Second
	leaseDuration              = 15 * time.Second
	leaseRetryPeriod           = 2 * time.Second
	failoverBackstop           = leaseDuration + leaseRetryPeriod + managerRecoveryBackstop
	redirectorRecoveryBackstop = 30 * time.Second
	customCode                 = "launch"
)

// crashEnv runs processes of its own against one control plane.
type crashEnv struct {
	*env
	bin, dir string
	kc       devenv.Kubeconfigs
	mu       sync.Mutex
	procs    []*devenv.Process
}

// start runs a binary (its log named after name) and waits until its probe
// port is ready.
func (c *crashEnv) start(t *testing.T, name, probes string, args ...string) *devenv.Process {
	t.Helper()
	binary, kubeconfig := "manager", c.kc.Manager
	if strings.HasPrefix(name, "redirector") {
		binary, kubeconfig = "redirector", c.kc.Redirector
		args = append([]string{"--peer-bind-address", "127.0.0.1:0", "--peer-allow-local"}, args...)
	}
	p, err := devenv.Start(name, filepath.Join(c.dir, name+".log"), filepath.Join(c.bin, binary),
		append([]string{"--kubeconfig", kubeconfig, "--health-probe-bind-address", probes}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := devenv.WaitHTTP(ctx, "http://"+probes+"/readyz", http.StatusOK); err != nil {
		t.Fatalf("%s not ready: %v", name, err)
	}
	return p
}

func (c *crashEnv) kill(t *testing.T, p *devenv.Process) {
	t.Helper()
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
}

// crashLinks is the 400 links of one namespace, in the order they are
// applied: 180 pairs with the same target (the second of each pair applied
// 180 links after the first), four links competing for customCode (the first
// applied first, so it is the oldest and wins) and 36 singles.
func crashLinks(ns string) []string {
	link := func(name, spec string) string {
		return fmt.Sprintf("apiVersion: linkforge.io/v1alpha1\nkind: ShortLink\nmetadata: {name: %s, namespace: %s}\nspec: %s\n", name, ns, spec)
	}
	var docs []string
	for i := range 180 {
		docs = append(docs, link(fmt.Sprintf("pair-%03d-a", i), fmt.Sprintf("{url: 'https://example.com/pair/%d'}", i)))
	}
	for i := range 180 {
		docs = append(docs, link(fmt.Sprintf("pair-%03d-b", i), fmt.Sprintf("{url: 'HTTPS://Example.com:443/pair/%d'}", i)))
	}
	for i := range 36 {
		docs = append(docs, link(fmt.Sprintf("single-%03d", i), fmt.Sprintf("{url: 'https://example.com/single/%d'}", i)))
	}
	for i := range 4 {
		custom := link(fmt.Sprintf("custom-%d", i), fmt.Sprintf("{url: 'https://example.com/launch/%d', code: %s}", i, customCode))
		docs = append(docs[:i*100], append([]string{custom}, docs[i*100:]...)...)
	}
	return docs
}

// applyInBackground starts one kubectl apply of all docs (it creates them one
// by one, over seconds) and returns a channel that yields its error.
func (c *crashEnv) applyInBackground(docs []string) <-chan error {
	done := make(chan error, 1)
	cmd := c.cp.KubectlCmd(context.Background(), "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(strings.Join(docs, "---\n"))
	go func() {
		out, err := cmd.CombinedOutput()
		if err != nil {
			err = fmt.Errorf("kubectl apply: %w\n%s", err, tail(string(out), 2000))
		}
		done <- err
	}()
	return done
}

// killMidApply applies docs and SIGKILLs p once some links are Ready while
// the apply still runs, then waits for the apply to finish.
func (c *crashEnv) killMidApply(t *testing.T, g *WithT, ns string, docs []string, p *devenv.Process) {
	t.Helper()
	applied := c.applyInBackground(docs)
	g.Eventually(func() (int, error) { return c.countReady(ns) }).WithPolling(20 * time.Millisecond).Should(BeNumerically(">=", 10))
	c.kill(t, p)
	links, _ := c.links(ns)
	ready, _ := c.countReady(ns)
	t.Logf("%s killed with %d links applied, %d Ready", p.Name, len(links), ready)
	g.Expect(len(links)).To(BeNumerically("<", len(docs)), "killed while the apply was still running")
	g.Expect(<-applied).To(Succeed())
}

type crashLink struct {
	Metadata struct {
		Name       string `json:"name"`
		Generation int64  `json:"generation"`
	} `json:"metadata"`
	Status struct {
		Code               string `json:"code"`
		CanonicalURL       string `json:"canonicalURL"`
		ObservedGeneration int64  `json:"observedGeneration"`
		Conditions         []struct {
			Type, Status, Reason string
		} `json:"conditions"`
	} `json:"status"`
}

func (l crashLink) ready() (status, reason string) {
	for _, c := range l.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status, c.Reason
		}
	}
	return "", ""
}

func (c *crashEnv) links(ns string) (map[string]crashLink, error) {
	out, err := c.kubectl("get", "shortlinks", "-n", ns, "-o", "json")
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, tail(out, 500))
	}
	var list struct{ Items []crashLink }
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, err
	}
	m := map[string]crashLink{}
	for _, l := range list.Items {
		m[l.Metadata.Name] = l
	}
	return m, nil
}

// countReady counts the links of ns that are Ready.
func (c *crashEnv) countReady(ns string) (int, error) {
	links, err := c.links(ns)
	n := 0
	for _, l := range links {
		if st, _ := l.ready(); st == "True" {
			n++
		}
	}
	return n, err
}

// expectAllDecided asserts that all 400 links of ns are decided for their
// current spec and that the invariants hold: no code Ready for two targets,
// pairs share a code, custom-0 (the oldest) alone holds customCode.
func expectAllDecided(g Gomega, links map[string]crashLink, err error) {
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(links).To(HaveLen(400))
	targetOf := map[string]string{}
	for name, l := range links {
		status, reason := l.ready()
		g.Expect(l.Status.ObservedGeneration).To(Equal(l.Metadata.Generation), "%s decided for its current spec", name)
		g.Expect(status+"/"+reason).To(BeElementOf("True/CodeAssigned", "False/CodeConflict"), name)
		if status != "True" {
			continue
		}
		if other, held := targetOf[l.Status.Code]; held {
			g.Expect(l.Status.CanonicalURL).To(Equal(other), "code %s Ready for two targets", l.Status.Code)
		}
		targetOf[l.Status.Code] = l.Status.CanonicalURL
	}
	for i := range 180 {
		a, b := links[fmt.Sprintf("pair-%03d-a", i)], links[fmt.Sprintf("pair-%03d-b", i)]
		g.Expect(a.Status.Code).NotTo(BeEmpty())
		g.Expect(b.Status.Code).To(Equal(a.Status.Code), "pair %d shares a code", i)
	}
	for i := range 4 {
		status, reason := links[fmt.Sprintf("custom-%d", i)].ready()
		if i == 0 {
			g.Expect(status+"/"+reason).To(Equal("True/CodeAssigned"), "the oldest holds %s", customCode)
			g.Expect(links["custom-0"].Status.Code).To(Equal(customCode))
		} else {
			g.Expect(status+"/"+reason).To(Equal("False/CodeConflict"), "custom-%d", i)
		}
	}
}

func TestCrashRecovery(t *testing.T) {
	t.Parallel() // its own control plane, binaries and ports (newCluster)
	g := newG(t)
	bin, tmp, cp := newCluster(t)
	c := &crashEnv{env: &env{t: t, cp: cp}, bin: bin, dir: tmp, kc: installOperator(t, cp, tmp)}
	t.Cleanup(func() {
		for _, p := range c.procs {
			_ = p.Stop(10 * time.Second)
			if t.Failed() {
				if b, err := os.ReadFile(p.Log); err == nil {
					t.Logf("--- %s log ---\n%s", p.Name, tail(string(b), 3000))
				}
			}
		}
		expectNoForbidden(t, c.procs...)
	})
	free := func() string {
		addr, err := devenv.FreeAddr()
		g.Expect(err).NotTo(HaveOccurred())
		return addr
	}

	var manager *devenv.Process
	managerProbes := free()
	t.Run("a manager SIGKILLed while 400 links are applied decides them all once restarted", func(t *testing.T) {
		g := newG(t)
		const ns = "crash"
		c.mustKubectl("create", "namespace", ns)
		docs := crashLinks(ns)
		c.killMidApply(t, g, ns, docs, c.start(t, "manager", managerProbes))

		restarted := time.Now()
		manager = c.start(t, "manager-restarted", managerProbes)
		g.Eventually(func(g Gomega) {
			links, err := c.links(ns)
			expectAllDecided(g, links, err)
		}).WithTimeout(managerRecoveryBackstop).WithPolling(time.Second).Should(Succeed())
		testtiming.Of(t).Logf("all 400 decided %s after the restart (backstop %s)", time.Since(restarted).Round(100*time.Millisecond), managerRecoveryBackstop)
	})

	t.Run("a redirector SIGKILLed and restarted serves again, links created meanwhile included; the other replica serves throughout", func(t *testing.T) {
		g := newG(t)
		if manager == nil {
			// The previous subtest failed before its restart: run one here,
			// so that this subtest still runs and reports on its own.
			manager = c.start(t, "manager", managerProbes)
		}
		const ns = "redirector-crash"
		c.mustKubectl("create", "namespace", ns)
		type replica struct{ name, addr, probes string }
		replicas := []replica{{"redirector-0", free(), free()}, {"redirector-1", free(), free()}}
		procs := make([]*devenv.Process, 2)
		for i, r := range replicas {
			procs[i] = c.start(t, r.name, r.probes, "--bind-address", r.addr)
		}
		codeOf := func(name string) string {
			c.applyYAML(fmt.Sprintf("apiVersion: linkforge.io/v1alpha1\nkind: ShortLink\nmetadata: {name: %s, namespace: %s}\nspec: {url: 'https://example.com/%s'}\n", name, ns, name))
			c.mustKubectl("wait", "--for=condition=Ready", "-n", ns, "shortlink/"+name, "--timeout=60s")
			return c.mustKubectl("get", "shortlink", "-n", ns, name, "-o", "jsonpath={.status.code}")
		}
		get := func(r replica, code string) int {
			resp, err := noFollow.Get("http://" + r.addr + "/" + ns + "/" + code)
			if err != nil {
				return 0
			}
			_ = resp.Body.Close()
			return resp.StatusCode
		}
		before := codeOf("before")
		for _, r := range replicas {
			g.Eventually(func() int { return get(r, before) }).Should(Equal(http.StatusFound), r.name)
		}

		// The survivor is asked all along; every answer must be a redirect.
		var served, failed atomic.Int64
		stop, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			for {
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond): // pacing, not synchronisation
				}
				if get(replicas[1], before) == http.StatusFound {
					served.Add(1)
				} else {
					failed.Add(1)
				}
			}
		}()
		c.kill(t, procs[0])
		during := codeOf("during")
		g.Eventually(func() int { return get(replicas[1], during) }).Should(Equal(http.StatusFound), "the survivor serves the new link")

		restarted := time.Now()
		c.start(t, "redirector-0-restarted", replicas[0].probes, "--bind-address", replicas[0].addr)
		g.Eventually(func() []int { return []int{get(replicas[0], before), get(replicas[0], during)} }).
			WithTimeout(redirectorRecoveryBackstop).Should(Equal([]int{http.StatusFound, http.StatusFound}))
		testtiming.Of(t).Logf("the restarted replica served both links %s after its restart (backstop %s)",
			time.Since(restarted).Round(100*time.Millisecond), redirectorRecoveryBackstop)
		close(stop)
		<-stopped
		t.Logf("the survivor answered %d requests during the crash, %d not a redirect", served.Load(), failed.Load())
		g.Expect(failed.Load()).To(BeZero())
		g.Expect(served.Load()).To(BeNumerically(">", 10))
	})

	t.Run("with leader election, the follower takes over from a leader SIGKILLed mid-apply and finishes", func(t *testing.T) {
		g := newG(t)
		if manager != nil {
			// One manager without leader election would reconcile alongside.
			g.Expect(manager.Stop(15 * time.Second)).To(Succeed())
		}
		const ns = "failover"
		c.mustKubectl("create", "namespace", ns)
		docs := crashLinks(ns)
		leArgs := []string{"--leader-elect", "--leader-election-namespace", systemNamespace}
		managers := []*devenv.Process{
			c.start(t, "manager-le-0", free(), leArgs...),
			c.start(t, "manager-le-1", free(), leArgs...),
		}
		acquired := func(p *devenv.Process) bool {
			b, _ := os.ReadFile(p.Log)
			return strings.Contains(string(b), "Successfully acquired lease")
		}
		var leader, follower *devenv.Process
		g.Eventually(func() bool {
			for i, p := range managers {
				if acquired(p) {
					leader, follower = p, managers[1-i]
					return true
				}
			}
			return false
		}).Should(BeTrue(), "a leader is elected")
		g.Expect(acquired(follower)).To(BeFalse(), "only one leader")

		c.killMidApply(t, g, ns, docs, leader)
		killedAt := time.Now()

		// The killed leader never released the Lease: the follower takes it
		// at its first retry after the Lease's duration.
		g.Eventually(func() bool { return acquired(follower) }).WithTimeout(loadedMachine*(leaseDuration+leaseRetryPeriod)).Should(BeTrue(), "the follower takes the lease")
		testtiming.Of(t).Logf("%s took the lease %s after the kill", follower.Name, time.Since(killedAt).Round(100*time.Millisecond))
		g.Eventually(func(g Gomega) {
			links, err := c.links(ns)
			expectAllDecided(g, links, err)
		}).WithTimeout(failoverBackstop).WithPolling(time.Second).Should(Succeed())
		testtiming.Of(t).Logf("all 400 decided %s after the leader was killed (backstop %s)", time.Since(killedAt).Round(100*time.Millisecond), failoverBackstop)
	})
}
