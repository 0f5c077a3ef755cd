package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/linkforge/linkforge/internal/devenv"
)

// pair is a manager and a redirector of the real binaries (startPair).
type pair struct {
	mgr, red                                *devenv.Process
	base                                    string // http://<the redirector's address>, the manager's --redirect-base-url
	redirectAddr, redirectProbes, mgrProbes string
}

// startPair starts the manager and a redirector as the service accounts of
// config/default (kc): the redirector at a free address, which is the
// manager's --redirect-base-url, each with the extra flags its function
// returns for that base. It stops both when t ends (their logs on a
// failure, and no forbidden request allowed) and returns once both are ready.
func startPair(t *testing.T, g *WithT, bin, tmp string, kc devenv.Kubeconfigs, mgrArgs, redArgs func(base string) []string) *pair {
	var addrs [3]string
	for i := range addrs {
		a, err := devenv.FreeAddr()
		g.Expect(err).NotTo(HaveOccurred())
		addrs[i] = a
	}
	p := &pair{redirectAddr: addrs[0], redirectProbes: addrs[1], mgrProbes: addrs[2]}
	p.base = "http://" + p.redirectAddr
	var err error
	p.mgr, err = devenv.Start("manager", filepath.Join(tmp, "manager.log"), filepath.Join(bin, "manager"),
		append([]string{"--kubeconfig", kc.Manager, "--health-probe-bind-address", p.mgrProbes, "--redirect-base-url", p.base}, mgrArgs(p.base)...)...)
	g.Expect(err).NotTo(HaveOccurred())
	p.red, err = devenv.Start("redirector", filepath.Join(tmp, "redirector.log"), filepath.Join(bin, "redirector"),
		append([]string{"--kubeconfig", kc.Redirector, "--bind-address", p.redirectAddr, "--health-probe-bind-address", p.redirectProbes}, redArgs(p.base)...)...)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		for _, proc := range []*devenv.Process{p.red, p.mgr} {
			if err := proc.Stop(15 * time.Second); err != nil {
				t.Error(err)
			}
		}
		expectNoForbidden(t, p.mgr, p.red)
		if t.Failed() {
			for _, proc := range []*devenv.Process{p.mgr, p.red} {
				if b, err := os.ReadFile(proc.Log); err == nil {
					t.Logf("--- %s log ---\n%s", proc.Name, tail(string(b), 4000))
				}
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, probe := range []string{p.mgrProbes, p.redirectProbes} {
		g.Expect(devenv.WaitHTTP(ctx, "http://"+probe+"/readyz", http.StatusOK)).To(Succeed())
	}
	return p
}
