package hostpolicy

// The ValidatingAdmissionPolicies of config/destination-policy mirror this
// package in CEL. These tests compile them as the API server of Kubernetes
// 1.30 would (the first with ValidatingAdmissionPolicy GA), evaluate them here
// and hold their decisions to this package's: the same for plain hosts, and
// never laxer for the others (see "What admission can check" in the package
// doc). The envtest suite of package controllers runs the same policies in a
// real API server.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/ref"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
	"sigs.k8s.io/yaml"

	"github.com/linkforge/linkforge/internal/shortcode"
)

// perCallLimit is the API server's cost limit of one expression (k8s.io/apiserver/pkg/apis/cel.PerCallLimit).
const perCallLimit = 1000000

// celPolicy is a compiled ValidatingAdmissionPolicy.
type celPolicy struct {
	name        string
	conditions  []cel.Program
	varNames    []string
	variables   []cel.Program
	validations []cel.Program
	messages    []cel.Program
}

var policyDir = func() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "config", "destination-policy")
		}
		if filepath.Dir(d) == d {
			panic("no go.mod above " + wd)
		}
	}
}()

func loadPolicy(t testing.TB, file string) *celPolicy {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(policyDir, file))
	if err != nil {
		t.Fatal(err)
	}
	return compilePolicy(t, file, b)
}

// compilePolicy compiles the ValidatingAdmissionPolicy in b, read from file.
func compilePolicy(t testing.TB, file string, b []byte) *celPolicy {
	t.Helper()
	var vap admissionv1.ValidatingAdmissionPolicy
	if err := yaml.UnmarshalStrict(b, &vap); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	env, err := environment.MustBaseEnvSet(version.MajorMinor(1, 30)).NewExpressionsEnv().Extend(
		cel.Variable("object", cel.DynType),
		cel.Variable("oldObject", cel.DynType),
		cel.Variable("namespaceObject", cel.DynType),
		cel.Variable("params", cel.DynType),
		cel.Variable("request", cel.DynType),
		cel.Variable("variables", cel.MapType(cel.StringType, cel.DynType)),
	)
	if err != nil {
		t.Fatal(err)
	}
	compile := func(what, expr string) cel.Program {
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Fatalf("%s: %s: %v", file, what, iss.Err())
		}
		prg, err := env.Program(ast, cel.CostTracking(&library.CostEstimator{}), cel.CostLimit(perCallLimit))
		if err != nil {
			t.Fatalf("%s: %s: %v", file, what, err)
		}
		return prg
	}
	p := &celPolicy{name: vap.Name}
	for _, c := range vap.Spec.MatchConditions {
		p.conditions = append(p.conditions, compile("matchCondition "+c.Name, c.Expression))
	}
	for _, v := range vap.Spec.Variables {
		p.varNames = append(p.varNames, v.Name)
		p.variables = append(p.variables, compile("variable "+v.Name, v.Expression))
	}
	for i, v := range vap.Spec.Validations {
		p.validations = append(p.validations, compile(fmt.Sprintf("validation %d", i), v.Expression))
		p.messages = append(p.messages, compile(fmt.Sprintf("messageExpression %d", i), v.MessageExpression))
	}
	return p
}

// admission is what a policy decided about one request.
type admission struct {
	matched bool
	denied  bool
	message string
	vars    map[string]any
}

func (p *celPolicy) eval(act map[string]any) (admission, error) {
	vars := map[string]any{}
	act["variables"] = vars
	run := func(prg cel.Program) (any, error) {
		out, _, err := prg.Eval(act)
		if err != nil {
			return nil, err
		}
		return native(out), nil
	}
	for _, c := range p.conditions {
		ok, err := run(c)
		if err != nil {
			return admission{}, fmt.Errorf("matchCondition: %w", err)
		}
		if ok != true {
			return admission{}, nil
		}
	}
	for i, v := range p.variables {
		val, err := run(v)
		if err != nil {
			return admission{}, fmt.Errorf("variable %s: %w", p.varNames[i], err)
		}
		vars[p.varNames[i]] = val
	}
	a := admission{matched: true, vars: vars}
	for i, v := range p.validations {
		ok, err := run(v)
		if err != nil {
			return a, fmt.Errorf("validation: %w", err)
		}
		if ok != true {
			msg, err := run(p.messages[i])
			if err != nil {
				return a, fmt.Errorf("messageExpression: %w", err)
			}
			a.denied, a.message = true, msg.(string)
			return a, nil
		}
	}
	return a, nil
}

