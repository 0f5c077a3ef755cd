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
	helm := filepath.Join(root, "bin", "helm")
	if _, err := os.Stat(helm); err != nil {
		t.Fatalf("no %s: run `make helm` (make test does) to build the pinned helm", helm)
	}
	home := t.TempDir()
	for _, v := range []string{"HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"} {
		t.Setenv(v, filepath.Join(home, v))
	}
	return helm
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
