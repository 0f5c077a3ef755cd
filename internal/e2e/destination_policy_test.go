package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// policyOverlay writes config/default's kustomization with its destination
// policy component enabled (the commented `components:` lines) into a
// temporary directory and returns it: what a user who enables it applies.
func policyOverlay(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, "config", "default", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	k := string(src)
	for _, off := range []string{"#components:\n", "#- ../destination-policy\n"} {
		if !strings.Contains(k, off) {
			t.Fatalf("config/default/kustomization.yaml has no %q line to enable", strings.TrimSpace(off))
		}
		k = strings.Replace(k, off, off[1:], 1)
	}
	dir := t.TempDir()
	config, err := filepath.Rel(dir, filepath.Join(root, "config")) // kustomize takes no absolute paths
	if err != nil {
		t.Fatal(err)
	}
	k = strings.ReplaceAll(k, "- ../", "- "+config+"/")
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// kubectlStdin runs kubectl with yaml on its standard input and returns its
// combined output.
func (e *env) kubectlStdin(yaml string, args ...string) (string, error) {
	cmd := e.cp.KubectlCmd(context.Background(), args...)
	cmd.Stdin = strings.NewReader(yaml)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func shortLinkYAML(ns, name, url string) string {
	return fmt.Sprintf("apiVersion: linkforge.io/v1alpha1\nkind: ShortLink\nmetadata: {name: %s, namespace: %s}\nspec: {url: '%s'}\n", name, ns, url)
}

// testDestinationPolicy enables the component with `kubectl apply -k`, as a
// user does, and checks with the real kubectl, manager and redirector that a
// namespace's allowed hosts and a DestinationDenyList are enforced when links
// are applied, and that a link admitted before its namespace's list changed
// is reported and no longer served, and served again when the list allows it.
func (e *env) testDestinationPolicy(t *testing.T) {
	g, e := newG(t), e.in(t)
	out := e.mustKubectl("apply", "-k", policyOverlay(t))
	for _, name := range []string{"linkforge-allowed-hosts", "linkforge-denied-hosts", "linkforge-allowed-hosts-annotation"} {
		g.Expect(out).To(ContainSubstring("validatingadmissionpolicy.admissionregistration.k8s.io/"+name+" created"), out)
		g.Expect(out).To(ContainSubstring("validatingadmissionpolicybinding.admissionregistration.k8s.io/"+name+" created"), out)
	}
	t.Cleanup(func() {
		_, _ = e.kubectl("delete", "validatingadmissionpolicybindings,validatingadmissionpolicies,destinationdenylists",
			"-l", "app.kubernetes.io/part-of=linkforge", "--ignore-not-found")
	})

	const ns = "policy"
	e.mustKubectl("create", "namespace", ns)
	e.applyYAML(shortLinkYAML(ns, "docs", "https://docs.example.com/start") + "---\n" + shortLinkYAML(ns, "partner", "https://partner.example.net/offer"))
	e.mustKubectl("wait", "--for=condition=Ready", "-n", ns, "shortlink/docs", "shortlink/partner", "--timeout=60s")
	codes := map[string]string{}
	for _, name := range []string{"docs", "partner"} {
		codes[name] = e.mustKubectl("get", "shortlink", "-n", ns, name, "-o", "jsonpath={.status.code}")
	}
	served := func(name string) func() (string, error) {
		return func() (string, error) {
			status, loc, err := e.get("/" + ns + "/" + codes[name])
			return fmt.Sprintf("%d %s", status, loc), err
		}
	}
	g.Eventually(served("partner")).Should(Equal("302 https://partner.example.net/offer"))

	e.mustKubectl("annotate", "namespace", ns, "linkforge.io/allowed-hosts=*.example.com")

	// Refused at apply, with the namespace's list; the policy takes a moment
	// to be loaded.
	var refusal string
	g.Eventually(func() (string, error) {
		var err error
		refusal, err = e.kubectlStdin(shortLinkYAML(ns, "phish", "https://login.evil.example.org/"), "apply", "-f", "-")
		if err == nil {
			_, _ = e.kubectl("delete", "shortlink", "-n", ns, "phish")
		}
		return refusal, nil
	}).Should(ContainSubstring(`ValidatingAdmissionPolicy 'linkforge-allowed-hosts' with binding 'linkforge-allowed-hosts' denied request: ` +
		`host "login.evil.example.org" is not allowed in namespace policy: its linkforge.io/allowed-hosts annotation allows only *.example.com`))
	t.Logf("$ kubectl apply -f phish.yaml\n%s", refusal)

	// The link admitted before: Blocked, reported, not served, not deleted.
	g.Eventually(func() (string, error) {
		return e.kubectl("get", "shortlink", "-n", ns, "partner", "-o", "jsonpath={.status.state}")
	}).Should(Equal("Blocked"))
	g.Eventually(served("partner")).Should(HavePrefix("404"), "a Blocked link is not served")
	g.Expect(served("docs")()).To(Equal("302 https://docs.example.com/start"), "an allowed link is untouched")
	t.Logf("$ kubectl get sl -n %s\n%s", ns, e.mustKubectl("get", "sl", "-n", ns))
	events := e.mustKubectl("get", "events", "-n", ns, "--field-selector", "reason=DestinationNotAllowed")
	g.Expect(events).To(ContainSubstring(`host "partner.example.net" is not allowed in namespace policy: its linkforge.io/allowed-hosts annotation allows only *.example.com`))
	t.Logf("$ kubectl get events -n %s --field-selector reason=DestinationNotAllowed\n%s", ns, events)

	// A malformed list is refused.
	out, err := e.kubectl("annotate", "--overwrite", "namespace", ns, "linkforge.io/allowed-hosts=*.example.com,https://docs.example.org/")
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring(`linkforge.io/allowed-hosts: "https://docs.example.org/" is not a host pattern`))
	t.Logf("$ kubectl annotate --overwrite namespace %s linkforge.io/allowed-hosts=*.example.com,https://docs.example.org/\n%s", ns, out)

	// The cluster's deny-list, in every namespace.
	e.applyYAML("apiVersion: linkforge.io/v1alpha1\nkind: DestinationDenyList\nmetadata:\n  name: cloud-metadata\n  labels: {app.kubernetes.io/part-of: linkforge}\n" +
		"spec:\n  hosts: [169.254.169.254, metadata.google.internal, '[fd00:ec2::254]']\n")
	g.Eventually(func() (string, error) {
		out, _ := e.kubectlStdin(shortLinkYAML("default", "metadata", "http://169.254.169.254/latest/meta-data/"), "apply", "-f", "-")
		return out, nil
	}).Should(HaveSuffix(`host "169.254.169.254" is denied in every namespace by DestinationDenyList "cloud-metadata" (entry 169.254.169.254)`))

	// Allowed again: served again, under its code.
	e.mustKubectl("annotate", "namespace", ns, "linkforge.io/allowed-hosts-")
	g.Eventually(served("partner")).Should(Equal("302 https://partner.example.net/offer"))
	g.Expect(e.mustKubectl("get", "shortlink", "-n", ns, "partner", "-o", "jsonpath={.status.state}")).To(Equal("Active"))
	status, _, err := e.get("/" + ns + "/" + codes["docs"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(http.StatusFound))
	e.mustKubectl("delete", "namespace", ns, "--wait=false")
}
