package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"

	"github.com/linkforge/linkforge/internal/devenv"
)

// The namespace and service accounts config/default creates; the binaries run
// as these in every end-to-end test.
const (
	systemNamespace = "linkforge-system"
	managerSA       = "linkforge-manager"
	redirectorSA    = "linkforge-redirector"
)

func serviceAccount(name string) string {
	return "system:serviceaccount:" + systemNamespace + ":" + name
}

// installOperator applies config/default as `make deploy` does (CRD,
// namespace, service accounts, roles, bindings; the Deployments are accepted
// but never run: the control plane has no kubelet) and returns kubeconfigs
// that act as the manager's and the redirector's service accounts, so the
// binaries have exactly the RBAC the manifests give them.
func installOperator(t *testing.T, cp *devenv.ControlPlane, dir string) devenv.Kubeconfigs {
	t.Helper()
	out, err := cp.KubectlCmd(context.Background(), "apply", "-k", filepath.Join(root, "config", "default")).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply -k config/default: %v\n%s", err, out)
	}
	var kc devenv.Kubeconfigs
	if kc.Manager, err = cp.ServiceAccountKubeconfig(dir, systemNamespace, managerSA); err != nil {
		t.Fatal(err)
	}
	if kc.Redirector, err = cp.ServiceAccountKubeconfig(dir, systemNamespace, redirectorSA); err != nil {
		t.Fatal(err)
	}
	return kc
}

// expectNoForbidden fails t if a process's log mentions "forbidden": a
// missing verb shows up there first (a reflector retrying its list, an
// event dropped, a status write refused) even when the flow works around it.
func expectNoForbidden(t *testing.T, procs ...*devenv.Process) {
	t.Helper()
	for _, p := range procs {
		if p == nil {
			continue
		}
		b, err := os.ReadFile(p.Log)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(strings.ToLower(line), "forbidden") {
				t.Errorf("%s log: %s", p.Name, line)
			}
		}
	}
}

// canIList is what `kubectl auth can-i --list` allows user in namespace, as
// "resource verb" or "nonResourceURL verb" lines, sorted.
func (e *env) canIList(user, namespace string) []string {
	e.t.Helper()
	out := e.mustKubectl("auth", "can-i", "--list", "-n", namespace, "--as", user,
		"--as-group", "system:serviceaccounts", "--as-group", "system:serviceaccounts:"+systemNamespace)
	// Columns: Resources, Non-Resource URLs, Resource Names, Verbs; the
	// bracketed lists may hold spaces.
	row := regexp.MustCompile(`^(\S*)\s+\[(.*?)\]\s+\[(.*?)\]\s+\[(.*)\]$`)
	var rules []string
	for _, line := range strings.Split(out, "\n")[1:] {
		m := row.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			if strings.TrimSpace(line) != "" && !strings.HasPrefix(strings.TrimSpace(line), "[") {
				e.t.Fatalf("unexpected can-i line %q", line)
			}
			// A non-resource line starts with its bracketed URLs.
			m = regexp.MustCompile(`^\[(.*?)\]\s+\[(.*?)\]\s+\[(.*)\]$`).FindStringSubmatch(strings.TrimSpace(line))
			if m == nil {
				continue
			}
			m = append([]string{m[0], ""}, m[1:]...)
		}
		what := m[1]
		if what == "" {
			what = m[2]
		}
		if m[3] != "" {
			what += " names=" + m[3]
		}
		for _, verb := range strings.Fields(m[4]) {
			rules = append(rules, what+" "+verb)
		}
	}
	slices.Sort(rules)
	return slices.Compact(rules)
}

// grantedBeyondAuthenticated is canIList minus what every authenticated
// service account may do (discovery, self reviews): what the manifests add.
func (e *env) grantedBeyondAuthenticated(sa, namespace string) []string {
	base := e.canIList(serviceAccount("nobody"), namespace)
	return slices.DeleteFunc(e.canIList(serviceAccount(sa), namespace), func(r string) bool {
		return slices.Contains(base, r)
	})
}

