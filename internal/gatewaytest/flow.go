package gatewaytest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/linkforge/linkforge/internal/qr/qrtest"
)

// HostsRecheck is the manager's promise for a host's Event: it reads a
// host's Certificate again every GatewayHostsOptions.Recheck (a minute,
// not a flag) until the host is served, and reconciles at once on a
// claim's change or the Gateway's status. A claim's first 302 needs one
// reconcile plus one issuance (IssueAndServe's 30 s); its Served Event at
// most one recheck more. Both times LoadedMachine.
const HostsRecheck = time.Minute

// Hosts is where HostsFlow runs: a cluster with linkforge's manager (with
// --gateway naming Gateway) and redirector, cert-manager's controller
// (CertManagerArgs) and Traefik, and the CA of InstallIssuers.
type Hosts struct {
	Ctx context.Context
	C   client.Client
	// HTTPS trusts only the CA and dials Traefik's websecure entrypoint,
	// whatever the URL's host, as curl --resolve does.
	HTTPS *http.Client
	// Port is the HTTPS listeners' port as a URL names it: "" for 443.
	Port string
	// Host is the host TeamA and TeamB claim; SecondHost the one TeamC
	// claims at the same time as TeamA.
	Host, SecondHost string
	// Gateway is the user's Gateway the manager programs: annotated
	// cert-manager.io/cluster-issuer, with the listeners UserListeners.
	Gateway       types.NamespacedName
	UserListeners []string
	// RedirectorNamespace holds the manager's HTTPRoutes.
	RedirectorNamespace string
	// TeamA, TeamB and TeamC are three namespaces of the caller's,
	// without annotations; the flow makes a ShortLink hello in each.
	TeamA, TeamB, TeamC string
	// GarbageCollector: a kube-controller-manager runs, so a host's
	// certificate Secret goes with its Certificate (else it stays).
	GarbageCollector bool
}

