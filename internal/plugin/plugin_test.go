package plugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/controllers"
	"github.com/linkforge/linkforge/internal/peer"
	"github.com/linkforge/linkforge/internal/shortcode"
	"github.com/linkforge/linkforge/internal/testenv"
)

// The suite runs two control planes: one with the ShortLink CRD and the real
// controller (watching namespace linked only), one without the CRD.
const (
	linked       = "linked"       // the controller reconciles links here
	nocontroller = "nocontroller" // and not here
	baseURL      = "https://go.example.com"
)

var (
	admin     client.Client
	adminKube string // kubeconfig of a system:masters user
	bobKube   string // kubeconfig of a user without any RBAC rule
	noCRDKube string // kubeconfig of the control plane without the CRD
	suiteCtx  = context.Background()
)

func TestMain(m *testing.M) {
	pollInterval = 50 * time.Millisecond
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	dir, err := os.MkdirTemp("", "linkforge-plugin-test")
	if err != nil {
		_, _ = fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()

	// Start both control planes at once: each takes seconds.
	var (
		wg              sync.WaitGroup
		env, bare       *envtest.Environment
		cfg             *rest.Config
		envErr, bareErr error
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		env, cfg, envErr = testenv.Start()
	}()
	go func() {
		defer wg.Done()
		bare, bareErr = startWithoutCRD()
	}()
	wg.Wait()
	defer func() {
		for _, e := range []*envtest.Environment{env, bare} {
			if e != nil {
				_ = e.Stop()
			}
		}
	}()
	if err := errors.Join(envErr, bareErr); err != nil {
		_, _ = fmt.Fprintln(os.Stderr, err)
		return 1
	}

	stop, err := setup(env, cfg, bare, dir)
	if err != nil {
		_, _ = fmt.Fprintln(os.Stderr, "setting up the suite:", err)
		return 1
	}
	defer stop()
	return m.Run()
}

func startWithoutCRD() (*envtest.Environment, error) {
	root, err := testenv.ModuleRoot()
	if err != nil {
		return nil, err
	}
	env, err := testenv.Environment(root)
	if err != nil {
		return nil, err
	}
	env.CRDDirectoryPaths, env.ErrorIfCRDPathMissing = nil, false
	if _, err := env.Start(); err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	return env, nil
}

// setup writes the kubeconfigs, creates the namespaces and starts the
// controller; stop stops it.
func setup(env *envtest.Environment, cfg *rest.Config, bare *envtest.Environment, dir string) (stop func(), err error) {
	kubeconfig := func(e *envtest.Environment, user envtest.User) (string, error) {
		u, err := e.AddUser(user, nil)
		if err != nil {
			return "", err
		}
		data, err := u.KubeConfig()
		if err != nil {
			return "", err
		}
		path := filepath.Join(dir, user.Name+fmt.Sprintf("-%p", e)+".kubeconfig")
		return path, os.WriteFile(path, data, 0o600)
	}
	masters := envtest.User{Name: "admin", Groups: []string{"system:masters"}}
	if adminKube, err = kubeconfig(env, masters); err != nil {
		return nil, err
	}
	if bobKube, err = kubeconfig(env, envtest.User{Name: "bob"}); err != nil {
		return nil, err
	}
	if noCRDKube, err = kubeconfig(bare, masters); err != nil {
		return nil, err
	}

	scheme := runtime.NewScheme()
	if err := errors.Join(linkv1.AddToScheme(scheme), corev1.AddToScheme(scheme)); err != nil {
		return nil, err
	}
	if admin, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	for _, ns := range []string{linked, nocontroller} {
		if err := admin.Create(suiteCtx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return nil, err
		}
	}

	index := controllers.NewCodeIndex()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  controllers.ManagerCacheOptions([]string{linked}, index),
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(suiteCtx)
	r := &controllers.ShortLinkReconciler{
		Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("plugin-test"), RedirectBaseURL: baseURL, Index: index,
	}
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		cancel()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		return nil, errors.New("the controller's cache did not sync")
	}
	return func() {
		cancel()
		if err := <-done; err != nil {
			_, _ = fmt.Fprintln(os.Stderr, "controller:", err)
		}
	}, nil
}