// native turns a CEL value into Go values (lists of any).
func native(v ref.Val) any {
	if l, ok := v.Value().([]ref.Val); ok {
		out := make([]any, len(l))
		for i, e := range l {
			out[i] = native(e)
		}
		return out
	}
	return v.Value()
}

func shortLinkRequest(url string) map[string]any {
	return shortLinkRequestTo([]string{url})
}

// shortLinkRequestTo creates a ShortLink whose targets are urls: spec.url,
// then a rule's url, a variant's url, spec.expiredURL, then more rules',
// the order in which the policies and the manager judge them.
func shortLinkRequestTo(urls []string) map[string]any {
	spec := map[string]any{"url": urls[0]}
	var rules, variants []any
	for i, u := range urls[1:] {
		switch i {
		case 1:
			variants = append(variants, map[string]any{"url": u, "weight": int64(10)})
		case 2:
			spec["expiredURL"] = u
		default:
			rules = append(rules, map[string]any{"url": u, "devices": []any{"ios"}})
		}
	}
	if rules != nil {
		spec["rules"] = rules
	}
	if variants != nil {
		spec["variants"] = variants
	}
	return map[string]any{
		"object":  map[string]any{"metadata": map[string]any{"name": "l", "namespace": "team-a"}, "spec": spec},
		"request": map[string]any{"operation": "CREATE"},
	}
}

// judgeOrder is urls in the order shortLinkRequestTo places them in the
// spec and the manager judges them: spec.url, the rules', the variant's,
// spec.expiredURL.
func judgeOrder(urls []string) []string {
	if len(urls) < 2 {
		return urls
	}
	out := []string{urls[0], urls[1]}
	out = append(out, urls[min(4, len(urls)):]...)
	if len(urls) > 2 {
		out = append(out, urls[2])
	}
	if len(urls) > 3 {
		out = append(out, urls[3])
	}
	return out
}

func namespaceObject(annotation *string) map[string]any {
	md := map[string]any{"name": "team-a"}
	if annotation != nil {
		md["annotations"] = map[string]any{AllowedHostsAnnotation: *annotation}
	}
	return map[string]any{"metadata": md}
}

// admittedByCRD approximates the CRD's rules on spec.url: the policies only
// see URLs those admit.
func admittedByCRD(url string) bool {
	u := strings.ToLower(strings.TrimSpace(url))
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") || len(strings.TrimSpace(url)) > 2048 {
		return false
	}
	for i := 0; i < len(url); i++ {
		if url[i] < 0x20 || url[i] == 0x7f {
			return false
		}
	}
	authority := u[strings.Index(u, "://")+3:]
	if i := strings.IndexAny(authority, "/?#"); i >= 0 {
		authority = authority[:i]
	}
	return !strings.Contains(authority, "@")
}

// goVerdict is the manager's decision on a link with targets urls:
// "invalid" when the canonicalizer refuses one of them (the link is never
// served), else the first refusal in judging order, or allowed.
func goVerdict(urls []string, p Policy) (v Verdict, host string, valid bool) {
	var canonical []string
	for _, u := range judgeOrder(urls) {
		c, err := shortcode.Canonicalize(u)
		if err != nil {
			return Verdict{}, "", false
		}
		canonical = append(canonical, c)
	}
	for i, c := range canonical {
		if v := p.Judge(c); !v.Allowed {
			return v, rawHost(judgeOrder(urls)[i]), true
		}
	}
	return Verdict{Allowed: true}, "", true
}

