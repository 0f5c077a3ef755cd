package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// promRule is what the tests read of config/monitoring/rules.yaml.
type promRule struct {
	APIVersion, Kind string
	Metadata         map[string]any
	Spec             struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert, Expr, For string
				Labels           map[string]string
				Annotations      map[string]string
			}
		}
	}
}

// monitoringExprs returns every PromQL expression of the alerts and the
// dashboard, named by where it is.
func monitoringExprs(t *testing.T) map[string]string {
	t.Helper()
	exprs := map[string]string{}
	b, err := os.ReadFile(filepath.Join(root, "config", "monitoring", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules promRule
	if err := yaml.UnmarshalStrict(b, &rules); err != nil {
		t.Fatalf("rules.yaml: %v", err)
	}
	for _, g := range rules.Spec.Groups {
		for _, r := range g.Rules {
			exprs["alert "+r.Alert] = r.Expr
		}
	}
	b, err = os.ReadFile(filepath.Join(root, "config", "monitoring", "linkforge-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	for _, p := range dash.Panels {
		for i, tg := range p.Targets {
			// Grafana's interval variable, as Prometheus would see it.
			exprs["panel "+p.Title+" #"+string(rune('A'+i))] = strings.ReplaceAll(tg.Expr, "$__rate_interval", "1m")
		}
	}
	return exprs
}

// metricNames parses expr and returns the metric names it selects.
func metricNames(expr string) ([]string, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok && vs.Name != "" {
			names = append(names, vs.Name)
		}
		return nil
	})
	return names, nil
}

// Every alert has a severity, a summary and a duration, and every
// expression of the alerts and the dashboard is valid PromQL.
func TestMonitoringRulesParse(t *testing.T) {
	g := newG(t)
	b, err := os.ReadFile(filepath.Join(root, "config", "monitoring", "rules.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var rules promRule
	g.Expect(yaml.UnmarshalStrict(b, &rules)).To(Succeed())
	alerts := 0
	for _, gr := range rules.Spec.Groups {
		for _, r := range gr.Rules {
			alerts++
			g.Expect(r.Labels).To(HaveKey("severity"), r.Alert)
			g.Expect(r.Annotations).To(HaveKey("summary"), r.Alert)
			g.Expect(r.For).NotTo(BeEmpty(), r.Alert)
		}
	}
	g.Expect(alerts).To(BeNumerically(">=", 5))
	exprs := monitoringExprs(t)
	g.Expect(len(exprs)).To(BeNumerically(">", alerts))
	for where, expr := range exprs {
		names, err := metricNames(expr)
		g.Expect(err).NotTo(HaveOccurred(), "%s: %s", where, expr)
		g.Expect(names).NotTo(BeEmpty(), "%s selects no metric", where)
	}
	_, err = metricNames("sum(rate(x[5m]) ")
	g.Expect(err).To(HaveOccurred(), "the parser accepts broken PromQL")
}

// exported is whether the /metrics pages export name: a family of that
// name, or of the histogram it is a series of.
func exported(pages []string, name string) bool {
	candidates := []string{name}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			candidates = append(candidates, base)
		}
	}
	for _, p := range pages {
		for _, c := range candidates {
			if strings.Contains(p, "\n# TYPE "+c+" ") || strings.HasPrefix(p, "# TYPE "+c+" ") {
				return true
			}
		}
	}
	return false
}

// testMonitoringMetrics: every metric the alerts and the dashboard use is
// exported by the running manager (leading) or redirector, the click
// events' series by the redirector that has them on (TestEndToEnd runs one).
func (e *env) testMonitoringMetrics(t *testing.T) {
	g := newG(t)
	var pages []string
	g.Eventually(func(g Gomega) {
		status, body, err := e.getMetricsPort("/metrics", e.scraperToken)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(200))
		g.Expect(body).To(ContainSubstring("leader_election_master_status"))
		red, err := e.fetch(e.redirectProbes + "/metrics")
		g.Expect(err).NotTo(HaveOccurred())
		pages = []string{body, red}
		if e.eventsProbes != "" {
			// The linkforge_events_* series: only a redirector with
			// click events on has them (docs/events.md).
			ev, err := e.fetch(e.eventsProbes + "/metrics")
			g.Expect(err).NotTo(HaveOccurred())
			pages = append(pages, ev)
		}
	}).Should(Succeed())
	var missing []string
	for where, expr := range monitoringExprs(t) {
		names, err := metricNames(expr)
		g.Expect(err).NotTo(HaveOccurred())
		for _, n := range names {
			if !exported(pages, n) {
				missing = append(missing, where+": "+n)
			}
		}
	}
	slices.Sort(missing)
	g.Expect(missing).To(BeEmpty(), "metrics the alerts or the dashboard use that the binaries do not export")
}
