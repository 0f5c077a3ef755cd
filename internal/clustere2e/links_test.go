//go:build clustere2e

package clustere2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testSamples: config/samples become Ready and the redirector Service
// answers them: 302 to the destination, 301 for the sample that asks for
// it, 404 for an unknown code; a QR code and a preview page too.
func (c *cluster) testSamples(t *testing.T) {
	g, c := newG(t), c.in(t)
	c.dumpOnFailure()
	c.mustKubectl("apply", "-k", filepath.Join(root, "config", "samples"))
	c.mustKubectl("wait", "--for=condition=Ready", "shortlink", "--all", "-n", "default", "--timeout=90s")
	svc := c.redirectorURL()
	code := c.mustKubectl("get", "shortlink", "docs", "-n", "default", "-o", "jsonpath={.status.code}")
	url := c.mustKubectl("get", "shortlink", "docs", "-n", "default", "-o", "jsonpath={.spec.url}")
	g.Expect(code).To(HaveLen(10))

	for path, want := range map[string]string{
		"/default/" + code:     "302 " + url,
		"/default/handbook":    "301 https://example.com/handbook",
		"/default/nope":        "404 ",
		"/no-such-namespace/a": "404 ",
	} {
		// Every redirector (a new connection each time: kube-proxy picks one)
		// answers the same once it has the link.
		g.Eventually(func() (string, error) {
			status, loc, err := click(http.MethodGet, svc+path)
			return fmt.Sprintf("%d %s", status, loc), err
		}).Should(Equal(want), path)
		for i := 0; i < 6; i++ {
			status, loc, err := click(http.MethodGet, svc+path)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(fmt.Sprintf("%d %s", status, loc)).To(Equal(want), path)
		}
	}

	// A QR code of /<namespace>/<code> draws only the public URL the
	// operator set (--public-base-url; the chart's baseURL): without one it
	// answers 404 and says so (docs/serving.md#qr-codes).
	resp, err := clicker.Get(svc + "/default/" + code + "/qr")
	g.Expect(err).NotTo(HaveOccurred())
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if c.redirectorArg("--public-base-url") {
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
		g.Expect(resp.Header.Get("Content-Type")).To(Equal("image/png"))
		g.Expect(string(body)).To(HavePrefix("\x89PNG"))
	} else {
		g.Expect(resp.StatusCode).To(Equal(http.StatusNotFound), string(body))
		g.Expect(string(body)).To(ContainSubstring("public-base-url"))
	}

	resp, err = clicker.Get(svc + "/default/" + code + "+")
	g.Expect(err).NotTo(HaveOccurred())
	body, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(string(body)).To(ContainSubstring("https://kubernetes.io/docs/concepts/overview/"))
}

// testMaxUses: a limited link clicked through the Service (both replicas)
// serves exactly maxUses redirects, then 410; status.uses says so.
func (c *cluster) testMaxUses(t *testing.T) {
	g, c := newG(t), c.in(t)
	c.dumpOnFailure()
	ns := c.namespace("maxuses")
	const maxUses = 25
	code := c.link(ns, "limited", "https://example.com/limited", maxUses)
	url := c.redirectorURL() + "/" + ns + "/" + code
	// HEAD is not a use: wait until every redirector has the link.
	g.Eventually(func() (int, error) {
		status, _, err := click(http.MethodHead, url)
		return status, err
	}).Should(Equal(http.StatusFound))

	// Clicks until ten 410s; a 503 (no quota at hand yet) ends an attempt,
	// and the next comes 200ms later, as Retry-After asks, roughly.
	counts := map[int]int{}
	g.Eventually(func(g Gomega) {
		for counts[http.StatusGone] < 10 {
			status, _, err := click(http.MethodGet, url)
			g.Expect(err).NotTo(HaveOccurred())
			counts[status]++
			if status != http.StatusFound && status != http.StatusGone && status != http.StatusServiceUnavailable ||
				counts[http.StatusFound] > maxUses {
				StopTrying(fmt.Sprintf("answered %d; answers so far %v (maxUses %d)", status, counts, maxUses)).Now()
			}
			g.Expect(status).NotTo(Equal(http.StatusServiceUnavailable))
		}
	}).WithPolling(200 * time.Millisecond).Should(Succeed())
	t.Logf("answers: %v", counts)
	g.Expect(counts[http.StatusFound]).To(Equal(maxUses))
	g.Eventually(func() (string, error) {
		uses, state, err := c.status(ns, "limited")
		return fmt.Sprintf("%d %s", uses, state), err
	}).Should(Equal(fmt.Sprintf("%d Exhausted", maxUses)))
}