// allPlain: every target's host is plain (admission compares it exactly).
func allPlain(urls []string) bool {
	for _, u := range urls {
		if !isPlain(rawHost(u)) {
			return false
		}
	}
	return true
}

func allAdmittedByCRD(urls []string) bool {
	for _, u := range urls {
		if !admittedByCRD(u) {
			return false
		}
	}
	return true
}

// checkAllowList holds the allowed-hosts policy to Judge for one link's
// targets and one annotation (nil: none).
func checkAllowList(t testing.TB, allowPolicy *celPolicy, urls []string, annotation *string) {
	t.Helper()
	if !allAdmittedByCRD(urls) {
		return
	}
	act := shortLinkRequestTo(urls)
	act["namespaceObject"] = namespaceObject(annotation)
	got, err := allowPolicy.eval(act)
	if err != nil {
		t.Fatalf("urls %q, annotation %v: the policy fails (a refusal without a useful message): %v", urls, deref(annotation), err)
	}
	p := Policy{Namespace: "team-a"}
	if annotation != nil {
		l := Parse(*annotation)
		p.Allow = &l
	}
	v, refusedHost, valid := goVerdict(urls, p)
	switch {
	case !valid:
		// Admitted or not, the controller refuses the link: nothing to compare.
	case !got.denied && !v.Allowed:
		t.Errorf("urls %q, annotation %q: admitted, but the manager refuses it: %s", urls, deref(annotation), v.Message)
	case got.denied && v.Allowed && allPlain(urls):
		t.Errorf("urls %q, annotation %q: refused at admission (%s), but the manager allows it, and the hosts are plain", urls, deref(annotation), got.message)
	case got.denied && v.Message != "" && allPlain(urls):
		// Both refuse the same host: the messages agree but for how the
		// host is shown and how ignored entries are quoted.
		want := v.Message[strings.Index(v.Message, " is not allowed"):]
		want, _, _ = strings.Cut(want, " (ignored")
		if !strings.Contains(got.message, want) || !strings.HasPrefix(got.message, fmt.Sprintf("host %q", refusedHost)) {
			t.Errorf("urls %q: admission says %q, the manager %q", urls, got.message, v.Message)
		}
	}
}

// checkDenyList holds the denied-hosts policy to Judge for one link's
// targets and one DestinationDenyList's hosts.
func checkDenyList(t testing.TB, denyPolicy *celPolicy, urls []string, hosts []string) {
	t.Helper()
	if !allAdmittedByCRD(urls) {
		return
	}
	act := shortLinkRequestTo(urls)
	items := make([]any, len(hosts))
	for i, h := range hosts {
		items[i] = h
	}
	act["params"] = map[string]any{"metadata": map[string]any{"name": "deny"}, "spec": map[string]any{"hosts": items}}
	got, err := denyPolicy.eval(act)
	if err != nil {
		t.Fatalf("urls %q, hosts %q: the policy fails: %v", urls, hosts, err)
	}
	v, _, valid := goVerdict(urls, Policy{Namespace: "team-a", Deny: []Named{{Name: "deny", List: FromEntries(hosts)}}})
	switch {
	case !valid:
	case got.denied && v.Allowed:
		t.Errorf("urls %q, hosts %q: refused at admission (%s), but the manager allows it", urls, hosts, got.message)
	case !got.denied && !v.Allowed && allPlain(urls):
		t.Errorf("urls %q, hosts %q: admitted, but the manager denies it (%s), and the hosts are plain", urls, hosts, v.Message)
	}
}

