//go:build clustere2e

package clustere2e

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// testCodeChange: issue 54's typo, on the node. spec.code of a link moves
// to a code another link holds (kubectl patch, as a person does it): the
// link keeps its code (state Kept), and its short URL, clicked through the
// Service (both redirector replicas, a new connection each time) from
// before the patch until the state is Kept and for two seconds more,
// never answers anything but its redirect. Once the holder is deleted, the
// link moves to the code it asked for.
func (c *cluster) testCodeChange(t *testing.T) {
	g, c := newG(t), c.in(t)
	c.dumpOnFailure()
	ns := c.namespace("codechange")
	const landingURL = "https://example.com/landing/?utm_source=linkforge&lang=en"
	for name, spec := range map[string]string{
		"guide":   `{url: "https://example.com/guide", code: handbook}`,
		"landing": fmt.Sprintf(`{url: %q, code: landing}`, landingURL),
	} {
		c.apply(fmt.Sprintf("apiVersion: linkforge.io/v1alpha1\nkind: ShortLink\nmetadata:\n  name: %s\n  namespace: %s\nspec: %s\n", name, ns, spec))
	}
	c.mustKubectl("wait", "--for=condition=Ready", "-n", ns, "shortlink/guide", "shortlink/landing", "--timeout=90s")
	old := c.redirectorURL() + "/" + ns + "/landing"
	g.Eventually(func() (string, error) {
		status, loc, err := click(http.MethodHead, old)
		return fmt.Sprintf("%d %s", status, loc), err
	}).Should(Equal("302 " + landingURL))

	// Clicks of the old short URL, about 50 a second, each on a new
	// connection (kube-proxy picks a replica for each).
	var (
		clicks   atomic.Int64
		mu       sync.Mutex
		failures []string
	)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond) // pace, not a wait
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			status, loc, err := click(http.MethodGet, old)
			if err != nil || status != http.StatusFound || loc != landingURL {
				mu.Lock()
				failures = append(failures, fmt.Sprintf("%d %q %v", status, loc, err))
				mu.Unlock()
			}
			clicks.Add(1)
		}
	}()
	waitClicks := func(n int64) {
		target := clicks.Load() + n
		g.Eventually(clicks.Load).WithTimeout(60 * time.Second).Should(BeNumerically(">=", target))
	}
	waitClicks(50)
	c.mustKubectl("patch", "shortlink", "landing", "-n", ns, "--type", "merge", "-p", `{"spec":{"code":"handbook"}}`)
	c.mustKubectl("wait", "--for=jsonpath={.status.state}=Kept", "-n", ns, "shortlink/landing", "--timeout=90s")
	g.Expect(c.mustKubectl("get", "-n", ns, "shortlink", "landing", "-o", "jsonpath={.status.code}")).To(Equal("landing"))
	g.Expect(c.mustKubectl("get", "-n", ns, "shortlink", "landing", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].message}`)).
		To(And(ContainSubstring(`held by ShortLink "guide"`), ContainSubstring("code landing")))
	waitClicks(100) // two seconds and more on the Kept link
	close(stop)
	<-done
	t.Logf("%d clicks of the old short URL from before the patch to two seconds after Kept", clicks.Load())
	g.Expect(failures).To(BeEmpty(), "the old short URL answered something else than its redirect")

	// The wanted code is freed: the link moves to it.
	c.mustKubectl("delete", "shortlink", "guide", "-n", ns)
	c.mustKubectl("wait", "--for=jsonpath={.status.code}=handbook", "-n", ns, "shortlink/landing", "--timeout=90s")
	g.Eventually(func(g Gomega) {
		for range 6 { // both replicas
			status, loc, err := click(http.MethodHead, c.redirectorURL()+"/"+ns+"/handbook")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(fmt.Sprintf("%d %s", status, loc)).To(Equal("302 " + landingURL))
		}
	}).Should(Succeed())
}
