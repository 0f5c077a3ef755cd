package chart

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/linkforge/linkforge/internal/testenv"
)

// gatewayRules are the rules of config/gateway-hosts' two Roles: in the
// Gateway's namespace, that one Gateway and Certificates; in the
// redirector's, the HTTPRoutes. name is the Gateway's name.
func gatewayRules(name string) (gateway, routes string) {
	return `[{apiGroups: [gateway.networking.k8s.io], resources: [gateways], resourceNames: [` + name + `], verbs: [get, list, watch, patch]},
		{apiGroups: [cert-manager.io], resources: [certificates], verbs: [get]}]`,
		`[{apiGroups: [gateway.networking.k8s.io], resources: [httproutes], verbs: [create, delete, list, patch, watch]}]`
}

// gatewayHostsOverlay writes an overlay on top of config/default with a
// copy of config/gateway-hosts, its placeholders replaced by the Gateway
// gwNamespace/gwName, as the component's comment says to enable it; it
// returns the overlay's directory.
func gatewayHostsOverlay(t *testing.T, root, gwNamespace, gwName string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(root, "config", "gateway-hosts")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "gateway-hosts"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		s := strings.NewReplacer("GATEWAY_NAMESPACE", gwNamespace, "GATEWAY_NAME", gwName).Replace(string(b))
		if err := os.WriteFile(filepath.Join(dir, "gateway-hosts", e.Name()), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base, err := filepath.Rel(dir, filepath.Join(root, "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	k := "resources:\n- " + base + "\ncomponents:\n- gateway-hosts\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// gatewayHostsValues are the values that turn the Gateway hosts on for the
// Gateway gateway-system/web.
const gatewayHostsValues = `{gatewayHosts: {enabled: true, gateway: {namespace: gateway-system, name: web}}}`

// TestGatewayHostsValues renders the chart with each gatewayHosts value and
// checks the manager's --gateway flags and the Roles and RoleBindings that
// give its ServiceAccount the Gateway hosts' access (or that there are
// none), whatever the release's name and namespace.
func TestGatewayHostsValues(t *testing.T) {
	root := moduleRoot(t)
	helm := testenv.HelmBinary(t, root)
	for _, c := range []struct {
		name, release, namespace, values string
		fullname                         string   // the objects' name prefix
		gwNamespace, gwName              string   // the Gateway ("": no Roles)
		args                             []string // the manager's --gateway flags
	}{
		{name: "off by default", release: release, namespace: namespace, fullname: "linkforge"},
		{name: "disabled with a Gateway", release: release, namespace: namespace, fullname: "linkforge",
			values: `{gatewayHosts: {enabled: false, gateway: {namespace: gateway-system, name: web}}}`},
		{
			name: "on, the defaults", release: release, namespace: namespace, values: gatewayHostsValues,
			fullname: "linkforge", gwNamespace: "gateway-system", gwName: "web",
			args: []string{"--gateway=gateway-system/web", "--gateway-certificate-secret=linkforge-{host}",
				"--gateway-redirector-service=linkforge-system/linkforge-redirector", "--gateway-redirector-port=80", "--gateway-listener-port=443"},
		},
		{
			name: "another release and namespace, the Service's port, a Secret and a listener port", release: "demo", namespace: "links",
			values: `{redirector: {service: {port: 8080}}, gatewayHosts: {enabled: true, gateway: {namespace: infra, name: public.gw},
				certificateSecret: "tls-{host}.links", listenerPort: 8443}}`,
			fullname: "demo-linkforge", gwNamespace: "infra", gwName: "public.gw",
			args: []string{"--gateway=infra/public.gw", "--gateway-certificate-secret=tls-{host}.links",
				"--gateway-redirector-service=links/demo-linkforge-redirector", "--gateway-redirector-port=8080", "--gateway-listener-port=8443"},
		},
		{
			name: "the Gateway in the release namespace, fullnameOverride", release: release, namespace: namespace,
			values:   `{fullnameOverride: go, gatewayHosts: {enabled: true, gateway: {namespace: linkforge-system, name: web}, listenerPort: 443.0}}`,
			fullname: "go", gwNamespace: namespace, gwName: "web",
			args: []string{"--gateway=linkforge-system/web", "--gateway-certificate-secret=linkforge-{host}",
				"--gateway-redirector-service=linkforge-system/go-redirector", "--gateway-redirector-port=80", "--gateway-listener-port=443"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			set := parse(t, []byte(run(t, helm, "template", c.release, filepath.Join(root, "config", "helm", "linkforge"),
				"--namespace", c.namespace, "-f", writeValues(t, c.values))))
			d := set["apps/v1 Deployment "+c.namespace+"/"+c.fullname+"-manager"]
			if d == nil {
				t.Fatalf("no manager Deployment %s/%s-manager", c.namespace, c.fullname)
			}
			var args []string
			for _, a := range dig(d, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)["args"].([]any) {
				if s := a.(string); strings.HasPrefix(s, "--gateway") {
					args = append(args, s)
				}
			}
			if !slices.Equal(args, c.args) {
				t.Errorf("the manager's --gateway flags %q, want %q", args, c.args)
			}

			// The Roles and RoleBindings of the Gateway hosts, and no other.
			want := map[string]any{}
			if c.gwName != "" {
				gw, routes := gatewayRules(c.gwName)
				subjects := decodeOne(t, `[{kind: ServiceAccount, name: `+c.fullname+`-manager, namespace: `+c.namespace+`}]`)
				for _, r := range []struct{ ns, name, rules string }{
					{c.gwNamespace, c.fullname + "-manager-gateway", gw},
					{c.namespace, c.fullname + "-manager-routes", routes},
				} {
					want["rbac.authorization.k8s.io/v1 Role "+r.ns+"/"+r.name] = decodeOne(t, r.rules)
					want["rbac.authorization.k8s.io/v1 RoleBinding "+r.ns+"/"+r.name] = map[string]any{
						"roleRef":  decodeOne(t, `{apiGroup: rbac.authorization.k8s.io, kind: Role, name: `+r.name+`}`),
						"subjects": subjects,
					}
				}
			}
			got := map[string]any{}
			for k, o := range set {
				if n := name(o); !strings.HasSuffix(n, "-manager-gateway") && !strings.HasSuffix(n, "-manager-routes") {
					continue
				}
				switch o["kind"] {
				case "Role":
					got[k] = o["rules"]
				case "RoleBinding":
					got[k] = map[string]any{"roleRef": o["roleRef"], "subjects": o["subjects"]}
				}
			}
			if d := diff("", want, got); len(d) > 0 {
				t.Errorf("the Gateway hosts' Roles and RoleBindings differ (- want, + got):\n%s", strings.Join(d, "\n"))
			}
		})
	}
}

// TestGatewayHostsRefusals: each bad gatewayHosts value fails the render
// with a message naming the value and what is wanted, as the manager would
// refuse its flag.
func TestGatewayHostsRefusals(t *testing.T) {
	root := moduleRoot(t)
	helm := testenv.HelmBinary(t, root)
	const gw = `gateway: {namespace: gateway-system, name: web}`
	for _, c := range []struct {
		name, values, want string
	}{
		{"without a Gateway", `{gatewayHosts: {enabled: true}}`,
			"gatewayHosts.gateway.name is empty: name the Gateway"},
		{"without the Gateway's name", `{gatewayHosts: {enabled: true, gateway: {namespace: gateway-system}}}`,
			"gatewayHosts.gateway.name is empty"},
		{"without the Gateway's namespace", `{gatewayHosts: {enabled: true, gateway: {name: web}}}`,
			"gatewayHosts.gateway.namespace is empty: name the Gateway's namespace"},
		{"the Gateway not a map", `{gatewayHosts: {enabled: true, gateway: gateway-system/web}}`,
			"gatewayHosts.gateway: gateway-system/web: want {namespace: <the Gateway's namespace>, name: <its name>}"},
		{"a bad namespace", `{gatewayHosts: {enabled: true, gateway: {namespace: Gateway_System, name: web}}}`,
			"gatewayHosts.gateway.namespace: Gateway_System: want a namespace's name"},
		{"a namespace with a dot", `{gatewayHosts: {enabled: true, gateway: {namespace: gateway.system, name: web}}}`,
			"gatewayHosts.gateway.namespace: gateway.system: want a namespace's name"},
		{"a namespace of 64 characters", `{gatewayHosts: {enabled: true, gateway: {namespace: ` + strings.Repeat("n", 64) + `, name: web}}}`,
			"gatewayHosts.gateway.namespace: " + strings.Repeat("n", 64) + ": want a namespace's name"},
		{"a bad name", `{gatewayHosts: {enabled: true, gateway: {namespace: gateway-system, name: "web/https"}}}`,
			"gatewayHosts.gateway.name: web/https: want the Gateway's name"},
		{"a name not a string", `{gatewayHosts: {enabled: true, gateway: {namespace: gateway-system, name: 443}}}`,
			"gatewayHosts.gateway.name: 443: want the Gateway's name"},
		{"a name of 254 characters", `{gatewayHosts: {enabled: true, gateway: {namespace: gateway-system, name: ` + strings.Repeat("g", 254) + `}}}`,
			"want the Gateway's name, a DNS name"},
		{"a Secret without {host}", `{gatewayHosts: {enabled: true, ` + gw + `, certificateSecret: linkforge-tls}}`,
			`gatewayHosts.certificateSecret: "linkforge-tls" has no {host}: every host needs a Secret of its own`},
		{"a Secret with capitals", `{gatewayHosts: {enabled: true, ` + gw + `, certificateSecret: "TLS-{host}"}}`,
			`gatewayHosts.certificateSecret: "TLS-{host}" makes "TLS-a-example" for the host a.example, not a Secret name`},
		{"a Secret ending in a dash", `{gatewayHosts: {enabled: true, ` + gw + `, certificateSecret: "{host}-"}}`,
			`makes "a-example-" for the host a.example, not a Secret name`},
		{"a Secret not a string", `{gatewayHosts: {enabled: true, ` + gw + `, certificateSecret: [a]}}`,
			"gatewayHosts.certificateSecret: [a]: want a Secret name with {host} in it"},
		{"listener port 0", `{gatewayHosts: {enabled: true, ` + gw + `, listenerPort: 0}}`,
			"gatewayHosts.listenerPort: 0 is not a port (1-65535)"},
		{"listener port 65536", `{gatewayHosts: {enabled: true, ` + gw + `, listenerPort: 65536}}`,
			"gatewayHosts.listenerPort: 65536 is not a port (1-65535)"},
		{"listener port 443.5", `{gatewayHosts: {enabled: true, ` + gw + `, listenerPort: 443.5}}`,
			"gatewayHosts.listenerPort: 443.5 is not a port (1-65535)"},
		{"listener port a string", `{gatewayHosts: {enabled: true, ` + gw + `, listenerPort: "443"}}`,
			`gatewayHosts.listenerPort: "443" is a string: want a number`},
		{"the Service's port out of range", `{redirector: {service: {port: 70000}}, gatewayHosts: {enabled: true, ` + gw + `}}`,
			"redirector.service.port: 70000 is not a port (1-65535): want the redirect Service's port"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := exec.Command(helm, "template", release, filepath.Join(root, "config", "helm", "linkforge"), "-f", writeValues(t, c.values)).CombinedOutput()
			if err == nil || !strings.Contains(string(out), c.want) {
				t.Errorf("helm template with %s: %v, %s; want a failure with %q", c.values, err, tail(string(out), 400), c.want)
			}
		})
	}
}

// TestGatewayHostsMatchKustomize: config/gateway-hosts, enabled from an
// overlay on top of config/default for the Gateway gateway-system/web,
// renders what the chart renders with gatewayHosts on for that Gateway: the
// same Roles and RoleBindings (names, namespaces, rules, subjects) and
// everything else the same, but for the chart's --gateway-* flags beyond
// --gateway, each the manager's default for the release linkforge.
func TestGatewayHostsMatchKustomize(t *testing.T) {
	root := moduleRoot(t)
	helm := testenv.HelmBinary(t, root)
	kubectl := testenv.KubectlBinary(t, root)
	want := kustomizeBuild(t, kubectl, gatewayHostsOverlay(t, root, "gateway-system", "web"))
	got := helmTemplate(t, helm, root, "--set", "namespace.create=true", "-f", writeValues(t, gatewayHostsValues))
	for _, k := range []string{
		"rbac.authorization.k8s.io/v1 Role gateway-system/linkforge-manager-gateway",
		"rbac.authorization.k8s.io/v1 RoleBinding gateway-system/linkforge-manager-gateway",
		"rbac.authorization.k8s.io/v1 Role " + namespace + "/linkforge-manager-routes",
		"rbac.authorization.k8s.io/v1 RoleBinding " + namespace + "/linkforge-manager-routes",
	} {
		if want[k] == nil {
			t.Errorf("config/gateway-hosts renders no %s", k)
		}
		if got[k] == nil {
			t.Errorf("the chart renders no %s", k)
		}
	}
	if a := deploymentArgs(want, "linkforge-manager", "--gateway"); !slices.Equal(a, []string{"--gateway=gateway-system/web"}) {
		t.Errorf("config/gateway-hosts: the manager's --gateway flags %q, want only --gateway=gateway-system/web", a)
	}
	// The flags the component leaves to their defaults.
	defaults := []string{"--gateway-certificate-secret=linkforge-{host}", "--gateway-redirector-service=" + namespace + "/linkforge-redirector",
		"--gateway-redirector-port=80", "--gateway-listener-port=443"}
	manager := got["apps/v1 Deployment "+namespace+"/linkforge-manager"]
	ct := dig(manager, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)
	var args []any
	for _, a := range ct["args"].([]any) {
		if !slices.Contains(defaults, a.(string)) {
			args = append(args, a)
		}
	}
	if n := len(ct["args"].([]any)) - len(args); n != len(defaults) {
		t.Errorf("the chart's manager has %d of the flags %q, want all %d", n, defaults, len(defaults))
	}
	ct["args"] = args
	compareSets(t, want, got)
}

// gatewayHostsAccess are the checks of the manager's Gateway hosts access
// (kubectl auth can-i, as TestApplyToEnvtest runs them) with the Gateway
// gateway-system/web: exactly config/gateway-hosts' rules.
var gatewayHostsAccess = []struct{ sa, verb, resource, ns, want string }{
	{"linkforge-manager", "patch", "gateways.gateway.networking.k8s.io/web", "gateway-system", "yes"},
	{"linkforge-manager", "watch", "gateways.gateway.networking.k8s.io/web", "gateway-system", "yes"},
	{"linkforge-manager", "update", "gateways.gateway.networking.k8s.io/web", "gateway-system", "no"},
	{"linkforge-manager", "patch", "gateways.gateway.networking.k8s.io/other", "gateway-system", "no"},
	{"linkforge-manager", "get", "certificates.cert-manager.io/linkforge-go-team-a-example", "gateway-system", "yes"},
	{"linkforge-manager", "list", "certificates.cert-manager.io", "gateway-system", "no"},
	{"linkforge-manager", "get", "secrets/linkforge-go-team-a-example", "gateway-system", "no"},
	{"linkforge-manager", "create", "httproutes.gateway.networking.k8s.io", namespace, "yes"},
	{"linkforge-manager", "delete", "httproutes.gateway.networking.k8s.io/linkforge-go-team-a-example", namespace, "yes"},
	{"linkforge-manager", "update", "httproutes.gateway.networking.k8s.io/linkforge-go-team-a-example", namespace, "no"},
	{"linkforge-manager", "create", "httproutes.gateway.networking.k8s.io", "gateway-system", "no"},
	{"linkforge-manager", "patch", "gateways.gateway.networking.k8s.io/web", namespace, "no"},
	{"linkforge-redirector", "patch", "gateways.gateway.networking.k8s.io/web", "gateway-system", "no"},
	{"linkforge-redirector", "create", "httproutes.gateway.networking.k8s.io", namespace, "no"},
}