// rawHost is the host of url as the package doc says admission reads it
// (computed here, not by the policies under test): trimmed, after "://", up
// to '/', '?' or '#', an IPv6 literal with its brackets or else up to the
// last ':', ASCII letters lower-cased, trailing dots removed.
func rawHost(url string) string {
	u := strings.TrimSpace(url)
	_, authority, _ := strings.Cut(u, "://")
	if i := strings.IndexAny(authority, "/?#"); i >= 0 {
		authority = authority[:i]
	}
	host := authority
	if strings.HasPrefix(authority, "[") {
		if i := strings.IndexByte(authority, ']'); i >= 0 {
			host = authority[:i+1]
		}
	} else if i := strings.LastIndexByte(authority, ':'); i >= 0 {
		host = authority[:i]
	}
	return trimDots(lowerASCII(host))
}

// isPlain: a host admission compares exactly (the package doc).
func isPlain(h string) bool {
	if h == "" {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !isLabelByte(c) && c != '.' {
			return false
		}
	}
	return !endsInNumber(h) || isDottedQuad(h)
}

func deref(s *string) string {
	if s == nil {
		return "<none>"
	}
	return *s
}

// hostCorpus: hosts at the edges of the rule, spelled in the ways a URL can
// spell them.
var hostCorpus = []string{
	"example.com", "EXAMPLE.com", "www.example.com", "a.b.example.com", "example.com.", "www.example.com.",
	"evilexample.com", "example.com.evil.io", "docs.vendor.io", "x.docs.vendor.io", "vendor.io",
	"bücher.example", "BÜCHER.example", "xn--bcher-kva.example", "bücher.example.com", "ü.example.com",
	"evil。example.com", "example.com。evil.io", "ｅｘａｍｐｌｅ.com", "\u00ad.example.com",
	"169.254.169.254", "2852039166", "0xa9fea9fe", "0xA9FEA9FE", "0251.0376.0251.0376", "169.254.43518",
	"169.254.169.254.", "127.1", "10.0.0.1", "1.2.3.256", "foo.1",
	"[fd00:ec2::254]", "[FD00:EC2::254]", "[fd00:ec2:0:0:0:0:0:254]", "[::ffff:169.254.169.254]", "[::ffff:a9fe:a9fe]", "[2001:db8::1]",
	"metadata.google.internal", "metadata.google.internal.", "x.corp.example.com", "corp.example.com",
	"exa_mple.com", "-x.example.com", ".example.com", "a..example.com", "%65xample.com", "ex%61mple.com", "exa\\mple.com",
	"localhost", "my-host", "_srv.example.com",
}

var urlShapes = []string{"https://%s/", "http://%s", "https://%s:8443/p?q=1#f", "HTTPS://%s:443/x", "  https://%s/a  ", "http://%s:/x"}

var allowCorpus = []*string{
	nil,
	ptr("*.example.com, docs.vendor.io"),
	ptr("example.com *.example.com"),
	ptr("*.EXAMPLE.com."),
	ptr("xn--bcher-kva.example"),
	ptr("*.example"),
	ptr("169.254.169.254 10.0.0.1"),
	ptr("[fd00:ec2::254]"),
	ptr("[FD00:0ec2::254], 127.0.0.1"),
	ptr(""),
	ptr(" , "),
	ptr("https://example.com, example.com:443, bücher.example, *, *., 2852039166"),
	ptr("*.com\n*.io\tlocalhost"),
	ptr("*.internal,_srv.example.com"),
}

var denyCorpus = [][]string{
	{"169.254.169.254", "metadata.google.internal", "[fd00:ec2::254]"},
	{"*.corp.example.com"},
	{"*.example.com"},
	{"EXAMPLE.com."},
	{"xn--bcher-kva.example", "*.example"},
	{"[FD00:0EC2:0::254]"},
	{"127.0.0.1", "*.internal", "localhost"},
	{"*.io"},
}

func ptr(s string) *string { return &s }

