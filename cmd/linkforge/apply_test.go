package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/testenv"
)

// The control plane starts on the first test that needs it, so that the
// other tests of this package run without envtest's binaries.
var (
	envOnce    sync.Once
	env        *envtest.Environment
	envKube    string // kubeconfig of a system:masters user
	envClient  client.Client
	envErr     error
	envTempDir string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if env != nil {
		_ = env.Stop()
	}
	if envTempDir != "" {
		_ = os.RemoveAll(envTempDir)
	}
	os.Exit(code)
}

func controlPlane(t *testing.T) (string, client.Client) {
	t.Helper()
	envOnce.Do(func() {
		env, _, envErr = testenv.Start()
		if envErr != nil {
			return
		}
		user, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
		if err != nil {
			envErr = err
			return
		}
		data, err := user.KubeConfig()
		if err != nil {
			envErr = err
			return
		}
		if envTempDir, envErr = os.MkdirTemp("", "linkforge-import-apply"); envErr != nil {
			return
		}
		envKube = filepath.Join(envTempDir, "admin.kubeconfig")
		if envErr = os.WriteFile(envKube, data, 0o600); envErr != nil {
			return
		}
		scheme := runtime.NewScheme()
		_ = clientgoscheme.AddToScheme(scheme)
		_ = linkv1.AddToScheme(scheme)
		envClient, envErr = client.New(user.Config(), client.Options{Scheme: scheme})
	})
	if envErr != nil {
		t.Fatalf("envtest: %v", envErr)
	}
	return envKube, envClient
}

