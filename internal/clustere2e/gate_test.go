//go:build clustere2e

package clustere2e

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/linkforge/linkforge/internal/gate"
)

// testGatedLinks: a password link (maxUses 1) on the real node, through
// the Service: a person's GET, HEAD, Slack's previewer and the preview
// page never show its destination and spend nothing; a wrong password is
// answered the form again and spends nothing; the right one answers 303
// to the destination and is the use; after it, the link is used up for
// the right password too (a replayed post redirects nobody).
func (c *cluster) testGatedLinks(t *testing.T) {
	g, c := newG(t), c.in(t)
	c.dumpOnFailure()
	ns := c.namespace("gated")
	const destination = "https://example.com/team-only-notes"
	hash, err := gate.Hash([]byte("open sesame"), gate.MinCost)
	g.Expect(err).NotTo(HaveOccurred())
	c.apply(fmt.Sprintf(`apiVersion: linkforge.io/v1alpha1
kind: ShortLink
metadata:
  name: notes
  namespace: %s
spec:
  url: %q
  maxUses: 1
  reapPolicy: Retain
  access:
    passwordHash: %q
`, ns, destination, hash))
	c.mustKubectl("wait", "--for=condition=Ready", "-n", ns, "shortlink/notes", "--timeout=90s")
	code := c.mustKubectl("get", "-n", ns, "shortlink", "notes", "-o", "jsonpath={.status.code}")
	link := c.redirectorURL() + "/" + ns + "/" + code
	const browser = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
	const slack = "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"
	hidden := func(what string, status int, header http.Header, body string) {
		g.Expect(header.Get("Location")).NotTo(ContainSubstring("team-only"), what)
		g.Expect(body).NotTo(ContainSubstring("team-only"), what, status)
	}
	// Every replica has the link (the form is what each answers).
	g.Eventually(func() (int, error) {
		status, _, _, err := gateRequest(http.MethodGet, link, browser, "")
		return status, err
	}).Should(Equal(http.StatusOK))
	for range 4 { // kube-proxy spreads them over the replicas
		status, header, body, err := gateRequest(http.MethodGet, link, browser, "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusOK))
		g.Expect(body).To(ContainSubstring(`type="password"`))
		hidden("a person's GET", status, header, body)
		status, header, body, err = gateRequest(http.MethodHead, link, browser, "")
		g.Expect(err).NotTo(HaveOccurred())
		hidden("HEAD", status, header, body)
		status, header, body, err = gateRequest(http.MethodGet, link, slack, "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusOK))
		hidden("Slack's previewer", status, header, body)
		status, header, body, err = gateRequest(http.MethodGet, link+"+", browser, "")
		g.Expect(err).NotTo(HaveOccurred())
		hidden("the preview page", status, header, body)
		status, header, body, err = gateRequest(http.MethodPost, link, browser, "not it")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusOK), "a wrong password")
		g.Expect(body).To(ContainSubstring(`type="password"`), "a wrong password")
		hidden("a wrong password", status, header, body)
	}
	out, err := c.kubectl("", "get", "shortlink", "-n", ns, "notes", "-o", "jsonpath={.status.uses}")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Or(BeEmpty(), Equal("0")), "uses spent before the right password")

	// The right password: 303 to the destination (a 503 while the replica
	// asked reserves its quota is retried).
	var status int
	var header http.Header
	g.Eventually(func(g Gomega) {
		var err error
		status, header, _, err = gateRequest(http.MethodPost, link, browser, "open sesame")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).NotTo(Equal(http.StatusServiceUnavailable))
	}).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Expect(status).To(Equal(http.StatusSeeOther))
	g.Expect(header.Get("Location")).To(Equal(destination))
	// Replayed: the use is spent, on whichever replica.
	g.Eventually(func() (int, error) {
		status, _, _, err := gateRequest(http.MethodPost, link, browser, "open sesame")
		return status, err
	}).WithPolling(200 * time.Millisecond).Should(Equal(http.StatusGone))
	g.Eventually(func() (string, error) {
		return c.kubectl("", "get", "shortlink", "-n", ns, "notes", "-o", "jsonpath={.status.uses} {.status.state}")
	}).Should(Equal("1 Exhausted"))
}

// gateRequest sends method to target as a browser would (a password: the
// form posted), on a connection of its own, and returns what came back.
func gateRequest(method, target, ua, password string) (int, http.Header, string, error) {
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(url.Values{"password": {password}}.Encode())
	}
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		return 0, nil, "", err
	}
	req.Header.Set("User-Agent", ua)
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := clicker.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header, string(b), err
}
