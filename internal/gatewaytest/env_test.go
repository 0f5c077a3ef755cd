//go:build gatewaytest

package gatewaytest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/linkforge/linkforge/internal/devenv"
	"github.com/linkforge/linkforge/internal/testenv"
)

// gatewayEnv is a local control plane (with linkforge's CRDs, the Gateway
// API's and cert-manager's) and, out of cluster against it, cert-manager's
// controller and Traefik, with a CA ClusterIssuer `ca` and the GatewayClass
// `traefik`: what both tests start from.
type gatewayEnv struct {
	g         *WithT
	ctx       context.Context
	c         client.Client
	cp        *devenv.ControlPlane
	root, tmp string
	// hostIP is an address of this machine an EndpointSlice may hold (the
	// API server refuses loopback ones): what runs outside the cluster
	// behind a Service listens there.
	hostIP string
	// Traefik's entrypoints: websecure (the HTTPS listeners' port) and web
	// (an HTTP listener's), each host:port on loopback and its port.
	httpsAddr, httpsPort, httpAddr, httpPort string
	caPEM                                    []byte
	// https trusts only the CA and dials httpsAddr whatever the URL's host,
	// as curl --resolve <host>:<port>:127.0.0.1 does.
	https *http.Client
}

// startGatewayEnv starts it all, stopped when t ends.
func startGatewayEnv(t *testing.T) *gatewayEnv {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(IssueAndServe)
	g.SetDefaultEventuallyPollingInterval(250 * time.Millisecond)
	e := &gatewayEnv{g: g, ctx: t.Context(), tmp: t.TempDir(), hostIP: hostIPv4(t)}
	var err error
	e.root, err = testenv.ModuleRoot()
	g.Expect(err).NotTo(HaveOccurred())
	traefik := testenv.TraefikBinary(t, e.root)
	certManager := testenv.CertManagerControllerBinary(t, e.root)
	gatewayCRDs, certManagerCRDs := testenv.GatewayCRDs(t, e.root)

	e.cp, err = devenv.StartControlPlane(e.root, e.tmp)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := e.cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	_, err = envtest.InstallCRDs(e.cp.Config, envtest.CRDInstallOptions{
		Paths: []string{gatewayCRDs, certManagerCRDs}, ErrorIfPathMissing: true,
		MaxTime: time.Minute * LoadedMachine,
	})
	g.Expect(err).NotTo(HaveOccurred(), "installing the Gateway API's and cert-manager's CRDs")
	e.c, err = client.New(e.cp.Config, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())

	for _, a := range []*[2]*string{{&e.httpsAddr, &e.httpsPort}, {&e.httpAddr, &e.httpPort}} {
		*a[0], err = devenv.FreeAddr()
		g.Expect(err).NotTo(HaveOccurred())
		_, *a[1], err = net.SplitHostPort(*a[0])
		g.Expect(err).NotTo(HaveOccurred())
	}

	devenv.StartLogged(t, e.tmp, "cert-manager", certManager, append([]string{
		"--kubeconfig", e.cp.Kubeconfig,
		"--metrics-listen-address", "127.0.0.1:0", "--internal-healthz-listen-address", "127.0.0.1:0"}, CertManagerArgs()...)...)
	// Out of a cluster, Traefik's Kubernetes providers read KUBECONFIG
	// (it has no flag for one), else need an endpoint and a token.
	t.Setenv("KUBECONFIG", e.cp.Kubeconfig)
	devenv.StartLogged(t, e.tmp, "traefik", traefik, TraefikArgs(e.httpsAddr, e.httpAddr)...)
	e.caPEM = InstallIssuers(e.ctx, g, e.c)
	e.https = HTTPSClient(g, e.caPEM, e.httpsAddr)
	return e
}

// apply creates or updates the object of manifest, server-side.
func (e *gatewayEnv) apply(manifest string) {
	Apply(e.ctx, e.g, e.c, manifest)
}

// hostAddr is a free host:port on hostIP.
func (e *gatewayEnv) hostAddr() string {
	ln, err := net.Listen("tcp", net.JoinHostPort(e.hostIP, "0"))
	e.g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	addr := ln.Addr().String()
	e.g.ExpectWithOffset(1, ln.Close()).To(Succeed())
	return addr
}

// serviceOutside makes Service ns/name (port 80, named http) lead to addr,
// on hostIP outside the cluster: a Service without a selector and the
// EndpointSlice a controller would have made for it (Traefik resolves a
// backendRef through the Service's EndpointSlices).
func (e *gatewayEnv) serviceOutside(ns, name, addr string) {
	ip, port, err := net.SplitHostPort(addr)
	e.g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	e.apply(fmt.Sprintf(`
apiVersion: v1
kind: Service
metadata: {name: %s, namespace: %s}
spec:
  ports: [{name: http, port: 80, targetPort: %s}]`, name, ns, port))
	e.apply(fmt.Sprintf(`
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %[1]s-outside
  namespace: %[2]s
  labels: {kubernetes.io/service-name: %[1]s}
addressType: IPv4
endpoints: [{addresses: [%[3]s], conditions: {ready: true}}]
ports: [{name: http, port: %[4]s, protocol: TCP}]`, name, ns, ip, port))
}
