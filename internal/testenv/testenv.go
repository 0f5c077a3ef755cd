// Package testenv starts the envtest control plane (etcd + kube-apiserver,
// with the ShortLink CRD installed) for every suite, benchmark and local
// environment, so that plain `go test ./...` works without make once the
// binaries exist.
//
// It finds the binaries the way hack/envtest-assets.sh does, but never builds
// them: that takes minutes, so it is left to `make envtest-assets`.
package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// versionsFile holds the pinned versions, shared with the Makefile and
// hack/envtest-assets.sh; relative to the module root.
const versionsFile = "hack/envtest-versions.env"

// Start starts a control plane for the module that holds the working
// directory (go test runs in the package's directory). On error nothing is
// left running and the Environment is nil.
func Start() (*envtest.Environment, *rest.Config, error) {
	root, err := ModuleRoot()
	if err != nil {
		return nil, nil, err
	}
	return StartAt(root)
}

// StartAt starts a control plane with the CRDs of root/config/crd/bases.
func StartAt(root string) (*envtest.Environment, *rest.Config, error) {
	env, err := Environment(root)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := env.Start()
	if err != nil {
		// Start can fail once etcd and kube-apiserver run (installing the
		// CRDs, say); stop them so they do not outlive the test.
		return nil, nil, errors.Join(fmt.Errorf("starting envtest: %w", err), env.Stop())
	}
	return env, cfg, nil
}

// Environment is an envtest environment for the module at root, not yet
// started, for callers that set more options before Start.
func Environment(root string) (*envtest.Environment, error) {
	assets, err := AssetsDir(root)
	if err != nil {
		return nil, err
	}
	return &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
		// envtest's default (20s, retried five times) is how long
		// kube-apiserver takes to answer on a busy two-core machine: a
		// loaded run failed three e2e tests on it. Start waits at most
		// this, so a control plane that cannot start still fails.
		ControlPlaneStartTimeout: ControlPlaneStartTimeout,
	}, nil
}

// ControlPlaneStartTimeout bounds the start of each envtest component
// (etcd, kube-apiserver), unless KUBEBUILDER_CONTROLPLANE_START_TIMEOUT
// says otherwise.
var ControlPlaneStartTimeout = func() time.Duration {
	if v, err := time.ParseDuration(os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT")); err == nil && v > 0 {
		return v
	}
	return 2 * time.Minute
}()

// ModuleRoot returns the nearest directory at or above the working directory
// that holds a go.mod, so callers need not count ../ from their package.
func ModuleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return moduleRootFrom(wd)
}

func moduleRootFrom(dir string) (string, error) {
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.mod in %s or any directory above it", dir)
		}
		d = parent
	}
}

// AssetsDir returns the directory that holds kube-apiserver and etcd for the
// module at root.
func AssetsDir(root string) (string, error) {
	return assetsDir(os.Getenv, root, runtime.GOOS+"-"+runtime.GOARCH)
}

// assetsDir follows hack/envtest-assets.sh: KUBEBUILDER_ASSETS if set (make
// test sets it), else setup-envtest's store, at ENVTEST_STORE or
// $XDG_DATA_HOME/kubebuilder-envtest or ~/.local/share/kubebuilder-envtest,
// in k8s/<version>-<platform>, the version pinned in versionsFile unless
// ENVTEST_K8S_VERSION overrides it.
func assetsDir(getenv func(string) string, root, platform string) (string, error) {
	if dir := getenv("KUBEBUILDER_ASSETS"); dir != "" {
		if missing := missingBinaries(dir); missing != "" {
			return "", fmt.Errorf("KUBEBUILDER_ASSETS=%s has no %s; unset it to use the store that `make envtest-assets` fills", dir, missing)
		}
		return dir, nil
	}
	version := getenv("ENVTEST_K8S_VERSION")
	if version == "" {
		pins, err := readPins(filepath.Join(root, versionsFile))
		if err != nil {
			return "", err
		}
		if version = pins["K8S_VERSION"]; version == "" {
			return "", fmt.Errorf("%s: no K8S_VERSION", versionsFile)
		}
	}
	dir := filepath.Join(storeDir(getenv), "k8s", version+"-"+platform)
	if missing := missingBinaries(dir); missing != "" {
		return "", fmt.Errorf("envtest: no %s in %s (KUBEBUILDER_ASSETS is unset). "+
			"Run `make envtest-assets` (or `make test`) once in %s: it downloads or builds "+
			"kube-apiserver and etcd into that directory (minutes, first run only)", missing, dir, root)
	}
	return dir, nil
}

// storeDir is the store hack/envtest-assets.sh hands setup-envtest (--bin-dir).
func storeDir(getenv func(string) string) string {
	if store := getenv("ENVTEST_STORE"); store != "" {
		return store
	}
	data := getenv("XDG_DATA_HOME")
	if data == "" {
		data = filepath.Join(getenv("HOME"), ".local", "share")
	}
	return filepath.Join(data, "kubebuilder-envtest")
}

// missingBinaries names the control-plane binaries dir lacks, or is empty.
func missingBinaries(dir string) string {
	var missing []string
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if fi, err := os.Stat(filepath.Join(dir, bin)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, bin)
		}
	}
	return strings.Join(missing, " and ")
}

// readPins reads the KEY=value lines of the versions file.
func readPins(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the pinned envtest versions: %w", err)
	}
	defer func() { _ = f.Close() }()
	pins := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			pins[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return pins, nil
}
