package chart

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/linkforge/linkforge/internal/events"
	"github.com/linkforge/linkforge/internal/testenv"
)

// The release that renders config/default's names: namePrefix linkforge-,
// namespace linkforge-system.
const (
	release   = "linkforge"
	namespace = "linkforge-system"
)

// helmLabels and helmAnnotations are the metadata the chart adds and
// config/default does not; they are dropped before comparing.
var (
	helmLabels = []string{
		"helm.sh/chart",
		"app.kubernetes.io/managed-by",
		"app.kubernetes.io/instance",
		"app.kubernetes.io/version",
	}
	helmAnnotations = []string{"helm.sh/resource-policy"}
)

// object is one decoded manifest.
type object = map[string]any

// TestChartMatchesKustomize renders the chart and config/default and
// compares the two object sets: the same objects (apiVersion, kind,
// namespace, name) and, after normalizing, the same content, RBAC rules
// included.
func TestChartMatchesKustomize(t *testing.T) {
	root := moduleRoot(t)
	helm := testenv.HelmBinary(t, root)
	kubectl := testenv.KubectlBinary(t, root)
	want := kustomizeBuild(t, kubectl, filepath.Join(root, "config", "default"))

	t.Run("defaults", func(t *testing.T) {
		// config/default makes the Namespace; the chart leaves it to
		// `helm install` unless namespace.create is on (values.yaml says why).
		withoutNS := map[string]object{}
		for k, o := range want {
			if o["kind"] != "Namespace" {
				withoutNS[k] = o
			}
		}
		compareSets(t, withoutNS, helmTemplate(t, helm, root))
	})
	t.Run("namespace.create", func(t *testing.T) {
		compareSets(t, want, helmTemplate(t, helm, root, "--set", "namespace.create=true"))
	})
	t.Run("monitoring", func(t *testing.T) {
		// config/default with its ../monitoring line enabled.
		withMonitoring := kustomizeBuild(t, kubectl, defaultWith(t, root, "#- ../monitoring"))
		got := helmTemplate(t, helm, root, "--set", "namespace.create=true",
			"--set", "monitoring.alerts.enabled=true", "--set", "monitoring.dashboard.enabled=true")
		if n := countKind(got, "PrometheusRule"); n != 1 {
			t.Errorf("the chart renders %d PrometheusRules with monitoring.alerts.enabled, want 1", n)
		}
		compareSets(t, withMonitoring, got)
	})
	t.Run("serviceMonitors", func(t *testing.T) {
		// config/default with its ../prometheus line enabled.
		withPrometheus := kustomizeBuild(t, kubectl, defaultWith(t, root, "#- ../prometheus"))
		got := helmTemplate(t, helm, root, "--set", "namespace.create=true", "--set", "prometheus.serviceMonitor.enabled=true")
		if n := countKind(got, "ServiceMonitor"); n != 2 {
			t.Errorf("the chart renders %d ServiceMonitors with prometheus.serviceMonitor.enabled, want 2", n)
		}
		compareSets(t, withPrometheus, got)
	})
	t.Run("destinationPolicy", func(t *testing.T) {
		// config/default with its destination policy component enabled.
		withPolicy := kustomizeBuild(t, kubectl, defaultWith(t, root, "#components:", "#- ../destination-policy"))
		got := helmTemplate(t, helm, root, "--set", "namespace.create=true", "--set", "destinationPolicy.enabled=true")
		for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
			if n := countKind(got, kind); n != 3 {
				t.Errorf("the chart renders %d %ss with destinationPolicy.enabled, want 3", n, kind)
			}
			if n := countKind(helmTemplate(t, helm, root), kind); n != 0 {
				t.Errorf("the chart renders %d %ss by default, want none", n, kind)
			}
		}
		compareSets(t, withPolicy, got)
	})
	t.Run("networkPolicy", func(t *testing.T) {
		// config/default with its network policy component enabled.
		withNetworkPolicy := kustomizeBuild(t, kubectl, defaultWith(t, root, "#components:", "#- ../network-policy"))
		got := helmTemplate(t, helm, root, "--set", "namespace.create=true", "--set", "networkPolicy.enabled=true")
		if n := countKind(got, "NetworkPolicy"); n != 1 {
			t.Errorf("the chart renders %d NetworkPolicies with networkPolicy.enabled, want 1", n)
		}
		compareSets(t, withNetworkPolicy, got)
	})
}

// redirectorNetworkPolicy is the spec of the redirector's NetworkPolicy, as
// docs/install.md states it: clicks from anywhere, the peer port only from
// the redirector's pods, the probe port (/metrics) only from the namespace
// monitoring; ingress only.
const redirectorNetworkPolicy = `
podSelector:
  matchLabels: {app.kubernetes.io/name: linkforge, app.kubernetes.io/component: redirector}
policyTypes: [Ingress]
ingress:
- ports: [{port: 8080, protocol: TCP}]
- from:
  - podSelector:
      matchLabels: {app.kubernetes.io/name: linkforge, app.kubernetes.io/component: redirector}
  ports: [{port: 8082, protocol: TCP}]
- from:
  - namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: monitoring}
  ports: [{port: 8081, protocol: TCP}]
`