// targetSets are the links the policies are checked on: each URL of the
// corpus as spec.url alone, and as each of the other targets (a rule's,
// a variant's, spec.expiredURL, a second rule's) beside corpus URLs that
// come before it; for every stride-th URL only.
func targetSets(stride int) [][]string {
	urls := make([]string, 0, len(hostCorpus)*len(urlShapes))
	for _, h := range hostCorpus {
		for _, shape := range urlShapes {
			urls = append(urls, fmt.Sprintf(shape, h))
		}
	}
	var sets [][]string
	for i, u := range urls {
		sets = append(sets, []string{u})
		for pos := 1; pos <= 4 && i%stride == 0; pos++ {
			set := make([]string, pos+1)
			for k := range pos {
				set[k] = urls[(i+7*(k+1))%len(urls)]
			}
			set[pos] = u
			sets = append(sets, set)
		}
	}
	return sets
}

func TestAllowedHostsPolicyMatchesJudge(t *testing.T) {
	allowPolicy := loadPolicy(t, "allowed_hosts_policy.yaml")
	for _, urls := range targetSets(1) {
		for _, a := range allowCorpus {
			checkAllowList(t, allowPolicy, urls, a)
		}
	}
}

func TestDeniedHostsPolicyMatchesJudge(t *testing.T) {
	denyPolicy := loadPolicy(t, "denied_hosts_policy.yaml")
	for _, urls := range targetSets(1) {
		for _, d := range denyCorpus {
			checkDenyList(t, denyPolicy, urls, d)
		}
	}
}