// HostsFlow is issue 56's flow: TeamA claims Host and TeamC SecondHost with
// linkforge.io/domain and, without anything written by hand, the manager
// adds a listener and an HTTPRoute for each, cert-manager's gateway-shim
// issues their certificates, and https://<host>/hello answers each team's
// 302 through Traefik; the QR code and the preview page name the public
// short URL. TeamB's later claim of Host changes nothing; removing TeamA's
// hands the host to TeamB (no new issuance); removing TeamB's, then
// TeamC's, removes each host's listener, route and Certificate (and its
// Secret, where a garbage collector runs). It logs the time from the
// annotations to the first HTTPS 302, the number issue 56 asks for.
func HostsFlow(t testing.TB, g *gomega.WithT, h Hosts) {
	ctx, c := h.Ctx, h.C
	gwNS, lfNS := h.Gateway.Namespace, h.RedirectorNamespace
	dests := map[string]string{h.TeamA: "https://example.com/a", h.TeamB: "https://example.com/b", h.TeamC: "https://example.com/c"}
	for _, ns := range []string{h.TeamA, h.TeamB, h.TeamC} {
		Apply(ctx, g, c, fmt.Sprintf(`
apiVersion: linkforge.io/v1alpha1
kind: ShortLink
metadata: {name: hello, namespace: %s}
spec: {url: '%s', code: hello}`, ns, dests[ns]))
		g.Eventually(func(g gomega.Gomega) {
			g.Expect(Condition(ctx, g, c, "linkforge.io/v1alpha1", "ShortLink", ns, "hello", "Ready")).To(gomega.Equal("True"))
		}).Should(gomega.Succeed(), "ShortLink %s/hello Ready", ns)
	}
	claim := func(ns, host string) {
		// Server-side apply by this owner: the annotation is added, or
		// removed when this owner no longer names it.
		m := "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + ns
		if host != "" {
			m += ", annotations: {linkforge.io/domain: " + host + "}"
		}
		Apply(ctx, g, c, m+"}")
	}
	base := func(host string) string {
		if h.Port == "" {
			return "https://" + host
		}
		return "https://" + host + ":" + h.Port
	}
	listener, second := ListenerName(h.Host), ListenerName(h.SecondHost)
	listeners := append(append([]string{}, h.UserListeners...), listener, second)
	servedNote := gomega.HavePrefix("Normal GatewayHostServed: https://" + h.Host + "/ is served")

	noFollow := *h.HTTPS
	noFollow.CheckRedirect = NoFollow
	first := (HostsRecheck/2 + IssueAndServe/LoadedMachine) * LoadedMachine
	served := (HostsRecheck + IssueAndServe/LoadedMachine) * LoadedMachine

	annotated := time.Now()
	claim(h.TeamA, h.Host)
	claim(h.TeamC, h.SecondHost)
	Redirects(g, &noFollow, base(h.Host)+"/hello", dests[h.TeamA], first)
	t.Logf("%s annotated to first HTTPS 302: %s (bound %s: a reconcile and an issuance, times LoadedMachine)",
		h.TeamA, time.Since(annotated).Round(time.Millisecond), first)
	Redirects(g, &noFollow, base(h.SecondHost)+"/hello", dests[h.TeamC], first)
	t.Logf("%s annotated to first HTTPS 302 on its own host: %s (bound %s)", h.TeamC, time.Since(annotated).Round(time.Millisecond), first)

	// What the manager made, and what it says of it.
	gw := Get(ctx, g, c, "gateway.networking.k8s.io/v1", "Gateway", gwNS, h.Gateway.Name)
	g.Expect(ListenerNames(gw)).To(gomega.ConsistOf(listeners))
	route := Get(ctx, g, c, "gateway.networking.k8s.io/v1", "HTTPRoute", lfNS, listener)
	g.Expect(route.GetAnnotations()).To(gomega.HaveKeyWithValue("linkforge.io/namespace", h.TeamA))
	g.Expect(Condition(ctx, g, c, "cert-manager.io/v1", "Certificate", gwNS, listener, "Ready")).To(gomega.Equal("True"))
	g.Eventually(func(g gomega.Gomega) []string { return NamespaceEvents(ctx, g, c, h.TeamA) }).WithTimeout(served).
		Should(gomega.ContainElement(servedNote), "%s's Event says its host is served", h.TeamA)
	t.Logf("%s annotated to its Served Event: %s (bound %s: one recheck more)", h.TeamA, time.Since(annotated).Round(time.Millisecond), served)

	// The QR code encodes the public host's short URL (the scheme of
	// --public-base-url, the claimed host), and the preview page names it
	// too, with its destination.
	resp, body := Fetch(g, &noFollow, base(h.Host)+"/hello/qr")
	g.Expect(resp.StatusCode).To(gomega.Equal(http.StatusOK), "%s", body)
	g.Expect(resp.Header.Get("Content-Type")).To(gomega.Equal("image/png"))
	g.Expect(qrtest.ScanPNG(t, []byte(body))).To(gomega.Equal("https://" + h.Host + "/hello"))
	resp, body = Fetch(g, &noFollow, base(h.Host)+"/hello+")
	g.Expect(resp.StatusCode).To(gomega.Equal(http.StatusOK), "%s", body)
	g.Expect(body).To(gomega.ContainSubstring("<h1>Short link https://" + h.Host + "/hello</h1>"))
	g.Expect(body).To(gomega.ContainSubstring(`<a href="` + dests[h.TeamA] + `"`))

	// TeamB claims the same host later: the younger claim is refused.
	claim(h.TeamB, h.Host)
	g.Eventually(func(g gomega.Gomega) []string { return NamespaceEvents(ctx, g, c, h.TeamB) }).
		Should(gomega.ContainElement(gomega.HavePrefix("Warning GatewayHostConflict")), "%s is told its claim conflicts", h.TeamB)
	g.Consistently(func(g gomega.Gomega) {
		gw := Get(ctx, g, c, "gateway.networking.k8s.io/v1", "Gateway", gwNS, h.Gateway.Name)
		g.Expect(ListenerNames(gw)).To(gomega.ConsistOf(listeners))
		route := Get(ctx, g, c, "gateway.networking.k8s.io/v1", "HTTPRoute", lfNS, listener)
		g.Expect(route.GetAnnotations()).To(gomega.HaveKeyWithValue("linkforge.io/namespace", h.TeamA))
	}).WithTimeout(3*time.Second).Should(gomega.Succeed(), "the host stays %s's", h.TeamA)
	Redirects(g, &noFollow, base(h.Host)+"/hello", dests[h.TeamA], first)

	// TeamA lets go: the host's listener, route and Certificate pass to
	// TeamB. The Secret is owned by the Certificate
	// (--enable-certificate-owner-ref; without it, it has no owner).
	secret := Get(ctx, g, c, "v1", "Secret", gwNS, listener)
	g.Expect(secret.GetOwnerReferences()).To(gomega.ContainElement(gomega.HaveField("Kind", "Certificate")),
		"with --enable-certificate-owner-ref the Secret is the Certificate's")
	oldCert := Get(ctx, g, c, "cert-manager.io/v1", "Certificate", gwNS, listener).GetUID()
	released := time.Now()
	claim(h.TeamA, "")
	// The manager reconciles on the Namespace's update; gateway-shim on the
	// Gateway's. Then TeamB's claim is the only one, and gets the host.
	g.Eventually(func(g gomega.Gomega) {
		route := Get(ctx, g, c, "gateway.networking.k8s.io/v1", "HTTPRoute", lfNS, listener)
		g.Expect(route.GetAnnotations()).To(gomega.HaveKeyWithValue("linkforge.io/namespace", h.TeamB))
	}).WithTimeout(first).Should(gomega.Succeed(), "the host's route goes to %s", h.TeamB)
	Redirects(g, &noFollow, base(h.Host)+"/hello", dests[h.TeamB], first)
	t.Logf("%s's annotation removed to %s's first HTTPS 302: %s (bound %s)", h.TeamA, h.TeamB, time.Since(released).Round(time.Millisecond), first)
	// The listener keeps its name (the host's), so gateway-shim keeps its
	// Certificate: the handoff issues nothing.
	g.Expect(Get(ctx, g, c, "cert-manager.io/v1", "Certificate", gwNS, listener).GetUID()).To(gomega.Equal(oldCert))
	g.Eventually(func(g gomega.Gomega) []string { return NamespaceEvents(ctx, g, c, h.TeamB) }).WithTimeout(served).
		Should(gomega.ContainElement(servedNote), "%s's Event says the host is now served", h.TeamB)

	// TeamB lets go too, then TeamC: nothing of either host is left; the
	// Secret goes with its Certificate where a garbage collector runs.
	// SecondHost keeps its listener and answers until TeamC lets go.
	released = time.Now()
	claim(h.TeamB, "")
	removedAll(t, g, h, released, listener, append(append([]string{}, h.UserListeners...), second))
	Redirects(g, &noFollow, base(h.SecondHost)+"/hello", dests[h.TeamC], first)
	removed := time.Now()
	claim(h.TeamC, "")
	removedAll(t, g, h, removed, second, h.UserListeners)
}