// TestNetworkPolicy checks the redirector's NetworkPolicy, in the kustomize
// component and in the chart: exactly the rules above when enabled, no
// NetworkPolicy at all by default, and the chart's values for who may read
// /metrics and for more rules.
func TestNetworkPolicy(t *testing.T) {
	root := moduleRoot(t)
	helm := testenv.HelmBinary(t, root)
	kubectl := testenv.KubectlBinary(t, root)
	want := decodeOne(t, redirectorNetworkPolicy)
	policyKey := "networking.k8s.io/v1 NetworkPolicy " + namespace + "/linkforge-redirector"
	spec := func(t *testing.T, set map[string]object) any {
		t.Helper()
		if n := countKind(set, "NetworkPolicy"); n != 1 {
			t.Fatalf("%d NetworkPolicies rendered, want 1", n)
		}
		o, ok := set[policyKey]
		if !ok {
			t.Fatalf("no %s rendered", policyKey)
		}
		return o["spec"]
	}
	check := func(t *testing.T, want, got any) {
		t.Helper()
		if d := diff("spec", want, got); len(d) > 0 {
			t.Errorf("the NetworkPolicy's spec differs (- want, + got):\n%s", strings.Join(d, "\n"))
		}
	}

	t.Run("kustomize component", func(t *testing.T) {
		check(t, want, spec(t, kustomizeBuild(t, kubectl, defaultWith(t, root, "#components:", "#- ../network-policy"))))
	})
	t.Run("chart", func(t *testing.T) {
		check(t, want, spec(t, helmTemplate(t, helm, root, "--set", "networkPolicy.enabled=true")))
	})
	t.Run("absent by default", func(t *testing.T) {
		if n := countKind(kustomizeBuild(t, kubectl, filepath.Join(root, "config", "default")), "NetworkPolicy"); n != 0 {
			t.Errorf("config/default renders %d NetworkPolicies, want none", n)
		}
		if n := countKind(helmTemplate(t, helm, root), "NetworkPolicy"); n != 0 {
			t.Errorf("the chart renders %d NetworkPolicies by default, want none", n)
		}
		if n := countKind(helmTemplate(t, helm, root, "--set", "networkPolicy.enabled=false"), "NetworkPolicy"); n != 0 {
			t.Errorf("the chart renders %d NetworkPolicies with networkPolicy.enabled=false, want none", n)
		}
	})
	t.Run("chart: metricsFrom and extraIngress", func(t *testing.T) {
		values := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(values, []byte(`networkPolicy:
  enabled: true
  metricsFrom:
  - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: observability}}
    podSelector: {matchLabels: {app.kubernetes.io/name: prometheus}}
  extraIngress:
  - from: [{ipBlock: {cidr: 10.0.0.0/16}}]
    ports: [{port: 8081, protocol: TCP}]
`), 0o644); err != nil {
			t.Fatal(err)
		}
		w := decodeOne(t, redirectorNetworkPolicy).(map[string]any)
		ingress := w["ingress"].([]any)
		ingress[2] = decodeOne(t, `
from:
- namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: observability}}
  podSelector: {matchLabels: {app.kubernetes.io/name: prometheus}}
ports: [{port: 8081, protocol: TCP}]
`)
		w["ingress"] = append(ingress, decodeOne(t, `
from: [{ipBlock: {cidr: 10.0.0.0/16}}]
ports: [{port: 8081, protocol: TCP}]
`))
		check(t, w, spec(t, helmTemplate(t, helm, root, "-f", values)))

		// No metricsFrom: no rule for the probe port, which then only the
		// node (the kubelet) reaches.
		w = decodeOne(t, redirectorNetworkPolicy).(map[string]any)
		w["ingress"] = w["ingress"].([]any)[:2]
		check(t, w, spec(t, helmTemplate(t, helm, root, "--set", "networkPolicy.enabled=true", "--set-json", "networkPolicy.metricsFrom=[]")))
	})
}

