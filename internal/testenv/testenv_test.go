package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dirWith makes dir, with executable stand-ins for the named binaries.
func dirWith(t *testing.T, dir string, bins ...string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range bins {
		if err := os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestAssetsDir(t *testing.T) {
	const platform = "linux-amd64"
	tmp := t.TempDir()
	root := filepath.Join(tmp, "repo")
	dirWith(t, filepath.Join(root, "hack"))
	if err := os.WriteFile(filepath.Join(root, versionsFile), []byte("# pins\nK8S_VERSION=1.2.3\nETCD_VERSION=3.4.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	explicit := dirWith(t, filepath.Join(tmp, "explicit"), "kube-apiserver", "etcd")
	xdg := dirWith(t, filepath.Join(tmp, "xdg", "kubebuilder-envtest", "k8s", "1.2.3-"+platform), "kube-apiserver", "etcd")
	home := dirWith(t, filepath.Join(tmp, "home", ".local", "share", "kubebuilder-envtest", "k8s", "1.2.3-"+platform), "kube-apiserver", "etcd")
	store := dirWith(t, filepath.Join(tmp, "store", "k8s", "9.9.9-"+platform), "kube-apiserver", "etcd")
	etcdOnly := dirWith(t, filepath.Join(tmp, "etcd-only"), "etcd")

	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    string
		wantErr []string // substrings of the error
	}{
		{name: "KUBEBUILDER_ASSETS wins", env: map[string]string{"KUBEBUILDER_ASSETS": explicit, "XDG_DATA_HOME": filepath.Join(tmp, "xdg")}, want: explicit},
		{name: "KUBEBUILDER_ASSETS without kube-apiserver", env: map[string]string{"KUBEBUILDER_ASSETS": etcdOnly},
			wantErr: []string{"KUBEBUILDER_ASSETS=" + etcdOnly, "no kube-apiserver"}},
		{name: "store under XDG_DATA_HOME", env: map[string]string{"XDG_DATA_HOME": filepath.Join(tmp, "xdg"), "HOME": filepath.Join(tmp, "home")}, want: xdg},
		{name: "store under HOME", env: map[string]string{"HOME": filepath.Join(tmp, "home")}, want: home},
		{name: "ENVTEST_STORE and ENVTEST_K8S_VERSION", env: map[string]string{"ENVTEST_STORE": filepath.Join(tmp, "store"), "ENVTEST_K8S_VERSION": "9.9.9"}, want: store},
		{name: "missing", env: map[string]string{"XDG_DATA_HOME": "/nonexistent"},
			wantErr: []string{"no kube-apiserver and etcd in /nonexistent/kubebuilder-envtest/k8s/1.2.3-" + platform, "make envtest-assets", "make test"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := assetsDir(func(k string) string { return tc.env[k] }, root, platform)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("got %q, want an error", got)
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not say %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// The Makefile and hack/envtest-assets.sh read the same file; it must pin a version.
func TestPinnedVersion(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	pins, err := readPins(filepath.Join(root, versionsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"K8S_VERSION", "ETCD_VERSION"} {
		if pins[k] == "" {
			t.Errorf("%s pins no %s", versionsFile, k)
		}
	}
	// hack/kube-build.sh builds Kubernetes with go.mod's versions, so that
	// the packages both import compile once: that holds only while the
	// pinned release is the one go.mod's k8s.io modules come from.
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	want := "k8s.io/apimachinery v0." + strings.TrimPrefix(pins["K8S_VERSION"], "1.") + "\n"
	if !strings.Contains(string(gomod), want) {
		t.Errorf("%s pins Kubernetes %s, but go.mod does not require %q: move the pin with go.mod's k8s.io modules (hack/kube-build.sh shares their compiled packages)",
			versionsFile, pins["K8S_VERSION"], strings.TrimSpace(want))
	}
}

func TestModuleRoot(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b")
	dirWith(t, deep)
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := moduleRootFrom(deep); err != nil || got != root {
		t.Errorf("moduleRootFrom(%s) = %q, %v; want %s", deep, got, err, root)
	}
}
