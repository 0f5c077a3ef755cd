package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// HelmBinary is root/bin/helm, which `make helm` builds from
// helm.sh/helm/v4, with its repository cache, config and plugins kept out of
// $HOME for the test.
func HelmBinary(t testing.TB, root string) string {
	t.Helper()
	helm := builtTool(t, root, "helm", "the pinned helm")
	home := t.TempDir()
	for _, v := range []string{"HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"} {
		t.Setenv(v, filepath.Join(home, v))
	}
	return helm
}

// OAuth2ProxyBinary is root/bin/oauth2-proxy, which `make oauth2-proxy`
// (and make tools) builds from github.com/oauth2-proxy/oauth2-proxy/v7 at
// the version hack/authproxy/go.mod pins.
func OAuth2ProxyBinary(t testing.TB, root string) string {
	t.Helper()
	return builtTool(t, root, "oauth2-proxy", "the pinned oauth2-proxy")
}

// MockOIDCBinary is root/bin/mockoidc, oauth2-proxy's mock OpenID Connect
// provider as a process (hack/authproxy/mockoidc), which `make mockoidc`
// (and make tools) builds.
func MockOIDCBinary(t testing.TB, root string) string {
	t.Helper()
	return builtTool(t, root, "mockoidc", "the test OpenID Connect provider")
}

// builtTool is root/bin/name, which `make name` builds (what it is, in
// the message of a test that finds none).
func builtTool(t testing.TB, root, name, what string) string {
	t.Helper()
	p := filepath.Join(root, "bin", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no %s: run `make %s` (make tools and make test do) to build %s", p, name, what)
	}
	return p
}

// KubectlBinary is the kubectl on PATH, else the one hack/envtest-assets.sh
// may have built beside kube-apiserver (as internal/devenv finds it).
func KubectlBinary(t testing.TB, root string) string {
	t.Helper()
	if p, err := exec.LookPath("kubectl"); err == nil {
		return p
	}
	if dir, err := AssetsDir(root); err == nil {
		p := filepath.Join(dir, "kubectl")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	t.Fatal("no kubectl on PATH (nor beside the envtest binaries)")
	return ""
}

// TraefikBinary is root/bin/traefik, a Gateway API implementation, which
// `make gateway-binaries` builds from github.com/traefik/traefik/v3 at the
// version hack/gateway/go.mod pins.
func TraefikBinary(t testing.TB, root string) string {
	t.Helper()
	return builtGatewayFile(t, root, "traefik", "Traefik")
}

// CertManagerControllerBinary is root/bin/cert-manager-controller,
// cert-manager's controller, which `make gateway-binaries` builds from
// github.com/cert-manager/cert-manager at the version hack/gateway/go.mod
// pins.
func CertManagerControllerBinary(t testing.TB, root string) string {
	t.Helper()
	return builtGatewayFile(t, root, "cert-manager-controller", "cert-manager's controller")
}

// GatewayCRDs are the directories of the CRDs that `make gateway-binaries`
// copies beside those binaries: the Gateway API's standard channel and
// cert-manager's, at the versions hack/gateway/go.mod pins.
func GatewayCRDs(t testing.TB, root string) (gatewayAPI, certManager string) {
	t.Helper()
	return builtGatewayFile(t, root, "gateway-crds/gateway-api", "the Gateway API's CRDs"),
		builtGatewayFile(t, root, "gateway-crds/cert-manager", "cert-manager's CRDs")
}

// builtGatewayFile is root/bin/name, which `make gateway-binaries` makes.
func builtGatewayFile(t testing.TB, root, name, what string) string {
	t.Helper()
	p := filepath.Join(root, "bin", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no %s: run `make gateway-binaries` to build %s (hack/gateway)", p, what)
	}
	return p
}
