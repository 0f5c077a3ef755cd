package chart

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/linkforge/linkforge/internal/testenv"
)

// The keys of the exposure objects of the release linkforge.
const (
	routeKey   = "gateway.networking.k8s.io/v1 HTTPRoute " + namespace + "/linkforge-redirector"
	ingressKey = "networking.k8s.io/v1 Ingress " + namespace + "/linkforge-redirector"
)

// gatewayAPIVersion is the Gateway API whose HTTPRoute CRD the rendered
// routes are checked against (the one the manager builds on).
const gatewayAPIVersion = "v1.6.3"

// baseURLArgs are the two flags the public base URL gives: the manager's
// and the redirector's.
func baseURLArgs(set map[string]object) []string {
	return append(deploymentArgs(set, "linkforge-manager", "--redirect-base-url"),
		deploymentArgs(set, "linkforge-redirector", "--public-base-url")...)
}

// wantBaseURL is baseURLArgs for base ("": no flag).
func wantBaseURL(base string) []string {
	if base == "" {
		return nil
	}
	return []string{"--redirect-base-url=" + base, "--public-base-url=" + base}
}

// writeValues writes a values file and returns its path, which has no
// comma (helm's -f splits its argument at commas, and t.TempDir is named
// after the test).
func writeValues(t *testing.T, values string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "values")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	p := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(p, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestExposeValues renders the chart with each expose value and checks the
// HTTPRoute and the Ingress (their spec and annotations, or that there is
// none) and the public base URL both Deployments get from them.
func TestExposeValues(t *testing.T) {
	root := moduleRoot(t)
	helm := testenv.HelmBinary(t, root)
	route := func(parents, hosts string, port int) string {
		return `{parentRefs: ` + parents + `, hostnames: ` + hosts + `,
			rules: [{matches: [{path: {type: PathPrefix, value: /}}], backendRefs: [{name: linkforge-redirector, port: ` + jsonInt(port) + `}]}]}`
	}
	rule := func(host string) string {
		return `{host: ` + host + `, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: linkforge-redirector, port: {number: 80}}}}]}}`
	}
	for _, c := range []struct {
		name, values string
		// route and ingress are the objects' spec ("": none rendered);
		// routeAnnotations and ingressAnnotations their annotations.
		route, ingress                       string
		routeAnnotations, ingressAnnotations string
		base                                 string // the public base URL ("": none)
	}{
		{name: "off by default"},
		{name: "disabled with hosts", values: `
expose:
  httpRoute: {enabled: false, hostnames: [go.example.com], parentRefs: [{name: web}]}
  ingress: {enabled: false, hosts: [go.example.com]}`},
		{
			name: "HTTPRoute, one Gateway in the release namespace",
			values: `
expose:
  httpRoute: {enabled: true, hostnames: [go.example.com], parentRefs: [{name: web}]}`,
			route: route(`[{name: web}]`, `[go.example.com]`, 80),
			base:  "https://go.example.com",
		},
		{
			name: "HTTPRoute, two listeners, a wildcard after the first host, annotations",
			values: `
expose:
  httpRoute:
    enabled: true
    hostnames: [go.example.com, "*.go.example.com"]
    parentRefs:
    - {name: web, namespace: gateway-system, sectionName: https}
    - {name: internal, namespace: gateway-system}
    annotations: {example.com/owner: links}`,
			route:            route(`[{name: web, namespace: gateway-system, sectionName: https}, {name: internal, namespace: gateway-system}]`, `[go.example.com, "*.go.example.com"]`, 80),
			routeAnnotations: `{example.com/owner: links}`,
			base:             "https://go.example.com",
		},
		{
			name: "HTTPRoute over plain HTTP, to the Service's own port",
			values: `
redirector: {service: {port: 8080}}
expose:
  httpRoute: {enabled: true, scheme: http, hostnames: [links.internal], parentRefs: [{name: web}]}`,
			route: route(`[{name: web}]`, `[links.internal]`, 8080),
			base:  "http://links.internal",
		},
		{
			name: "baseURL wins over the first host",
			values: `
baseURL: https://l.example.com/s
expose:
  httpRoute: {enabled: true, hostnames: ["*.example.com"], parentRefs: [{name: web}]}`,
			route: route(`[{name: web}]`, `["*.example.com"]`, 80),
			base:  "https://l.example.com/s",
		},
		{
			name: "Ingress without TLS",
			values: `
expose:
  ingress: {enabled: true, hosts: [go.example.com]}`,
			ingress: `{rules: [` + rule("go.example.com") + `]}`,
			base:    "http://go.example.com",
		},
		{
			name: "Ingress with cert-manager, a class and two hosts",
			values: `
expose:
  ingress:
    enabled: true
    className: nginx
    hosts: [go.example.com, go.example.org]
    tls:
    - {secretName: linkforge-tls, hosts: [go.example.com, go.example.org]}
    annotations: {cert-manager.io/cluster-issuer: letsencrypt}`,
			ingress: `{ingressClassName: nginx, tls: [{hosts: [go.example.com, go.example.org], secretName: linkforge-tls}],
				rules: [` + rule("go.example.com") + `, ` + rule("go.example.org") + `]}`,
			ingressAnnotations: `{cert-manager.io/cluster-issuer: letsencrypt}`,
			base:               "https://go.example.com",
		},
		{
			name: "Ingress, TLS for the second host only: the first is http",
			values: `
expose:
  ingress: {enabled: true, hosts: [go.example.com, go.example.org], tls: [{secretName: org, hosts: [go.example.org]}]}`,
			ingress: `{tls: [{hosts: [go.example.org], secretName: org}], rules: [` + rule("go.example.com") + `, ` + rule("go.example.org") + `]}`,
			base:    "http://go.example.com",
		},
		{
			name: "Ingress, a wildcard certificate covers the first host, the controller's default certificate",
			values: `
expose:
  ingress: {enabled: true, hosts: [go.example.com, "*.example.com"], tls: [{hosts: ["*.example.com"]}]}`,
			ingress: `{tls: [{hosts: ["*.example.com"]}], rules: [` + rule("go.example.com") + `, ` + rule(`"*.example.com"`) + `]}`,
			base:    "https://go.example.com",
		},
		{
			name: "both, the same first host",
			values: `
expose:
  httpRoute: {enabled: true, hostnames: [go.example.com], parentRefs: [{name: web}]}
  ingress: {enabled: true, hosts: [go.example.com], tls: [{secretName: t, hosts: [go.example.com]}]}`,
			route:   route(`[{name: web}]`, `[go.example.com]`, 80),
			ingress: `{tls: [{hosts: [go.example.com], secretName: t}], rules: [` + rule("go.example.com") + `]}`,
			base:    "https://go.example.com",
		},
		{
			name: "both, different hosts, baseURL says which",
			values: `
baseURL: https://go.example.org
expose:
  httpRoute: {enabled: true, hostnames: [go.example.org], parentRefs: [{name: web}]}
  ingress: {enabled: true, hosts: [go.example.com]}`,
			route:   route(`[{name: web}]`, `[go.example.org]`, 80),
			ingress: `{rules: [` + rule("go.example.com") + `]}`,
			base:    "https://go.example.org",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			set := helmTemplate(t, helm, root, "-f", writeValues(t, c.values))
			for _, o := range []struct {
				key, kind, spec, annotations string
			}{
				{routeKey, "HTTPRoute", c.route, c.routeAnnotations},
				{ingressKey, "Ingress", c.ingress, c.ingressAnnotations},
			} {
				got, ok := set[o.key]
				if n := countKind(set, o.kind); n != map[bool]int{false: 0, true: 1}[o.spec != ""] || ok != (o.spec != "") {
					t.Errorf("%d %ss rendered (%s: %v), want %v", n, o.kind, o.key, ok, o.spec != "")
					continue
				}
				if !ok {
					continue
				}
				if d := diff("spec", decodeOne(t, o.spec), got["spec"]); len(d) > 0 {
					t.Errorf("the %s's spec differs (- want, + got):\n%s", o.kind, strings.Join(d, "\n"))
				}
				var want any
				if o.annotations != "" {
					want = decodeOne(t, o.annotations)
				}
				if d := diff("annotations", want, got["metadata"].(map[string]any)["annotations"]); len(d) > 0 {
					t.Errorf("the %s's annotations differ (- want, + got):\n%s", o.kind, strings.Join(d, "\n"))
				}
			}
			if got := baseURLArgs(set); !slices.Equal(got, wantBaseURL(c.base)) {
				t.Errorf("base URL flags %q, want %q", got, wantBaseURL(c.base))
			}
		})
	}
}