// testPreviewers: a single-use link pasted into Slack, then clicked by its
// person, through the Service: Slack's previewer gets the link's card
// (200, no Location) and no use, however often it asks, from either
// replica; the person gets the one redirect, then 410.
func (c *cluster) testPreviewers(t *testing.T) {
	g, c := newG(t), c.in(t)
	c.dumpOnFailure()
	ns := c.namespace("previewers")
	code := c.link(ns, "invite", "https://example.com/invite-secret", 1)
	url := c.redirectorURL() + "/" + ns + "/" + code
	g.Eventually(func() (int, error) {
		status, _, err := click(http.MethodHead, url)
		return status, err
	}).Should(Equal(http.StatusFound))
	const slack = "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"
	const previews = 6
	for i := range previews {
		status, location, err := clickAs(http.MethodGet, url, slack)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusOK), "Slack's fetch %d", i)
		g.Expect(location).To(BeEmpty(), "Slack's fetch %d", i)
	}
	const browser = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
	// A 503 (no quota at hand yet on the replica asked) is retried.
	var status int
	var location string
	g.Eventually(func(g Gomega) {
		var err error
		status, location, err = clickAs(http.MethodGet, url, browser)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).NotTo(Equal(http.StatusServiceUnavailable))
	}).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Expect(status).To(Equal(http.StatusFound))
	g.Expect(location).To(Equal("https://example.com/invite-secret"))
	g.Eventually(func() (int, error) {
		status, _, err := clickAs(http.MethodGet, url, browser)
		return status, err
	}).WithPolling(200 * time.Millisecond).Should(Equal(http.StatusGone))
	g.Eventually(func() (string, error) {
		out, err := c.kubectl("", "get", "shortlink", "-n", ns, "invite", "-o", "jsonpath={.status.uses} {.status.previewerFetches} {.status.state}")
		return out, err
	}).Should(Equal(fmt.Sprintf("1 %d Exhausted", previews)))
}

// testMetrics scrapes the pods' own ports as the ServiceMonitors of
// config/prometheus do: each redirector's probe port (plain /metrics),
// whose request counters add up to the clicks sent through the Service;
// the manager's HTTPS metrics port, for a caller bound to
// linkforge-metrics-reader only.
func (c *cluster) testMetrics(t *testing.T) {
	g, c := newG(t), c.in(t)
	c.dumpOnFailure()
	redirectors := c.pods("redirector")
	g.Expect(redirectors).To(HaveLen(2))
	scrape := func() (float64, error) {
		var sum float64
		for _, p := range redirectors {
			body, err := get("http://"+p.Status.PodIP+":8081/metrics", "")
			if err != nil {
				return 0, err
			}
			if metricValue(body, "linkforge_redirector_ready") != 1 {
				return 0, fmt.Errorf("%s: linkforge_redirector_ready is not 1", p.Name)
			}
			if n := metricValue(body, "linkforge_redirector_index_links"); n < 4 {
				return 0, fmt.Errorf("%s: linkforge_redirector_index_links %v, want the samples at least", p.Name, n)
			}
			sum += metricValue(body, `linkforge_redirector_requests_total{code="3xx"}`)
		}
		return sum, nil
	}
	before, err := scrape()
	g.Expect(err).NotTo(HaveOccurred())
	svc := c.redirectorURL()
	const clicks = 20
	for i := 0; i < clicks; i++ {
		status, _, err := click(http.MethodGet, svc+"/default/handbook")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusMovedPermanently))
	}
	g.Eventually(scrape).Should(Equal(before+clicks), "the redirectors counted every click, together")

	managers := c.pods("manager")
	g.Expect(managers).To(HaveLen(1))
	metricsURL := "https://" + managers[0].Status.PodIP + ":8443/metrics"
	c.mustKubectl("create", "serviceaccount", "scraper", "-n", systemNS)
	c.mustKubectl("create", "clusterrolebinding", "linkforge-e2e-scraper", "--clusterrole=linkforge-metrics-reader", "--serviceaccount="+systemNS+":scraper")
	c.mustKubectl("create", "serviceaccount", "stranger", "-n", systemNS)
	t.Cleanup(func() {
		_, _ = c.kubectl("", "delete", "clusterrolebinding", "linkforge-e2e-scraper")
		_, _ = c.kubectl("", "delete", "serviceaccount", "-n", systemNS, "scraper", "stranger")
	})
	scraper := c.mustKubectl("create", "token", "scraper", "-n", systemNS)
	stranger := c.mustKubectl("create", "token", "stranger", "-n", systemNS)
	g.Eventually(func() (string, error) { return get(metricsURL, scraper) }).Should(ContainSubstring("controller_runtime_reconcile_total"))
	_, err = get(metricsURL, stranger)
	g.Expect(err).To(MatchError(ContainSubstring("403")))
	_, err = get(metricsURL, "")
	g.Expect(err).To(MatchError(ContainSubstring("401")))
}

var scrapeClient = &http.Client{
	Timeout: 10 * time.Second,
	// The manager's metrics certificate is self-signed, as the
	// ServiceMonitor's insecureSkipVerify says.
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // as the ServiceMonitor scrapes
}

// get returns the body of GET url (with a bearer token when token is set),
// or an error naming the status unless it is 200.
func get(url, token string) (string, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := scrapeClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}

// redirectorArg reports whether the redirector Deployment's container has
// an argument that starts with prefix.
func (c *cluster) redirectorArg(prefix string) bool {
	c.t.Helper()
	d, err := c.cs.AppsV1().Deployments(systemNS).Get(context.Background(), redirectorName, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, prefix) {
			return true
		}
	}
	return false
}
