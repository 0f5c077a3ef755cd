//go:build gatewaytest

package gatewaytest

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/linkforge/linkforge/internal/devenv"
	"github.com/linkforge/linkforge/internal/qr/qrtest"
)

// hostsRecheck is the manager's promise for a host's Event: it reads a
// host's Certificate again every GatewayHostsOptions.Recheck (a minute,
// not a flag) until the host is served, and reconciles at once on a
// claim's change or the Gateway's status. A claim's first 302 needs one
// reconcile plus one issuance (issueAndServe's 30 s); its Served Event at
// most one recheck more. Both times loadedMachine.
const hostsRecheck = time.Minute

const (
	vanityHost = "a.example.test"
	gwNS       = "infra"
	lfNS       = "linkforge-system"
	listener   = "linkforge-a-example-test" // listener, HTTPRoute and Certificate/Secret
)

// TestLinkforgeHostsThroughTraefikGateway is issue 56's flow end to end on
// loopback: the real bin/manager with --gateway programs Traefik's Gateway
// for the host a namespace claims, cert-manager's gateway-shim issues its
// certificate from the CA ClusterIssuer, and https://<host>/<code> answers
// the link's 302 from the real bin/redirector through Traefik. A second
// namespace's claim of the host changes nothing; removing the first claim
// hands the host to the second, and removing that one removes the
// listener, the route and the Certificate. cert-manager runs with --enable-certificate-owner-ref, so
// the certificate's Secret is owned by its Certificate (deleted by the
// garbage collector of a real cluster; envtest runs none).
func TestLinkforgeHostsThroughTraefikGateway(t *testing.T) {
	e := startGatewayEnv(t, "--enable-certificate-owner-ref")
	g := e.g
	for _, ns := range []string{gwNS, lfNS, "team-a", "team-b"} {
		e.apply(fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}", ns))
	}
	// The user's Gateway: one HTTP listener, and the annotation that lets
	// gateway-shim issue the certificates of the listeners the manager adds.
	e.apply(fmt.Sprintf(`
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: public
  namespace: %s
  annotations: {cert-manager.io/cluster-issuer: ca}
spec:
  gatewayClassName: traefik
  listeners: [{name: http, port: %s, protocol: HTTP}]`, gwNS, e.httpPort))

	redirectAddr := e.hostAddr()
	e.serviceOutside(lfNS, "linkforge-redirector", redirectAddr)
	lf, err := devenv.StartLinkforgeWith(e.ctx, e.cp, devenv.Kubeconfigs{}, filepath.Join(e.root, "bin"), e.tmp, redirectAddr,
		[]string{"--gateway", gwNS + "/public", "--gateway-redirector-service", lfNS + "/linkforge-redirector",
			"--gateway-listener-port", e.httpsPort},
		[]string{"--public-base-url", "https://" + vanityHost})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := lf.Stop(15 * time.Second); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			for _, p := range []*devenv.Process{lf.Manager, lf.Redirector} {
				if b, err := os.ReadFile(p.Log); err == nil {
					t.Logf("--- %s log ---\n%s", p.Name, b[max(0, len(b)-4000):])
				}
			}
		}
	})

	for ns, dest := range map[string]string{"team-a": "https://example.com/a", "team-b": "https://example.com/b"} {
		e.apply(fmt.Sprintf(`
apiVersion: linkforge.io/v1alpha1
kind: ShortLink
metadata: {name: hello, namespace: %s}
spec: {url: '%s', code: hello}`, ns, dest))
		g.Eventually(func(g Gomega) {
			g.Expect(condition(e.ctx, g, e.c, "linkforge.io/v1alpha1", "ShortLink", ns, "hello", "Ready")).To(Equal("True"))
		}).Should(Succeed(), "ShortLink %s/hello Ready", ns)
	}

	noFollow := *e.https
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	base := "https://" + net.JoinHostPort(vanityHost, e.httpsPort)
	first := (hostsRecheck/2 + issueAndServe/loadedMachine) * loadedMachine

	annotated := time.Now()
	e.apply(`
apiVersion: v1
kind: Namespace
metadata: {name: team-a, annotations: {linkforge.io/domain: ` + vanityHost + `}}`)
	redirects(g, &noFollow, base+"/hello", "https://example.com/a", first)
	t.Logf("team-a annotated to first HTTPS 302: %s (bound %s: a reconcile and an issuance, times loadedMachine)",
		time.Since(annotated).Round(time.Millisecond), first)

	// What the manager made, and what it says of it.
	gw := get(e.ctx, g, e.c, "gateway.networking.k8s.io/v1", "Gateway", gwNS, "public")
	g.Expect(listenerNames(gw)).To(ConsistOf("http", listener))
	route := get(e.ctx, g, e.c, "gateway.networking.k8s.io/v1", "HTTPRoute", lfNS, listener)
	g.Expect(route.GetAnnotations()).To(HaveKeyWithValue("linkforge.io/namespace", "team-a"))
	g.Expect(condition(e.ctx, g, e.c, "cert-manager.io/v1", "Certificate", gwNS, listener, "Ready")).To(Equal("True"))
	served := (hostsRecheck + issueAndServe/loadedMachine) * loadedMachine
	g.Eventually(func(g Gomega) []string { return e.namespaceEvents(g, "team-a") }).WithTimeout(served).
		Should(ContainElement(HavePrefix("Normal GatewayHostServed: https://"+vanityHost+"/ is served")), "team-a's Event says its host is served")
	t.Logf("team-a annotated to its Served Event: %s (bound %s: one recheck more)", time.Since(annotated).Round(time.Millisecond), served)

	// The QR code encodes the public host's short URL (the scheme of
	// --public-base-url, the claimed host), and the preview page names it
	// too, with its destination.
	resp, body := fetch(g, &noFollow, base+"/hello/qr")
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "%s", body)
	g.Expect(resp.Header.Get("Content-Type")).To(Equal("image/png"))
	g.Expect(qrtest.ScanPNG(t, []byte(body))).To(Equal("https://" + vanityHost + "/hello"))
	resp, body = fetch(g, &noFollow, base+"/hello+")
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "%s", body)
	g.Expect(body).To(ContainSubstring("<h1>Short link https://" + vanityHost + "/hello</h1>"))
	g.Expect(body).To(ContainSubstring(`<a href="https://example.com/a"`))

	// team-b claims the same host later: the younger claim is refused.
	e.apply(`
apiVersion: v1
kind: Namespace
metadata: {name: team-b, annotations: {linkforge.io/domain: ` + vanityHost + `}}`)
	g.Eventually(func(g Gomega) []string { return e.namespaceEvents(g, "team-b") }).
		Should(ContainElement(HavePrefix("Warning GatewayHostConflict")), "team-b is told its claim conflicts")
	g.Consistently(func(g Gomega) {
		gw := get(e.ctx, g, e.c, "gateway.networking.k8s.io/v1", "Gateway", gwNS, "public")
		g.Expect(listenerNames(gw)).To(ConsistOf("http", listener))
		route := get(e.ctx, g, e.c, "gateway.networking.k8s.io/v1", "HTTPRoute", lfNS, listener)
		g.Expect(route.GetAnnotations()).To(HaveKeyWithValue("linkforge.io/namespace", "team-a"))
	}).WithTimeout(3*time.Second).Should(Succeed(), "the host stays team-a's")
	redirects(g, &noFollow, base+"/hello", "https://example.com/a", first)

	// team-a lets go: the host's listener, route and Certificate pass to
	// team-b. The Secret is owned by the Certificate
	// (--enable-certificate-owner-ref; without it, it has no owner).
	secret := get(e.ctx, g, e.c, "v1", "Secret", gwNS, listener)
	g.Expect(secret.GetOwnerReferences()).To(ContainElement(HaveField("Kind", "Certificate")),
		"with --enable-certificate-owner-ref the Secret is the Certificate's")
	oldCert := get(e.ctx, g, e.c, "cert-manager.io/v1", "Certificate", gwNS, listener).GetUID()
	released := time.Now()
	e.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}")
	// The manager reconciles on the Namespace's update; gateway-shim on the
	// Gateway's. Then team-b's claim is the only one, and gets the host.
	g.Eventually(func(g Gomega) {
		route := get(e.ctx, g, e.c, "gateway.networking.k8s.io/v1", "HTTPRoute", lfNS, listener)
		g.Expect(route.GetAnnotations()).To(HaveKeyWithValue("linkforge.io/namespace", "team-b"))
	}).Should(Succeed(), "the host's route goes to team-b")
	redirects(g, &noFollow, base+"/hello", "https://example.com/b", first)
	t.Logf("team-a's annotation removed to team-b's first HTTPS 302: %s (bound %s)", time.Since(released).Round(time.Millisecond), first)
	// The listener keeps its name (the host's), so gateway-shim keeps its
	// Certificate: the handoff issues nothing.
	g.Expect(get(e.ctx, g, e.c, "cert-manager.io/v1", "Certificate", gwNS, listener).GetUID()).To(Equal(oldCert))
	g.Eventually(func(g Gomega) []string { return e.namespaceEvents(g, "team-b") }).WithTimeout(served).
		Should(ContainElement(HavePrefix("Normal GatewayHostServed: https://"+vanityHost+"/ is served")), "team-b's Event says the host is now served")

	// team-b lets go too: nothing of the host is left but, without a
	// garbage collector here, the Secret.
	removed := time.Now()
	e.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: team-b}")
	g.Eventually(func(g Gomega) {
		gw := get(e.ctx, g, e.c, "gateway.networking.k8s.io/v1", "Gateway", gwNS, "public")
		g.Expect(listenerNames(gw)).To(ConsistOf("http"))
		g.Expect(gone(e, "gateway.networking.k8s.io/v1", "HTTPRoute", lfNS, listener)).To(BeTrue(), "the HTTPRoute is deleted")
		g.Expect(gone(e, "cert-manager.io/v1", "Certificate", gwNS, listener)).To(BeTrue(), "gateway-shim deletes the Certificate")
	}).Should(Succeed())
	t.Logf("last annotation removed to no listener, route or Certificate: %s (bound %s)", time.Since(removed).Round(time.Millisecond), issueAndServe)
	secret = get(e.ctx, g, e.c, "v1", "Secret", gwNS, listener)
	t.Logf("the Secret stays (no garbage collector in envtest), owned by: %v", secret.GetOwnerReferences())
}

