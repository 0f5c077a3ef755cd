//go:build clustere2e

package clustere2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/linkforge/linkforge/internal/testtiming"
)

// What make e2e-cluster sets: the previous release's tree (its dist/ holds
// install.yaml, the chart and the images, imported on the node) and its version.
const (
	previousReleaseEnv = "LINKFORGE_PREVIOUS_RELEASE"
	previousVersionEnv = "UPGRADE_FROM_VERSION"
)

// previousDist is the previous release's dist/ directory.
func (c *cluster) previousDist() string {
	c.t.Helper()
	dir := os.Getenv(previousReleaseEnv)
	if dir == "" {
		c.t.Fatalf("%s is unset: make e2e-cluster builds the previous release and sets it", previousReleaseEnv)
	}
	return filepath.Join(dir, "dist")
}

// releaseImages is image by Deployment name in an install.yaml.
func releaseImages(g *WithT, installYAML string) map[string]string {
	b, err := os.ReadFile(installYAML)
	g.Expect(err).NotTo(HaveOccurred())
	images := map[string]string{}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var d appsv1.Deployment
		if yaml.Unmarshal([]byte(doc), &d) != nil || d.Kind != "Deployment" || len(d.Spec.Template.Spec.Containers) == 0 {
			continue
		}
		images[d.Name] = d.Spec.Template.Spec.Containers[0].Image
	}
	g.Expect(images).To(HaveKey(managerName))
	g.Expect(images).To(HaveKey(redirectorName))
	return images
}

// runningImages is the image of every running pod of the release, by
// Deployment name (a name maps to its images, more than one mid-rollout).
func (c *cluster) runningImages() map[string][]string {
	out := map[string][]string{}
	for component, name := range map[string]string{"manager": managerName, "redirector": redirectorName} {
		for _, p := range c.pods(component) {
			out[name] = append(out[name], p.Spec.Containers[0].Image)
		}
	}
	return out
}

// onlyImages: every pod of the release runs the images named, and each
// Deployment is Available.
func (c *cluster) onlyImages(g *WithT, want map[string]string) {
	g.Eventually(func(g Gomega) {
		g.Expect(c.available(managerName)).To(Succeed())
		g.Expect(c.available(redirectorName)).To(Succeed())
		g.Expect(c.podCount("redirector")).To(Equal(2), "no old redirector left terminating")
		for name, images := range c.runningImages() {
			g.Expect(images).To(HaveEach(want[name]), name)
		}
	}).WithTimeout(4 * time.Minute).Should(Succeed())
}