// removedAll waits until the Gateway has only the listeners left and the
// route, Certificate and (with a garbage collector) Secret named name are
// gone, and logs the time since released.
func removedAll(t testing.TB, g *gomega.WithT, h Hosts, released time.Time, name string, left []string) {
	ctx, c, gwNS := h.Ctx, h.C, h.Gateway.Namespace
	g.Eventually(func(g gomega.Gomega) {
		gw := Get(ctx, g, c, "gateway.networking.k8s.io/v1", "Gateway", gwNS, h.Gateway.Name)
		g.Expect(ListenerNames(gw)).To(gomega.ConsistOf(left))
		g.Expect(Gone(ctx, c, "gateway.networking.k8s.io/v1", "HTTPRoute", h.RedirectorNamespace, name)).To(gomega.BeTrue(), "the HTTPRoute is deleted")
		g.Expect(Gone(ctx, c, "cert-manager.io/v1", "Certificate", gwNS, name)).To(gomega.BeTrue(), "gateway-shim deletes the Certificate")
		if h.GarbageCollector {
			g.Expect(Gone(ctx, c, "v1", "Secret", gwNS, name)).To(gomega.BeTrue(), "the garbage collector deletes the Certificate's Secret")
		}
	}).WithOffset(1).WithTimeout(IssueAndServe).Should(gomega.Succeed())
	t.Logf("annotation removed to no listener, route or Certificate %s: %s (bound %s)", name, time.Since(released).Round(time.Millisecond), IssueAndServe)
	if !h.GarbageCollector {
		secret := Get(ctx, g, c, "v1", "Secret", gwNS, name)
		t.Logf("the Secret %s stays (no garbage collector here), owned by: %v", name, secret.GetOwnerReferences())
	}
}