// TestPeerKey checks how the redirectors' peer key is made and found, in
// config/default and in the chart: the manager creates it (a Role that
// creates Secrets and nothing else, --peer-key-secret); the redirector
// gets POD_NAMESPACE from the downward API, names the Secret with
// --peer-key-secret, and has a Role that gets only that Secret; the pod's
// hardening is unchanged and nothing is mounted.
func TestPeerKey(t *testing.T) {
	root := moduleRoot(t)
	sets := map[string]map[string]object{
		"config/default": kustomizeBuild(t, testenv.KubectlBinary(t, root), filepath.Join(root, "config", "default")),
		"the chart":      helmTemplate(t, testenv.HelmBinary(t, root), root),
	}
	wantEnv := decodeOne(t, `{name: POD_NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}`)
	wantRules := decodeOne(t, `
- {apiGroups: [""], resources: [secrets], resourceNames: [linkforge-peer-key], verbs: [get, list, watch]}
`)
	wantManagerRules := decodeOne(t, `[{apiGroups: [""], resources: [secrets], verbs: [create]}]`)
	wantManagerSubjects := decodeOne(t, `[{kind: ServiceAccount, name: linkforge-manager, namespace: `+namespace+`}]`)
	wantSubjects := decodeOne(t, `[{kind: ServiceAccount, name: linkforge-redirector, namespace: `+namespace+`}]`)
	wantPodSecurity := decodeOne(t, `{runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}`)
	wantSecurity := decodeOne(t, `{allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}`)
	for _, from := range sortedKeys(sets) {
		objs := sets[from]
		d, ok := objs["apps/v1 Deployment "+namespace+"/linkforge-redirector"]
		if !ok {
			t.Errorf("%s: no redirector Deployment", from)
			continue
		}
		pod := d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
		containers, _ := pod["containers"].([]any)
		if len(containers) != 1 {
			t.Fatalf("%s: the redirector pod has %d containers, want 1", from, len(containers))
		}
		ct := containers[0].(map[string]any)
		var env any
		for _, e := range ct["env"].([]any) {
			if e.(map[string]any)["name"] == "POD_NAMESPACE" {
				env = e
			}
		}
		args := fmt.Sprint(ct["args"])
		role := objs["rbac.authorization.k8s.io/v1 Role "+namespace+"/linkforge-redirector-peer-key-role"]
		binding := objs["rbac.authorization.k8s.io/v1 RoleBinding "+namespace+"/linkforge-redirector-peer-key-rolebinding"]
		managerRole := objs["rbac.authorization.k8s.io/v1 Role "+namespace+"/linkforge-manager-peer-key-role"]
		managerBinding := objs["rbac.authorization.k8s.io/v1 RoleBinding "+namespace+"/linkforge-manager-peer-key-rolebinding"]
		var managerArgs string
		if m, ok := objs["apps/v1 Deployment "+namespace+"/linkforge-manager"]; ok {
			mpod := m["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			managerArgs = fmt.Sprint(mpod["containers"].([]any)[0].(map[string]any)["args"])
		}
		for _, c := range []struct {
			what      string
			want, got any
		}{
			{"POD_NAMESPACE", wantEnv, env},
			{"--peer-key-secret", true, strings.Contains(args, "--peer-key-secret=linkforge-peer-key")},
			{"peer key role", wantRules, role["rules"]},
			{"peer key binding", wantSubjects, binding["subjects"]},
			{"the manager's peer key role", wantManagerRules, managerRole["rules"]},
			{"the manager's peer key binding", wantManagerSubjects, managerBinding["subjects"]},
			{"the manager's --peer-key-secret", true, strings.Contains(managerArgs, "--peer-key-secret=linkforge-peer-key")},
			{"volumes", nil, pod["volumes"]},
			{"pod securityContext", wantPodSecurity, pod["securityContext"]},
			{"securityContext", wantSecurity, ct["securityContext"]},
		} {
			if d := diff(c.what, c.want, c.got); len(d) > 0 {
				t.Errorf("%s: the redirector's %s differ (- want, + got):\n%s", from, c.what, strings.Join(d, "\n"))
			}
		}
	}
}

// decodeOne decodes one YAML (or JSON) document.
func decodeOne(t *testing.T, doc string) any {
	t.Helper()
	var v any
	if err := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(doc), 4096).Decode(&v); err != nil {
		t.Fatalf("decoding %q: %v", doc, err)
	}
	return v
}

// TestRBACRules compares the rules of every Role and ClusterRole by name,
// unnormalized: the chart grants exactly what config/rbac grants.
func TestRBACRules(t *testing.T) {
	root := moduleRoot(t)
	want := kustomizeBuild(t, testenv.KubectlBinary(t, root), filepath.Join(root, "config", "default"))
	got := helmTemplate(t, testenv.HelmBinary(t, root), root)
	roles := func(set map[string]object) map[string]any {
		rules := map[string]any{}
		for _, o := range set {
			if k := o["kind"]; k == "Role" || k == "ClusterRole" {
				rules[fmt.Sprint(k, " ", name(o))] = o["rules"]
			}
		}
		return rules
	}
	wantRules, gotRules := roles(want), roles(got)
	if len(wantRules) == 0 {
		t.Fatal("config/default has no roles")
	}
	for _, r := range sortedKeys(wantRules) {
		if _, ok := gotRules[r]; !ok {
			t.Errorf("the chart has no %s", r)
		} else if !reflect.DeepEqual(wantRules[r], gotRules[r]) {
			t.Errorf("%s: the chart's rules differ from config/rbac's:\n%s", r, strings.Join(diff("rules", wantRules[r], gotRules[r]), "\n"))
		}
	}
	for _, r := range sortedKeys(gotRules) {
		if _, ok := wantRules[r]; !ok {
			t.Errorf("the chart has %s, config/default does not", r)
		}
	}
}

