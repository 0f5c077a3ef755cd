package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/linkforge/linkforge/internal/shortcode/conformance"
)

// shortLinkJSON is a ShortLink manifest as JSON, so any URL (control bytes
// included) reaches the API server exactly.
func shortLinkJSON(namespace, name, url string) string {
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "linkforge.io/v1alpha1", "kind": "ShortLink",
		"metadata": map[string]string{"name": name, "namespace": namespace},
		"spec":     map[string]string{"url": url},
	})
	return string(b)
}

// admissionMessage is what the CRD's validation must answer for an invalid
// conformance vector, or "" where either admission or the controller may
// refuse it (a host of bad characters: the canonicalizer decides).
func admissionMessage(v conformance.Invalid) string {
	switch v.Reason {
	case "empty", "too long":
		return "spec.url" // minLength, the http(s) rule or maxLength
	case "scheme", "not an absolute URL":
		return "url must be an absolute URL starting with http:// or https://"
	case "userinfo":
		return "url must not hold a user name or password"
	case "control character":
		return "url must not contain control characters"
	case "port":
		return "url port must be a number from 1 to 65535"
	case "host":
		if strings.Contains(v.URL, ":///") {
			return "url must have a host"
		}
	}
	return ""
}

// testURLAdmission applies every conformance vector: each invalid one is
// refused at admission (with the message admissionMessage names) or by the
// controller (InvalidURL, no code: nothing to serve); each valid one is
// admitted and gets the vector's canonical URL, so the CEL rules refuse
// nothing the canonicalizer accepts.
func (e *env) testURLAdmission(t *testing.T) {
	g, e := newG(t), e.in(t)
	vectors, err := conformance.Load()
	g.Expect(err).NotTo(HaveOccurred())
	const ns = "vectors"
	e.mustKubectl("create", "namespace", ns)

	var controllerRefused []string
	for i, v := range vectors.Invalid {
		name := fmt.Sprintf("invalid-%d", i)
		cmd := e.cp.KubectlCmd(context.Background(), "create", "-f", "-")
		cmd.Stdin = strings.NewReader(shortLinkJSON(ns, name, v.URL))
		out, err := cmd.CombinedOutput()
		want := admissionMessage(v)
		if err != nil {
			g.Expect(string(out)).To(ContainSubstring(want), "vector %q (%s)", v.URL, v.Reason)
			g.Expect(string(out)).To(ContainSubstring("is invalid"), "vector %q (%s): refused by validation", v.URL, v.Reason)
			continue
		}
		g.Expect(want).To(BeEmpty(), "vector %q (%s) was admitted; want %q", v.URL, v.Reason, want)
		controllerRefused = append(controllerRefused, name)
	}
	t.Logf("%d invalid vectors refused at admission, %d left to the controller: %v",
		len(vectors.Invalid)-len(controllerRefused), len(controllerRefused), controllerRefused)
	for _, name := range controllerRefused {
		g.Eventually(func(g Gomega) {
			out, err := e.kubectl("get", "shortlink", "-n", ns, name, "-o",
				`jsonpath={.status.conditions[?(@.type=="Ready")].reason}/{.status.code}`)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(Equal("InvalidURL/"), "refused, and no code to serve")
		}).Should(Succeed(), name)
	}

	docs := make([]string, 0, len(vectors.Valid))
	for i, v := range vectors.Valid {
		docs = append(docs, shortLinkJSON(ns, fmt.Sprintf("valid-%d", i), v.URL))
	}
	cmd := e.cp.KubectlCmd(context.Background(), "create", "-f", "-")
	cmd.Stdin = strings.NewReader(strings.Join(docs, "\n"))
	out, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "every valid vector is admitted:\n%s", out)
	for i, v := range vectors.Valid {
		g.Eventually(func() (string, error) {
			return e.kubectl("get", "shortlink", "-n", ns, fmt.Sprintf("valid-%d", i), "-o",
				`jsonpath={.status.conditions[?(@.type=="Ready")].reason} {.status.canonicalURL}`)
		}).Should(Equal("CodeAssigned "+v.Canonical), "vector %q", v.URL)
	}
	e.mustKubectl("delete", "namespace", ns, "--wait=false")
}