func TestImportApply(t *testing.T) {
	kubeconfig, cl := controlPlane(t)
	fixNow(t)
	ctx := context.Background()
	// A namespace of its own each run: the control plane is shared by the
	// package's tests and outlives a run (go test -count=N).
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "team-a-"}}
	if err := cl.Create(ctx, namespace); err != nil {
		t.Fatal(err)
	}
	ns := namespace.Name
	file := filepath.Join(t.TempDir(), "links.csv")
	write := func(content string) {
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// One source for the file as it changes: an export imported again.
	apply := func() (int, string) {
		var stdout, stderr bytes.Buffer
		code := run([]string{"import", file, "--apply", "--kubeconfig", kubeconfig, "-n", ns, "--workers", "4", "--source", "shortener-export"}, &stdout, &stderr)
		if stdout.Len() != 0 {
			t.Errorf("stdout %q, want nothing", stdout.String())
		}
		return code, stderr.String()
	}
	const rows = "url,code,expires,max_uses\nhttps://example.com/docs,docs,,\nhttps://example.com/launch,Launch,2027-01-01T00:00:00Z,100\nftp://example.com/file,ftp,,\nhttps://example.com/no-code,,,\n"
	write(rows)

	// A bad row is reported and skipped; the others are created.
	code, stderr := apply()
	if code != 1 {
		t.Errorf("exit status %d, want 1 (a row was skipped); stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		file + `: line 4: skipped: invalid url "ftp://example.com/file"`,
		"linkforge import: 3 ShortLink(s) from " + file + " (csv, source shortener-export) applied in ",
		": 3 created, 0 updated, 0 unchanged, 0 conflict(s) left as they are, 0 failed; 1 row(s) skipped\n",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	// Not a terminal: no progress bar.
	if strings.Contains(stderr, "\r") || strings.Contains(stderr, "links  ") {
		t.Errorf("progress written to a non-terminal:\n%q", stderr)
	}
	var links linkv1.ShortLinkList
	if err := cl.List(ctx, &links, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range links.Items {
		s := l.Spec.URL + " code=" + l.Spec.Code
		if l.Spec.MaxUses != nil {
			s += fmt.Sprintf(" maxUses=%d", *l.Spec.MaxUses)
		}
		if l.Spec.ExpiresAt != nil {
			s += " expires=" + l.Spec.ExpiresAt.UTC().Format("2006-01-02")
		}
		got[l.Name] = s
		if owner := l.ManagedFields; len(owner) == 0 || owner[0].Manager != "linkforge-import" || owner[0].Operation != metav1.ManagedFieldsOperationApply {
			t.Errorf("%s: managed fields %+v, want an Apply by linkforge-import", l.Name, owner)
		}
		if source := l.Annotations["linkforge.io/import-source"]; source != "shortener-export" {
			t.Errorf("%s: source %q, want shortener-export", l.Name, source)
		}
	}
	if len(got) != 3 || got["docs"] != "https://example.com/docs code=docs" || !strings.HasPrefix(got["launch-ccf56ef5"], "https://example.com/launch code=Launch maxUses=100 expires=2027-01-01") {
		t.Errorf("links in %s: %v", ns, got)
	}

	// Again: nothing changes.
	code, stderr = apply()
	if code != 1 || !strings.Contains(stderr, ": 0 created, 0 updated, 3 unchanged, 0 conflict(s) left as they are, 0 failed; 1 row(s) skipped\n") {
		t.Errorf("second run: exit %d\n%s", code, stderr)
	}

	// The source changed one link and lost its bad row: one update, exit 0.
	write(strings.Replace(strings.Replace(rows, "https://example.com/docs,docs", "https://example.com/docs/v2,docs", 1), "ftp://example.com/file,ftp,,\n", "", 1))
	code, stderr = apply()
	if code != 0 || !strings.Contains(stderr, ": 0 created, 1 updated, 2 unchanged, 0 conflict(s) left as they are, 0 failed; 0 row(s) skipped\n") {
		t.Errorf("third run: exit %d\n%s", code, stderr)
	}

	// On a terminal, a progress bar and its last frame.
	saved := isTerminal
	isTerminal = func(io.Writer) bool { return true }
	defer func() { isTerminal = saved }()
	_, stderr = apply()
	if !strings.Contains(stderr, "\r[==============================] 3/3 links") {
		t.Errorf("no progress bar on a terminal:\n%q", stderr)
	}
}

// TestImportApplyNeverSurprises holds --apply to its promise: it changes
// only the links it created. A second file that reuses a code, a link
// made by hand under the name an import wants, and a code another link
// holds are conflicts, reported with what would change and left as they
// are (exit status 4) unless --overwrite; the same file again changes
// nothing and reports no conflict.
func TestImportApplyNeverSurprises(t *testing.T) {
	kubeconfig, cl := controlPlane(t)
	fixNow(t)
	ctx := context.Background()
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "surprise-"}}
	if err := cl.Create(ctx, namespace); err != nil {
		t.Fatal(err)
	}
	ns := namespace.Name
	dir := t.TempDir()
	files := map[string]string{
		// Shlink's importer CSV: a title, an expiry and a visit limit.
		"a.csv": "Long URL,Short code,Title,validUntil,maxVisits\nhttps://a.example/promo,promo,Spring promo,2027-01-01T00:00:00Z,100\nhttps://a.example/docs,a-docs,,,\n",
		"b.csv": "Long URL,Short code\nhttps://b.example/promo,promo\nhttps://b.example/new,new\n",
		"c.csv": "url,code,expires,max_uses\nhttps://example.com/docs,docs,2027-01-01T00:00:00Z,1\n",
		"d.csv": "url,code\nhttps://example.com/sale,sale\nhttps://example.com/same,same\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	source := func(name string) string {
		return name + "@sha256:" + sha256Prefix(t, filepath.Join(dir, name))
	}
	importFile := func(name string, flags ...string) (int, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		args := append([]string{"import", filepath.Join(dir, name), "--apply", "--kubeconfig", kubeconfig, "-n", ns, "--workers", "2"}, flags...)
		code := run(args, &stdout, &stderr)
		return code, strings.ReplaceAll(stderr.String(), dir+"/", "")
	}
	get := func(name string) *linkv1.ShortLink {
		t.Helper()
		var l linkv1.ShortLink
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &l); err != nil {
			t.Fatalf("get %s: %v", name, err)
		}
		return &l
	}
	describe := func(l *linkv1.ShortLink) string {
		s := l.Spec.URL
		if l.Spec.Code != "" {
			s += " code=" + l.Spec.Code
		}
		if l.Spec.MaxUses != nil {
			s += fmt.Sprintf(" maxUses=%d", *l.Spec.MaxUses)
		}
		if l.Spec.ExpiresAt != nil {
			s += " expires=" + l.Spec.ExpiresAt.UTC().Format("2006-01-02")
		}
		if title, ok := l.Annotations["linkforge.io/title"]; ok {
			s += " title=" + title
		}
		return s
	}
	expect := func(step string, code, wantCode int, stderr string, want ...string) {
		t.Helper()
		if code != wantCode {
			t.Errorf("%s: exit status %d, want %d; stderr:\n%s", step, code, wantCode, stderr)
		}
		for _, w := range want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", step, w, stderr)
			}
		}
	}

	code, stderr := importFile("a.csv")
	expect("a.csv", code, 0, stderr, ": 2 created, 0 updated, 0 unchanged, 0 conflict(s) left as they are, 0 failed; 0 row(s) skipped\n")
	promoA := "https://a.example/promo code=promo maxUses=100 expires=2027-01-01 title=Spring promo"
	if got := describe(get("promo")); got != promoA {
		t.Fatalf("promo after a.csv: %s, want %s", got, promoA)
	}
	if got := get("promo").Annotations["linkforge.io/import-source"]; got != source("a.csv") {
		t.Errorf("promo's source %q, want %q", got, source("a.csv"))
	}
	version := get("promo").ResourceVersion

	// The same file again: idempotent, no request, no conflict.
	code, stderr = importFile("a.csv")
	expect("a.csv again", code, 0, stderr, ": 0 created, 0 updated, 2 unchanged, 0 conflict(s) left as they are, 0 failed; 0 row(s) skipped\n")
	if strings.Contains(stderr, "conflict:") {
		t.Errorf("a.csv again reports a conflict:\n%s", stderr)
	}
	if v := get("promo").ResourceVersion; v != version {
		t.Errorf("a.csv again wrote promo (resourceVersion %s, was %s)", v, version)
	}

	// A second file that reuses promo: reported with every change, left
	// alone; its new link is created.
	code, stderr = importFile("b.csv")
	expect("b.csv", code, exitConflicts, stderr,
		`b.csv: line 2: conflict: ShortLink `+ns+`/promo exists and was not created by this import (imported from "`+source("a.csv")+`"): left as it is; --overwrite would change url "https://a.example/promo" -> "https://b.example/promo", expiresAt "2027-01-01T00:00:00Z" -> (removed), maxUses "100" -> (removed), title "Spring promo" -> (removed)`+"\n",
		": 1 created, 0 updated, 0 unchanged, 1 conflict(s) left as they are, 0 failed; 0 row(s) skipped\n",
		"1 link(s) exist and were not created by this import (source "+source("b.csv")+"): they were left as they are")
	if got := describe(get("promo")); got != promoA {
		t.Errorf("b.csv changed promo: %s, want %s", got, promoA)
	}

	// A link made by hand under the name the import wants: its code would
	// change, and its short URL with it.
	docs := &linkv1.ShortLink{ObjectMeta: metav1.ObjectMeta{Name: "docs", Namespace: ns}, Spec: linkv1.ShortLinkSpec{URL: "https://example.com/docs"}}
	if err := cl.Create(ctx, docs, client.FieldOwner("kubectl-create")); err != nil {
		t.Fatal(err)
	}
	docs.Status.Code = "LUMLV6n3To" // as the controller would compute it
	if err := cl.Status().Update(ctx, docs, client.FieldOwner("linkforge-manager")); err != nil {
		t.Fatal(err)
	}
	code, stderr = importFile("c.csv")
	expect("c.csv", code, exitConflicts, stderr,
		`c.csv: line 2: conflict: ShortLink `+ns+`/docs exists and was not created by this import (made by kubectl-create): left as it is; --overwrite would change code (computed "LUMLV6n3To") -> "docs" (its short URL changes), expiresAt (unset) -> "2027-01-01T00:00:00Z", maxUses (unset) -> "1"`+"\n",
		": 0 created, 0 updated, 0 unchanged, 1 conflict(s) left as they are, 0 failed;")
	if got := describe(get("docs")); got != "https://example.com/docs" {
		t.Errorf("c.csv changed the hand-made docs: %s", got)
	}

	// A code another link holds: never applied, not even with --overwrite.
	// A hand-made link that already is what the file says is left alone,
	// and is no conflict.
	for _, l := range []*linkv1.ShortLink{
		{ObjectMeta: metav1.ObjectMeta{Name: "spring", Namespace: ns}, Spec: linkv1.ShortLinkSpec{URL: "https://example.com/spring", Code: "sale"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "same", Namespace: ns}, Spec: linkv1.ShortLinkSpec{URL: "https://example.com/same", Code: "same"}},
	} {
		if err := cl.Create(ctx, l, client.FieldOwner("kubectl-create")); err != nil {
			t.Fatal(err)
		}
	}
	code, stderr = importFile("d.csv", "--overwrite")
	expect("d.csv", code, exitConflicts, stderr,
		`d.csv: line 2: conflict: ShortLink `+ns+`/sale: code "sale" is held by ShortLink `+ns+`/spring in the namespace: a link of that code would not get it (CodeConflict); not applied`+"\n",
		": 0 created, 0 updated, 0 unchanged, 1 already as the file has them (not created by this import: left as they are), 1 conflict(s) left as they are, 0 failed;")
	var sale linkv1.ShortLink
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "sale"}, &sale); err == nil {
		t.Errorf("d.csv created sale, whose code spring holds")
	}
	if _, ok := get("same").Annotations["linkforge.io/import-source"]; ok {
		t.Errorf("d.csv adopted the hand-made link same")
	}

	// --overwrite says so: b.csv takes promo, reported as overwritten.
	code, stderr = importFile("b.csv", "--overwrite")
	expect("b.csv --overwrite", code, 0, stderr,
		`b.csv: line 2: overwritten: ShortLink `+ns+`/promo was not created by this import (imported from "`+source("a.csv")+`"); --overwrite changed url "https://a.example/promo" -> "https://b.example/promo", expiresAt "2027-01-01T00:00:00Z" -> (removed), maxUses "100" -> (removed), title "Spring promo" -> (removed)`+"\n",
		": 0 created, 0 updated, 1 unchanged, 1 overwritten, 0 conflict(s) left as they are, 0 failed;")
	if got := describe(get("promo")); got != "https://b.example/promo code=promo" {
		t.Errorf("promo after b.csv --overwrite: %s", got)
	}
	// ... and a.csv cannot take it back without saying so either.
	code, stderr = importFile("a.csv")
	expect("a.csv after b.csv", code, exitConflicts, stderr, `conflict: ShortLink `+ns+`/promo exists and was not created by this import (imported from "`+source("b.csv")+`")`)
}