// redirects waits up to within until target answers 302 to location.
func redirects(g *WithT, hc *http.Client, target, location string, within time.Duration) {
	g.Eventually(func(g Gomega) {
		resp, body := fetch(g, hc, target)
		g.Expect(resp.StatusCode).To(Equal(http.StatusFound), "%s", body)
		g.Expect(resp.Header.Get("Location")).To(Equal(location))
	}).WithOffset(1).WithTimeout(within).Should(Succeed(), "%s answers 302 to %s through Traefik", target, location)
}

// fetch GETs target and returns the answer with (the start of) its body.
func fetch(g Gomega, hc *http.Client, target string) (*http.Response, string) {
	resp, err := hc.Get(target)
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return resp, string(b)
}

// listenerNames are the names of a Gateway's listeners.
func listenerNames(gw *unstructured.Unstructured) []string {
	ls, _, _ := unstructured.NestedSlice(gw.Object, "spec", "listeners")
	out := make([]string, 0, len(ls))
	for _, l := range ls {
		m, _ := l.(map[string]any)
		n, _ := m["name"].(string)
		out = append(out, n)
	}
	return out
}

// gone reports whether the object does not exist.
func gone(e *gatewayEnv, apiVersion, kind, ns, name string) bool {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	return apierrors.IsNotFound(e.c.Get(e.ctx, types.NamespacedName{Namespace: ns, Name: name}, u))
}

// namespaceEvents lists the events about Namespace ns as "Type Reason: note".
func (e *gatewayEnv) namespaceEvents(g Gomega, ns string) []string {
	var list eventsv1.EventList
	g.Expect(e.c.List(e.ctx, &list)).To(Succeed())
	var out []string
	for _, ev := range list.Items {
		if ev.Regarding.Kind == "Namespace" && ev.Regarding.Name == ns {
			out = append(out, fmt.Sprintf("%s %s: %s", ev.Type, ev.Reason, ev.Note))
		}
	}
	return out
}
