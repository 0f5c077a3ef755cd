//go:build clustere2e

package clustere2e

import (
	"context"
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
// ShortLinks went with the CRD), installs the packaged chart as the README
// says (the namespace first, restricted; `helm install dist/linkforge-*.tgz`),
// runs the smoke part of the suite on it, and uninstalls it (the CRDs
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
	c.mustKubectl("create", "namespace", systemNS)
	c.mustKubectl("label", "namespace", systemNS, "pod-security.kubernetes.io/enforce=restricted")
	out, err := c.helm("install", "linkforge", charts[0], "-n", systemNS)
	g.Expect(err).NotTo(HaveOccurred(), out)
	t.Logf("helm install:\n%s", out)

	t.Run("smoke: pods", c.testPods)
	t.Run("smoke: samples", c.testSamples)

	out, err = c.helm("uninstall", "linkforge", "-n", systemNS, "--wait", "--timeout=3m")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(strings.Fields(c.leftovers())).To(ConsistOf(
		"customresourcedefinition.apiextensions.k8s.io/shortlinks.linkforge.io",
		"customresourcedefinition.apiextensions.k8s.io/destinationdenylists.linkforge.io",
	), "helm uninstall keeps the CRDs (crd.keep), nothing else")
	g.Eventually(func() int { return c.podCount("manager") + c.podCount("redirector") }).Should(BeZero())
}