// upgradeDuringClicks makes limited and unlimited links on the release
// that runs, clicks them until the limited ones have uses and quota held
// by the redirectors, then upgrades (upgrade) while a burst of clicks runs,
// and checks the promise across it: no answer but 302, 410 and 503, never
// more redirects than maxUses, every count exact once the limited links are
// used up, every link stored before still read with its code.
func (c *cluster) upgradeDuringClicks(t *testing.T, g *WithT, ns string, to map[string]string, upgrade func()) {
	const maxUses = 150
	targets := c.links(g, ns, 2, 1, maxUses)
	codes := map[string]string{}
	for _, tg := range targets {
		codes[tg.name] = tg.url[strings.LastIndexByte(tg.url, '/')+1:]
		for range 5 {
			status, _, err := click(http.MethodGet, tg.url)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(status).To(Equal(http.StatusFound))
			tg.counts[status]++
		}
	}
	// Uses reported and quota held: what an upgrade must not lose.
	g.Eventually(func(g Gomega) {
		for _, tg := range targets[:2] {
			u, err := c.dyn.Resource(shortLinks).Namespace(ns).Get(context.Background(), tg.name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			uses, _, _ := unstructured.NestedInt64(u.Object, "status", "uses")
			rs, _, _ := unstructured.NestedSlice(u.Object, "status", "useReservations")
			g.Expect(uses).To(BeNumerically(">", 0), tg.name)
			g.Expect(rs).NotTo(BeEmpty(), tg.name)
		}
	}).Should(Succeed())

	b := &burst{rate: 30, targets: targets}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { b.run(3, 100000, stop); close(done) }()
	b.waitSent(g, 60) // two seconds of clicks before
	stopped := c.followLogs("redirector")
	started := time.Now()
	upgrade()
	c.onlyImages(g, to)
	logs := stopped()
	for _, tg := range targets {
		tg.lostByPrevious = gaveUpAtShutdown(logs, ns+"/"+tg.name)
	}
	testtiming.Of(t).Logf("upgraded: every pod on the new images after %s", time.Since(started).Round(100*time.Millisecond))
	b.waitSent(g, b.sent()+60) // and two seconds after
	close(stop)
	<-done
	t.Logf("clicks from 2s before the upgrade to 2s after: %s", b.summary())
	g.Expect(b.unexpects).To(BeEmpty())
	for _, tg := range targets {
		t.Logf("%s (maxUses %d): %v", tg.name, tg.maxUses, tg.counts)
		if tg.maxUses > 0 {
			g.Expect(tg.counts[http.StatusFound]).To(BeNumerically("<=", tg.maxUses))
		}
	}
	c.finish(g, ns, targets)
	// The links stored by the previous release read, with their codes.
	list, err := c.dyn.Resource(shortLinks).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	got := map[string]string{}
	for _, u := range list.Items {
		got[u.GetName()], _, _ = unstructured.NestedString(u.Object, "status", "code")
	}
	g.Expect(got).To(Equal(codes))
	c.mustKubectl("get", "shortlinks", "-A")
}

// testUpgradeWithKubectl: make e2e-cluster installed the previous release
// with kubectl; this one is applied over it as the README says (`kubectl
// apply --server-side -f dist/install.yaml`) while its links are clicked.
// It leaves this release installed for the rest of the suite.
func (c *cluster) testUpgradeWithKubectl(t *testing.T) {
	g, c := newG(t), c.in(t)
	c.dumpOnFailure()
	previous := releaseImages(g, filepath.Join(c.previousDist(), "install.yaml"))
	current := releaseImages(g, filepath.Join(root, "dist", "install.yaml"))
	g.Expect(previous).NotTo(Equal(current), "the previous release's images differ from this one's")
	c.onlyImages(g, previous)
	t.Logf("from %s: %v", os.Getenv(previousVersionEnv), previous)
	c.testMixedFleet(t, g)
	ns := c.namespace("upgrade-kubectl")
	c.upgradeDuringClicks(t, g, ns, current, func() {
		t.Log(c.mustKubectl("apply", "--server-side", "-f", "dist/install.yaml"))
	})
}

// helmUpgrade installs the previous release's chart (the namespace first,
// restricted, as the README says), clicks links on it, and upgrades to this
// release's chart with helm upgrade during a burst (upgradeDuringClicks).
// It leaves this release's chart installed.
func (c *cluster) helmUpgrade(t *testing.T, g *WithT, chart string, values ...string) {
	previous, err := filepath.Glob(filepath.Join(c.previousDist(), "linkforge-*.tgz"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(previous).To(HaveLen(1), "the previous release packages one chart")
	c.mustKubectl("create", "namespace", systemNS)
	c.mustKubectl("label", "namespace", systemNS, "pod-security.kubernetes.io/enforce=restricted")
	out, err := c.helm("install", "linkforge", previous[0], "-n", systemNS, "--wait", "--timeout=4m")
	g.Expect(err).NotTo(HaveOccurred(), out)
	c.onlyImages(g, releaseImages(g, filepath.Join(c.previousDist(), "install.yaml")))
	ns := c.namespace("upgrade-helm")
	c.upgradeDuringClicks(t, g, ns, releaseImages(g, filepath.Join(root, "dist", "install.yaml")), func() {
		out, err := c.helm(append([]string{"upgrade", "linkforge", chart, "-n", systemNS}, values...)...)
		g.Expect(err).NotTo(HaveOccurred(), out)
		t.Logf("helm upgrade:\n%s", out)
	})
}

// gaveUpAtShutdown reports whether a pod in logs (kubectl logs --prefix)
// gave up writing link after it began shutting down. v0.3.0 gave a write
// up after four conflicts, its last one too: it logs that the uses wait
// for the next round, which never comes.
func gaveUpAtShutdown(logs, link string) bool {
	stopping := map[string]bool{}
	for _, line := range strings.Split(logs, "\n") {
		pod, _, _ := strings.Cut(line, " ")
		switch {
		case strings.Contains(line, `"msg":"shutting down"`):
			stopping[pod] = true
		case stopping[pod] && strings.Contains(line, `"error":"status of `+link+" kept changing"):
			return true
		}
	}
	return false
}

func TestGaveUpAtShutdown(t *testing.T) {
	const (
		a = `[pod/linkforge-redirector-7b6979bcff-d4lzw/redirector] `
		b = `[pod/linkforge-redirector-7b6979bcff-xqsfq/redirector] `
	)
	gaveUp := `{"level":"info","logger":"redirector.uses","msg":"cannot write uses yet; they wait for the next round","link":"up/limited-1","error":"status of up/limited-1 kept changing under 4 writes"}`
	for _, tc := range []struct {
		logs string
		want bool
	}{
		{a + `{"msg":"shutting down","delay":5}` + "\n" + a + gaveUp, true},
		{a + gaveUp + "\n" + a + `{"msg":"shutting down","delay":5}`, false}, // a round while serving: retried
		{b + `{"msg":"shutting down","delay":5}` + "\n" + a + gaveUp, false}, // another pod stopping
		{a + `{"msg":"shutting down","delay":5}` + "\n" + a + strings.ReplaceAll(gaveUp, "limited-1", "limited-10"), false},
	} {
		if got := gaveUpAtShutdown(tc.logs, "up/limited-1"); got != tc.want {
			t.Errorf("gaveUpAtShutdown(%q) = %v, want %v", tc.logs, got, tc.want)
		}
	}
}