// TestCopiesMatchSources checks the chart's copies of the generated
// manifests, which `make manifests` refreshes.
func TestCopiesMatchSources(t *testing.T) {
	root := moduleRoot(t)
	chart := filepath.Join(root, "config", "helm", "linkforge")
	pairs := map[string]string{
		filepath.Join("config", "rbac", "role.yaml"):                      filepath.Join(chart, "files", "rbac", "manager-role.yaml"),
		filepath.Join("config", "rbac", "redirector", "role.yaml"):        filepath.Join(chart, "files", "rbac", "redirector-role.yaml"),
		filepath.Join("config", "monitoring", "rules.yaml"):               filepath.Join(chart, "files", "monitoring", "rules.yaml"),
		filepath.Join("config", "monitoring", "linkforge-dashboard.json"): filepath.Join(chart, "files", "monitoring", "linkforge-dashboard.json"),
	}
	policy, err := filepath.Glob(filepath.Join(root, "config", "destination-policy", "*_[pb]*.yaml"))
	if err != nil || len(policy) != 6 {
		t.Fatalf("config/destination-policy: %d policies and bindings (%v), want 6", len(policy), err)
	}
	for _, p := range policy {
		rel, _ := filepath.Rel(root, p)
		pairs[rel] = filepath.Join(chart, "files", "destination-policy", filepath.Base(p))
	}
	if copies, _ := filepath.Glob(filepath.Join(chart, "files", "destination-policy", "*.yaml")); len(copies) != len(policy) {
		t.Errorf("%s/files/destination-policy has %d files, config/destination-policy %d; run `make manifests`", chart, len(copies), len(policy))
	}
	crds, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("no CRDs in config/crd/bases (%v)", err)
	}
	for _, c := range crds {
		rel, _ := filepath.Rel(root, c)
		pairs[rel] = filepath.Join(chart, "files", "crds", filepath.Base(c))
	}
	copies, _ := filepath.Glob(filepath.Join(chart, "files", "crds", "*.yaml"))
	if len(copies) != len(crds) {
		t.Errorf("%s/files/crds has %d files, config/crd/bases %d; run `make manifests`", chart, len(copies), len(crds))
	}
	for src, dst := range pairs {
		a, err := os.ReadFile(filepath.Join(root, src))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(dst)
		if err != nil {
			t.Errorf("%v; run `make manifests`", err)
			continue
		}
		if !bytes.Equal(a, b) {
			rel, _ := filepath.Rel(root, dst)
			t.Errorf("%s differs from %s; run `make manifests`", rel, src)
		}
	}
}

// TestLint runs helm lint --strict on the chart.
func TestLint(t *testing.T) {
	root := moduleRoot(t)
	run(t, testenv.HelmBinary(t, root), "lint", "--strict", filepath.Join(root, "config", "helm", "linkforge"))
}