func jsonInt(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestExposeRefusals: each bad expose value fails the render with a message
// naming the value and what is wanted.
func TestExposeRefusals(t *testing.T) {
	root := moduleRoot(t)
	helm := testenv.HelmBinary(t, root)
	const web = `parentRefs: [{name: web}]`
	for _, c := range []struct {
		name, values, want string
	}{
		{"HTTPRoute without hosts", `{expose: {httpRoute: {enabled: true, ` + web + `}}}`,
			"expose.httpRoute.hostnames is empty: name the hosts to serve"},
		{"HTTPRoute, hosts not a list", `{expose: {httpRoute: {enabled: true, hostnames: go.example.com, ` + web + `}}}`,
			"expose.httpRoute.hostnames: go.example.com is not a list"},
		{"HTTPRoute, 17 hosts", `{expose: {httpRoute: {enabled: true, ` + web + `, hostnames: [a.x, b.x, c.x, d.x, e.x, f.x, g.x, h.x, i.x, j.x, k.x, l.x, m.x, n.x, o.x, p.x, q.x]}}}`,
			"expose.httpRoute.hostnames: 17 hosts, at most 16"},
		{"HTTPRoute, a host twice", `{expose: {httpRoute: {enabled: true, ` + web + `, hostnames: [go.example.com, go.example.com]}}}`,
			"names a host twice"},
		{"HTTPRoute without parentRefs", `{expose: {httpRoute: {enabled: true, hostnames: [go.example.com]}}}`,
			"expose.httpRoute.parentRefs is empty: name the Gateway the route attaches to"},
		{"HTTPRoute, parentRefs not a list", `{expose: {httpRoute: {enabled: true, hostnames: [go.example.com], parentRefs: {name: web}}}}`,
			"expose.httpRoute.parentRefs: map[name:web] is not a list"},
		{"HTTPRoute, a parentRef not a map", `{expose: {httpRoute: {enabled: true, hostnames: [go.example.com], parentRefs: [web]}}}`,
			"expose.httpRoute.parentRefs[0]: web: want {name: <Gateway>"},
		{"HTTPRoute, a parentRef without a name", `{expose: {httpRoute: {enabled: true, hostnames: [go.example.com], parentRefs: [{namespace: gw}]}}}`,
			"expose.httpRoute.parentRefs[0].name: <nil>: want the Gateway's name"},
		{"HTTPRoute, a parentRef's unknown key", `{expose: {httpRoute: {enabled: true, hostnames: [go.example.com], parentRefs: [{name: web, section: https}]}}}`,
			`expose.httpRoute.parentRefs[0]: unknown key "section"`},
		{"HTTPRoute, a bad namespace", `{expose: {httpRoute: {enabled: true, hostnames: [go.example.com], parentRefs: [{name: web, namespace: Gateway_System}]}}}`,
			"expose.httpRoute.parentRefs[0].namespace: Gateway_System: want the Gateway's namespace"},
		{"HTTPRoute, a bad sectionName", `{expose: {httpRoute: {enabled: true, hostnames: [go.example.com], parentRefs: [{name: web, sectionName: "HTTPS 443"}]}}}`,
			"expose.httpRoute.parentRefs[0].sectionName: HTTPS 443: want the name of one of the Gateway's listeners"},
		{"HTTPRoute, 33 parentRefs", `{expose: {httpRoute: {enabled: true, hostnames: [go.example.com], parentRefs: [` + strings.Repeat("{name: w},", 32) + `{name: w}]}}}`,
			"expose.httpRoute.parentRefs: 33 Gateways, at most 32"},
		{"HTTPRoute, a scheme neither http nor https", `{expose: {httpRoute: {enabled: true, scheme: ftp, hostnames: [go.example.com], ` + web + `}}}`,
			`expose.httpRoute.scheme: "ftp": want https`},
		{"HTTPRoute, a wildcard first", `{expose: {httpRoute: {enabled: true, hostnames: ["*.example.com", go.example.com], ` + web + `}}}`,
			`expose.httpRoute.hostnames[0] is the wildcard "*.example.com": the short URLs need an exact host`},
		{"HTTPRoute, annotations not a map", `{expose: {httpRoute: {enabled: true, hostnames: [go.example.com], ` + web + `, annotations: [a]}}}`,
			"expose.httpRoute.annotations: [a] is not a map"},
		{"Ingress without hosts", `{expose: {ingress: {enabled: true}}}`,
			"expose.ingress.hosts is empty: name the hosts to serve"},
		{"Ingress, a wildcard first", `{expose: {ingress: {enabled: true, hosts: ["*.example.com"]}}}`,
			`expose.ingress.hosts[0] is the wildcard "*.example.com"`},
		{"Ingress, a bad class", `{expose: {ingress: {enabled: true, hosts: [go.example.com], className: "Nginx!"}}}`,
			"expose.ingress.className: Nginx!: want an IngressClass's name"},
		{"Ingress, tls not a list", `{expose: {ingress: {enabled: true, hosts: [go.example.com], tls: {secretName: t}}}}`,
			"expose.ingress.tls: map[secretName:t] is not a list"},
		{"Ingress, a tls entry without hosts", `{expose: {ingress: {enabled: true, hosts: [go.example.com], tls: [{secretName: t}]}}}`,
			"expose.ingress.tls[0].hosts is empty"},
		{"Ingress, a tls host it does not serve", `{expose: {ingress: {enabled: true, hosts: [go.example.com], tls: [{secretName: t, hosts: [go.example.org]}]}}}`,
			`expose.ingress.tls[0].hosts[0]: "go.example.org" is not one of expose.ingress.hosts`},
		{"Ingress, a tls entry's unknown key", `{expose: {ingress: {enabled: true, hosts: [go.example.com], tls: [{secret: t, hosts: [go.example.com]}]}}}`,
			`expose.ingress.tls[0]: unknown key "secret"`},
		{"Ingress, a bad secretName", `{expose: {ingress: {enabled: true, hosts: [go.example.com], tls: [{secretName: TLS_Secret, hosts: [go.example.com]}]}}}`,
			"expose.ingress.tls[0].secretName: TLS_Secret: want a Secret's name"},
		{"Ingress, annotations not a map", `{expose: {ingress: {enabled: true, hosts: [go.example.com], annotations: x}}}`,
			"expose.ingress.annotations: x is not a map"},
		{"both, two base URLs", `{expose: {httpRoute: {enabled: true, hostnames: [go.example.org], ` + web + `}, ingress: {enabled: true, hosts: [go.example.com], tls: [{hosts: [go.example.com]}]}}}`,
			"expose.httpRoute and expose.ingress give two public base URLs, https://go.example.org and https://go.example.com: set baseURL"},
		{"both, one over HTTP", `{expose: {httpRoute: {enabled: true, hostnames: [go.example.com], ` + web + `}, ingress: {enabled: true, hosts: [go.example.com]}}}`,
			"two public base URLs, https://go.example.com and http://go.example.com"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := exec.Command(helm, "template", release, filepath.Join(root, "config", "helm", "linkforge"), "-f", writeValues(t, c.values)).CombinedOutput()
			if err == nil || !strings.Contains(string(out), c.want) {
				t.Errorf("helm template with %s: %v, %s; want a failure with %q", c.values, err, tail(string(out), 400), c.want)
			}
		})
	}
}