// TestPolicyDecisions pins what admission does with the hosts it cannot
// compare exactly (the package doc's "What admission can check").
func TestPolicyDecisions(t *testing.T) {
	allowPolicy := loadPolicy(t, "allowed_hosts_policy.yaml")
	denyPolicy := loadPolicy(t, "denied_hosts_policy.yaml")
	allow := func(url, annotation string) admission {
		act := shortLinkRequest(url)
		act["namespaceObject"] = namespaceObject(&annotation)
		a, err := allowPolicy.eval(act)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	deny := func(url string, hosts ...string) admission {
		act := shortLinkRequest(url)
		items := make([]any, 0, len(hosts))
		for _, h := range hosts {
			items = append(items, h)
		}
		act["params"] = map[string]any{"metadata": map[string]any{"name": "cloud-metadata"}, "spec": map[string]any{"hosts": items}}
		a, err := denyPolicy.eval(act)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if a := allow("https://bücher.example/", "*.example"); a.denied {
		t.Errorf("a non-ASCII name below an allowed wildcard is admitted: %s", a.message)
	}
	a := allow("https://bücher.example/", "xn--bcher-kva.example")
	if !a.denied || !strings.Contains(a.message, "write a non-ASCII name in its ASCII (punycode) form") {
		t.Errorf("a non-ASCII name that only its IDNA form would match is refused with a hint: %+v", a)
	}
	if a := allow("https://xn--bcher-kva.example/", "xn--bcher-kva.example"); a.denied {
		t.Errorf("the punycode form is admitted: %s", a.message)
	}
	if a := allow("https://evil.example.org/", "*.example.com, docs.vendor.io"); !a.denied ||
		a.message != `host "evil.example.org" is not allowed in namespace team-a: its linkforge.io/allowed-hosts annotation allows only *.example.com, docs.vendor.io` {
		t.Errorf("the refusal names the namespace's list: %q", a.message)
	}
	if a := deny("http://2852039166/", "169.254.169.254"); a.denied {
		t.Errorf("a decimal IPv4 address is left to the manager: %s", a.message)
	}
	if a := deny("http://169.254.169.254./latest", "169.254.169.254"); !a.denied ||
		a.message != `host "169.254.169.254" is denied in every namespace by DestinationDenyList "cloud-metadata" (entry 169.254.169.254)` {
		t.Errorf("a denied address is refused, naming the list: %q", a.message)
	}
	if a := deny("https://ü.corp.example.com/", "*.corp.example.com"); !a.denied {
		t.Error("a non-ASCII name below a denied wildcard is refused at admission")
	}

	// Only a new URL is judged.
	act := shortLinkRequest("https://evil.example.org/")
	act["request"] = map[string]any{"operation": "UPDATE"}
	act["oldObject"] = act["object"]
	act["namespaceObject"] = namespaceObject(ptr("*.example.com"))
	if a, err := allowPolicy.eval(act); err != nil || a.matched {
		t.Errorf("an update that keeps spec.url is not judged: %+v, %v", a, err)
	}

	// Every target is judged, and an update that changes any of them is.
	old := shortLinkRequestTo([]string{"https://www.example.com/", "https://apps.example.com/"})
	for name, urls := range map[string][]string{
		"a rule's url":      {"https://www.example.com/", "https://evil.example.org/"},
		"a variant's url":   {"https://www.example.com/", "https://apps.example.com/", "https://evil.example.org/"},
		"spec.expiredURL":   {"https://www.example.com/", "https://apps.example.com/", "https://b.example.com/", "https://evil.example.org/"},
		"a second rule url": {"https://www.example.com/", "https://apps.example.com/", "https://b.example.com/", "https://c.example.com/", "https://evil.example.org/"},
	} {
		act := shortLinkRequestTo(urls)
		act["request"] = map[string]any{"operation": "UPDATE"}
		act["oldObject"] = old["object"]
		act["namespaceObject"] = namespaceObject(ptr("*.example.com"))
		if a, err := allowPolicy.eval(act); err != nil || !a.denied || !strings.HasPrefix(a.message, `host "evil.example.org" is not allowed in namespace team-a`) {
			t.Errorf("%s: a refused host is refused on update: %+v, %v", name, a, err)
		}
		act["params"] = map[string]any{"metadata": map[string]any{"name": "evil"}, "spec": map[string]any{"hosts": []any{"*.example.org"}}}
		if a, err := denyPolicy.eval(act); err != nil || a.message != `host "evil.example.org" is denied in every namespace by DestinationDenyList "evil" (entry *.example.org)` {
			t.Errorf("%s: a denied host is refused on update: %+v, %v", name, a, err)
		}
	}
	act = shortLinkRequestTo([]string{"https://www.example.com/", "https://apps.example.com/"})
	act["request"] = map[string]any{"operation": "UPDATE"}
	act["oldObject"] = old["object"]
	act["namespaceObject"] = namespaceObject(ptr("docs.example.com"))
	if a, err := allowPolicy.eval(act); err != nil || a.matched {
		t.Errorf("an update that keeps every target is not judged: %+v, %v", a, err)
	}
}

func TestAnnotationPolicyMatchesParse(t *testing.T) {
	p := loadPolicy(t, "allowed_hosts_annotation_policy.yaml")
	for _, a := range allowCorpus {
		if a == nil {
			continue
		}
		checkAnnotation(t, p, *a)
	}
	got, err := p.eval(map[string]any{
		"object":  namespaceObject(ptr("*.example.com, https://docs.example.com")),
		"request": map[string]any{"operation": "CREATE"},
	})
	if err != nil || !got.denied || !strings.HasPrefix(got.message, `linkforge.io/allowed-hosts: "https://docs.example.com" is not a host pattern: list exact hosts`) {
		t.Errorf("a bad entry is refused with its name: %+v, %v", got, err)
	}
	// A namespace whose annotation is unchanged is not judged, even if invalid.
	old := namespaceObject(ptr("https://docs.example.com"))
	got, err = p.eval(map[string]any{"object": old, "oldObject": old, "request": map[string]any{"operation": "UPDATE"}})
	if err != nil || got.matched {
		t.Errorf("an unchanged annotation is not judged: %+v, %v", got, err)
	}
}

func checkAnnotation(t testing.TB, p *celPolicy, annotation string) {
	t.Helper()
	got, err := p.eval(map[string]any{"object": namespaceObject(&annotation), "request": map[string]any{"operation": "CREATE"}})
	if err != nil {
		t.Fatalf("annotation %q: the policy fails: %v", annotation, err)
	}
	var celInvalid []string
	if got.vars != nil {
		for _, e := range got.vars["invalid"].([]any) {
			celInvalid = append(celInvalid, e.(string))
		}
	}
	goInvalid := Parse(annotation).Invalid
	if !slices.Equal(celInvalid, goInvalid) {
		t.Errorf("annotation %q: the policy refuses entries %q, the manager ignores %q", annotation, celInvalid, goInvalid)
	}
	if got.denied != (len(goInvalid) > 0) {
		t.Errorf("annotation %q: refused=%v with %d invalid entries", annotation, got.denied, len(goInvalid))
	}
}

// FuzzPoliciesMatchJudge holds the three policies to this package on any URL,
// annotation and deny-list entry.
func FuzzPoliciesMatchJudge(f *testing.F) {
	for i, h := range hostCorpus {
		a := allowCorpus[i%len(allowCorpus)]
		f.Add(fmt.Sprintf(urlShapes[i%len(urlShapes)], h), deref(a), denyCorpus[i%len(denyCorpus)][0])
	}
	allowPolicy := loadPolicy(f, "allowed_hosts_policy.yaml")
	denyPolicy := loadPolicy(f, "denied_hosts_policy.yaml")
	annotationPolicy := loadPolicy(f, "allowed_hosts_annotation_policy.yaml")
	f.Fuzz(func(t *testing.T, url, annotation, denyEntry string) {
		// The API server stores only UTF-8 strings (it decodes JSON so).
		if !utf8.ValidString(url) || !utf8.ValidString(annotation) || !utf8.ValidString(denyEntry) {
			return
		}
		checkAllowList(t, allowPolicy, []string{url}, &annotation)
		// The CRD admits only patterns into a DestinationDenyList.
		if _, ok := ParsePattern(denyEntry); ok {
			checkDenyList(t, denyPolicy, []string{url}, []string{denyEntry})
		}
		checkAnnotation(t, annotationPolicy, annotation)
	})
}

// TestPoliciesWithinCostOnTheLargestLink: a link with every target the CRD
// allows (16 rules, 10 variants, an expiredURL, each 2048 bytes) stays
// within the API server's cost limit of an expression, against a long
// allow-list and deny-list.
func TestPoliciesWithinCostOnTheLargestLink(t *testing.T) {
	urls := make([]string, 0, 28)
	for i := range 28 {
		u := fmt.Sprintf("https://h%d.app.example.com/", i)
		urls = append(urls, u+strings.Repeat("p", 2048-len(u)))
	}
	// shortLinkRequestTo places spec.url, a rule, a variant, the
	// expiredURL, then rules (15 more here); 9 more variants reach the
	// CRD's bounds.
	act := shortLinkRequestTo(urls[:19])
	spec := act["object"].(map[string]any)["spec"].(map[string]any)
	variants := spec["variants"].([]any)
	for _, u := range urls[19:] {
		variants = append(variants, map[string]any{"url": u, "weight": int64(1)})
	}
	spec["variants"] = variants
	if n, v := len(spec["rules"].([]any)), len(variants); n != 16 || v != 10 {
		t.Fatalf("%d rules, %d variants", n, v)
	}
	entries := make([]string, 0, 200)
	for i := range 200 {
		entries = append(entries, fmt.Sprintf("*.team%d.example.org", i))
	}
	act["namespaceObject"] = namespaceObject(ptr(strings.Join(entries, ", ") + ", *.app.example.com"))
	if a, err := loadPolicy(t, "allowed_hosts_policy.yaml").eval(act); err != nil || a.denied {
		t.Errorf("allowed-hosts: %+v, %v", a, err)
	}
	items := make([]any, 0, 1024)
	for i := range 1024 {
		items = append(items, fmt.Sprintf("*.denied%d.example.net", i))
	}
	act["params"] = map[string]any{"metadata": map[string]any{"name": "big"}, "spec": map[string]any{"hosts": items}}
	if a, err := loadPolicy(t, "denied_hosts_policy.yaml").eval(act); err != nil || a.denied {
		t.Errorf("denied-hosts: %+v, %v", a, err)
	}
}
