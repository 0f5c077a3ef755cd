//go:build clustere2e

package clustere2e

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// helm runs bin/helm (make helm; make release builds it) against the node.
func (c *cluster) helm(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "bin", "helm"), args...)
	cmd.Env = append(cmd.Environ(), "KUBECONFIG="+c.kubeconfig, "HELM_CACHE_HOME="+c.t.TempDir(),
		"HELM_CONFIG_HOME="+c.t.TempDir(), "HELM_DATA_HOME="+c.t.TempDir())
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// leftovers lists the cluster-wide objects of linkforge there are.
func (c *cluster) leftovers() string {
	out, err := c.kubectl("", "get", "customresourcedefinitions,clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings",
		"-o", "name")
	if err != nil {
		return err.Error() + ": " + out
	}
	var mine []string
	for _, l := range strings.Fields(out) {
		if strings.Contains(l, "linkforge") {
			mine = append(mine, l)
		}
	}
	return strings.Join(mine, " ")
}

// testUninstallThenHelm removes the release installed with kubectl
// (`kubectl delete -f dist/install.yaml`: nothing of it is left, the
// ShortLinks went with the CRD), installs the previous release's chart as
// the README says (the namespace first, restricted), upgrades it to this
// release's packaged chart with `helm upgrade` while its links are clicked
// (the destination policy enabled on the way), runs the smoke part of the
// suite, the destination policy's and the exposure's (testExposure) on
// it, and uninstalls it (the CRDs
// are kept, as crd.keep says).
func (c *cluster) testUninstallThenHelm(t *testing.T) {
	g, c := newG(t), c.in(t)
	c.dumpOnFailure()
	c.mustKubectl("delete", "-f", "dist/install.yaml", "--wait=true", "--timeout=180s")
	g.Eventually(func() bool {
		_, err := c.cs.CoreV1().Namespaces().Get(context.Background(), systemNS, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(3*time.Minute).Should(BeTrue(), "the namespace is gone")
	g.Expect(c.leftovers()).To(BeEmpty(), "nothing cluster-wide is left of the release")

	charts, err := filepath.Glob(filepath.Join(root, "dist", "linkforge-*.tgz"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(charts).To(HaveLen(1), "make release packages one chart")
	// As the README asks: baseURL set (QR codes of /<namespace>/<code> draw it).
	c.helmUpgrade(t, g, charts[0], "--set", "destinationPolicy.enabled=true", "--set", "baseURL=http://go.linkforge.test",
		"--wait", "--timeout=4m")

	t.Run("smoke: pods", c.testPods)
	t.Run("smoke: samples", c.testSamples)
	t.Run("the destination policy, at admission and in the manager", c.testDestinationPolicy)
	t.Run("on its own hosts over HTTPS through Traefik's Gateway and an Ingress, certificates from cert-manager, hosts from namespaces' claims",
		func(t *testing.T) { c.testExposure(t, charts[0]) })

	out, err := c.helm("uninstall", "linkforge", "-n", systemNS, "--wait", "--timeout=3m")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(strings.Fields(c.leftovers())).To(ConsistOf(
		"customresourcedefinition.apiextensions.k8s.io/shortlinks.linkforge.io",
		"customresourcedefinition.apiextensions.k8s.io/destinationdenylists.linkforge.io",
	), "helm uninstall keeps the CRDs (crd.keep), nothing else")
	g.Eventually(func() int { return c.podCount("manager") + c.podCount("redirector") }).Should(BeZero())
}

// testDestinationPolicy, with the chart's destinationPolicy.enabled: the API
// server refuses a link whose host its namespace's allowed-hosts annotation
// does not list, with a message that says so, and admits one it lists;
// a DestinationDenyList that names that host later makes the manager block
// the link, and the redirectors stop serving it.
func (c *cluster) testDestinationPolicy(t *testing.T) {
	g, c := newG(t), c.in(t)
	c.dumpOnFailure()
	ns := c.namespace("policy")
	c.mustKubectl("annotate", "namespace", ns, "linkforge.io/allowed-hosts=docs.example.com")
	link := func(name, url string) string {
		return fmt.Sprintf("apiVersion: linkforge.io/v1alpha1\nkind: ShortLink\nmetadata: {name: %s, namespace: %s}\nspec: {url: %q}\n", name, ns, url)
	}
	out, err := c.kubectl(link("elsewhere", "https://evil.example.net/x"), "apply", "-f", "-")
	g.Expect(err).To(HaveOccurred(), "a host the namespace does not allow is refused at admission: %s", out)
	g.Expect(out).To(ContainSubstring("evil.example.net"))
	g.Expect(out).To(ContainSubstring("linkforge.io/allowed-hosts"))
	_, err = c.dyn.Resource(shortLinks).Namespace(ns).Get(context.Background(), "elsewhere", metav1.GetOptions{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing stored")

	c.apply(link("docs", "https://docs.example.com/guide"))
	c.mustKubectl("wait", "--for=condition=Ready", "-n", ns, "shortlink/docs", "--timeout=90s")
	url := c.redirectorURL() + "/" + ns + "/" + c.mustKubectl("get", "-n", ns, "shortlink", "docs", "-o", "jsonpath={.status.code}")
	g.Eventually(func() (int, error) {
		status, _, err := click(http.MethodHead, url)
		return status, err
	}).Should(Equal(http.StatusFound))

	c.apply("apiVersion: linkforge.io/v1alpha1\nkind: DestinationDenyList\nmetadata: {name: e2e-docs}\nspec: {hosts: [docs.example.com]}\n")
	t.Cleanup(func() { _, _ = c.kubectl("", "delete", "destinationdenylist", "e2e-docs") })
	g.Eventually(func() (string, error) {
		_, state, err := c.status(ns, "docs")
		return state, err
	}).Should(Equal("Blocked"))
	g.Eventually(func() (int, error) {
		status, _, err := click(http.MethodHead, url)
		return status, err
	}).ShouldNot(Equal(http.StatusFound), "a blocked link is not served")
	status, _, err := click(http.MethodGet, url)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("a blocked link answers %d", status)
	out, err = c.kubectl(link("docs2", "https://docs.example.com/other"), "apply", "-f", "-")
	g.Expect(err).To(HaveOccurred(), "a denied host is refused at admission too: %s", out)
	g.Expect(out).To(ContainSubstring("e2e-docs"))
}