// TestImportApplyWithoutList: an importer who may not list ShortLinks reads
// each link before writing it (get), and keeps the promise; one who may
// read none is refused, unless --overwrite says to write blind.
func TestImportApplyWithoutList(t *testing.T) {
	_, cl := controlPlane(t)
	fixNow(t)
	ctx := context.Background()
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "no-list-"}}
	if err := cl.Create(ctx, namespace); err != nil {
		t.Fatal(err)
	}
	ns := namespace.Name
	dir := t.TempDir()
	kubeconfigFor := func(user string, verbs ...string) string {
		t.Helper()
		role := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"linkforge.io"}, Resources: []string{"shortlinks"}, Verbs: verbs}},
		}
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: user},
			Subjects:   []rbacv1.Subject{{Kind: "User", Name: user}},
		}
		for _, o := range []client.Object{role, binding} {
			if err := cl.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		u, err := env.AddUser(envtest.User{Name: user}, nil)
		if err != nil {
			t.Fatal(err)
		}
		data, err := u.KubeConfig()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, user+".kubeconfig")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	hand := &linkv1.ShortLink{ObjectMeta: metav1.ObjectMeta{Name: "docs", Namespace: ns}, Spec: linkv1.ShortLinkSpec{URL: "https://example.com/docs"}}
	if err := cl.Create(ctx, hand, client.FieldOwner("kubectl-create")); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "links.csv")
	if err := os.WriteFile(file, []byte("url,code\nhttps://example.com/docs,docs\nhttps://example.com/new,new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	importAs := func(kubeconfig string, flags ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"import", file, "--apply", "--kubeconfig", kubeconfig, "-n", ns}, flags...), &stdout, &stderr)
		return code, stderr.String()
	}

	getter := kubeconfigFor("getter-"+ns, "get", "create", "patch")
	code, stderr := importAs(getter)
	if code != exitConflicts || !strings.Contains(stderr, "conflict: ShortLink "+ns+"/docs exists and was not created by this import (made by kubectl-create)") ||
		!strings.Contains(stderr, ": 1 created, 0 updated, 0 unchanged, 1 conflict(s) left as they are, 0 failed;") {
		t.Errorf("get without list: exit %d\n%s", code, stderr)
	}
	if code, stderr = importAs(getter); code != exitConflicts || !strings.Contains(stderr, ": 0 created, 0 updated, 1 unchanged, 1 conflict(s)") {
		t.Errorf("get without list, again: exit %d\n%s", code, stderr)
	}

	blind := kubeconfigFor("blind-"+ns, "create", "patch")
	code, stderr = importAs(blind)
	if code != 1 || !strings.Contains(stderr, "not applied: ShortLink "+ns+"/docs: the import may read neither the ShortLinks of namespace "+ns+" (list) nor this one (get)") {
		t.Errorf("neither get nor list: exit %d\n%s", code, stderr)
	}
	var docs linkv1.ShortLink
	if err := cl.Get(ctx, client.ObjectKeyFromObject(hand), &docs); err != nil || docs.Spec.Code != "" {
		t.Errorf("docs after a blind import: %+v, %v", docs.Spec, err)
	}
	code, stderr = importAs(blind, "--overwrite")
	if code != 0 || !strings.Contains(stderr, "2 applied without being read (--overwrite; the import may not get or list ShortLinks)") {
		t.Errorf("blind --overwrite: exit %d\n%s", code, stderr)
	}
}
