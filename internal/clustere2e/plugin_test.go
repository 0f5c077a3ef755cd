//go:build clustere2e

package clustere2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// testPlugin: the CLI as the kubectl plugin users install
// (kubectl-linkforge on the PATH), against the node: create prints the
// link's path (no base URL in the release), the code is the one `code`
// predicts, the Service serves it maxUses times, and get lists it.
func (c *cluster) testPlugin(t *testing.T) {
	g, c := newG(t), c.in(t)
	c.dumpOnFailure()
	plugin := c.plugin(t, g)

	ns := c.namespace("plugin")
	const url = "https://example.com/plugged"
	predicted, _, err := plugin("code", "-n", ns, url)
	g.Expect(err).NotTo(HaveOccurred())
	code, _, _ := strings.Cut(predicted, "\t")
	path, stderr, err := plugin("create", "plugged", url, "--max-uses", "3", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred(), stderr)
	g.Expect(stderr).To(ContainSubstring("shortlink.linkforge.io/plugged created"))
	g.Expect(path).To(Equal("/"+ns+"/"+code), "create prints the path of the code `code` predicted")

	svc := c.redirectorURL()
	g.Eventually(func() (int, error) {
		status, _, err := click(http.MethodHead, svc+path)
		return status, err
	}).Should(Equal(http.StatusFound))
	// A 503 (no quota at hand yet) ends an attempt; the next comes 200ms
	// later, as Retry-After asks, roughly.
	var answers []string
	g.Eventually(func(g Gomega) {
		for len(answers) < 4 {
			status, loc, err := click(http.MethodGet, svc+path)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(status).NotTo(Equal(http.StatusServiceUnavailable))
			answers = append(answers, fmt.Sprintf("%d %s", status, loc))
		}
	}).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Expect(answers).To(Equal([]string{"302 " + url, "302 " + url, "302 " + url, "410 "}))

	listing, stderr, err := plugin("get", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred(), stderr)
	g.Expect(listing).To(ContainSubstring(code))
	g.Expect(listing).To(ContainSubstring("plugged"))
}

// plugin builds kubectl-linkforge from this tree and returns a function
// that runs `kubectl linkforge ARGS...` against the node (the plugin found
// on the PATH, as users run it), returning its stdout, stderr and error.
func (c *cluster) plugin(t *testing.T, g *WithT) func(args ...string) (string, string, error) {
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "kubectl-linkforge"), "./cmd/linkforge")
	build.Dir = root
	out, err := build.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	return func(args ...string) (string, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, c.kubectlBin, append([]string{"linkforge"}, args...)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.kubeconfig, "PATH="+dir+":"+os.Getenv("PATH"))
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return strings.TrimSpace(stdout.String()), strings.TrimSpace(stderr.String()), err
	}
}
