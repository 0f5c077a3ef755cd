package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// BenchmarkClickOutage: the real redirector with click events on (the
// flags of TestEndToEnd's events redirector: a buffer of clickBuffer),
// pushing to a CloudEvents receiver, under clicks from clickWorkers
// keep-alive clients: clickBaseline with the receiver up, then clickOutage with it
// down (its connections cut, as a crashed receiver's are). It reports the
// redirects' p50 and p99 with the receiver up and down, and the ratio of
// the p99s. Goal: the outage does not slow serving, p99 while it is down at
// most 3 times that before plus 20 ms. (TestEndToEnd's outage test asserts
// what holds at any speed: every click redirected, the events kept within
// the buffer, every loss counted.)
//
//	KUBEBUILDER_ASSETS=... go test ./internal/e2e -run '^$' -bench ClickOutage -benchtime 1x
func BenchmarkClickOutage(b *testing.B) {
	bin, tmp, cp := newCluster(b)
	c := benchClient(b, cp)
	const ns, code = "outage", "outage0001"
	if out, err := cp.KubectlCmd(context.Background(), "create", "namespace", ns).CombinedOutput(); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	// The status the controller would write (no manager runs).
	l := &linkv1.ShortLink{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "clicked"},
		Spec:       linkv1.ShortLinkSpec{URL: "https://example.com/clicked"},
	}
	if err := c.Create(context.Background(), l); err != nil {
		b.Fatal(err)
	}
	l.Status = linkv1.ShortLinkStatus{Code: code, ObservedGeneration: l.Generation, ConfirmedGeneration: l.Generation}
	if err := c.Status().Update(context.Background(), l); err != nil {
		b.Fatal(err)
	}
	path := "/" + ns + "/" + code
	sink := newClickSink(b)
	red := startRedirectors(b, cp, bin, tmp, "events", 1, []string{path}, clickEventFlags(sink.URL)...)[0]
	clicks := &clickEnv{sink: sink, red: &replica{addr: red.addr, probes: red.probes}}
	g := NewWithT(b)
	up := clicks.load(g, path, clickBaseline, 0)
	sink.set(func(s *clickSink) { s.down = true })
	down := clicks.load(g, path, clickOutage, 0)
	sink.set(func(s *clickSink) { s.down = false })
	for b.Loop() {
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p99Up, p99Down := quantile(up, 0.99), quantile(down, 0.99)
	b.ReportMetric(ms(quantile(up, 0.5)), "ms-p50-up")
	b.ReportMetric(ms(p99Up), "ms-p99-up")
	b.ReportMetric(ms(quantile(down, 0.5)), "ms-p50-down")
	b.ReportMetric(ms(p99Down), "ms-p99-down")
	b.ReportMetric(float64(p99Down)/float64(max(p99Up, time.Microsecond)), "p99-down/up")
	goal := "met"
	if p99Down > 3*p99Up+20*time.Millisecond {
		goal = "MISSED"
	}
	b.Logf("%d redirects with the receiver up (p99 %s), %d with it down (p99 %s); goal p99 down <= 3 x up + 20ms: %s",
		len(up), p99Up, len(down), p99Down, goal)
}
