// Command import-bench measures `linkforge import --apply` against
// `kubectl apply` of the same manifests on the envtest control plane:
//
//	go build -o bin/linkforge ./cmd/linkforge && go run ./hack/import-bench -n 100000
//
// It starts etcd and kube-apiserver (internal/testenv), writes a linkforge
// CSV of N links, times `bin/linkforge import FILE --apply` into namespace
// bench-import, writes the same manifests with -o and times
// `kubectl apply --server-side -f` of them into namespace bench-kubectl.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/linkforge/linkforge/internal/testenv"
)

func main() {
	n := flag.Int("n", 100000, "links")
	kubectlMode := flag.String("kubectl", "--server-side", `kubectl apply mode: "--server-side" or "" (client-side)`)
	skipKubectl := flag.Bool("skip-kubectl", false, "time linkforge only")
	flag.Parse()
	if err := run(*n, *kubectlMode, *skipKubectl); err != nil {
		fmt.Fprintln(os.Stderr, "import-bench:", err)
		os.Exit(1)
	}
}

func run(n int, kubectlMode string, skipKubectl bool) error {
	env, _, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	dir, err := os.MkdirTemp("", "import-bench")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	user, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return err
	}
	var csv strings.Builder
	csv.WriteString("url,code\n")
	for i := range n {
		fmt.Fprintf(&csv, "https://example.com/page/%d,c%d\n", i, i)
	}
	file := filepath.Join(dir, "links.csv")
	if err := os.WriteFile(file, []byte(csv.String()), 0o644); err != nil {
		return err
	}
	sh := func(name string, args ...string) (time.Duration, error) {
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		start := time.Now()
		err := cmd.Run()
		return time.Since(start), err
	}
	for _, ns := range []string{"bench-import", "bench-kubectl"} {
		if _, err := sh("kubectl", "create", "namespace", ns); err != nil {
			return err
		}
	}
	linkforge := filepath.Join("bin", "linkforge")
	took, err := sh(linkforge, "import", file, "--apply", "-n", "bench-import")
	if err != nil {
		return err
	}
	fmt.Printf("RESULT linkforge import --apply, %d links: %s\n", n, took.Round(100*time.Millisecond))
	again, err := sh(linkforge, "import", file, "--apply", "-n", "bench-import")
	if err != nil {
		return err
	}
	fmt.Printf("RESULT linkforge import --apply again (unchanged), %d links: %s\n", n, again.Round(100*time.Millisecond))
	if skipKubectl {
		return nil
	}
	manifests := filepath.Join(dir, "links.yaml")
	if _, err := sh(linkforge, "import", file, "-n", "bench-kubectl", "-o", manifests); err != nil {
		return err
	}
	args := []string{"apply", "-f", manifests}
	if kubectlMode != "" {
		args = append(args, kubectlMode)
	}
	cmd := exec.Command("kubectl", args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stderr = os.Stderr
	start := time.Now()
	out, err := cmd.Output()
	took = time.Since(start)
	if err != nil {
		return err
	}
	fmt.Printf("RESULT kubectl %s, %d links: %s (%d lines of output)\n", strings.Join(args, " "), n, took.Round(100*time.Millisecond), strings.Count(string(out), "\n"))
	return nil
}
