//go:build gatewaytest

package gatewaytest

import (
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

const (
	host      = "go.example.test"
	namespace = "app"
)

// TestHTTPSThroughTraefikGateway runs the Gateway API implementation and
// cert-manager that hack/gateway builds (make gateway-binaries) out of
// cluster against a local control plane: cert-manager's gateway-shim issues
// the certificate a Gateway's HTTPS listener names from a CA ClusterIssuer
// (cert-manager.io/cluster-issuer on the Gateway), and Traefik serves an
// HTTPRoute through that listener, on loopback, to a backend it finds
// through an EndpointSlice. A client that trusts only the CA gets the
// backend's answer; then the same through an Ingress (Traefik's Ingress
// provider, cert-manager's ingress-shim) for a second host.
func TestHTTPSThroughTraefikGateway(t *testing.T) {
	e := startGatewayEnv(t)
	g, ctx, c, tmp := e.g, e.ctx, e.c, e.tmp
	gatewayPort := e.httpsPort
	Apply(ctx, g, c, fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}", namespace))

	// The backend listens on hostIP: the API server refuses an
	// EndpointSlice address in the loopback range.
	ln, err := net.Listen("tcp", net.JoinHostPort(e.hostIP, "0"))
	g.Expect(err).NotTo(HaveOccurred())
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, "backend: %s %s", r.Host, r.URL.Path)
	}))
	backend.Listener = ln
	backend.Start()
	t.Cleanup(backend.Close)
	e.serviceOutside(namespace, "backend", ln.Addr().String())
	Apply(ctx, g, c, fmt.Sprintf(`
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: backend, namespace: %[1]s}
spec:
  parentRefs: [{name: public}]
  hostnames: [%[2]s]
  rules: [{backendRefs: [{name: backend, port: 80}]}]`, namespace, host))

	created := time.Now()
	Apply(ctx, g, c, fmt.Sprintf(`
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: public
  namespace: %[1]s
  annotations: {cert-manager.io/cluster-issuer: ca}
spec:
  gatewayClassName: traefik
  listeners:
  - name: https
    hostname: %[2]s
    port: %[3]s
    protocol: HTTPS
    tls: {mode: Terminate, certificateRefs: [{name: go-example-tls}]}`, namespace, host, gatewayPort))

	https := e.https
	target := "https://" + net.JoinHostPort(host, gatewayPort) + "/x"
	served := answers(g, https, target)
	t.Logf("Gateway created to first HTTPS answer: %s (bound %s)", time.Since(created).Round(time.Millisecond), IssueAndServe)
	g.Expect(served.DNSNames).To(ConsistOf(host))
	// The same with curl, where there is one: what a person would type.
	if curl, err := exec.LookPath("curl"); err == nil {
		caFile := filepath.Join(tmp, "ca.crt")
		g.Expect(os.WriteFile(caFile, e.caPEM, 0o600)).To(Succeed())
		out, err := exec.CommandContext(ctx, curl, "-sS", "--fail", "--cacert", caFile,
			"--resolve", net.JoinHostPort(host, gatewayPort)+":127.0.0.1", target).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "curl: %s", out)
		g.Expect(string(out)).To(Equal("backend: " + net.JoinHostPort(host, gatewayPort) + " /x"))
	}

	// What cert-manager and Traefik say of it: the Certificate the shim
	// made for the listener is Ready, and the Gateway is Programmed.
	g.Expect(Condition(ctx, g, c, "cert-manager.io/v1", "Certificate", namespace, "go-example-tls", "Ready")).To(Equal("True"))
	g.Eventually(func(g Gomega) {
		g.Expect(Condition(ctx, g, c, "gateway.networking.k8s.io/v1", "Gateway", namespace, "public", "Programmed")).To(Equal("True"))
	}).Should(Succeed(), "Traefik reports the Gateway Programmed")

	// The same through Traefik's Ingress provider, for clusters without
	// the Gateway API: cert-manager's ingress-shim issues the certificate
	// the Ingress's TLS names, and Traefik serves the Ingress's host with it
	// on its entrypoint.
	const ingressHost = "in.example.test"
	Apply(ctx, g, c, `
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: traefik}
spec: {controller: traefik.io/ingress-controller}`)
	created = time.Now()
	Apply(ctx, g, c, fmt.Sprintf(`
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: backend
  namespace: %[1]s
  annotations:
    cert-manager.io/cluster-issuer: ca
    # Traefik takes spec.tls's Secret as a certificate only: without this
    # the router is plain HTTP, and HTTPS on the entrypoint answers 404.
    traefik.ingress.kubernetes.io/router.tls: "true"
spec:
  ingressClassName: traefik
  tls: [{hosts: [%[2]s], secretName: in-example-tls}]
  rules:
  - host: %[2]s
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: backend, port: {name: http}}}}]}`, namespace, ingressHost))
	served = answers(g, https, "https://"+net.JoinHostPort(ingressHost, gatewayPort)+"/y")
	t.Logf("Ingress created to first HTTPS answer: %s (bound %s)", time.Since(created).Round(time.Millisecond), IssueAndServe)
	g.Expect(served.DNSNames).To(ConsistOf(ingressHost))
}

// answers waits until target answers 200 from the backend through
// Traefik, over TLS that hc verifies, and returns the certificate it
// was served.
func answers(g *WithT, hc *http.Client, target string) *x509.Certificate {
	u, err := url.Parse(target)
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	var served *x509.Certificate
	g.Eventually(func(g Gomega) {
		resp, err := hc.Get(target)
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "%s", body)
		g.Expect(string(body)).To(Equal("backend: " + u.Host + " " + u.Path))
		served = resp.TLS.PeerCertificates[0]
	}).WithOffset(1).Should(Succeed(), "%s answers through Traefik with the certificate cert-manager issued", target)
	g.ExpectWithOffset(1, served.Issuer.CommonName).To(Equal(CACommonName))
	return served
}

// hostIPv4 is an IPv4 address of this machine outside the loopback and
// link-local ranges, which an EndpointSlice may hold.
func hostIPv4(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	t.Fatalf("no IPv4 address outside the loopback range among %v: the backend needs one, as an EndpointSlice may not point at loopback", addrs)
	return ""
}
