package controllers

import (
	"os"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/linkforge/linkforge/internal/testenv"
)

// The benchmarks run outside the Ginkgo suite (go test -run '^$' -bench .),
// so they start a control plane of their own, once per test binary.
var bench struct {
	once   sync.Once
	env    *envtest.Environment
	cfg    *rest.Config
	client client.Client
	err    error
}

// TestMain stops the benchmarks' control plane, if one was started.
func TestMain(m *testing.M) {
	code := m.Run()
	if bench.env != nil {
		_ = bench.env.Stop()
	}
	os.Exit(code)
}

// benchEnv returns a config and client for a running envtest control plane
// with the CRD installed.
func benchEnv(b *testing.B) (*rest.Config, client.Client) {
	b.Helper()
	bench.once.Do(func() {
		bench.env, bench.cfg, bench.err = testenv.Start()
		if bench.err != nil {
			return
		}
		// Neither side of a comparison is throttled on the client.
		bench.cfg.QPS, bench.cfg.Burst = -1, 0
		bench.client, bench.err = client.New(bench.cfg, client.Options{Scheme: scheme})
	})
	if bench.err != nil {
		b.Fatalf("starting envtest: %v", bench.err)
	}
	return rest.CopyConfig(bench.cfg), bench.client
}
