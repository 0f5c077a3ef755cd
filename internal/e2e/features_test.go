package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/linkforge/linkforge/internal/devenv"
	"github.com/linkforge/linkforge/internal/qr/qrtest"
)

// TestLinkFeatures runs the features of issue 25 through the real binaries,
// as the service accounts of config/default: dedup control and its metrics,
// QR codes (redirector and plugin), preview pages, fallback redirects and
// activation times.
func TestLinkFeatures(t *testing.T) {
	t.Parallel() // its own control plane, binaries and ports (newCluster)
	g := newG(t)
	bin, tmp, cp := newCluster(t)
	kc := installOperator(t, cp, tmp)
	mgrMetrics, err := devenv.FreeAddr()
	g.Expect(err).NotTo(HaveOccurred())
	pr := startPair(t, g, bin, tmp, kc,
		func(string) []string { return []string{"--metrics-bind-address", mgrMetrics, "--metrics-secure=false"} },
		func(base string) []string {
			return []string{"--peer-bind-address", "127.0.0.1:0", "--peer-allow-local",
				"--public-base-url", base, "--uses-flush-interval", "1s", "--uses-lease", "3s",
				"--root-redirect", "https://example.com/home", "--gone-redirect", "https://example.com/gone"}
		})
	base, redirectAddr, redirectProbes := pr.base, pr.redirectAddr, pr.redirectProbes
	e := &env{t: t, cp: cp, redirect: base, redirectProbes: redirectProbes}
	const ns = "features"
	e.mustKubectl("create", "namespace", ns)
	apply := func(name, spec string) {
		e.applyYAML(fmt.Sprintf("apiVersion: linkforge.io/v1alpha1\nkind: ShortLink\nmetadata: {name: %s, namespace: %s}\nspec: %s\n", name, ns, spec))
	}
	field := func(name, jsonpath string) string {
		out, _ := e.kubectl("get", "shortlink", name, "-n", ns, "-o", "jsonpath={"+jsonpath+"}")
		return out
	}
	status := func(path string, header ...string) func() (string, error) {
		return func() (string, error) {
			req, _ := http.NewRequest(http.MethodGet, base+path, nil)
			for i := 0; i+1 < len(header); i += 2 {
				req.Header.Set(header[i], header[i+1])
			}
			if header != nil && header[0] == "Host" {
				req.Host = header[1]
			}
			resp, err := noFollow.Do(req)
			if err != nil {
				return "", err
			}
			_ = resp.Body.Close()
			return fmt.Sprintf("%d %s", resp.StatusCode, resp.Header.Get("Location")), nil
		}
	}
	predict := func(url string, salt int) string {
		out, err := exec.Command(filepath.Join(bin, "linkforge"), "code", "-n", ns, "--salt", fmt.Sprint(salt), url).Output()
		g.Expect(err).NotTo(HaveOccurred())
		return strings.Split(string(out), "\t")[0]
	}
	metric := func(line string) func() (string, error) {
		return func() (string, error) {
			body, err := e.fetch(mgrMetrics + "/metrics")
			if err != nil {
				return "", err
			}
			for _, l := range strings.Split(body, "\n") {
				if strings.HasPrefix(l, line+" ") {
					return l, nil
				}
			}
			return "", nil
		}
	}

	const url = "https://example.com/features"
	t.Run("dedup off takes the next salt; the manager's metrics count it", func(t *testing.T) {
		g := newG(t)
		apply("first", "{url: '"+url+"'}")
		e.mustKubectl("wait", "--for=condition=Ready", "-n", ns, "shortlink/first", "--timeout=60s")
		apply("copy", "{url: '"+url+"'}")
		apply("own", "{url: '"+url+"', dedupPolicy: Never}")
		e.mustKubectl("wait", "--for=condition=Ready", "-n", ns, "shortlink/copy", "shortlink/own", "--timeout=60s")
		g.Expect(field("first", ".status.code")).To(Equal(predict(url, 0)))
		g.Expect(field("copy", ".status.code")).To(Equal(predict(url, 0)))
		g.Expect(field("own", ".status.code")).To(Equal(predict(url, 1)))
		g.Eventually(status("/" + ns + "/" + predict(url, 1))).Should(Equal("302 " + url))

		g.Eventually(metric("linkforge_codes_dedup_hits_total")).Should(Equal("linkforge_codes_dedup_hits_total 1"))
		g.Eventually(metric(`linkforge_codes_salted_total{salt="1"}`)).Should(Equal(`linkforge_codes_salted_total{salt="1"} 1`))
		g.Eventually(metric(`linkforge_codes_held{namespace="` + ns + `"}`)).Should(Equal(`linkforge_codes_held{namespace="` + ns + `"} 2`))
		g.Eventually(metric(`linkforge_codes_shared_links{namespace="` + ns + `"}`)).Should(Equal(`linkforge_codes_shared_links{namespace="` + ns + `"} 2`))
		// What docs/concepts.md shows.
		body, _ := e.fetch(mgrMetrics + "/metrics")
		var lines []string
		for _, l := range strings.Split(body, "\n") {
			if strings.HasPrefix(l, "linkforge_codes_") {
				lines = append(lines, l)
			}
		}
		t.Logf("curl -s http://%s/metrics | grep ^linkforge_codes_\n%s", mgrMetrics, strings.Join(lines, "\n"))
	})

	code := predict(url, 0)
	t.Run("a QR code of the short URL, from the redirector and from the plugin; a preview page", func(t *testing.T) {
		g := newG(t)
		resp, err := http.Get(base + "/" + ns + "/" + code + "/qr?size=300")
		g.Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
		g.Expect(resp.Header.Get("Content-Type")).To(Equal("image/png"))
		shortURL := field("first", ".status.shortURL")
		g.Expect(shortURL).To(Equal(base + "/" + ns + "/" + code))
		g.Expect(qrtest.ScanPNG(t, body)).To(Equal(shortURL))

		file := filepath.Join(tmp, "first.png")
		out, err := exec.Command(filepath.Join(bin, "linkforge"), "qr", "first", "-n", ns, "-o", file, "--kubeconfig", cp.Kubeconfig).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		fromPlugin, err := os.ReadFile(file)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(qrtest.ScanPNG(t, fromPlugin)).To(Equal(shortURL))

		page, err := e.fetch(redirectAddr + "/" + ns + "/" + code + "+")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(page).To(ContainSubstring(`<a href="` + url + `"`))
		g.Expect(page).To(ContainSubstring("State: <strong>Active</strong>"))
	})

	t.Run("QR codes, previews and HEAD are not uses", func(t *testing.T) {
		g := newG(t)
		apply("counted", "{url: 'https://example.com/counted'}")
		e.mustKubectl("wait", "--for=condition=Ready", "-n", ns, "shortlink/counted", "--timeout=60s")
		c := field("counted", ".status.code")
		g.Eventually(status("/" + ns + "/" + c + "/qr")).Should(HavePrefix("200"))
		for range 3 {
			for _, p := range []string{"/qr", "+", "/qr?format=svg"} {
				g.Expect(status("/" + ns + "/" + c + p)()).To(HavePrefix("200"))
			}
			req, _ := http.NewRequest(http.MethodHead, base+"/"+ns+"/"+c, nil)
			resp, err := noFollow.Do(req)
			g.Expect(err).NotTo(HaveOccurred())
			_ = resp.Body.Close()
		}
		g.Expect(status("/" + ns + "/" + c)()).To(HavePrefix("302"))
		g.Expect(status("/" + ns + "/" + c)()).To(HavePrefix("302"))
		g.Eventually(func() string { return field("counted", ".status.uses") }).Should(Equal("2"))
		g.Consistently(func() string { return field("counted", ".status.uses") }).WithTimeout(3 * time.Second).Should(Equal("2"))
	})

	t.Run("fallback redirects: per namespace (annotation) and the redirector's defaults", func(t *testing.T) {
		g := newG(t)
		e.mustKubectl("annotate", "namespace", ns, "linkforge.io/domain=go.features.example",
			"linkforge.io/not-found-redirect=https://features.example/missing", "linkforge.io/root-redirect=https://features.example/")
		apply("brief", "{url: 'https://example.com/brief', ttl: 3s}")
		e.mustKubectl("wait", "--for=condition=Ready", "-n", ns, "shortlink/brief", "--timeout=60s")
		brief := field("brief", ".status.code")
		g.Eventually(status("/" + ns + "/nope")).Should(Equal("302 https://features.example/missing"))
		g.Expect(status("/nope", "Host", "go.features.example")()).To(Equal("302 https://features.example/missing"))
		g.Expect(status("/", "Host", "go.features.example")()).To(Equal("302 https://features.example/"))
		g.Expect(status("/")()).To(Equal("302 https://example.com/home"), "the redirector's default on other hosts")
		g.Expect(status("/default/nope")()).To(Equal("404 "), "no not-found default: 404")
		g.Eventually(status("/"+ns+"/"+brief)).WithTimeout(30*time.Second).Should(Equal("302 https://example.com/gone"), "expired: the default gone fallback")
		g.Expect(status("/"+ns+"/"+brief+"/qr")()).To(Equal("410 "), "a QR code takes no fallback")

		e.mustKubectl("annotate", "namespace", ns, "linkforge.io/gone-redirect=not a url")
		g.Eventually(func() string {
			out, _ := e.kubectl("get", "events", "-A", "--field-selector", "reason=InvalidFallback", "-o", "jsonpath={.items[*].message}")
			return out
		}).Should(ContainSubstring("linkforge.io/gone-redirect is ignored"))
		g.Expect(status("/"+ns+"/"+brief)()).To(Equal("302 https://example.com/gone"), "the invalid annotation is ignored")
	})

	t.Run("a link with activatesAt is Scheduled, answers as unknown, and redirects on time", func(t *testing.T) {
		g := newG(t)
		// The test must see the link Scheduled, and the redirector answer
		// for it as for an unknown code, before it activates, and nothing
		// bounds how soon it can (a reconcile, a watch event, kubectl): a
		// machine too slow for the lead tries again with a new link and
		// twice the lead. A link never seen so still fails, after four tries.
		missIsSlowness := NewGomega(func(string, ...int) {})
		missIsSlowness.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
		var name, launch string
		var at time.Time
		for try, lead := 0, 8*time.Second; ; try, lead = try+1, 2*lead {
			name = fmt.Sprintf("launch-%d", try)
			at = time.Now().Add(lead).UTC().Truncate(time.Second)
			apply(name, fmt.Sprintf("{url: 'https://example.com/%s', activatesAt: '%s'}", name, at.Format(time.RFC3339)))
			seen := missIsSlowness.Eventually(func() string { return field(name, ".status.state") }).
				WithTimeout(time.Until(at)).Should(Equal("Scheduled"))
			launch = field(name, ".status.code")
			seen = seen && missIsSlowness.Eventually(status("/"+ns+"/"+launch)).
				WithTimeout(time.Until(at)).Should(Equal("302 https://features.example/missing"), "before: the not-found fallback")
			if seen && time.Now().Before(at) {
				break
			}
			g.Expect(try).To(BeNumerically("<", 3), "%s was not seen Scheduled and unknown before its activatesAt, %s after it was applied", name, lead)
		}
		g.Expect(field(name, `.status.conditions[?(@.type=="Ready")].status`)).To(Equal("True"))
		wide := e.mustKubectl("get", "sl", name, "-n", ns, "-o", "wide")
		g.Expect(wide).To(ContainSubstring("ACTIVATES"))
		g.Expect(wide).To(ContainSubstring(at.Format(time.RFC3339)))
		// The redirector starts on its own clock at activatesAt, once its
		// informer has the link (a watch event, which no bound of the code
		// times: the 30 s after activatesAt are a backstop).
		g.Eventually(status("/" + ns + "/" + launch)).WithTimeout(time.Until(at) + 30*time.Second).WithPolling(100 * time.Millisecond).
			Should(Equal("302 https://example.com/" + name))
		g.Expect(time.Now()).To(BeTemporally(">=", at))
		g.Eventually(func() string { return field(name, ".status.state") }).Should(Equal("Active"))
		var events struct {
			Items []struct{ Reason, Note string } `json:"items"`
		}
		out := e.mustKubectl("get", "events", "-n", ns, "--field-selector", "involvedObject.name="+name, "-o", "json")
		g.Expect(json.Unmarshal([]byte(out), &events)).To(Succeed())
		reasons := make([]string, 0, len(events.Items))
		for _, ev := range events.Items {
			reasons = append(reasons, ev.Reason)
		}
		g.Expect(reasons).To(ContainElement("Activated"))
	})
}
