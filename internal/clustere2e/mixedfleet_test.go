//go:build clustere2e

package clustere2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/uses"
)

// testMixedFleet is the window of an upgrade from v0.3.0 in which this
// release's CRD is applied and v0.3.0 redirectors still serve (issue 52,
// item 3): whoever answers at a new holder's peer address, a v0.3.0
// replica never redirects a use it was not given.
//
// It applies this release's CRD beside the running v0.3.0 pods (what
// kubectl apply and helm upgrade do first), starts an impostor on the
// node that answers every forwarded use "served" as v0.3.0 believes, and
// gives two limited links' whole quota to a reservation at the impostor's
// address: one written as this release's holders write theirs
// (uses.Reservation), the other as v0.3.0's holders write theirs (the
// control: it shows the impostor is reachable from the pods and believed,
// so the first link's result is not for want of a path). Clicks through
// the v0.3.0 Service: the control is served by the impostor; the first
// link never reaches it and never redirects past maxUses.
func (c *cluster) testMixedFleet(t *testing.T, g *WithT) {
	ns := c.namespace("mixed-fleet")
	c.applyCRDs(g, filepath.Join(root, "dist", "install.yaml"))

	pods := c.pods("redirector")
	g.Expect(pods).NotTo(BeEmpty())
	imp := startImpostor(t, g, pods[0].Status.PodIP)

	const maxUses = 4
	newCode := c.link(ns, "new-holder", "https://example.com/mixed/new", maxUses)
	oldCode := c.link(ns, "old-holder", "https://example.com/mixed/old", maxUses)
	expires := time.Now().Add(10 * time.Minute) // past the test: the reservation stands throughout
	asNew := uses.Reservation("linkforge-redirector-new-0-impostor", maxUses, expires, imp.addr)
	asOld := linkv1.UseReservation{Holder: "linkforge-redirector-old-0-impostor", Quota: maxUses,
		ExpiresAt: metav1.NewMicroTime(expires), Peer: imp.addr}
	// Each replaces the link's reservations (one taken ahead by a v0.3.0
	// replica keeps serving the block it holds in memory: within maxUses,
	// as the overwritten quota is not given back). The new-style
	// reservation first: a replica's informer that shows the
	// control's has shown it (one watch, in resourceVersion order).
	c.holdAll(g, ns, "new-holder", asNew)
	c.holdAll(g, ns, "old-holder", asOld)

	// The control: every redirector pod forwards to the impostor.
	svc := c.redirectorURL()
	g.Eventually(func(g Gomega) {
		status, _, err := click(http.MethodGet, svc+"/"+ns+"/"+oldCode)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(BeElementOf(http.StatusFound, http.StatusServiceUnavailable))
		for _, p := range pods {
			g.Expect(imp.askedFrom(p.Status.PodIP, oldCode)).To(BeTrue(), "pod %s (%s) has not forwarded to the impostor yet", p.Name, p.Status.PodIP)
		}
	}).Should(Succeed())
	t.Logf("the control (a reservation as v0.3.0 writes it): the impostor was asked %d times", imp.asked(oldCode))

	// The new-style reservation: clicks in parallel, each waits at most
	// --uses-reserve-timeout (2 s) for quota that the impostor holds.
	const clicks = 12
	counts := map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range clicks {
		wg.Go(func() {
			status, _, err := click(http.MethodGet, svc+"/"+ns+"/"+newCode)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				counts[0]++
				return
			}
			counts[status]++
		})
	}
	wg.Wait()
	t.Logf("%d clicks on the link held as this release's holders write it: %v; the impostor was asked %d times", clicks, counts, imp.asked(newCode))
	g.Expect(imp.asked(newCode)).To(BeZero(), "a v0.3.0 replica forwarded to a new holder's address")
	g.Expect(counts[http.StatusFound]).To(BeNumerically("<=", maxUses))
	g.Expect(counts[0]).To(BeZero(), "clicks without an answer")
	c.mustKubectl("delete", "namespace", ns, "--wait=false") // its reservations name the impostor
}

// applyCRDs applies the CustomResourceDefinitions of an install.yaml alone,
// as the first step of an upgrade does.
func (c *cluster) applyCRDs(g *WithT, installYAML string) {
	data, err := os.ReadFile(installYAML)
	g.Expect(err).NotTo(HaveOccurred())
	var crds []string
	for _, doc := range strings.Split(string(data), "\n---") {
		var head struct{ Kind string }
		if yaml.Unmarshal([]byte(doc), &head) == nil && head.Kind == "CustomResourceDefinition" {
			crds = append(crds, doc)
		}
	}
	g.Expect(crds).NotTo(BeEmpty(), "no CRD in %s", installYAML)
	out, err := c.kubectl(strings.Join(crds, "\n---\n"), "apply", "--server-side", "-f", "-")
	g.Expect(err).NotTo(HaveOccurred(), out)
	c.t.Logf("applied this release's CRDs beside the running pods:\n%s", out)
}

// holdAll writes r as the only reservation of the link (a status update,
// retried on conflicts with the manager's writes).
func (c *cluster) holdAll(g *WithT, ns, name string, r linkv1.UseReservation) {
	raw, err := json.Marshal(r)
	g.Expect(err).NotTo(HaveOccurred())
	var obj map[string]any
	g.Expect(json.Unmarshal(raw, &obj)).To(Succeed())
	links := c.dyn.Resource(shortLinks).Namespace(ns)
	g.Eventually(func(g Gomega) {
		u, err := links.Get(context.Background(), name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(unstructured.SetNestedSlice(u.Object, []any{obj}, "status", "useReservations")).To(Succeed())
		_, err = links.UpdateStatus(context.Background(), u, metav1.UpdateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}).Should(Succeed())
}

// impostor answers every request at its address as a v0.3.0 holder that
// served the use does (204, Linkforge-Use: served), and records who asked
// for which path.
type impostor struct {
	addr string
	mu   sync.Mutex
	seen []string // "client-ip path"
}

// startImpostor listens on this node's address on the pods' network (the
// one it reaches podIP from), so that the pods reach it.
func startImpostor(t *testing.T, g *WithT, podIP string) *impostor {
	probe, err := net.Dial("udp", net.JoinHostPort(podIP, "9"))
	g.Expect(err).NotTo(HaveOccurred())
	local := probe.LocalAddr().(*net.UDPAddr).IP.String()
	_ = probe.Close()
	ln, err := net.Listen("tcp", net.JoinHostPort(local, "0"))
	g.Expect(err).NotTo(HaveOccurred())
	imp := &impostor{addr: ln.Addr().String()}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		imp.mu.Lock()
		imp.seen = append(imp.seen, host+" "+r.URL.Path)
		imp.mu.Unlock()
		w.Header().Set("Linkforge-Use", "served")
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	t.Logf("impostor at %s", imp.addr)
	return imp
}

// asked is how many requests named code.
func (i *impostor) asked(code string) int {
	i.mu.Lock()
	defer i.mu.Unlock()
	n := 0
	for _, s := range i.seen {
		if strings.Contains(s, "/"+code+"/") {
			n++
		}
	}
	return n
}

// askedFrom reports whether a request from ip named code.
func (i *impostor) askedFrom(ip, code string) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, s := range i.seen {
		if strings.HasPrefix(s, ip+" ") && strings.Contains(s, "/"+code+"/") {
			return true
		}
	}
	return false
}