// freshNamespaces deletes the ShortLinks of the suite's namespaces, so that
// a test starts from none whatever ran before it (go test -count=N runs
// every test again against the same control plane).
func freshNamespaces(t *testing.T) {
	t.Helper()
	for _, ns := range []string{linked, nocontroller} {
		if err := admin.DeleteAllOf(suiteCtx, &linkv1.ShortLink{}, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
	}
	err := wait.PollUntilContextTimeout(suiteCtx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, ns := range []string{linked, nocontroller} {
			var list linkv1.ShortLinkList
			if err := admin.List(ctx, &list, client.InNamespace(ns)); err != nil || len(list.Items) > 0 {
				return false, err
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("deleting the ShortLinks of earlier tests: %v", err)
	}
}

type result struct {
	code           int
	stdout, stderr string
}

// runVerb runs the verb in-process with --kubeconfig kubeconfig.
func runVerb(t *testing.T, kubeconfig, verb string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if kubeconfig != "" {
		args = append(args, "--kubeconfig", kubeconfig)
	}
	code := Run(verb, args, &stdout, &stderr)
	t.Logf("%s %s: exit %d\nstdout:\n%sstderr:\n%s", verb, strings.Join(args, " "), code, stdout.String(), stderr.String())
	return result{code, stdout.String(), stderr.String()}
}

func (r result) expect(t *testing.T, code int, stdout string, stderr ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit status %d, want %d", r.code, code)
	}
	if stdout != "*" && r.stdout != stdout {
		t.Errorf("stdout %q, want %q", r.stdout, stdout)
	}
	for _, s := range stderr {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %q", s)
		}
	}
}

// wantURL is the short URL the controller gives rawURL in the namespace linked.
func wantURL(t *testing.T, rawURL string) string {
	namespace := linked
	t.Helper()
	canonical, err := shortcode.Canonicalize(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return baseURL + "/" + namespace + "/" + shortcode.Code(canonical, namespace, 0)
}

func getLinkT(t *testing.T, namespace, name string) *linkv1.ShortLink {
	t.Helper()
	var l linkv1.ShortLink
	if err := admin.Get(suiteCtx, types.NamespacedName{Namespace: namespace, Name: name}, &l); err != nil {
		t.Fatal(err)
	}
	return &l
}

func TestCreateWaitsAndPrintsTheShortURL(t *testing.T) {
	freshNamespaces(t)
	const target = "https://example.com/docs"
	want := wantURL(t, target)

	runVerb(t, adminKube, "create", "docs", target, "-n", linked, "--max-uses", "10").
		expect(t, ExitOK, want+"\n", "shortlink.linkforge.io/docs created")

	// Again with the same spec: nothing to change, same answer.
	runVerb(t, adminKube, "create", "-n", linked, "docs", target, "--max-uses=10").
		expect(t, ExitOK, want+"\n", "shortlink.linkforge.io/docs unchanged")

	l := getLinkT(t, linked, "docs")
	if l.Spec.URL != target || l.Spec.MaxUses == nil || *l.Spec.MaxUses != 10 {
		t.Errorf("spec %+v", l.Spec)
	}
	if !hasManager(l, FieldManager) {
		t.Errorf("managed fields %v lack %s", l.ManagedFields, FieldManager)
	}
}

func hasManager(l *linkv1.ShortLink, manager string) bool {
	for _, f := range l.ManagedFields {
		if f.Manager == manager {
			return true
		}
	}
	return false
}

func TestCreateRefusesAnotherSpecUnlessOverwrite(t *testing.T) {
	freshNamespaces(t)
	const first, second = "https://example.com/first", "https://example.com/second"
	runVerb(t, adminKube, "create", "moving", first, "-n", linked).expect(t, ExitOK, wantURL(t, first)+"\n")

	runVerb(t, adminKube, "create", "moving", second, "-n", linked, "--ttl", "24h").
		expect(t, ExitNotReady, "",
			"shortlink linked/moving already exists with another spec",
			`url: "https://example.com/first" (wanted "https://example.com/second")`,
			"ttl: <unset> (wanted 24h0m0s)",
			"--overwrite")
	if got := getLinkT(t, linked, "moving").Spec.URL; got != first {
		t.Fatalf("the refused create changed spec.url to %s", got)
	}

	runVerb(t, adminKube, "create", "moving", second, "-n", linked, "--ttl", "24h", "--overwrite").
		expect(t, ExitOK, wantURL(t, second)+"\n", "shortlink.linkforge.io/moving configured")
	if l := getLinkT(t, linked, "moving"); l.Spec.URL != second || l.Spec.TTL == nil {
		t.Errorf("spec after --overwrite: %+v", l.Spec)
	}
}

func TestCreateReportsACodeHeldByAnotherLink(t *testing.T) {
	freshNamespaces(t)
	runVerb(t, adminKube, "create", "promo", "https://example.com/promo", "-n", linked, "--code", "sale").
		expect(t, ExitOK, baseURL+"/linked/sale\n")
	// The same URL and parameters share the code (dedup): no warning.
	res := runVerb(t, adminKube, "create", "promo-copy", "https://example.com/promo", "-n", linked, "--code", "sale")
	res.expect(t, ExitOK, baseURL+"/linked/sale\n")
	if strings.Contains(res.stderr, "warning") {
		t.Errorf("a link that shares the code was warned:\n%s", res.stderr)
	}

	res = runVerb(t, adminKube, "create", "promo2", "https://example.com/other", "-n", linked, "--code", "sale")
	res.expect(t, ExitNotReady, "", "shortlink linked/promo2 is Conflict: ", "promo")
	// Issue 54: said before the write, not only after it.
	warning := `warning: code "sale" is held by ShortLink "promo" (https://example.com/promo), which takes precedence`
	res.expect(t, ExitNotReady, "", warning, "this link will serve nothing until that code is free", "Pick another --code")
	if w, c := strings.Index(res.stderr, warning), strings.Index(res.stderr, "created"); w < 0 || c < w {
		t.Errorf("the warning does not come before the write:\n%s", res.stderr)
	}
}

// TestCreateKeepsTheCodeOfAnEditedLink: --overwrite of a link with another
// --code that is taken warns before the write that the link keeps serving
// the code it holds, and the link does (state Kept).
func TestCreateKeepsTheCodeOfAnEditedLink(t *testing.T) {
	freshNamespaces(t)
	runVerb(t, adminKube, "create", "guide", "https://example.com/guide", "-n", linked, "--code", "handbook").
		expect(t, ExitOK, baseURL+"/linked/handbook\n")
	runVerb(t, adminKube, "create", "landing", "https://example.com/landing", "-n", linked, "--code", "landing").
		expect(t, ExitOK, baseURL+"/linked/landing\n")

	res := runVerb(t, adminKube, "create", "landing", "https://example.com/landing", "-n", linked, "--code", "handbook", "--overwrite")
	res.expect(t, ExitNotReady, "",
		`warning: code "handbook" is held by ShortLink "guide" (https://example.com/guide), which takes precedence`,
		"shortlink landing will not move to it while it is; it keeps serving its code landing until then",
		"shortlink.linkforge.io/landing configured", "shortlink linked/landing is Kept: ")
	if l := getLinkT(t, linked, "landing"); l.Status.Code != "landing" || l.Status.State != linkv1.StateKept {
		t.Errorf("status code %q, state %s; want landing, Kept", l.Status.Code, l.Status.State)
	}
}

// TestCreateServerDryRun: --dry-run=server has the API server check the
// write, warns as a write does, and keeps nothing.
func TestCreateServerDryRun(t *testing.T) {
	freshNamespaces(t)
	runVerb(t, adminKube, "create", "guide", "https://example.com/guide", "-n", linked, "--code", "handbook").
		expect(t, ExitOK, baseURL+"/linked/handbook\n")
	res := runVerb(t, adminKube, "create", "promo", "https://example.com/sale", "-n", linked, "--code", "handbook", "--dry-run=server", "-o", "yaml")
	res.expect(t, ExitOK, "*", `warning: code "handbook" is held by ShortLink "guide"`, "shortlink.linkforge.io/promo created (server dry run)")
	if !strings.Contains(res.stdout, "redirectStatus: 302") || !strings.Contains(res.stdout, "namespace: linked") {
		t.Errorf("stdout is not the manifest as the API server defaulted it:\n%s", res.stdout)
	}
	var l linkv1.ShortLink
	if err := admin.Get(suiteCtx, types.NamespacedName{Namespace: linked, Name: "promo"}, &l); !apierrors.IsNotFound(err) {
		t.Errorf("--dry-run=server created the link (get: %v)", err)
	}
	// The API server's rules apply: its CEL rule refuses this, not create's checks.
	runVerb(t, adminKube, "create", "never", "https://example.com/never", "-n", linked, "--dry-run=server",
		"--activates-at", "2031-01-01T00:00:00Z", "--expires-at", "2030-01-01T00:00:00Z").
		expect(t, ExitNotReady, "", "the API server refused the ShortLink", "activatesAt must be before expiresAt")
}

func TestCreateDryRunPrintsAManifestAndCreatesNothing(t *testing.T) {
	freshNamespaces(t)
	res := runVerb(t, adminKube, "create", "gitops", "https://example.com/gitops", "--dry-run=client",
		"--code", "gitops", "--expires-at", "2030-01-02T15:04:05Z", "--status", "308", "--forward-query")
	res.expect(t, ExitOK, `apiVersion: linkforge.io/v1alpha1
kind: ShortLink
metadata:
  name: gitops
spec:
  code: gitops
  expiresAt: "2030-01-02T15:04:05Z"
  forwardQuery: true
  redirectStatus: 308
  url: https://example.com/gitops
`)

	expectServerAccepts(t, res.stdout)
	err := admin.Get(suiteCtx, types.NamespacedName{Namespace: linked, Name: "gitops"}, &linkv1.ShortLink{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("--dry-run=client created the link (get: %v)", err)
	}

	// With -n the manifest names its namespace; -o json; no cluster needed.
	runVerb(t, "", "create", "gitops", "https://example.com/gitops", "--dry-run=client", "-n", "team-a", "-o", "json",
		"--kubeconfig", filepath.Join(t.TempDir(), "none")).
		expect(t, ExitOK, `{
  "apiVersion": "linkforge.io/v1alpha1",
  "kind": "ShortLink",
  "metadata": {
    "name": "gitops",
    "namespace": "team-a"
  },
  "spec": {
    "url": "https://example.com/gitops"
  }
}
`)
}

// expectServerAccepts checks that a manifest create printed is one the
// API server accepts as it is (a server-side dry run in linked).
func expectServerAccepts(t *testing.T, manifest string) {
	t.Helper()
	var l linkv1.ShortLink
	if err := yaml.UnmarshalStrict([]byte(manifest), &l); err != nil {
		t.Fatal(err)
	}
	l.Namespace = linked
	if err := admin.Create(suiteCtx, &l, client.DryRunAll); err != nil {
		t.Errorf("the API server refuses the manifest: %v", err)
	}
}

// The card flags make spec.card, which the API server accepts as it is.
func TestCreateDryRunWithACard(t *testing.T) {
	freshNamespaces(t)
	res := runVerb(t, adminKube, "create", "invite", "https://example.com/invite", "--dry-run=client", "--max-uses", "1",
		"--card-title", "Join the team", "--card-description", "One seat, for you.", "--card-image", "https://example.com/i.png")
	res.expect(t, ExitOK, `apiVersion: linkforge.io/v1alpha1
kind: ShortLink
metadata:
  name: invite
spec:
  card:
    description: One seat, for you.
    image: https://example.com/i.png
    title: Join the team
  maxUses: 1
  url: https://example.com/invite
`)
	expectServerAccepts(t, res.stdout)
}

func TestGet(t *testing.T) {
	freshNamespaces(t)
	const target = "https://example.com/get"
	runVerb(t, adminKube, "create", "listed", target, "-n", linked, "--max-uses", "5", "--expires-at", "2031-01-01T00:00:00Z").
		expect(t, ExitOK, "*")
	code := strings.TrimPrefix(wantURL(t, target), baseURL+"/linked/")

	res := runVerb(t, adminKube, "get", "listed", "-n", linked)
	res.expect(t, ExitOK, "*")
	table, answer, _ := strings.Cut(res.stdout, "\n\n")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 2 {
		t.Fatalf("want a header and one row, got %q", res.stdout)
	}
	// Then what a click gets (internal/explain).
	if want := "code " + code + " redirects to " + target + " with 302 Found until 2031-01-01T00:00:00Z, for at most 5 uses; " +
		"link previewers (chat apps, crawlers) get a card (its namespace's, or a neutral one), not a redirect, and spend no use.\n"; answer != want {
		t.Errorf("answer %q, want %q", answer, want)
	}
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "NAME SHORT URL CODE TARGET USES LAST USED EXPIRES STATE" {
		t.Errorf("header %q", lines[0])
	}
	wantRow := []string{"listed", baseURL + "/linked/" + code, code, target, "0/5", "never", "2031-01-01T00:00:00Z", "Active"}
	if got := strings.Fields(lines[1]); strings.Join(got, " ") != strings.Join(wantRow, " ") {
		t.Errorf("row %q, want %q", got, wantRow)
	}

	// Once a redirector has written a use, LAST USED says how long ago.
	var l linkv1.ShortLink
	if err := admin.Get(suiteCtx, types.NamespacedName{Namespace: linked, Name: "listed"}, &l); err != nil {
		t.Fatal(err)
	}
	l.Status.Uses, l.Status.LastUsedAt = 1, &metav1.Time{Time: time.Now().Add(-90 * time.Minute)}
	if err := admin.Status().Update(suiteCtx, &l); err != nil {
		t.Fatal(err)
	}
	res = runVerb(t, adminKube, "get", "listed", "-n", linked)
	res.expect(t, ExitOK, "*")
	table, _, _ = strings.Cut(res.stdout, "\n\n")
	lines = strings.Split(strings.TrimSpace(table), "\n")
	wantRow = []string{"listed", baseURL + "/linked/" + code, code, target, "1/5", "90m", "ago", "2031-01-01T00:00:00Z", "Active"}
	if got := strings.Fields(lines[len(lines)-1]); strings.Join(got, " ") != strings.Join(wantRow, " ") {
		t.Errorf("row %q, want %q", got, wantRow)
	}

	// The namespace's table lists every link of it; -A adds a NAMESPACE column.
	res = runVerb(t, adminKube, "get", "-n", linked)
	res.expect(t, ExitOK, "*")
	if !strings.Contains(res.stdout, "\nlisted ") {
		t.Errorf("the namespace's table lacks listed")
	}
	res = runVerb(t, adminKube, "get", "-A")
	res.expect(t, ExitOK, "*")
	if !strings.HasPrefix(res.stdout, "NAMESPACE ") || !strings.Contains(res.stdout, "\nlinked ") {
		t.Errorf("get -A: %q", res.stdout)
	}

	runVerb(t, adminKube, "get", "nosuchlink", "-n", linked).
		expect(t, ExitNotReady, "", `shortlink "nosuchlink" not found in namespace linked`)
	runVerb(t, adminKube, "get", "-n", "default").expect(t, ExitOK, "", "No shortlinks found in default namespace.")
}

func TestOpen(t *testing.T) {
	freshNamespaces(t)
	const target = "https://example.com/open"
	want := wantURL(t, target)
	runVerb(t, adminKube, "create", "opened", target, "-n", linked).expect(t, ExitOK, want+"\n")

	runVerb(t, adminKube, "open", "opened", "-n", linked).expect(t, ExitOK, want+"\n")

	// --browser hands the URL to the opener.
	dir := t.TempDir()
	opener := filepath.Join(dir, "opener")
	if err := os.WriteFile(opener, []byte("#!/bin/sh\necho \"$1\" > "+filepath.Join(dir, "opened")+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	defer func(f func() (string, error)) { browserCommand = f }(browserCommand)
	browserCommand = func() (string, error) { return opener, nil }
	runVerb(t, adminKube, "open", "opened", "-n", linked, "--browser").expect(t, ExitOK, want+"\n")
	if got, _ := os.ReadFile(filepath.Join(dir, "opened")); string(got) != want+"\n" {
		t.Errorf("the browser was handed %q, want %q", got, want)
	}

	runVerb(t, adminKube, "open", "nosuchlink", "-n", linked).expect(t, ExitNotReady, "", "not found")
}

// TestOpenAndGetSayWhatAClickGets: issue 54's link, expired with an
// expiredURL, redirects there: create, open and get say so, not 410.
func TestOpenAndGetSayWhatAClickGets(t *testing.T) {
	freshNamespaces(t)
	const target, ended = "https://example.com/sale", "https://example.com/sale-is-over"
	want := wantURL(t, target)
	says := "code " + strings.TrimPrefix(want, baseURL+"/linked/") + " expired at 2020-01-01T00:00:00Z and redirects to " + ended + " with 302 Found, its spec.expiredURL"
	runVerb(t, adminKube, "create", "sale", target, "-n", linked, "--expires-at", "2020-01-01T00:00:00Z", "--expired-url", ended).
		expect(t, ExitOK, want+"\n", "note: "+says)
	runVerb(t, adminKube, "open", "sale", "-n", linked).
		expect(t, ExitNotReady, want+"\n", "shortlink linked/sale is Expired: "+says)
	res := runVerb(t, adminKube, "get", "sale", "-n", linked)
	res.expect(t, ExitOK, "*")
	if !strings.Contains(res.stdout, "\n\n"+says+".\n") || strings.Contains(res.stdout, "410") {
		t.Errorf("get does not say what a click gets:\n%s", res.stdout)
	}

	// A status the controller wrote before the expiry (it is behind, or
	// down): the redirectors read the expiry on their clock, and so do
	// open and get.
	stale := &linkv1.ShortLink{ObjectMeta: metav1.ObjectMeta{Name: "stale", Namespace: nocontroller},
		Spec: linkv1.ShortLinkSpec{URL: target, ExpiresAt: &metav1.Time{Time: time.Now().Add(-time.Minute)}, ExpiredURL: ended}}
	if err := admin.Create(suiteCtx, stale); err != nil {
		t.Fatal(err)
	}
	stale.Status.State, stale.Status.Code = linkv1.StateActive, "stalecode"
	stale.Status.ObservedGeneration, stale.Status.ConfirmedGeneration = stale.Generation, stale.Generation
	meta.SetStatusCondition(&stale.Status.Conditions, metav1.Condition{
		Type: linkv1.ConditionReady, Status: metav1.ConditionTrue, Reason: linkv1.ReasonCodeAssigned,
		Message: "code stalecode redirects to " + target, ObservedGeneration: stale.Generation,
	})
	if err := admin.Status().Update(suiteCtx, stale); err != nil {
		t.Fatal(err)
	}
	runVerb(t, adminKube, "open", "stale", "-n", nocontroller).
		expect(t, ExitNotReady, "/nocontroller/stalecode\n", "shortlink nocontroller/stale is Expired: code stalecode expired at ", "redirects to "+ended)
	res = runVerb(t, adminKube, "get", "-n", nocontroller)
	if row := strings.Fields(strings.TrimSpace(res.stdout)); len(row) == 0 || row[len(row)-1] != "Expired" {
		t.Errorf("get lists the link as %q, want Expired:\n%s", row, res.stdout)
	}
}

// Without a controller, create times out; once a status says Ready (as a
// manager without --redirect-base-url writes it), the short URL is a path.
func TestWithoutControllerAndWithoutBaseURL(t *testing.T) {
	freshNamespaces(t)
	const target = "https://example.com/slow"
	runVerb(t, adminKube, "create", "slow", target, "-n", nocontroller, "--timeout", "1s").
		expect(t, ExitNotReady, "", "shortlink.linkforge.io/slow created",
			"shortlink nocontroller/slow is not Ready after 1s: no controller has reconciled it",
			"Is the linkforge manager running?")

	runVerb(t, adminKube, "open", "slow", "-n", nocontroller).
		expect(t, ExitNotReady, "", "shortlink nocontroller/slow has no short URL yet")

	// What the controller writes, without a redirect base URL.
	l := getLinkT(t, nocontroller, "slow")
	l.Status.State, l.Status.Code = linkv1.StateActive, "slowcode"
	l.Status.ObservedGeneration, l.Status.ConfirmedGeneration = l.Generation, l.Generation
	meta.SetStatusCondition(&l.Status.Conditions, metav1.Condition{
		Type: linkv1.ConditionReady, Status: metav1.ConditionTrue, Reason: linkv1.ReasonActive,
		Message: "serving", ObservedGeneration: l.Generation,
	})
	if err := admin.Status().Update(suiteCtx, l); err != nil {
		t.Fatal(err)
	}

	runVerb(t, adminKube, "create", "slow", target, "-n", nocontroller).
		expect(t, ExitOK, "/nocontroller/slowcode\n", "unchanged", "runs without --redirect-base-url")
	runVerb(t, adminKube, "open", "slow", "-n", nocontroller).
		expect(t, ExitOK, "/nocontroller/slowcode\n", "runs without --redirect-base-url")
	runVerb(t, adminKube, "open", "slow", "-n", nocontroller, "--browser").
		expect(t, ExitNotReady, "/nocontroller/slowcode\n", "it has no host")
}

func TestInvalidURL(t *testing.T) {
	freshNamespaces(t)
	runVerb(t, adminKube, "create", "bad", "ftp://example.com/file", "-n", linked).
		expect(t, ExitNotReady, "", `invalid URL "ftp://example.com/file": scheme`)
	runVerb(t, adminKube, "create", "bad", "not a url", "--dry-run=client").
		expect(t, ExitNotReady, "", `invalid URL "not a url"`)

	// Past the client-side check, the API server's CEL rule refuses it too.
	link := &linkv1.ShortLink{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: linked}, Spec: linkv1.ShortLinkSpec{URL: "ftp://example.com/file"}}
	var stderr bytes.Buffer
	code := report(apply(suiteCtx, admin, link, false, false, &stderr), &stderr)
	if code != ExitNotReady || !strings.Contains(stderr.String(), "the API server refused the ShortLink") ||
		!strings.Contains(stderr.String(), "url must be an absolute URL starting with http:// or https://") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

// TestDestinationPolicy: with the admission policies of
// config/destination-policy installed, create says which policy refused the
// link and why (exit 1), and reports a link the controller blocks.
func TestDestinationPolicy(t *testing.T) {
	freshNamespaces(t)
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	remove, err := testenv.InstallDestinationPolicy(suiteCtx, admin, root, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := remove(suiteCtx); err != nil {
			t.Error(err)
		}
	})
	// A new namespace each run: a deleted one stays Terminating in envtest.
	restricted := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "restricted-",
		Annotations: map[string]string{"linkforge.io/allowed-hosts": "*.example.com, docs.vendor.io"}}}
	if err := admin.Create(suiteCtx, restricted); err != nil {
		t.Fatal(err)
	}
	ns := restricted.Name
	t.Cleanup(func() { _ = admin.Delete(suiteCtx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })

	runVerb(t, adminKube, "create", "phish", "https://login.evil.example/", "-n", ns).
		expect(t, ExitNotReady, "", "error: the admission policy allowed-hosts refused the ShortLink: "+
			`host "login.evil.example" is not allowed in namespace `+ns+`: its linkforge.io/allowed-hosts annotation allows only *.example.com, docs.vendor.io`+"\n")
	if r := runVerb(t, adminKube, "create", "phish", "https://login.evil.example/", "-n", ns); strings.Contains(r.stderr, "created") ||
		strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("one line, and nothing created: %q", r.stderr)
	}

	// A host admission cannot compare (an IPv4 address in decimal) is
	// admitted, and the controller blocks it.
	deny := &linkv1.DestinationDenyList{ObjectMeta: metav1.ObjectMeta{Name: "plugin-metadata"},
		Spec: linkv1.DestinationDenyListSpec{Hosts: []linkv1.HostPattern{"169.254.169.254"}}}
	if err := admin.Create(suiteCtx, deny); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(suiteCtx, deny) })
	// Once the controller blocks a probe, its cache holds the list.
	probe := &linkv1.ShortLink{ObjectMeta: metav1.ObjectMeta{Name: "metadata-probe", Namespace: linked}, Spec: linkv1.ShortLinkSpec{URL: "http://0xa9fea9fe/"}}
	if err := admin.Create(suiteCtx, probe); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(suiteCtx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return getLinkT(t, linked, probe.Name).Status.State == linkv1.StateBlocked, nil
	}); err != nil {
		t.Fatalf("the controller does not block the probe: %v", err)
	}
	runVerb(t, adminKube, "create", "metadata", "http://2852039166/latest/", "-n", linked).
		expect(t, ExitNotReady, "", "shortlink.linkforge.io/metadata created\n",
			`error: shortlink linked/metadata is Blocked: host "2852039166" (the address 169.254.169.254) is denied in every namespace by DestinationDenyList "plugin-metadata" (entry 169.254.169.254)`)
}