// TestExposeHosts holds the chart's check of a host to what the API
// server's own checks take: every host it renders is a DNS subdomain or a
// wildcard one, not an IP address (as the Ingress validation has it) and
// matches the HTTPRoute CRD's hostname pattern; it refuses the others with
// their reason, and labels over 63 characters, which no DNS name has.
func TestExposeHosts(t *testing.T) {
	root := moduleRoot(t)
	helm := testenv.HelmBinary(t, root)
	routePattern := httpRouteHostnamePattern(t)
	for _, c := range []struct {
		host string
		want string // "": rendered; else the refusal's words
	}{
		{"go.example.com", ""},
		{"localhost", ""},
		{"xn--bcher-kva.example", ""},
		{"a-b.c-d.example", ""},
		{"*.example.com", ""},
		{"999.1.1.1", ""},
		{"1.2.3.4.example", ""},
		{strings.Repeat("a", 63) + ".example", ""},
		{strings.Repeat("a.", 126) + "a", ""},
		{strings.Repeat("a.", 126) + "ab", "is not a DNS name"},
		{strings.Repeat("a", 64) + ".example", "is not a DNS name"},
		{"Go.Example.com", `has capitals: write it "go.example.com"`},
		{"go.example.com.", "is not a DNS name"},
		{".example.com", "is not a DNS name"},
		{"-go.example.com", "is not a DNS name"},
		{"go-.example.com", "is not a DNS name"},
		{"go..example.com", "is not a DNS name"},
		{"go_links.example.com", "is not a DNS name"},
		{"go example.com", "is not a DNS name"},
		{"", "is not a DNS name"},
		{"*", `a wildcard is "*." before a name`},
		{"*.", "is not a DNS name"},
		{"go.*.example.com", `a wildcard is "*." before a name`},
		{"*go.example.com", `a wildcard is "*." before a name`},
		{"10.0.0.1", "is an IP address"},
		{"*.10.0.0.1", "is an IP address"},
		{"::1", "is an IP address"},
		{"[2001:db8::1]", "is an IP address"},
		{"go.example.com:443", "without a port"},
		{"https://go.example.com", "is a URL"},
		{"bücher.example", "is not a DNS name"},
	} {
		t.Run(c.host, func(t *testing.T) {
			// The host second, so that a wildcard is not the base URL's.
			values := writeValues(t, `{baseURL: "https://go.example.net", expose: {ingress: {enabled: true, hosts: [go.example.net, `+quote(c.host)+`]},
				httpRoute: {enabled: true, parentRefs: [{name: web}], hostnames: [go.example.net, `+quote(c.host)+`]}}}`)
			out, err := exec.Command(helm, "template", release, filepath.Join(root, "config", "helm", "linkforge"), "-f", values).CombinedOutput()
			if c.want != "" {
				if err == nil || !strings.Contains(string(out), c.want) {
					t.Errorf("rendered with the host %q (%v): want a failure with %q; %s", c.host, err, c.want, tail(string(out), 300))
				}
				return
			}
			if err != nil {
				t.Fatalf("refused the host %q: %v\n%s", c.host, err, tail(string(out), 300))
			}
			if name := strings.TrimPrefix(c.host, "*."); len(validation.IsDNS1123Subdomain(name)) > 0 || net.ParseIP(name) != nil {
				t.Errorf("rendered %q, which an Ingress refuses: %v", c.host, validation.IsDNS1123Subdomain(name))
			}
			if !routePattern.MatchString(c.host) || len(c.host) > 253 {
				t.Errorf("rendered %q, which the HTTPRoute CRD refuses (pattern %s)", c.host, routePattern)
			}
		})
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// gatewayAPIDir is the Gateway API module of gatewayAPIVersion, from the
// module proxy into the module cache.
func gatewayAPIDir(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/gateway-api@"+gatewayAPIVersion)
	cmd.Dir = t.TempDir() // outside the module: go.mod does not name it
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var m struct{ Dir, Error string }
	if err == nil {
		err = json.Unmarshal(out, &m)
	}
	if err != nil || m.Dir == "" {
		t.Fatalf("go mod download sigs.k8s.io/gateway-api@%s (for its HTTPRoute CRD): %v %s\n%s%s", gatewayAPIVersion, err, m.Error, out, stderr.Bytes())
	}
	return m.Dir
}

// httpRouteCRD is the path of the HTTPRoute CRD of the standard channel.
func httpRouteCRD(t *testing.T) string {
	return filepath.Join(gatewayAPIDir(t), "config", "crd", "standard", "gateway.networking.k8s.io_httproutes.yaml")
}

// httpRouteHostnamePattern is the pattern the HTTPRoute CRD gives
// spec.hostnames' items.
func httpRouteHostnamePattern(t *testing.T) *regexp.Regexp {
	t.Helper()
	data, err := os.ReadFile(httpRouteCRD(t))
	if err != nil {
		t.Fatal(err)
	}
	crd := parse(t, data)
	for _, o := range crd {
		for _, v := range o["spec"].(map[string]any)["versions"].([]any) {
			v := v.(map[string]any)
			if v["name"] != "v1" {
				continue
			}
			p := dig(v, "schema", "openAPIV3Schema", "properties", "spec", "properties", "hostnames", "items", "pattern")
			if s, ok := p.(string); ok {
				return regexp.MustCompile(s)
			}
		}
	}
	t.Fatal("no v1 spec.hostnames pattern in the HTTPRoute CRD")
	return nil
}

// dig follows keys down nested maps; nil where one is missing.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// TestExposeMatchesKustomize: the components config/expose/httproute and
// config/expose/ingress, enabled in config/default, render what the chart
// renders with the same values (the object, and the base URL patched into
// both Deployments), and a component's base URL follows its first host when
// that is changed.
func TestExposeMatchesKustomize(t *testing.T) {
	root := moduleRoot(t)
	helm := testenv.HelmBinary(t, root)
	kubectl := testenv.KubectlBinary(t, root)
	for _, c := range []struct {
		component, values, key string
	}{
		{"httproute", `
expose:
  httpRoute:
    enabled: true
    hostnames: [go.example.com]
    parentRefs: [{name: web, namespace: gateway-system, sectionName: https}]`, routeKey},
		{"ingress", `
expose:
  ingress:
    enabled: true
    className: nginx
    hosts: [go.example.com]
    tls: [{secretName: linkforge-tls, hosts: [go.example.com]}]
    annotations: {cert-manager.io/cluster-issuer: letsencrypt}`, ingressKey},
	} {
		t.Run(c.component, func(t *testing.T) {
			want := kustomizeBuild(t, kubectl, defaultWith(t, root, "#components:", "#- ../expose/"+c.component))
			if _, ok := want[c.key]; !ok {
				t.Fatalf("config/expose/%s renders no %s", c.component, c.key)
			}
			if got := baseURLArgs(want); !slices.Equal(got, wantBaseURL("https://go.example.com")) {
				t.Errorf("config/expose/%s: base URL flags %q, want %q", c.component, got, wantBaseURL("https://go.example.com"))
			}
			compareSets(t, want, helmTemplate(t, helm, root, "--set", "namespace.create=true", "-f", writeValues(t, c.values)))
		})
		t.Run(c.component+": the base URL follows the host", func(t *testing.T) {
			// A copy of the component with another host, as an overlay
			// would have it.
			src := filepath.Join(root, "config", "expose", c.component)
			dst := filepath.Join(t.TempDir(), c.component)
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			entries, err := os.ReadDir(src)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				b, err := os.ReadFile(filepath.Join(src, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				if e.Name() != "kustomization.yaml" {
					b = bytes.ReplaceAll(b, []byte("go.example.com"), []byte("links.example.org"))
				}
				if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			dir := defaultWith(t, root, "#components:", "#- ../expose/"+c.component)
			k, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			rel, err := filepath.Rel(dir, dst)
			if err != nil {
				t.Fatal(err)
			}
			k = regexp.MustCompile(`(?m)^- \S*/expose/`+c.component+`$`).ReplaceAll(k, []byte("- "+rel))
			if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), k, 0o644); err != nil {
				t.Fatal(err)
			}
			set := kustomizeBuild(t, kubectl, dir)
			if got, want := baseURLArgs(set), wantBaseURL("https://links.example.org"); !slices.Equal(got, want) {
				t.Errorf("base URL flags %q, want %q", got, want)
			}
			if !strings.Contains(compact(set[c.key]["spec"]), "links.example.org") {
				t.Errorf("%s: %s, want the host links.example.org", c.key, compact(set[c.key]["spec"]))
			}
		})
	}
	t.Run("absent by default", func(t *testing.T) {
		set := kustomizeBuild(t, kubectl, filepath.Join(root, "config", "default"))
		if n := countKind(set, "HTTPRoute") + countKind(set, "Ingress"); n != 0 || len(baseURLArgs(set)) != 0 {
			t.Errorf("config/default renders %d HTTPRoutes and Ingresses and the base URL flags %q, want none", n, baseURLArgs(set))
		}
	})
}

// TestServiceAnnotations: redirector.service.annotations (a load balancer's
// TLS, docs/install.md#a-plain-loadbalancer-service) are the redirect
// Service's, and it has none by default.
func TestServiceAnnotations(t *testing.T) {
	root := moduleRoot(t)
	helm := testenv.HelmBinary(t, root)
	const svc = "v1 Service " + namespace + "/linkforge-redirector"
	annotations := func(set map[string]object) any { return set[svc]["metadata"].(map[string]any)["annotations"] }
	if a := annotations(helmTemplate(t, helm, root)); a != nil {
		t.Errorf("default annotations %v, want none", a)
	}
	set := helmTemplate(t, helm, root, "-f", writeValues(t, `
redirector:
  service:
    type: LoadBalancer
    port: 443
    annotations: {service.beta.kubernetes.io/aws-load-balancer-ssl-cert: "arn:aws:acm:eu-west-1:1:certificate/x"}`))
	want := decodeOne(t, `{service.beta.kubernetes.io/aws-load-balancer-ssl-cert: "arn:aws:acm:eu-west-1:1:certificate/x"}`)
	if d := diff("annotations", want, annotations(set)); len(d) > 0 {
		t.Errorf("the Service's annotations differ (- want, + got):\n%s", strings.Join(d, "\n"))
	}
	if spec := compact(set[svc]["spec"]); !strings.Contains(spec, `"type":"LoadBalancer"`) || !strings.Contains(spec, `"port":443`) {
		t.Errorf("the Service's spec %s, want type LoadBalancer on port 443", spec)
	}
}