// TestApplyToEnvtest applies the rendered chart (CRD included, the
// HTTPRoute and Ingress of expose, with the Gateway API's HTTPRoute CRD, and
// the Gateway hosts' Roles) to an envtest API server with no CRD installed,
// checks every object exists and the ServiceAccounts are granted what they
// need (the manager exactly the Gateway hosts' access), has the API server
// check config/expose's and config/gateway-hosts' objects (a server-side
// dry run), then installs a second
// release with `helm install`. No pods run in envtest; creating the objects
// is the test.
func TestApplyToEnvtest(t *testing.T) {
	root := moduleRoot(t)
	helm := testenv.HelmBinary(t, root)
	kubectl := testenv.KubectlBinary(t, root)
	kubeconfig := testenv.StartWithoutCRDs(t, root)
	k := func(args ...string) string {
		return run(t, kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	}

	// The HTTPRoute CRD, so that the API server checks the chart's routes
	// against the Gateway API's own schema and rules.
	k("apply", "--server-side", "-f", httpRouteCRD(t))
	// The Gateway's and cert-manager's Certificate's (the controllers'
	// minimal copy), so that kubectl auth can-i knows their groups.
	k("apply", "--server-side", "-f", filepath.Join(filepath.Dir(httpRouteCRD(t)), "gateway.networking.k8s.io_gateways.yaml"),
		"-f", filepath.Join(root, "controllers", "testdata", "cert-manager", "certificates.yaml"))
	k("wait", "--for=condition=Established", "--timeout=60s", "crd/httproutes.gateway.networking.k8s.io",
		"crd/gateways.gateway.networking.k8s.io", "crd/certificates.cert-manager.io")

	// The Gateway hosts' Role goes to the Gateway's namespace, which is
	// the user's.
	k("create", "namespace", "gateway-system")

	rendered := filepath.Join(t.TempDir(), "linkforge.yaml")
	out := run(t, helm, "template", release, filepath.Join(root, "config", "helm", "linkforge"),
		"--namespace", namespace, "--set", "namespace.create=true",
		"--set", "destinationPolicy.enabled=true", "--set", "networkPolicy.enabled=true",
		"-f", writeValues(t, `
expose:
  httpRoute:
    enabled: true
    hostnames: [go.example.com, "*.go.example.com"]
    parentRefs: [{name: web, namespace: gateway-system, sectionName: https}, {name: internal}]
    annotations: {example.com/owner: links}
  ingress:
    enabled: true
    className: nginx
    hosts: [go.example.com, "*.go.example.com"]
    tls: [{secretName: linkforge-tls, hosts: [go.example.com, "*.go.example.com"]}]
    annotations: {cert-manager.io/cluster-issuer: letsencrypt}
gatewayHosts:
  enabled: true
  gateway: {namespace: gateway-system, name: web}
`))
	if err := os.WriteFile(rendered, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	k("apply", "--server-side", "-f", rendered)
	// config/expose's components, as config/default renders them.
	for _, c := range []string{"httproute", "ingress"} {
		exposed := filepath.Join(t.TempDir(), c+".yaml")
		if err := os.WriteFile(exposed, []byte(run(t, kubectl, "kustomize", defaultWith(t, root, "#components:", "#- ../expose/"+c))), 0o644); err != nil {
			t.Fatal(err)
		}
		k("apply", "--server-side", "--dry-run=server", "--force-conflicts", "-f", exposed)
	}
	// And config/gateway-hosts', enabled as its comment says.
	gatewayHosts := filepath.Join(t.TempDir(), "gateway-hosts.yaml")
	if err := os.WriteFile(gatewayHosts, []byte(run(t, kubectl, "kustomize", gatewayHostsOverlay(t, root, "gateway-system", "web"))), 0o644); err != nil {
		t.Fatal(err)
	}
	k("apply", "--server-side", "--dry-run=server", "--force-conflicts", "-f", gatewayHosts)
	names := strings.Fields(k("get", "-f", rendered, "-o", "name"))
	set := parse(t, []byte(out))
	if len(names) != len(set) {
		t.Errorf("kubectl get -f found %d objects, the chart rendered %d:\n%s", len(names), len(set), strings.Join(names, "\n"))
	}
	k("wait", "--for=condition=Established", "--timeout=60s", "crd/shortlinks.linkforge.io", "crd/destinationdenylists.linkforge.io")
	// Installed with its parameter's CRD, the deny-list policy refuses every
	// ShortLink write ("paramKind ... not yet synced") until the API server
	// has synced the DestinationDenyLists, a moment later.
	eventually(t, 30*time.Second, "the sample ShortLink is admitted", func() (bool, string) {
		out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "apply", "-n", "default",
			"-f", filepath.Join(root, "config", "samples", "shortlink_plain.yaml")).CombinedOutput()
		return err == nil, string(out)
	})

	// The bindings work: each ServiceAccount may do what its role says, and
	// the manager exactly the Gateway hosts' access.
	for _, c := range append([]struct{ sa, verb, resource, ns, want string }{
		{"linkforge-manager", "list", "shortlinks.linkforge.io", "default", "yes"},
		{"linkforge-manager", "update", "shortlinks.linkforge.io --subresource=status", "default", "yes"},
		{"linkforge-redirector", "patch", "shortlinks.linkforge.io --subresource=status", "default", "yes"},
		{"linkforge-manager", "create", "leases.coordination.k8s.io", namespace, "yes"},
		{"linkforge-manager", "create", "leases.coordination.k8s.io", "default", "no"},
		{"linkforge-redirector", "watch", "shortlinks.linkforge.io", "default", "yes"},
		{"linkforge-redirector", "list", "namespaces", "", "yes"},
		{"linkforge-redirector", "delete", "shortlinks.linkforge.io", "default", "no"},
		{"linkforge-manager", "watch", "namespaces", "", "yes"},
		{"linkforge-manager", "list", "destinationdenylists.linkforge.io", "", "yes"},
		{"linkforge-manager", "update", "destinationdenylists.linkforge.io", "", "no"},
	}, gatewayHostsAccess...) {
		args := append([]string{"--kubeconfig", kubeconfig, "auth", "can-i", c.verb}, strings.Fields(c.resource)...)
		args = append(args, "--as", "system:serviceaccount:"+namespace+":"+c.sa)
		if c.ns != "" {
			args = append(args, "-n", c.ns)
		}
		got, _ := exec.Command(kubectl, args...).Output() // exits 1 on "no"
		if strings.TrimSpace(string(got)) != c.want {
			t.Errorf("%s may %s %s in %q: %q, want %q", c.sa, c.verb, c.resource, c.ns, strings.TrimSpace(string(got)), c.want)
		}
	}

	// The chart's admission policy is bound and enforced (a policy takes a
	// moment to be loaded).
	k("create", "namespace", "restricted")
	k("annotate", "namespace", "restricted", "linkforge.io/allowed-hosts=*.example.com")
	link := filepath.Join(t.TempDir(), "link.yaml")
	if err := os.WriteFile(link, []byte("apiVersion: linkforge.io/v1alpha1\nkind: ShortLink\nmetadata: {name: phish, namespace: restricted}\nspec: {url: 'https://evil.example.org/'}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const refused = `ValidatingAdmissionPolicy 'linkforge-allowed-hosts' with binding 'linkforge-allowed-hosts' denied request: host "evil.example.org" is not allowed`
	eventually(t, 30*time.Second, "a ShortLink to a host the namespace does not allow is refused", func() (bool, string) {
		out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "create", "--dry-run=server", "-f", link).CombinedOutput()
		return err != nil && strings.Contains(string(out), refused), string(out)
	})

	// `helm install` of a second release beside the first: its own names,
	// the CRD left to the first.
	run(t, helm, "install", "demo", filepath.Join(root, "config", "helm", "linkforge"),
		"--kubeconfig", kubeconfig, "--namespace", "demo", "--create-namespace", "--set", "crd.enable=false")
	k("get", "-n", "demo", "deployment/demo-linkforge-manager", "deployment/demo-linkforge-redirector",
		"service/demo-linkforge-redirector", "poddisruptionbudget/demo-linkforge-redirector")
	k("get", "clusterrole/demo-linkforge-manager-role", "clusterrolebinding/demo-linkforge-redirector-rolebinding")
	if status := run(t, helm, "status", "demo", "--kubeconfig", kubeconfig, "--namespace", "demo"); !strings.Contains(status, "STATUS: deployed") {
		t.Errorf("helm status demo:\n%s", status)
	}
}

// eventually polls check until it is true, and fails t with what it said
// last if that takes longer than timeout.
func eventually(t *testing.T, timeout time.Duration, what string, check func() (bool, string)) {
	t.Helper()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(timeout); ; <-tick.C {
		ok, last := check()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s; last: %s", what, timeout, last)
		}
	}
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func run(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", filepath.Base(bin), strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return string(out)
}

func helmTemplate(t *testing.T, helm, root string, args ...string) map[string]object {
	t.Helper()
	args = append([]string{"template", release, filepath.Join(root, "config", "helm", "linkforge"), "--namespace", namespace}, args...)
	return parse(t, []byte(run(t, helm, args...)))
}

func kustomizeBuild(t *testing.T, kubectl, dir string) map[string]object {
	t.Helper()
	return parse(t, []byte(run(t, kubectl, "kustomize", dir)))
}

// defaultWith writes config/default's kustomization with the commented
// lines given (each a whole line, such as "#- ../prometheus") enabled into a
// temporary directory and returns it.
func defaultWith(t *testing.T, root string, lines ...string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, "config", "default", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	k := string(src)
	for _, off := range lines {
		if !strings.Contains(k, "\n"+off+"\n") {
			t.Fatalf("config/default/kustomization.yaml has no %q line to enable", off)
		}
		k = strings.Replace(k, "\n"+off+"\n", "\n"+strings.TrimPrefix(off, "#")+"\n", 1)
	}
	dir := t.TempDir()
	// kustomize takes no absolute paths of directories.
	config, err := filepath.Rel(dir, filepath.Join(root, "config"))
	if err != nil {
		t.Fatal(err)
	}
	k = strings.ReplaceAll(k, "- ../", "- "+config+"/")
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// clusterScopedForKustomize are the cluster-scoped kinds kustomize namespaces.
var clusterScopedForKustomize = map[string]bool{"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true}

// parse decodes a multi-document stream into objects keyed by
// apiVersion, kind, namespace and name.
func parse(t *testing.T, data []byte) map[string]object {
	t.Helper()
	set := map[string]object{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var o object
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			return set
		} else if err != nil {
			t.Fatalf("decoding manifests: %v", err)
		}
		if len(o) == 0 {
			continue
		}
		if clusterScopedForKustomize[fmt.Sprint(o["kind"])] {
			// kustomize's namespace transformer does not know these kinds
			// are cluster-scoped and gives them config/default's namespace
			// (kubernetes-sigs/kustomize#6051); the API server ignores a
			// namespace on a cluster-scoped object, and the chart writes none.
			if md, ok := o["metadata"].(map[string]any); ok {
				delete(md, "namespace")
			}
		}
		k := key(o)
		if _, dup := set[k]; dup {
			t.Fatalf("%s twice", k)
		}
		set[k] = o
	}
}

func key(o object) string {
	md, _ := o["metadata"].(map[string]any)
	if ns, ok := md["namespace"]; ok {
		return fmt.Sprintf("%v %v %v/%v", o["apiVersion"], o["kind"], ns, md["name"])
	}
	return fmt.Sprintf("%v %v %v", o["apiVersion"], o["kind"], md["name"])
}

func name(o object) string {
	md, _ := o["metadata"].(map[string]any)
	return fmt.Sprint(md["name"])
}

func countKind(set map[string]object, kind string) int {
	n := 0
	for _, o := range set {
		if o["kind"] == kind {
			n++
		}
	}
	return n
}

// compareSets fails for every object only one side has and every difference
// in the objects both have, after normalizing both.
func compareSets(t *testing.T, want, got map[string]object) {
	t.Helper()
	for _, k := range sortedKeys(want) {
		g, ok := got[k]
		if !ok {
			t.Errorf("the chart does not render %s", k)
			continue
		}
		if d := diff("", normalize(want[k]), normalize(g)); len(d) > 0 {
			t.Errorf("%s differs (- config/default, + chart):\n%s", k, strings.Join(d, "\n"))
		}
	}
	for _, k := range sortedKeys(got) {
		if _, ok := want[k]; !ok {
			t.Errorf("the chart renders %s, config/default does not", k)
		}
	}
}

// normalize returns a copy of o without the labels and annotations Helm
// adds, with container args sorted (flag order does not matter) and env
// sorted by name.
func normalize(o object) object {
	c := deepCopy(o)
	md, _ := c["metadata"].(map[string]any)
	for field, drop := range map[string][]string{"labels": helmLabels, "annotations": helmAnnotations} {
		m, _ := md[field].(map[string]any)
		for _, k := range drop {
			delete(m, k)
		}
		if m != nil && len(m) == 0 {
			delete(md, field)
		}
	}
	if c["kind"] == "Deployment" {
		spec, _ := c["spec"].(map[string]any)
		tmpl, _ := spec["template"].(map[string]any)
		pod, _ := tmpl["spec"].(map[string]any)
		containers, _ := pod["containers"].([]any)
		for _, ct := range containers {
			ct, _ := ct.(map[string]any)
			if args, ok := ct["args"].([]any); ok {
				sort.Slice(args, func(i, j int) bool { return fmt.Sprint(args[i]) < fmt.Sprint(args[j]) })
			}
			if env, ok := ct["env"].([]any); ok {
				sort.SliceStable(env, func(i, j int) bool {
					return fmt.Sprint(env[i].(map[string]any)["name"]) < fmt.Sprint(env[j].(map[string]any)["name"])
				})
			}
		}
	}
	return c
}

func deepCopy(o object) object {
	b, err := json.Marshal(o)
	if err != nil {
		panic(err)
	}
	var c object
	if err := json.Unmarshal(b, &c); err != nil {
		panic(err)
	}
	return c
}

// diff lists the paths where a and b differ.
func diff(path string, a, b any) []string {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		var out []string
		keys := sortedKeys(av)
		for k := range bv {
			if _, ok := av[k]; !ok {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			x, inA := av[k]
			y, inB := bv[k]
			switch {
			case !inA:
				out = append(out, fmt.Sprintf("+ %s.%s: %s", path, k, compact(y)))
			case !inB:
				out = append(out, fmt.Sprintf("- %s.%s: %s", path, k, compact(x)))
			default:
				out = append(out, diff(path+"."+k, x, y)...)
			}
		}
		return out
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			break
		}
		var out []string
		for i := range av {
			out = append(out, diff(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i])...)
		}
		return out
	}
	if reflect.DeepEqual(a, b) {
		return nil
	}
	return []string{fmt.Sprintf("- %s: %s", path, compact(a)), fmt.Sprintf("+ %s: %s", path, compact(b))}
}

func compact(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestClickEvents checks the chart's redirector.events values: off by
// default (no --events-* flag, nothing mounted); with sinks, the flags the
// redirector binds (parsed with its own events.Flags) and the credentials'
// Secret mounted read-only, each key the file of its flag; and a clear
// failure for credentials without a sink, keys without their Secret, or
// the events' own country header of before (one header now:
// redirector.countryHeader, TestRoutingHeaders).
func TestClickEvents(t *testing.T) {
	root := moduleRoot(t)
	helm := testenv.HelmBinary(t, root)
	pod := func(set map[string]object) (map[string]any, map[string]any) {
		d := set["apps/v1 Deployment "+namespace+"/linkforge-redirector"]
		p := d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
		return p, p["containers"].([]any)[0].(map[string]any)
	}
	eventArgs := func(ct map[string]any) []string {
		var out []string
		for _, a := range ct["args"].([]any) {
			if s := a.(string); strings.HasPrefix(s, "--events-") {
				out = append(out, s)
			}
		}
		return out
	}

	t.Run("off by default", func(t *testing.T) {
		p, ct := pod(helmTemplate(t, helm, root))
		if a := eventArgs(ct); len(a) != 0 || p["volumes"] != nil || ct["volumeMounts"] != nil {
			t.Errorf("events flags %v, volumes %v, mounts %v; want none", a, p["volumes"], ct["volumeMounts"])
		}
	})

	t.Run("on", func(t *testing.T) {
		p, ct := pod(helmTemplate(t, helm, root,
			"--set", "redirector.events.cloudEvents.url=https://events.example.com/linkforge",
			"--set", "redirector.events.otlp.endpoint=http://otel-collector.observability:4318",
			"--set", "redirector.events.otlp.gzip=true",
			"--set", "redirector.events.credentials.secretName=linkforge-events",
			"--set", "redirector.events.credentials.signingKey=signing-key",
			"--set", "redirector.events.credentials.otlpBearerToken=otlp-token",
			"--set", "redirector.events.buffer=50000"))
		var f events.Flags
		fs := flag.NewFlagSet("redirector", flag.ContinueOnError)
		f.Bind(fs)
		if err := fs.Parse(eventArgs(ct)); err != nil {
			t.Fatalf("the redirector refuses the chart's flags %v: %v", eventArgs(ct), err)
		}
		want := events.Flags{
			CloudEventsURL: "https://events.example.com/linkforge", SigningKeyFile: "/etc/linkforge/events/signing-key",
			OTLPEndpoint: "http://otel-collector.observability:4318", OTLPBearerTokenFile: "/etc/linkforge/events/otlp-token", OTLPGzip: true,
			Buffer: 50000, MaxBatch: events.DefaultMaxBatch, FlushInterval: events.DefaultFlushInterval,
		}
		if f != want {
			t.Errorf("flags %+v\nwant  %+v", f, want)
		}
		for _, c := range []struct {
			what      string
			want, got any
		}{
			{"volumes", decodeOne(t, `[{name: events-credentials, secret: {secretName: linkforge-events}}]`), p["volumes"]},
			{"volumeMounts", decodeOne(t, `[{name: events-credentials, mountPath: /etc/linkforge/events, readOnly: true}]`), ct["volumeMounts"]},
		} {
			if d := diff(c.what, c.want, c.got); len(d) > 0 {
				t.Errorf("%s differ (- want, + got):\n%s", c.what, strings.Join(d, "\n"))
			}
		}
	})

	t.Run("OTLP logs endpoint alone", func(t *testing.T) {
		_, ct := pod(helmTemplate(t, helm, root, "--set", "redirector.events.otlp.logsEndpoint=https://ingest.example.com/api/v2/otlp/logs"))
		var f events.Flags
		fs := flag.NewFlagSet("redirector", flag.ContinueOnError)
		f.Bind(fs)
		if err := fs.Parse(eventArgs(ct)); err != nil {
			t.Fatalf("the redirector refuses the chart's flags %v: %v", eventArgs(ct), err)
		}
		if c, err := f.Config(); err != nil || f.OTLPLogsEndpoint != "https://ingest.example.com/api/v2/otlp/logs" || f.OTLPEndpoint != "" || !c.Enabled() {
			t.Errorf("flags %+v (%v): want --events-otlp-logs-endpoint alone, events on", f, err)
		}
	})

	for _, c := range []struct {
		set  []string
		want string
	}{
		{[]string{"redirector.events.countryHeader=CF-IPCountry"}, "redirector.events.countryHeader is now redirector.countryHeader"},
		{[]string{"redirector.events.credentials.secretName=s"}, "credentials are set but no sink"},
		{[]string{"redirector.events.otlp.endpoint=http://o:4318", "redirector.events.credentials.bearerToken=t"}, "the keys need secretName"},
	} {
		args := []string{"template", release, filepath.Join(root, "config", "helm", "linkforge")}
		for _, s := range c.set {
			args = append(args, "--set", s)
		}
		out, err := exec.Command(helm, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("helm template --set %v: %v, %s; want a failure with %q", c.set, err, tail(string(out), 300), c.want)
		}
	}
}

// TestRoutingHeaders: the routing values give the redirector's
// --country-header (read by the countries conditions of rules and sent in
// click events), --client-address-header and --trusted-proxies, and
// nothing by default; a header without trusted proxies, or proxies
// without a header, fail with a message.
func TestRoutingHeaders(t *testing.T) {
	root := moduleRoot(t)
	helm := testenv.HelmBinary(t, root)
	headerArgs := func(set map[string]object) []string {
		return redirectorArgs(set, "--country-header", "--client-address-header", "--trusted-proxies")
	}
	if a := headerArgs(helmTemplate(t, helm, root)); len(a) != 0 {
		t.Errorf("default header flags %v, want none", a)
	}
	got := headerArgs(helmTemplate(t, helm, root,
		"--set", "redirector.countryHeader=CF-IPCountry",
		"--set", "redirector.clientAddressHeader=X-Forwarded-For",
		"--set", "redirector.trustedProxies={10.244.0.0/16,192.0.2.10}",
		"--set", "redirector.events.otlp.endpoint=http://otel:4318"))
	if want := []string{"--country-header=CF-IPCountry", "--client-address-header=X-Forwarded-For", "--trusted-proxies=10.244.0.0/16,192.0.2.10"}; !slices.Equal(got, want) {
		t.Errorf("header flags %v, want %v", got, want)
	}
	for set, want := range map[string]string{
		"redirector.clientAddressHeader=X-Real-IP": "redirector.clientAddressHeader needs redirector.trustedProxies",
		"redirector.trustedProxies={10.0.0.0/8}":   "redirector.trustedProxies needs redirector.clientAddressHeader",
	} {
		out, err := exec.Command(helm, "template", release, filepath.Join(root, "config", "helm", "linkforge"), "--set", set).CombinedOutput()
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("helm template --set %s: %v, %s; want a failure with %q", set, err, tail(string(out), 300), want)
		}
	}
}

// TestAuthValues: redirector.auth gives the redirector's sign-in gate
// flags (--auth-user-header, --auth-groups-header, --auth-proxies,
// --auth-sign-in-url), none by default, and a header without proxies, or
// proxies or groups without the user header, fail as the flags would.
func TestAuthValues(t *testing.T) {
	root := moduleRoot(t)
	helm := testenv.HelmBinary(t, root)
	authArgs := func(set map[string]object) []string { return redirectorArgs(set, "--auth-") }
	if a := authArgs(helmTemplate(t, helm, root)); len(a) != 0 {
		t.Errorf("default auth flags %v, want none", a)
	}
	got := authArgs(helmTemplate(t, helm, root,
		"--set", "redirector.auth.userHeader=X-Forwarded-User",
		"--set", "redirector.auth.groupsHeader=X-Forwarded-Groups",
		"--set", "redirector.auth.proxies={10.244.3.0/24,192.0.2.7}",
		"--set", "redirector.auth.signInURL=https://auth.example.com/oauth2/start?rd={url}"))
	want := []string{"--auth-user-header=X-Forwarded-User", "--auth-groups-header=X-Forwarded-Groups",
		"--auth-proxies=10.244.3.0/24,192.0.2.7", "--auth-sign-in-url=https://auth.example.com/oauth2/start?rd={url}"}
	if !slices.Equal(got, want) {
		t.Errorf("auth flags %v, want %v", got, want)
	}
	for set, want := range map[string]string{
		"redirector.auth.userHeader=X-Forwarded-User":     "redirector.auth.userHeader needs redirector.auth.proxies",
		"redirector.auth.proxies={10.0.0.0/8}":            "need redirector.auth.userHeader",
		"redirector.auth.groupsHeader=X-Forwarded-Groups": "need redirector.auth.userHeader",
	} {
		out, err := exec.Command(helm, "template", release, filepath.Join(root, "config", "helm", "linkforge"), "--set", set).CombinedOutput()
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("helm template --set %s: %v, %s; want a failure with %q", set, err, tail(string(out), 300), want)
		}
	}
}

// redirectorArgs are the redirector container's args that start with one
// of prefixes, in their order.
func redirectorArgs(set map[string]object, prefixes ...string) []string {
	return deploymentArgs(set, "linkforge-redirector", prefixes...)
}

// deploymentArgs are the args of the first container of the Deployment
// name that start with one of prefixes, in their order.
func deploymentArgs(set map[string]object, name string, prefixes ...string) []string {
	d := set["apps/v1 Deployment "+namespace+"/"+name]
	ct := d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	var out []string
	for _, a := range ct["args"].([]any) {
		s := a.(string)
		for _, p := range prefixes {
			if strings.HasPrefix(s, p) {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