// ListenerName is the name the manager gives a host's listener, HTTPRoute
// and Certificate (and cert-manager the Secret): linkforge-<host>, dots as
// dashes.
func ListenerName(host string) string { return "linkforge-" + strings.ReplaceAll(host, ".", "-") }

// NoFollow is an http.Client's CheckRedirect that returns a redirect
// itself rather than following it.
func NoFollow(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Redirects waits up to within until target answers 302 to location.
func Redirects(g *gomega.WithT, hc *http.Client, target, location string, within time.Duration) {
	g.Eventually(func(g gomega.Gomega) {
		resp, body := Fetch(g, hc, target)
		g.Expect(resp.StatusCode).To(gomega.Equal(http.StatusFound), "%s", body)
		g.Expect(resp.Header.Get("Location")).To(gomega.Equal(location))
	}).WithOffset(1).WithTimeout(within).Should(gomega.Succeed(), "%s answers 302 to %s through Traefik", target, location)
}

// Fetch GETs target and returns the answer with (the start of) its body.
func Fetch(g gomega.Gomega, hc *http.Client, target string) (*http.Response, string) {
	resp, err := hc.Get(target)
	g.ExpectWithOffset(1, err).NotTo(gomega.HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	g.ExpectWithOffset(1, err).NotTo(gomega.HaveOccurred())
	return resp, string(b)
}

// ListenerNames are the names of a Gateway's listeners.
func ListenerNames(gw *unstructured.Unstructured) []string {
	ls, _, _ := unstructured.NestedSlice(gw.Object, "spec", "listeners")
	out := make([]string, 0, len(ls))
	for _, l := range ls {
		m, _ := l.(map[string]any)
		n, _ := m["name"].(string)
		out = append(out, n)
	}
	return out
}

// Gone reports whether the object does not exist.
func Gone(ctx context.Context, c client.Client, apiVersion, kind, ns, name string) bool {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	return apierrors.IsNotFound(c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, u))
}

// NamespaceEvents lists the events about Namespace ns as "Type Reason: note".
func NamespaceEvents(ctx context.Context, g gomega.Gomega, c client.Client, ns string) []string {
	var list eventsv1.EventList
	g.Expect(c.List(ctx, &list)).To(gomega.Succeed())
	var out []string
	for _, ev := range list.Items {
		if ev.Regarding.Kind == "Namespace" && ev.Regarding.Name == ns {
			out = append(out, fmt.Sprintf("%s %s: %s", ev.Type, ev.Reason, ev.Note))
		}
	}
	return out
}

// Apply creates or updates the object of manifest, server-side.
func Apply(ctx context.Context, g gomega.Gomega, c client.Client, manifest string) {
	u := &unstructured.Unstructured{}
	g.ExpectWithOffset(1, yaml.Unmarshal([]byte(manifest), &u.Object)).To(gomega.Succeed(), manifest)
	g.ExpectWithOffset(1, c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("gatewaytest"), client.ForceOwnership)).To(gomega.Succeed(), manifest)
}

// Get reads an object, failing g if it cannot.
func Get(ctx context.Context, g gomega.Gomega, c client.Client, apiVersion, kind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	g.ExpectWithOffset(1, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, u)).To(gomega.Succeed())
	return u
}

// Condition is the status of the object's condition of type typ, "" if it
// has none.
func Condition(ctx context.Context, g gomega.Gomega, c client.Client, apiVersion, kind, ns, name, typ string) string {
	u := Get(ctx, g, c, apiVersion, kind, ns, name)
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, x := range conds {
		m, _ := x.(map[string]any)
		if m["type"] == typ {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}
