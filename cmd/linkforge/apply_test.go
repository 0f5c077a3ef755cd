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
	apply := func() (int, string) {
		var stdout, stderr bytes.Buffer
		code := run([]string{"import", file, "--apply", "--kubeconfig", kubeconfig, "-n", ns, "--workers", "4"}, &stdout, &stderr)
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
		"linkforge import: 3 ShortLink(s) from " + file + " (csv) applied in ",
		": 3 created, 0 updated, 0 unchanged, 0 failed; 1 row(s) skipped\n",
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
	}
	if len(got) != 3 || got["docs"] != "https://example.com/docs code=docs" || !strings.HasPrefix(got["launch-ccf56ef5"], "https://example.com/launch code=Launch maxUses=100 expires=2027-01-01") {
		t.Errorf("links in %s: %v", ns, got)
	}

	// Again: nothing changes.
	code, stderr = apply()
	if code != 1 || !strings.Contains(stderr, ": 0 created, 0 updated, 3 unchanged, 0 failed; 1 row(s) skipped\n") {
		t.Errorf("second run: exit %d\n%s", code, stderr)
	}

	// The source changed one link and lost its bad row: one update, exit 0.
	write(strings.Replace(strings.Replace(rows, "https://example.com/docs,docs", "https://example.com/docs/v2,docs", 1), "ftp://example.com/file,ftp,,\n", "", 1))
	code, stderr = apply()
	if code != 0 || !strings.Contains(stderr, ": 0 created, 1 updated, 2 unchanged, 0 failed; 0 row(s) skipped\n") {
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