func TestForbidden(t *testing.T) {
	freshNamespaces(t)
	runVerb(t, bobKube, "get", "-n", linked).
		expect(t, ExitCluster, "", "you may not list shortlinks.linkforge.io in namespace linked",
			`User "bob" cannot list resource "shortlinks"`, "kubectl auth can-i list shortlinks.linkforge.io -n linked")
	runVerb(t, bobKube, "get", "-A").
		expect(t, ExitCluster, "", "you may not list shortlinks.linkforge.io in all namespaces", "can-i list shortlinks.linkforge.io -A")
	runVerb(t, bobKube, "create", "mine", "https://example.com/", "-n", linked).
		expect(t, ExitCluster, "", "you may not get shortlinks.linkforge.io in namespace linked")
	runVerb(t, bobKube, "open", "docs", "-n", linked).
		expect(t, ExitCluster, "", "you may not get shortlinks.linkforge.io in namespace linked")
}

func TestMissingCRD(t *testing.T) {
	freshNamespaces(t)
	for _, args := range [][]string{
		{"get"},
		{"get", "docs"},
		{"create", "docs", "https://example.com/"},
		{"open", "docs"},
	} {
		runVerb(t, noCRDKube, args[0], args[1:]...).
			expect(t, ExitCluster, "", "the ShortLink CRD is not installed in this cluster: run `make install` or `kubectl apply -k config/crd`")
	}
}

