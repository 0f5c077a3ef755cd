package main

import (
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/linkforge/linkforge/controllers"
)

// TestFlagDefaults runs the manager's flag setup (run with --version, which
// returns after parsing) and checks that the scaling flags default to
// controllers.Defaults, which the convergence benchmark runs, and to the
// values the README documents.
func TestFlagDefaults(t *testing.T) {
	args, flags := os.Args, flag.CommandLine
	defer func() { os.Args, flag.CommandLine = args, flags }()
	// run defines its flags on the command line's set: a fresh one each
	// run, so the test passes when run again (go test -count).
	flag.CommandLine = flag.NewFlagSet("manager", flag.ContinueOnError)
	os.Args = []string{"manager", "--version"}
	if err := run(); err != nil {
		t.Fatal(err)
	}
	def := func(name string) string {
		f := flag.CommandLine.Lookup(name)
		if f == nil {
			t.Fatalf("no flag --%s", name)
		}
		return f.DefValue
	}
	for _, c := range []struct{ flag, want, documented string }{
		{"kube-api-qps", strconv.FormatFloat(float64(controllers.Defaults.QPS), 'g', -1, 64), "-1"},
		{"kube-api-burst", strconv.Itoa(controllers.Defaults.Burst), "0"},
		{"max-concurrent-reconciles", strconv.Itoa(controllers.Defaults.MaxConcurrentReconciles), "16"},
		{"reap-rate", strconv.FormatFloat(controllers.DefaultReapRate, 'g', -1, 64), "0"},
		{"reap-workers", strconv.Itoa(controllers.DefaultReapWorkers), "16"},
		{"namespaces", "", ""},
		{"leader-election-id", "", ""},
		{"dedup", "true", "true"},
		{"code-metrics-namespaces", strconv.Itoa(controllers.DefaultMetricsNamespaceLimit), "500"},
	} {
		if got := def(c.flag); got != c.want || got != c.documented {
			t.Errorf("--%s defaults to %q, want %q (controllers.Defaults) and %q (README)", c.flag, got, c.want, c.documented)
		}
	}
}

func TestMetricsNamespaceLimit(t *testing.T) {
	for flagValue, want := range map[int]int{0: -1, -3: -1, 1: 1, 500: 500} {
		if got := metricsNamespaceLimit(flagValue); got != want {
			t.Errorf("--code-metrics-namespaces=%d: limit %d, want %d", flagValue, got, want)
		}
	}
}

// TestGatewayHostsOptions: --gateway turns the Gateway hosts on, and each
// bad value of its flags is refused with a message naming the flag.
func TestGatewayHostsOptions(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "linkforge-system")
	good := options{gateway: "infra/public", gatewaySecret: controllers.DefaultGatewayCertificateSecret,
		gatewayRedirector: "linkforge-redirector", gatewayRedirectorPort: 80, gatewayListenerPort: 443}
	g, err := gatewayHostsOptions(good)
	if err != nil {
		t.Fatal(err)
	}
	if g.Gateway.String() != "infra/public" || g.Redirector.String() != "linkforge-system/linkforge-redirector" || g.RedirectorPort != 80 || g.ListenerPort != 443 {
		t.Errorf("got %+v", g)
	}
	if g, err := gatewayHostsOptions(options{}); g != nil || err != nil {
		t.Errorf("no --gateway: %+v, %v", g, err)
	}
	for _, tc := range []struct {
		name   string
		change func(*options)
		want   string
	}{
		{"no namespace", func(o *options) { o.gateway = "public" }, "--gateway"},
		{"extra slash", func(o *options) { o.gateway = "a/b/c" }, "--gateway"},
		{"empty service", func(o *options) { o.gatewayRedirector = "ns/" }, "--gateway-redirector-service"},
		{"secret without host", func(o *options) { o.gatewaySecret = "tls" }, "{host}"},
		{"bad secret", func(o *options) { o.gatewaySecret = "TLS_{host}" }, "--gateway-certificate-secret"},
		{"port", func(o *options) { o.gatewayRedirectorPort = 70000 }, "--gateway-redirector-port"},
		{"listener port", func(o *options) { o.gatewayListenerPort = 0 }, "--gateway-listener-port"},
	} {
		o := good
		tc.change(&o)
		if _, err := gatewayHostsOptions(o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
}
