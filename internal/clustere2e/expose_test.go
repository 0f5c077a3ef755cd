//go:build clustere2e

package clustere2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/linkforge/linkforge/internal/gatewaytest"
)

// The hosts of the exposure test: the chart's HTTPRoute serves routeHost
// (the release's base URL), its Ingress ingressHost, and the teams claim
// claimedHost (two of them) and secondHost with linkforge.io/domain.
const (
	routeHost   = "go.linkforge.test"
	ingressHost = "in.linkforge.test"
	claimedHost = "a.linkforge.test"
	secondHost  = "c.linkforge.test"
	gatewayNS   = "infra"
	gatewayName = "public"
)

// testExposure runs linkforge on its own hosts over HTTPS through a real
// Gateway, on the node: Traefik (its Kubernetes Gateway and Ingress
// providers) and cert-manager's controller, both built from their Go
// modules (make gateway-binaries) and imported as images (bin/node
// import-gateway), run as pods beside the chart's release; a CA
// ClusterIssuer signs every certificate. The chart, upgraded with
// expose.httpRoute, expose.ingress and gatewayHosts on, serves its base
// host through the Gateway's HTTPS listener and a second host through an
// Ingress, each with the certificate cert-manager issued, and programs the
// Gateway for the hosts namespaces claim (gatewaytest.HostsFlow: listener,
// route and certificate from an annotation alone, a second claim refused,
// everything removed with the last claim, the certificate's Secret by the
// garbage collector).
func (c *cluster) testExposure(t *testing.T, chart string) {
	g, c := newG(t), c.in(t)
	c.dumpOnFailure()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, args := range [][]string{
			{"get", "gateways,httproutes,ingresses", "-A", "-o", "yaml"},
			{"get", "certificates,certificaterequests,secrets", "-A"},
			{"logs", "-n", gatewaytest.TraefikNamespace, "deploy/traefik"},
			{"logs", "-n", gatewaytest.CertManagerNamespace, "deploy/cert-manager-controller"},
		} {
			out, _ := c.kubectl("", args...)
			// Not a handshake a client refused: each try makes two lines.
			var keep []string
			for _, l := range strings.Split(out, "\n") {
				if !strings.Contains(l, "TLS handshake error") && !strings.Contains(l, "Serving default certificate") {
					keep = append(keep, l)
				}
			}
			t.Logf("--- kubectl %s\n%s", strings.Join(args, " "), tail(strings.Join(keep, "\n"), 12000))
		}
	})
	ctx := t.Context()
	crds := filepath.Join(root, "bin", "gateway-crds")
	c.mustKubectl("apply", "--server-side", "-f", filepath.Join(crds, "gateway-api")+"/", "-f", filepath.Join(crds, "cert-manager")+"/")
	c.mustKubectl("wait", "--for=condition=Established", "--timeout=90s", "crd/gateways.gateway.networking.k8s.io",
		"crd/httproutes.gateway.networking.k8s.io", "crd/certificates.cert-manager.io", "crd/clusterissuers.cert-manager.io")
	c.apply(gatewaytest.InCluster())
	for _, d := range []string{gatewaytest.CertManagerNamespace + "/cert-manager-controller", gatewaytest.TraefikNamespace + "/traefik"} {
		ns, name, _ := strings.Cut(d, "/")
		c.mustKubectl("rollout", "status", "-n", ns, "deployment/"+name, fmt.Sprintf("--timeout=%s", 90*time.Second*loadedMachine))
	}

	rc, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	// controller-runtime's client logs through its global logger, which
	// otherwise prints a stack saying none was set.
	ctrllog.SetLogger(logr.Discard())
	cl, err := client.New(rc, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	caPEM := gatewaytest.InstallIssuers(ctx, g, cl)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	g.Expect(os.WriteFile(caFile, caPEM, 0o600)).To(Succeed())
	svc, err := c.cs.CoreV1().Services(gatewaytest.TraefikNamespace).Get(ctx, gatewaytest.TraefikService, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	gatewayIP := svc.Spec.ClusterIP
	https := gatewaytest.HTTPSClient(g, caPEM, net.JoinHostPort(gatewayIP, "443"))

	// The user's Gateway: a plain HTTP listener, an HTTPS one for the
	// release's own host (the chart's HTTPRoute attaches to it), and the
	// annotation that lets gateway-shim issue the certificates of both and
	// of the listeners the manager adds.
	c.mustKubectl("create", "namespace", gatewayNS)
	c.apply(fmt.Sprintf(`
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: %[1]s
  namespace: %[2]s
  annotations: {cert-manager.io/cluster-issuer: %[3]s}
spec:
  gatewayClassName: %[4]s
  listeners:
  - {name: http, port: 8000, protocol: HTTP}
  - name: https-go
    hostname: %[5]s
    port: %[6]d
    protocol: HTTPS
    tls: {mode: Terminate, certificateRefs: [{name: go-linkforge-test-tls}]}
    allowedRoutes: {namespaces: {from: All}}
`, gatewayName, gatewayNS, gatewaytest.CAIssuer, gatewaytest.GatewayClass, routeHost, gatewaytest.ListenerPort))

	// As docs/install.md's "Expose linkforge" says, in values.
	values := filepath.Join(t.TempDir(), "expose.yaml")
	g.Expect(os.WriteFile(values, fmt.Appendf(nil, `
baseURL: https://%[1]s
expose:
  httpRoute:
    enabled: true
    parentRefs: [{name: %[3]s, namespace: %[4]s, sectionName: https-go}]
    hostnames: [%[1]s]
  ingress:
    enabled: true
    className: %[5]s
    hosts: [%[2]s]
    tls: [{secretName: in-linkforge-test-tls, hosts: [%[2]s]}]
    annotations:
      cert-manager.io/cluster-issuer: %[6]s
      traefik.ingress.kubernetes.io/router.tls: "true"
gatewayHosts:
  enabled: true
  gateway: {namespace: %[4]s, name: %[3]s}
  listenerPort: %[7]d
`, routeHost, ingressHost, gatewayName, gatewayNS, gatewaytest.IngressClass, gatewaytest.CAIssuer, gatewaytest.ListenerPort), 0o600)).To(Succeed())
	upgraded := time.Now()
	out, err := c.helm("upgrade", "linkforge", chart, "-n", systemNS, "--reuse-values", "-f", values, "--wait", "--timeout=4m")
	g.Expect(err).NotTo(HaveOccurred(), out)

	ns := c.namespace("expose")
	code := c.link(ns, "docs", "https://guide.example.org/start", 0)
	g.Expect(c.mustKubectl("get", "-n", ns, "shortlink", "docs", "-o", "jsonpath={.status.shortURL}")).
		To(Equal("https://"+routeHost+"/"+ns+"/"+code), "status.shortURL names the public host")
	noFollow := *https
	noFollow.CheckRedirect = gatewaytest.NoFollow
	for _, host := range []string{routeHost, ingressHost} {
		gatewaytest.Redirects(g, &noFollow, "https://"+host+"/"+ns+"/"+code, "https://guide.example.org/start", gatewaytest.IssueAndServe)
		t.Logf("helm upgrade with exposure to the first HTTPS 302 on %s: %s (bound %s)", host, time.Since(upgraded).Round(time.Millisecond), gatewaytest.IssueAndServe)
		// What a person types, with the CA's certificate.
		cmd := exec.CommandContext(ctx, "curl", "-sSi", "--cacert", caFile, "--resolve", host+":443:"+gatewayIP, "https://"+host+"/"+ns+"/"+code)
		b, err := cmd.CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "curl: %s", b)
		g.Expect(string(b)).To(MatchRegexp(`^HTTP/\S+ 302`), "curl through Traefik: %s", b)
		g.Expect(string(b)).To(MatchRegexp(`(?im)^location: https://guide\.example\.org/start\r?$`))
		t.Logf("curl -i --cacert ca.crt https://%s/%s/%s:\n%s", host, ns, code, b)
	}

	gatewaytest.HostsFlow(t, g, gatewaytest.Hosts{
		Ctx: ctx, C: cl, HTTPS: https,
		Host: claimedHost, SecondHost: secondHost,
		Gateway:       types.NamespacedName{Namespace: gatewayNS, Name: gatewayName},
		UserListeners: []string{"http", "https-go"}, RedirectorNamespace: systemNS,
		TeamA: c.namespace("gw-team-a"), TeamB: c.namespace("gw-team-b"), TeamC: c.namespace("gw-team-c"),
		// The node runs kube-controller-manager: the Secret goes too.
		GarbageCollector: true,
	})
}