func TestClusterUnreachable(t *testing.T) {
	freshNamespaces(t)
	runVerb(t, adminKube, "get", "--server", "https://127.0.0.1:1").
		expect(t, ExitCluster, "", "cannot reach the cluster")
	runVerb(t, "", "get", "--kubeconfig", filepath.Join(t.TempDir(), "missing")).
		expect(t, ExitCluster, "", "error: ")
}

func TestUsage(t *testing.T) {
	freshNamespaces(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "onlyname"}, "create takes NAME and URL, got 1 argument(s)"},
		{[]string{"create", "a", "https://example.com/", "extra"}, "got 3 argument(s)"},
		{[]string{"create", "Not_A_Name", "https://example.com/"}, `invalid NAME "Not_A_Name"`},
		{[]string{"create", "a", "https://example.com/", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"create", "a", "https://example.com/", "--ttl", "1h", "--expires-at", "2030-01-01T00:00:00Z"}, "at most one of --ttl and --expires-at"},
		{[]string{"create", "a", "https://example.com/", "--ttl", "-1h"}, "invalid --ttl -1h0m0s"},
		{[]string{"create", "a", "https://example.com/", "--ttl", "1w"}, `invalid --ttl "1w": use a duration such as 168h, 90m or 1h30m`},
		{[]string{"create", "a", "https://example.com/", "--timeout", "soon"}, `invalid --timeout "soon": use a duration such as 168h`},
		{[]string{"create", "a", "https://example.com/", "--expires-at", "tomorrow"}, `invalid --expires-at "tomorrow"`},
		{[]string{"create", "a", "https://example.com/", "--max-uses", "0"}, "invalid --max-uses 0"},
		{[]string{"create", "a", "https://example.com/", "--status", "200"}, "invalid --status 200"},
		{[]string{"create", "a", "https://example.com/", "--code", "no/slash"}, `invalid --code "no/slash"`},
		{[]string{"create", "a", "https://example.com/", "--card-title", ""}, "invalid --card-title: use 1 to 200 characters"},
		{[]string{"create", "a", "https://example.com/", "--card-title", strings.Repeat("x", 201)}, "invalid --card-title: use 1 to 200 characters"},
		{[]string{"create", "a", "https://example.com/", "--card-title", "two\nlines"}, `invalid --card-title "two\nlines": no control characters`},
		{[]string{"create", "a", "https://example.com/", "--card-description", strings.Repeat("x", 501)}, "invalid --card-description: use 1 to 500 characters"},
		{[]string{"create", "a", "https://example.com/", "--card-image", "javascript:alert(1)"}, `invalid --card-image "javascript:alert(1)"`},
		{[]string{"create", "a", "https://example.com/", "--dry-run=all"}, `invalid --dry-run "all"`},
		{[]string{"create", "a", "https://example.com/", "-o", "yaml"}, "-o is for --dry-run"},
		{[]string{"create", "a", "https://example.com/", "--dry-run=client", "-o", "wide"}, `invalid -o "wide"`},
		{[]string{"get", "a", "b"}, "get takes at most one NAME, got 2"},
		{[]string{"get", "a", "-A"}, "get NAME looks in one namespace"},
		{[]string{"open"}, "open takes one NAME, got 0 argument(s)"},
	} {
		runVerb(t, "", tc.args[0], tc.args[1:]...).expect(t, ExitUsage, "", "error: ", tc.want, "See 'linkforge "+tc.args[0]+" --help' for usage.")
	}
	runVerb(t, "", "create", "--help").expect(t, ExitOK, "", "usage: linkforge create NAME URL", "--kubeconfig string", "-n, --namespace string")
}