// testLeastPrivilege checks the RBAC of config/default: each service
// account may do exactly what its binary needs (so a marker that drops a verb
// or adds one fails here), and the boundaries hold in real requests.
func (e *env) testLeastPrivilege(t *testing.T, kc devenv.Kubeconfigs) {
	e = e.in(t)
	manager, redirector := serviceAccount(managerSA), serviceAccount(redirectorSA)

	// The manager: reconcile (status), reap (delete), events, read the
	// destination policy (namespaces' allowed hosts, deny-lists), and
	// check who calls its metrics and /reaper (token and access reviews).
	managerAnywhere := []string{
		"destinationdenylists.linkforge.io get", "destinationdenylists.linkforge.io list", "destinationdenylists.linkforge.io watch",
		"events.events.k8s.io create", "events.events.k8s.io patch",
		"namespaces get", "namespaces list", "namespaces watch",
		"shortlinks.linkforge.io delete", "shortlinks.linkforge.io get", "shortlinks.linkforge.io list", "shortlinks.linkforge.io watch",
		"shortlinks.linkforge.io/status get", "shortlinks.linkforge.io/status patch", "shortlinks.linkforge.io/status update",
		"subjectaccessreviews.authorization.k8s.io create", "tokenreviews.authentication.k8s.io create",
	}
	// Its own namespace adds the leader election Lease and its event,
	// and creating the redirectors' peer key (it may not read Secrets).
	managerHome := append(slices.Clone(managerAnywhere), "events create", "events patch",
		"leases.coordination.k8s.io create", "leases.coordination.k8s.io get", "leases.coordination.k8s.io update",
		"secrets create")
	slices.Sort(managerHome)

	t.Run("each service account has exactly the verbs its binary needs", func(t *testing.T) {
		g, e := newG(t), e.in(t)
		g.Expect(e.grantedBeyondAuthenticated(managerSA, "default")).To(Equal(managerAnywhere))
		g.Expect(e.grantedBeyondAuthenticated(managerSA, systemNamespace)).To(Equal(managerHome))
		// The redirector: read links and namespaces (vanity hosts), write
		// uses and reservations in status, record conflicts as events.
		redirectorAnywhere := []string{
			"events.events.k8s.io create", "events.events.k8s.io patch",
			"namespaces get", "namespaces list", "namespaces watch",
			"shortlinks.linkforge.io get", "shortlinks.linkforge.io list", "shortlinks.linkforge.io watch",
			"shortlinks.linkforge.io/status patch", "shortlinks.linkforge.io/status update",
		}
		g.Expect(e.grantedBeyondAuthenticated(redirectorSA, "default")).To(Equal(redirectorAnywhere))
		// Its own namespace adds its peer key: that one Secret to read and
		// watch (a rotation loads without a restart), and no Secret to
		// create (the manager creates the key).
		redirectorHome := append(slices.Clone(redirectorAnywhere), "secrets names=linkforge-peer-key get",
			"secrets names=linkforge-peer-key list", "secrets names=linkforge-peer-key watch")
		slices.Sort(redirectorHome)
		g.Expect(e.grantedBeyondAuthenticated(redirectorSA, systemNamespace)).To(Equal(redirectorHome))
	})

	t.Run("the redirector cannot change links nor read Secrets but its peer key; the manager cannot read Secrets", func(t *testing.T) {
		g, e := newG(t), e.in(t)
		no := func(user string, args ...string) {
			out, _ := e.kubectl(append([]string{"auth", "can-i", "--as", user}, args...)...)
			g.Expect(out).To(Equal("no"), "%s may %v", user, args)
		}
		for _, verb := range []string{"create", "update", "patch", "delete", "deletecollection"} {
			no(redirector, verb, "shortlinks.linkforge.io", "-n", "default")
		}
		for _, verb := range []string{"get", "list", "watch"} {
			no(redirector, verb, "secrets", "-n", "default")
			no(redirector, verb, "secrets", "-n", systemNamespace)
			no(manager, verb, "secrets", "-n", "default")
			no(manager, verb, "secrets", "-n", systemNamespace)
		}
		// Nor can the redirector create one (a ServiceAccount token Secret
		// under its key's name would be readable to it).
		no(redirector, "create", "secrets", "-n", systemNamespace)
		// The manager creates no links and changes no spec.
		for _, verb := range []string{"create", "update", "patch"} {
			no(manager, verb, "shortlinks.linkforge.io", "-n", "default")
		}

		// Real requests, with the kubeconfigs the binaries run with.
		e.mustKubectl("create", "secret", "generic", "rbac-probe", "-n", "default", "--from-literal=k=v")
		e.applyYAML("apiVersion: linkforge.io/v1alpha1\nkind: ShortLink\nmetadata: {name: rbac-probe, namespace: default}\nspec: {url: 'https://example.com/rbac-probe'}\n")
		as := func(kubeconfig string, args ...string) string {
			out, err := e.kubectl(append([]string{"--kubeconfig", kubeconfig}, args...)...)
			g.Expect(err).To(HaveOccurred(), "kubectl %v succeeded: %s", args, out)
			return out
		}
		for _, kubeconfig := range []string{kc.Manager, kc.Redirector} {
			g.Expect(as(kubeconfig, "get", "secret", "rbac-probe", "-n", "default")).To(ContainSubstring("Forbidden"))
			g.Expect(as(kubeconfig, "get", "secrets", "-A")).To(ContainSubstring("Forbidden"))
		}
		g.Expect(as(kc.Redirector, "delete", "shortlink", "rbac-probe", "-n", "default")).To(ContainSubstring("Forbidden"))
		// Its key, by name only: what its watch lists (the field selector
		// names it), and not the namespace's other Secrets.
		key, err := e.kubectl("--kubeconfig", kc.Redirector, "get", "secrets", "-n", systemNamespace, "--field-selector", "metadata.name=linkforge-peer-key", "-o", "name")
		g.Expect(err).NotTo(HaveOccurred(), key)
		g.Expect(as(kc.Redirector, "get", "secrets", "-n", systemNamespace, "-o", "name")).To(ContainSubstring("Forbidden"))
		g.Expect(as(kc.Redirector, "patch", "shortlink", "rbac-probe", "-n", "default", "--type=merge",
			"-p", `{"spec":{"url":"https://evil.example/"}}`)).To(ContainSubstring("Forbidden"))
		cmd := e.cp.KubectlCmd(context.Background(), "--kubeconfig", kc.Redirector, "create", "-f", "-")
		cmd.Stdin = strings.NewReader("apiVersion: linkforge.io/v1alpha1\nkind: ShortLink\nmetadata: {name: planted, namespace: default}\nspec: {url: 'https://evil.example/'}\n")
		out, err := cmd.CombinedOutput()
		g.Expect(err).To(HaveOccurred())
		g.Expect(string(out)).To(ContainSubstring("Forbidden"))
		// What the uses design needs, the status subresource, cannot move a
		// link's target: the API server ignores spec in a status write.
		// (kubectl patch --subresource reads the subresource first, which the
		// redirector need not do; the binary patches directly.)
		cfg, err := clientcmd.BuildConfigFromFlags("", kc.Redirector)
		g.Expect(err).NotTo(HaveOccurred())
		client, err := dynamic.NewForConfig(cfg)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = client.Resource(linkv1.GroupVersion.WithResource("shortlinks")).Namespace("default").Patch(context.Background(),
			"rbac-probe", types.MergePatchType, []byte(`{"spec":{"url":"https://evil.example/"}}`), metav1.PatchOptions{}, "status")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(e.mustKubectl("get", "shortlink", "rbac-probe", "-n", "default", "-o", "jsonpath={.spec.url}")).
			To(Equal("https://example.com/rbac-probe"))
		e.mustKubectl("delete", "shortlink", "rbac-probe", "-n", "default")
		e.mustKubectl("delete", "secret", "rbac-probe", "-n", "default")
	})

	t.Run("config/gateway-hosts adds exactly the Gateway hosts' verbs, on the one Gateway and the routes", func(t *testing.T) {
		g, e := newG(t), e.in(t)
		const gatewayNamespace = "gateway-infra"
		e.mustKubectl("create", "namespace", gatewayNamespace)
		roles := make([]string, 0, 2)
		for _, f := range []string{"gateway_role.yaml", "routes_role.yaml"} {
			b, err := os.ReadFile(filepath.Join(root, "config", "gateway-hosts", f))
			g.Expect(err).NotTo(HaveOccurred())
			roles = append(roles, strings.NewReplacer("GATEWAY_NAMESPACE", gatewayNamespace, "GATEWAY_NAME", "public").Replace(string(b)))
		}
		e.applyYAML(strings.Join(roles, "\n---\n"))
		defer func() {
			e.mustKubectl("delete", "namespace", gatewayNamespace, "--wait=false")
			e.mustKubectl("delete", "-n", systemNamespace, "role,rolebinding", "linkforge-manager-routes")
		}()
		// In the Gateway's namespace: that Gateway, and reading
		// Certificates; never a Secret, nor another Gateway.
		atGateway := append(slices.Clone(managerAnywhere), "certificates.cert-manager.io get",
			"gateways.gateway.networking.k8s.io names=public get", "gateways.gateway.networking.k8s.io names=public list",
			"gateways.gateway.networking.k8s.io names=public patch", "gateways.gateway.networking.k8s.io names=public watch")
		slices.Sort(atGateway)
		g.Expect(e.grantedBeyondAuthenticated(managerSA, gatewayNamespace)).To(Equal(atGateway))
		// In the redirector's namespace: the HTTPRoutes it keeps.
		home := append(slices.Clone(managerHome), "httproutes.gateway.networking.k8s.io create", "httproutes.gateway.networking.k8s.io delete",
			"httproutes.gateway.networking.k8s.io list", "httproutes.gateway.networking.k8s.io patch",
			"httproutes.gateway.networking.k8s.io watch")
		slices.Sort(home)
		g.Expect(e.grantedBeyondAuthenticated(managerSA, systemNamespace)).To(Equal(home))
		// Elsewhere, nothing more; the redirector gets nothing of it.
		g.Expect(e.grantedBeyondAuthenticated(managerSA, "default")).To(Equal(managerAnywhere))
		for _, ns := range []string{gatewayNamespace, systemNamespace} {
			for _, r := range e.grantedBeyondAuthenticated(redirectorSA, ns) {
				g.Expect(r).NotTo(ContainSubstring("gateway.networking.k8s.io"))
				g.Expect(r).NotTo(ContainSubstring("cert-manager.io"))
			}
		}
		out, _ := e.kubectl("auth", "can-i", "--as", manager, "get", "secrets", "-n", gatewayNamespace)
		g.Expect(out).To(Equal("no"))
	})
}

// withServiceAccountToken creates a service account in the system namespace,
// binds it to clusterRole (none: no binding) and returns a token for it.
func (e *env) serviceAccountToken(name, clusterRole string) string {
	e.t.Helper()
	e.mustKubectl("create", "serviceaccount", name, "-n", systemNamespace)
	if clusterRole != "" {
		e.mustKubectl("create", "clusterrolebinding", name, "--clusterrole", clusterRole,
			"--serviceaccount", fmt.Sprintf("%s:%s", systemNamespace, name))
	}
	return e.mustKubectl("create", "token", name, "-n", systemNamespace)
}
