package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/linkforge/linkforge/internal/devenv"
	"github.com/linkforge/linkforge/internal/events"
	"github.com/linkforge/linkforge/internal/otelcoltest"
)

// TestClickEventsReachCollector: a redirect through the real binaries (the
// manager and a redirector with --events-otlp-endpoint, as the service
// accounts of config/default) arrives at a real OpenTelemetry Collector
// (hack/tools/otelcol: its OTLP receiver, and its file exporter read back) as a
// log record with the attributes of docs/events.md. The Collector takes
// logs under a base path (/otlp/v1/logs) and the redirector is given the
// base URL (.../otlp), to which it appends /v1/logs as the OTLP exporter
// specification says. The Collector's first build takes minutes;
// $LINKFORGE_OTELCOL names one built (make otelcol).
func TestClickEventsReachCollector(t *testing.T) {
	g := newG(t)
	col := otelcoltest.New(t, otelcoltest.Binary(t, root), otelcoltest.LogsPath("/otlp/v1/logs"))
	col.Start(t)
	g.Eventually(col.Listening).Should(BeTrue(), "the collector listens")

	bin, tmp, cp := newCluster(t)
	kc := installOperator(t, cp, tmp)
	red := newReplica(g, "redirector", bin, tmp, kc.Redirector,
		"--events-otlp-endpoint="+col.Endpoint+"/otlp", "--events-flush-interval=100ms", "--country-header=CF-IPCountry")
	mgrProbes, err := devenv.FreeAddr()
	g.Expect(err).NotTo(HaveOccurred())
	mgr, err := devenv.Start("manager", filepath.Join(tmp, "manager.log"), filepath.Join(bin, "manager"),
		"--kubeconfig", kc.Manager, "--health-probe-bind-address", mgrProbes, "--redirect-base-url", "http://"+red.addr)
	g.Expect(err).NotTo(HaveOccurred())
	red.proc, err = devenv.Start(red.name, red.log, red.bin, red.args...)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		for _, p := range []*devenv.Process{red.proc, mgr} {
			if err := p.Stop(15 * time.Second); err != nil {
				t.Error(err)
			}
		}
		if t.Failed() {
			for _, p := range []*devenv.Process{mgr, red.proc} {
				if b, err := os.ReadFile(p.Log); err == nil {
					t.Logf("--- %s log ---\n%s", p.Name, tail(string(b), 4000))
				}
			}
			t.Logf("--- collector log ---\n%s", tail(col.Log(), 4000))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, probe := range []string{mgrProbes, red.probes} {
		g.Expect(devenv.WaitHTTP(ctx, "http://"+probe+"/readyz", http.StatusOK)).To(Succeed())
	}

	e := &env{t: t, cp: cp, redirect: "http://" + red.addr, redirectProbes: red.probes}
	e.applyYAML("apiVersion: linkforge.io/v1alpha1\nkind: ShortLink\nmetadata: {name: otel, namespace: default}\nspec: {url: 'https://example.com/otel'}\n")
	e.mustKubectl("wait", "--for=condition=Ready", "shortlink/otel", "--timeout=60s")
	code := e.mustKubectl("get", "shortlink", "otel", "-o", "jsonpath={.status.code}")
	uid := e.mustKubectl("get", "shortlink", "otel", "-o", "jsonpath={.metadata.uid}")
	c := &clickEnv{env: e, red: red}
	// Until the redirector has seen the link, the code is an orphan's.
	g.Eventually(func() (int, error) { return c.click(noFollow, "GET", "/default/"+code+"?utm_source=secret") }).Should(Equal(http.StatusFound))

	var got map[string]string
	g.Eventually(func() map[string]string {
		for _, r := range col.Records(t) {
			if r[events.AttrName] == "otel" {
				got = r
			}
		}
		return got
	}).ShouldNot(BeNil(), "the redirect's record in the collector's file")
	for k, v := range map[string]string{
		"eventName": events.EventType, events.AttrNamespace: "default", events.AttrName: "otel", events.AttrUID: uid,
		events.AttrCode: code, events.AttrOrphan: "false", events.AttrTarget: "https://example.com/otel", events.AttrRule: "-1", events.AttrVariant: "-1",
		events.AttrStatus: "302", events.AttrRefererHost: "news.example.org", events.AttrBot: "false",
		events.AttrDevice: events.DeviceMobile, events.AttrCountry: "DE", events.AttrClientAddress: "127.0.0.0",
	} {
		g.Expect(got).To(HaveKeyWithValue(k, v))
	}
	g.Expect(got[events.AttrEventID]).To(HaveLen(36))
}