// rotate-peer-key against the control plane: it needs the Secret (a clear
// message without it), replaces the key keeping the one before, and bob,
// who may not update Secrets, is told so.
func TestRotatePeerKey(t *testing.T) {
	const ns = "linkforge-system"
	if err := admin.Create(suiteCtx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	runVerb(t, adminKube, "rotate-peer-key", "--secret", "no-such-key").
		expect(t, ExitNotReady, "", "no Secret linkforge-system/no-such-key: the manager creates it")
	runVerb(t, adminKube, "rotate-peer-key", "--previous-window", "-1s").
		expect(t, ExitUsage, "", "--previous-window -1s: a duration of 0 or more")
	runVerb(t, adminKube, "rotate-peer-key", "extra").
		expect(t, ExitUsage, "", "rotate-peer-key takes no arguments")

	name := types.NamespacedName{Namespace: ns, Name: "linkforge-peer-key"}
	before := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name.Name, // as the manager makes it
		Annotations: map[string]string{peer.GenerationAnnotation: "1795000000"}}, Data: map[string][]byte{peer.SecretKeyField: peer.RandomKey()}}
	if err := admin.Create(suiteCtx, before); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := admin.Get(suiteCtx, name, before); err != nil {
		t.Fatal(err)
	}
	r := runVerb(t, adminKube, "rotate-peer-key")
	r.expect(t, ExitOK, "*")
	after := &corev1.Secret{}
	if err := admin.Get(suiteCtx, name, after); err != nil {
		t.Fatal(err)
	}
	gen := after.Annotations[peer.GenerationAnnotation]
	if bytes.Equal(after.Data[peer.SecretKeyField], before.Data[peer.SecretKeyField]) ||
		!bytes.Equal(after.Data[peer.SecretPreviousField], before.Data[peer.SecretKeyField]) ||
		gen <= before.Annotations[peer.GenerationAnnotation] || !strings.Contains(r.stdout, "to generation "+gen+".") {
		t.Errorf("after the rotation: generation %s (before %s), previous kept %v; stdout %q", gen, before.Annotations[peer.GenerationAnnotation],
			bytes.Equal(after.Data[peer.SecretPreviousField], before.Data[peer.SecretKeyField]), r.stdout)
	}
	runVerb(t, bobKube, "rotate-peer-key").
		expect(t, ExitCluster, "", "you may not read and update Secret linkforge-system/linkforge-peer-key", "kubectl auth can-i update secrets/linkforge-peer-key -n linkforge-system")
}
