//go:build gatewaytest

package gatewaytest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	"github.com/linkforge/linkforge/internal/devenv"
)

const (
	vanityHost = "a.example.test"
	gwNS       = "infra"
	lfNS       = "linkforge-system"
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
	e := startGatewayEnv(t)
	g := e.g
	for _, ns := range []string{gwNS, lfNS, "team-a", "team-b", "team-c"} {
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

	HostsFlow(t, g, Hosts{
		Ctx: e.ctx, C: e.c, HTTPS: e.https, Port: e.httpsPort,
		Host: vanityHost, SecondHost: "c.example.test",
		Gateway: types.NamespacedName{Namespace: gwNS, Name: "public"}, UserListeners: []string{"http"},
		RedirectorNamespace: lfNS, TeamA: "team-a", TeamB: "team-b", TeamC: "team-c",
		// envtest runs no kube-controller-manager: the Secret stays.
		GarbageCollector: false,
	})
}
