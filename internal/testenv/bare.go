package testenv

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// StartWithoutCRDs starts etcd and kube-apiserver with no CRDs installed,
// for tests that install their own (a release manifest, a Helm chart), and
// returns the path of an admin kubeconfig. The control plane stops when t
// ends.
func StartWithoutCRDs(t testing.TB, root string) string {
	t.Helper()
	env, err := Environment(root)
	if err != nil {
		t.Fatal(err)
	}
	env.CRDDirectoryPaths = nil
	env.ErrorIfCRDPathMissing = false
	if _, err := env.Start(); err != nil {
		t.Fatalf("starting envtest: %v", errors.Join(err, env.Stop()))
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
