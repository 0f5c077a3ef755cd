package e2e

import (
	"fmt"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
)

// getHost is get with a Host header: how a vanity host reaches the redirector.
func (e *env) getHost(host, path string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, e.redirect+path, nil)
	if err != nil {
		return "", err
	}
	req.Host = host
	resp, err := noFollow.Do(req)
	if err != nil {
		return "", err
	}
	_ = resp.Body.Close()
	return fmt.Sprintf("%d %s", resp.StatusCode, resp.Header.Get("Location")), nil
}

// testVanityHost pins the documented behaviour (docs/security.md, Threat model): a
// claimed host serves its namespace's /<code>, and, like every host of the
// redirector, /<namespace>/<code> of every namespace. The path names the
// namespace, so a vanity host vouches for nothing the shared host does not.
func (e *env) testVanityHost(t *testing.T) {
	g, e := newG(t), e.in(t)
	const host = "go.vanity.example"
	e.mustKubectl("create", "namespace", "vanity")
	e.mustKubectl("annotate", "namespace", "vanity", "linkforge.io/domain="+host)
	e.applyYAML("apiVersion: linkforge.io/v1alpha1\nkind: ShortLink\nmetadata: {name: hello, namespace: vanity}\nspec: {url: 'https://example.com/vanity', code: hello}\n")
	e.mustKubectl("wait", "--for=condition=Ready", "-n", "vanity", "shortlink/hello", "--timeout=60s")
	g.Eventually(func() (string, error) { return e.getHost(host, "/hello") }).Should(Equal("302 https://example.com/vanity"))

	docs := e.mustKubectl("get", "shortlink", "docs", "-n", "default", "-o", "jsonpath={.status.code}")
	url := e.mustKubectl("get", "shortlink", "docs", "-n", "default", "-o", "jsonpath={.spec.url}")
	g.Expect(e.getHost(host, "/default/"+docs)).To(Equal("302 "+url), "another namespace's link, by its explicit path")
	g.Expect(e.getHost(host, "/"+docs)).To(HavePrefix("404"), "the short form is the claiming namespace's only")
}
