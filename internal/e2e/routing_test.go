package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/rules"
)

const (
	e2eIPhone  = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1"
	e2eAndroid = "Mozilla/5.0 (Linux; Android 14; Pixel 8 Pro) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/121.0.6167.101 Mobile Safari/537.36"
	e2eDesktop = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/121.0.0.0 Safari/537.36"
)

// TestRouting runs issue 38's routing through the real binaries, applied
// with kubectl as a user would: rules by device, language and query, a
// 70/30 split over 10,000 clients counted per variant in status, an
// expired link's expiredURL, path forwarding, the -o wide columns, and a
// rule target refused at apply by a namespace's allow-list.
func TestRouting(t *testing.T) {
	t.Parallel() // its own control plane, binaries and ports (newCluster)
	g := newG(t)
	bin, tmp, cp := newCluster(t)
	kc := installOperator(t, cp, tmp)
	// The test's client is the proxy in front (127.0.0.1, trusted): the
	// clients of the split differ by the address it appends to
	// X-Forwarded-For. Click events go to sink, whole addresses kept.
	sink := newClickSink(t)
	pr := startPair(t, g, bin, tmp, kc,
		func(string) []string { return []string{"--metrics-bind-address", "0"} },
		func(string) []string {
			return []string{"--peer-bind-address", "0", "--uses-flush-interval", "1s", "--gone-redirect", "https://example.com/gone",
				"--client-address-header", "X-Forwarded-For", "--trusted-proxies", "127.0.0.1",
				"--events-cloudevents-url", sink.URL + "/events", "--events-flush-interval", "100ms", "--events-keep-client-address"}
		})
	base, redirectAddr, redirectProbes := pr.base, pr.redirectAddr, pr.redirectProbes
	e := &env{t: t, cp: cp, redirect: base, redirectProbes: redirectProbes}
	const ns = "routing"
	e.mustKubectl("create", "namespace", ns)
	e.applyYAML(`apiVersion: linkforge.io/v1alpha1
kind: ShortLink
metadata: {name: app, namespace: routing}
spec:
  url: https://example.com/app
  rules:
  - {url: 'https://apps.apple.com/app/id1', devices: [ios]}
  - {url: 'https://play.google.com/store/apps/details?id=com.example', devices: [android]}
  - {url: 'https://example.com/de/app', languages: [de]}
  - {url: 'https://beta.example.com/app', queryParams: [{name: beta, value: '1'}]}
---
apiVersion: linkforge.io/v1alpha1
kind: ShortLink
metadata: {name: ab, namespace: routing}
spec:
  url: https://example.com/a
  variants:
  - {url: 'https://example.com/b', weight: 30}
---
apiVersion: linkforge.io/v1alpha1
kind: ShortLink
metadata: {name: sale, namespace: routing}
spec: {url: 'https://example.com/sale', ttl: 3s, expiredURL: 'https://example.com/sale-is-over'}
---
apiVersion: linkforge.io/v1alpha1
kind: ShortLink
metadata: {name: docs, namespace: routing}
spec: {url: 'https://docs.example.com/v2?lang=en', forwardPath: true}
`)
	e.mustKubectl("wait", "--for=condition=Ready", "-n", ns, "shortlink/app", "shortlink/ab", "shortlink/sale", "shortlink/docs", "--timeout=60s")
	code := func(name string) string {
		return e.mustKubectl("get", "shortlink", "-n", ns, name, "-o", "jsonpath={.status.code}")
	}
	clickWith := func(client *http.Client, path string, header ...string) (string, error) {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		_ = resp.Body.Close()
		return fmt.Sprintf("%d %s", resp.StatusCode, resp.Header.Get("Location")), nil
	}
	click := func(path string, header ...string) (string, error) { return clickWith(noFollow, path, header...) }

	t.Run("iOS, Android, German and ?beta=1 clicks each to their own target, the others to spec.url", func(t *testing.T) {
		g := newG(t)
		app := "/" + ns + "/" + code("app")
		g.Eventually(func() (string, error) { return click(app, "User-Agent", e2eDesktop) }).Should(Equal("302 https://example.com/app"))
		for _, c := range []struct {
			path   string
			header []string
			want   string
		}{
			{app, []string{"User-Agent", e2eIPhone}, "https://apps.apple.com/app/id1"},
			{app, []string{"User-Agent", e2eAndroid}, "https://play.google.com/store/apps/details?id=com.example"},
			{app, []string{"User-Agent", e2eDesktop, "Accept-Language", "de-DE,de;q=0.9,en;q=0.4"}, "https://example.com/de/app"},
			{app + "?beta=1", []string{"User-Agent", e2eDesktop}, "https://beta.example.com/app"},
			{app + "?beta=0", []string{"User-Agent", e2eDesktop, "Accept-Language", "en-GB"}, "https://example.com/app"},
		} {
			g.Expect(click(c.path, c.header...)).To(Equal("302 "+c.want), "%s %v", c.path, c.header)
		}
		page, err := e.fetch(redirectAddr + app + "+")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(page).To(ContainSubstring("Where its clicks go"))
		g.Expect(page).To(ContainSubstring("go to https://apps.apple.com/app/id1"))
	})

	t.Run("a 70/30 split over 10,000 clients, sticky per client, counted per variant in status", func(t *testing.T) {
		g := newG(t)
		ab := "/" + ns + "/" + code("ab")
		// Every redirect is a use: clicks counts them by destination,
		// the first one (once the link is served) included.
		clicks := map[string]int{}
		g.Eventually(func() (string, error) {
			got, err := click(ab, "User-Agent", e2eDesktop+" warm-up")
			if strings.HasPrefix(got, "302 ") {
				clicks[got]++
			}
			return got, err
		}).Should(HavePrefix("302 "))
		const clients, workers = 10_000, 8
		var mu sync.Mutex
		first := map[string]int{}
		var failures []string
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := w; i < clients; i += workers {
					client := fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)
					got, err := click(ab, "User-Agent", e2eDesktop, "X-Forwarded-For", client)
					var again string
					if err == nil && i%10 == 0 { // a tenth click again: the same variant
						again, err = click(ab, "User-Agent", e2eDesktop, "X-Forwarded-For", client)
					}
					mu.Lock()
					switch {
					case err != nil:
						failures = append(failures, err.Error())
					case again != "" && again != got:
						failures = append(failures, fmt.Sprintf("client %d: %q, then %q", i, got, again))
					default:
						first[got]++
						clicks[got]++
						if again != "" {
							clicks[again]++
						}
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		g.Expect(failures).To(BeEmpty())
		a, b := first["302 https://example.com/a"], first["302 https://example.com/b"]
		g.Expect(a+b).To(Equal(clients), "%v", first)
		share := float64(b) / clients
		t.Logf("variant b (weight 30) took %d of %d clients: %.2f%%", b, clients, 100*share)
		g.Expect(math.Abs(share - 0.30)).To(BeNumerically("<=", 0.02))

		// status.variantUses: every click, per destination, written with uses.
		want := fmt.Sprintf("https://example.com/a=%d https://example.com/b=%d",
			clicks["302 https://example.com/a"], clicks["302 https://example.com/b"])
		g.Eventually(func() (string, error) {
			out, err := e.kubectl("get", "shortlink", "-n", ns, "ab", "-o", "jsonpath={.status.variantUses}")
			if err != nil || out == "" {
				return out, err
			}
			var vu []struct {
				URL  string `json:"url"`
				Uses int    `json:"uses"`
			}
			if err := json.Unmarshal([]byte(out), &vu); err != nil {
				return "", err
			}
			parts := []string{}
			for _, v := range vu {
				parts = append(parts, fmt.Sprintf("%s=%d", v.URL, v.Uses))
			}
			return strings.Join(parts, " "), nil
		}).Should(Equal(want))
		t.Logf("status.variantUses: %s", want)
	})

	t.Run("behind a trusted proxy, the split and the click events see the client X-Forwarded-For names", func(t *testing.T) {
		g := newG(t)
		ab := "/" + ns + "/" + code("ab")
		// A peer the redirector does not trust (127.0.0.2, its own
		// loopback): its header is ignored.
		untrusted := &http.Client{
			CheckRedirect: noFollow.CheckRedirect,
			Transport:     &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext},
		}
		g.Eventually(func() (string, error) { return click(ab, "User-Agent", e2eDesktop, "X-Forwarded-For", "192.0.2.1") }).Should(HavePrefix("302 "))
		// 50 clients, each through the proxy as X-Forwarded-For names it,
		// then with an entry of its own left of the proxy's: the same
		// variant, the same address in its events.
		want := map[string]int{}
		for i := range 50 {
			client := fmt.Sprintf("203.0.113.%d", i+1)
			plain, err := click(ab, "User-Agent", e2eDesktop, "X-Forwarded-For", client)
			g.Expect(err).NotTo(HaveOccurred())
			spoofed, err := click(ab, "User-Agent", e2eDesktop, "X-Forwarded-For", "198.51.100.66, "+client)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(spoofed).To(Equal(plain), "client %s", client)
			want[client] = 2
		}
		g.Expect(clickWith(untrusted, ab, "User-Agent", e2eDesktop, "X-Forwarded-For", "203.0.113.200")).To(HavePrefix("302 "))
		want["127.0.0.2"] = 1
		// The events of these clicks, by address (the other subtests'
		// clients are from 10.0.0.0/8 and 192.0.2.1).
		got := map[string]int{}
		g.Eventually(func() map[string]int {
			all, _ := sink.received(0)
			clear(got)
			for _, ev := range all {
				var d struct {
					ClientAddress string `json:"clientAddress"`
				}
				if err := json.Unmarshal(ev.Data(), &d); err == nil && (strings.HasPrefix(d.ClientAddress, "203.0.113.") || d.ClientAddress == "127.0.0.2" || d.ClientAddress == "198.51.100.66") {
					got[d.ClientAddress]++
				}
			}
			return got
		}).Should(Equal(want))
		t.Logf("click events by client address: %d clients through the proxy, 2 events each; 1 from an untrusted peer, its header ignored", len(want)-1)
	})

	t.Run("a browser update moves no client; a weight change moves only the clients it must; variantsEnd ends the split", func(t *testing.T) {
		g := newG(t)
		e.applyYAML(`apiVersion: linkforge.io/v1alpha1
kind: ShortLink
metadata: {name: split-half, namespace: routing}
spec:
  url: https://example.com/a
  variants:
  - {url: 'https://example.com/b', weight: 50}
---
apiVersion: linkforge.io/v1alpha1
kind: ShortLink
metadata: {name: split-abc, namespace: routing}
spec:
  url: https://example.com/a
  variants:
  - {url: 'https://example.com/b', weight: 30}
  - {url: 'https://example.com/c', weight: 20}
`)
		e.mustKubectl("wait", "--for=condition=Ready", "-n", ns, "shortlink/split-half", "shortlink/split-abc", "--timeout=60s")
		chrome := func(v int) string {
			return fmt.Sprintf("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/%d.0.0.0 Safari/537.36", v)
		}
		// Each client its own address, through the trusted proxy.
		clientAddr := func(i int) string { return fmt.Sprintf("100.64.%d.%d", i/250, 1+i%250) }
		locations := func(path, ua string, n int) []string {
			out := make([]string, n)
			for i := range out {
				loc, err := click(path, "User-Agent", ua, "X-Forwarded-For", clientAddr(i))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(loc).To(HavePrefix("302 "))
				out[i] = strings.TrimPrefix(loc, "302 ")
			}
			return out
		}
		half := "/" + ns + "/" + code("split-half")
		g.Eventually(func() (string, error) { return click(half) }).Should(HavePrefix("302 "))
		before, after := locations(half, chrome(120), 300), locations(half, chrome(121), 300)
		moved := 0
		for i := range before {
			if before[i] != after[i] {
				moved++
			}
		}
		t.Logf("50/50, 300 clients from Chrome/120 to Chrome/121: %d changed variant", moved)
		g.Expect(moved).To(BeZero())

		// [30,20] -> [20,20] over 1,500 clients. Where each should go is
		// what rules.Evaluate makes of the link and its status.splitBuckets
		// as the controller wrote them.
		abc := "/" + ns + "/" + code("split-abc")
		const clients = 1500
		link := func(g Gomega) *linkv1.ShortLink {
			out, err := e.kubectl("get", "shortlink", "-n", ns, "split-abc", "-o", "json")
			g.Expect(err).NotTo(HaveOccurred())
			var l linkv1.ShortLink
			g.Expect(json.Unmarshal([]byte(out), &l)).To(Succeed())
			return &l
		}
		expected := func(g Gomega, l *linkv1.ShortLink) []string {
			c, err := rules.CompileAssigned(&l.Spec, l.Status.SplitBuckets, ns+"/split-abc", nil)
			g.Expect(err).NotTo(HaveOccurred())
			out := make([]string, clients)
			for i := range out {
				f := rules.Facts{Client: netip.MustParseAddr(clientAddr(i)), UserAgent: []byte(chrome(121))}
				out[i] = rules.Evaluate(&f, c).URL
			}
			return out
		}
		g.Eventually(func() (string, error) { return click(abc) }).Should(HavePrefix("302 "))
		first := locations(abc, chrome(121), clients)
		g.Expect(first).To(Equal(expected(g, link(g))), "the redirector splits as status.splitBuckets says")
		e.mustKubectl("patch", "shortlink", "-n", ns, "split-abc", "--type=json", "-p", `[{"op": "replace", "path": "/spec/variants/0/weight", "value": 20}]`)
		var want []string
		g.Eventually(func(g Gomega) {
			l := link(g)
			g.Expect(l.Status.ConfirmedGeneration).To(Equal(l.Generation))
			want = expected(g, l)
		}).Should(Succeed())
		g.Eventually(func() []string { return locations(abc, chrome(121), clients) }).Should(Equal(want), "the redirector serves the new weights")
		moves := map[string]int{}
		n := 0
		for i := range first {
			if first[i] != want[i] {
				moves[first[i]+" -> "+want[i]]++
				n++
			}
		}
		t.Logf("[30,20] -> [20,20], %d clients: %d moved (%.1f%%): %v", clients, n, 100*float64(n)/clients, moves)
		g.Expect(moves).To(HaveLen(1))
		g.Expect(moves).To(HaveKey("https://example.com/b -> https://example.com/a"))
		// 10% of 1,500: five standard deviations (11.6 clients) either way.
		g.Expect(math.Abs(float64(n)/clients - 0.10)).To(BeNumerically("<=", 5*math.Sqrt(0.1*0.9/clients)))

		// variantsEnd in the past: every client to the winner, at once.
		e.mustKubectl("patch", "shortlink", "-n", ns, "split-abc", "--type=merge", "-p", `{"spec": {"variantsEnd": {"at": "2020-01-01T00:00:00Z", "url": "https://example.com/c"}}}`)
		g.Eventually(func() []string { return slices.Compact(locations(abc, chrome(121), 50)) }).Should(Equal([]string{"https://example.com/c"}))
	})

	t.Run("an expired link sends its clicks to its expiredURL, not the gone fallback", func(t *testing.T) {
		g := newG(t)
		sale := "/" + ns + "/" + code("sale")
		g.Eventually(func() (string, error) { return click(sale) }).Should(Equal("302 https://example.com/sale-is-over"))
	})

	t.Run("forwardPath appends the rest of the path; other links answer 404 for it", func(t *testing.T) {
		g := newG(t)
		docs := "/" + ns + "/" + code("docs")
		g.Eventually(func() (string, error) { return click(docs + "/guide/intro") }).Should(Equal("302 https://docs.example.com/v2/guide/intro?lang=en"))
		g.Expect(click(docs + "/../../etc/passwd")).To(Equal("302 https://docs.example.com/v2/etc/passwd?lang=en"))
		g.Expect(click("/" + ns + "/" + code("app") + "/extra")).To(HavePrefix("404"))
	})

	t.Run("kubectl get -o wide shows rules and variants", func(t *testing.T) {
		g := newG(t)
		g.Eventually(func() (string, error) {
			return e.kubectl("get", "shortlinks", "-n", ns, "-o", "custom-columns=NAME:.metadata.name,RULES:.status.ruleCount,VARIANTS:.status.variantCount", "--no-headers")
		}).Should(MatchRegexp(`ab\s+<none>\s+1\s*\napp\s+4\s+<none>`))
		out := e.mustKubectl("get", "shortlinks", "-n", ns, "-o", "wide")
		t.Logf("$ kubectl get shortlinks -n %s -o wide\n%s", ns, out)
		g.Expect(strings.Split(out, "\n")[0]).To(MatchRegexp(`RULES\s+VARIANTS`))
		g.Expect(out).To(MatchRegexp(`\napp\s.*\s4\s+\s*\S*`))
	})

	t.Run("a rule target outside the namespace's allow-list is refused at apply", func(t *testing.T) {
		g := newG(t)
		out := e.mustKubectl("apply", "-k", policyOverlay(t))
		g.Expect(out).To(ContainSubstring("validatingadmissionpolicy.admissionregistration.k8s.io/linkforge-allowed-hosts created"))
		t.Cleanup(func() {
			_, _ = e.kubectl("delete", "validatingadmissionpolicybindings,validatingadmissionpolicies",
				"-l", "app.kubernetes.io/part-of=linkforge", "--ignore-not-found")
		})
		e.mustKubectl("annotate", "namespace", ns, "linkforge.io/allowed-hosts=*.example.com")
		link := "apiVersion: linkforge.io/v1alpha1\nkind: ShortLink\nmetadata: {name: sneaky, namespace: routing}\n" +
			"spec:\n  url: https://www.example.com/ok\n  rules:\n  - {url: 'https://login.evil.example.org/', devices: [ios]}\n"
		var refusal string
		g.Eventually(func() string {
			var err error
			refusal, err = e.kubectlStdin(link, "apply", "-f", "-")
			if err == nil {
				_, _ = e.kubectl("delete", "shortlink", "-n", ns, "sneaky")
			}
			return refusal
		}).Should(ContainSubstring(`host "login.evil.example.org" is not allowed in namespace routing`))
		t.Logf("$ kubectl apply -f sneaky.yaml\n%s", refusal)
	})
}
