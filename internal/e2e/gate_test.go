package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/linkforge/linkforge/internal/devenv"
	"github.com/linkforge/linkforge/internal/gate"
	"github.com/linkforge/linkforge/internal/pages"
	"github.com/linkforge/linkforge/internal/qr/qrtest"
	"github.com/linkforge/linkforge/internal/redirect"
	"github.com/linkforge/linkforge/internal/testtiming"
)

// The gate's e2e setting: the auth proxy's headers, read from 127.0.0.2
// only (the test's auth proxy dials from there); the redirector's other
// flags are its defaults, but for where it listens and --public-base-url
// (without it a QR code of /<ns>/<code> answers 404 and shows nothing).
const (
	gateNS           = "gate"
	gateUserHeader   = "X-Forwarded-User"
	gateGroupsHeader = "X-Forwarded-Groups"
	gateProxyAddr    = "127.0.0.2"
	gateSignIn       = "https://auth.example.com/oauth2/start?rd={url}"
	// gateSecret is in every gated link's destination, and nowhere else.
	gateSecret = "behind-the-gate"
)

var gateAuthFlags = []string{"--auth-user-header", gateUserHeader, "--auth-groups-header", gateGroupsHeader, "--auth-proxies", gateProxyAddr + "/32"}

// gateHeaderTimeout is the redirector's default --header-timeout, which
// bounds a request's arrival, its body included.
var gateHeaderTimeout = redirect.DefaultServerOptions().HeaderTimeout

// gateClientTimeout is when the test's clients give up: past a limited
// answer's wait (as long as a check) on a busy machine, and past
// loadedMachine x the header timeout the slow post is held to.
const gateClientTimeout = time.Minute

type gateEnv struct {
	*env
	// addr is the redirector's host:port, probes its probes'.
	addr, probes string
	// kubectlLinkforge runs `kubectl linkforge ARGS...` with stdin.
	kubectlLinkforge func(stdin string, args ...string) (stdout, stderr string, err error)
	addrs            atomic.Int32
}

// nextAddr is a loopback address no request of the test has come from:
// a new client, whose attempts the limiter has not counted.
func (ge *gateEnv) nextAddr() string {
	n := ge.addrs.Add(1)
	return fmt.Sprintf("127.0.%d.%d", 10+n/250, 1+n%250)
}

// from is an HTTP client whose connections come from the loopback
// address addr (Linux routes all of 127.0.0.0/8 to lo) and follow no
// redirect.
func from(addr string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}, Timeout: 10 * time.Second}
	return &http.Client{
		Timeout:       gateClientTimeout,
		CheckRedirect: noFollow.CheckRedirect,
		Transport:     &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true, DisableCompression: true},
	}
}

// gateReply is an answer as the test reads it.
type gateReply struct {
	status int
	header http.Header
	body   string
	took   time.Duration
}

func (r gateReply) String() string {
	return fmt.Sprintf("%d %v\n%s", r.status, r.header, tail(r.body, 2000))
}

// showsDestination reports whether r names a gated link's destination
// (gateSecret) anywhere: a header or the body.
func (r gateReply) showsDestination() bool {
	for _, vs := range r.header {
		for _, v := range vs {
			if strings.Contains(v, gateSecret) {
				return true
			}
		}
	}
	return strings.Contains(r.body, gateSecret)
}

// send sends method target (with a form body, if any) from hc with the
// headers given in pairs; "Host" sets the request's host.
func send(hc *http.Client, method, target, form string, header ...string) (gateReply, error) {
	var body io.Reader
	if form != "" {
		body = strings.NewReader(form)
	}
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		return gateReply{}, err
	}
	if form != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("User-Agent", e2eBrowser)
	given := map[string]bool{}
	for i := 0; i+1 < len(header); i += 2 {
		switch k, v := http.CanonicalHeaderKey(header[i]), header[i+1]; {
		case k == "Host":
			req.Host = v
		case given[k]: // a header sent twice
			req.Header.Add(k, v)
		default:
			req.Header.Set(k, v)
			given[k] = true
		}
	}
	began := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return gateReply{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return gateReply{status: resp.StatusCode, header: resp.Header, body: string(b), took: time.Since(began)}, err
}

// passwordForm is the body a browser posts from the gate's form.
func passwordForm(password string) string { return url.Values{"password": {password}}.Encode() }

// post posts password to path as a person at addr does; an answer 503
// (no room in the render budget for a check: "retry shortly") is retried
// after its Retry-After, as a person would, from a new address each time,
// so that the retries do not spend addr's attempts.
func (ge *gateEnv) post(g Gomega, addr, path, password string) gateReply {
	var r gateReply
	g.Eventually(func(g Gomega) int {
		var err error
		r, err = send(from(addr), http.MethodPost, ge.redirect+path, passwordForm(password))
		g.Expect(err).NotTo(HaveOccurred())
		if r.status == http.StatusServiceUnavailable {
			g.Expect(r.header.Get("Retry-After")).NotTo(BeEmpty(), "a 503 says when to retry")
			addr = ge.nextAddr()
		}
		return r.status
	}).WithPolling(time.Second).ShouldNot(Equal(http.StatusServiceUnavailable), "a check within the render budget")
	return r
}

// gateMetric is linkforge_redirector_gate_total{result}.
func (ge *gateEnv) gateMetric(result string) float64 {
	return metricWith(ge.probes, "linkforge_redirector_gate_total", `result="`+result+`"`)
}

// sameAnswer fails unless a and b are the same answer: status, headers
// (but Date) and body, byte for byte.
func sameAnswer(g Gomega, a, b gateReply, what string) {
	g.ExpectWithOffset(1, b.status).To(Equal(a.status), what)
	g.ExpectWithOffset(1, b.body).To(Equal(a.body), what)
	ha, hb := a.header.Clone(), b.header.Clone()
	ha.Del("Date")
	hb.Del("Date")
	g.ExpectWithOffset(1, hb).To(Equal(ha), what)
}

// TestGatedLinks runs issue 55's gated links from outside, through the
// shipped binaries with their default flags but for the auth proxy's
// (gateAuthFlags) and where they listen: links made with `kubectl
// linkforge create`, a password link's answers (nothing before the gate
// names the destination; a wrong password spends nothing, the right one
// is the use, and after it the password opens nothing), hostile posts
// (another link's path, a replay, an oversized body, a slow body, guesses
// past the limits), and signed-in groups through an oauth2-proxy-style
// proxy that the redirector trusts by its address alone.
func TestGatedLinks(t *testing.T) {
	t.Parallel() // its own control plane, binaries and ports (newCluster)
	g := newG(t)
	bin, tmp, cp := newCluster(t)
	kc := installOperator(t, cp, tmp)
	pr := startPair(t, g, bin, tmp, kc,
		func(string) []string { return []string{"--metrics-bind-address", "0"} },
		func(base string) []string {
			return append([]string{"--peer-bind-address", "127.0.0.1:0", "--peer-allow-local", "--public-base-url", base}, gateAuthFlags...)
		})
	ge := &gateEnv{env: &env{t: t, cp: cp, redirect: pr.base, redirectProbes: pr.redirectProbes}, addr: pr.redirectAddr, probes: pr.redirectProbes}

	// kubectl linkforge: the CLI as the plugin users install.
	pluginDir := filepath.Join(tmp, "plugin")
	g.Expect(os.MkdirAll(pluginDir, 0o755)).To(Succeed())
	g.Expect(os.Symlink(filepath.Join(bin, "linkforge"), filepath.Join(pluginDir, "kubectl-linkforge"))).To(Succeed())
	ge.kubectlLinkforge = func(stdin string, args ...string) (string, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := cp.KubectlCmd(ctx, append([]string{"linkforge"}, args...)...)
		cmd.Env = append(cmd.Env, "PATH="+pluginDir+string(os.PathListSeparator)+os.Getenv("PATH"))
		cmd.Stdin = strings.NewReader(stdin)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return strings.TrimSpace(stdout.String()), strings.TrimSpace(stderr.String()), err
	}
	ge.mustKubectl("create", "namespace", gateNS)

	const doorPassword, otherPassword, promptedPassword = "correct horse battery staple", "tr0mbone-kettle-lantern", "typed on stdin, not a terminal"
	hash := func(password string) string {
		h, err := gate.Hash([]byte(password), gate.DefaultCost)
		g.Expect(err).NotTo(HaveOccurred())
		return h
	}
	// create makes link name with the plugin and returns its path.
	create := func(g Gomega, stdin, name, dest string, flags ...string) string {
		out, stderr, err := ge.kubectlLinkforge(stdin, append([]string{"create", name, dest, "-n", gateNS, "--timeout", "2m"}, flags...)...)
		g.ExpectWithOffset(1, err).NotTo(HaveOccurred(), "%s\n%s", out, stderr)
		g.ExpectWithOffset(1, stderr).To(ContainSubstring("shortlink.linkforge.io/" + name + " created"))
		u, err := url.Parse(out)
		g.ExpectWithOffset(1, err).NotTo(HaveOccurred(), out)
		g.ExpectWithOffset(1, pr.base+u.Path).To(Equal(out), "create prints the short URL")
		return u.Path
	}
	dest := func(name string) string { return "https://example.com/" + gateSecret + "/" + name }

	var door, prompted, other, open string
	t.Run("kubectl linkforge create writes a password's hash, from --password-hash or a line of stdin, and refuses a bad hash or an empty password with a message", func(t *testing.T) {
		g := newG(t)
		door = create(g, "", "door", dest("door"), "--password-hash", hash(doorPassword), "--max-uses", "1")
		other = create(g, "", "other", dest("other"), "--password-hash", hash(otherPassword))
		open = create(g, "", "open", "https://example.com/open")
		// Not a terminal: the plugin reads the password as one line of stdin.
		prompted = create(g, promptedPassword+"\n", "prompted", dest("prompted"), "--password-prompt")
		spec := ge.mustKubectl("get", "shortlink", "prompted", "-n", gateNS, "-o", "jsonpath={.spec.access}")
		g.Expect(spec).NotTo(ContainSubstring(promptedPassword), "only the hash is written")
		got := ge.mustKubectl("get", "shortlink", "prompted", "-n", gateNS, "-o", "jsonpath={.spec.access.passwordHash}")
		g.Expect(gate.CheckHash(got)).To(Succeed())
		g.Expect(gate.Verify(got, []byte(promptedPassword))).To(BeTrue(), "the hash of the line read, without its newline")

		for _, c := range []struct {
			stdin string
			flags []string
			want  string
		}{
			{"", []string{"--password-hash", doorPassword}, "write the hash, never the password"},
			{"", []string{"--password-hash", "$2b$04$" + strings.Repeat("a", 53)}, "bcrypt cost 4: use 10 to 12"},
			{"\n", []string{"--password-prompt"}, "--password-prompt: an empty password"},
			{strings.Repeat("x", 80) + "\n", []string{"--password-prompt"}, "bcrypt reads at most 72"},
		} {
			out, stderr, err := ge.kubectlLinkforge(c.stdin, append([]string{"create", "refused", dest("refused"), "-n", gateNS}, c.flags...)...)
			g.Expect(err).To(HaveOccurred(), "%v: %s", c.flags, out)
			g.Expect(stderr).To(ContainSubstring(c.want), "%v", c.flags)
		}
		_, err := ge.kubectl("get", "shortlink", "refused", "-n", gateNS)
		g.Expect(err).To(HaveOccurred(), "nothing was created")
	})
	if door == "" || other == "" || open == "" || prompted == "" {
		t.Fatal("the links the other subtests need were not made")
	}
	doorURL := pr.base + door

	t.Run("before the gate nothing shows the destination: GET's form, HEAD, previewers, the preview page, the QR code", func(t *testing.T) {
		g := newG(t)
		hc := from("127.0.0.1")
		g.Eventually(func() (int, error) {
			r, err := send(hc, http.MethodGet, doorURL, "")
			return r.status, err
		}).Should(Equal(http.StatusOK), "the redirector has the link")
		for _, c := range []struct {
			method, suffix, ua string
			status             int
			body               string
		}{
			{http.MethodGet, "", e2eBrowser, http.StatusOK, `type="password"`},
			{http.MethodHead, "", e2eBrowser, http.StatusOK, ""},
			{http.MethodGet, "", "Slackbot", http.StatusOK, `property="og:title"`},
			{http.MethodGet, "", e2ePreviewers[1], http.StatusOK, `property="og:title"`},
			{http.MethodHead, "", "Slackbot", http.StatusOK, ""},
			{http.MethodGet, "+", e2eBrowser, http.StatusOK, `property="og:title"`},
			{http.MethodHead, "+", e2eBrowser, http.StatusOK, ""},
			{http.MethodGet, "+", "Slackbot", http.StatusOK, `property="og:title"`},
			{http.MethodGet, "/qr", e2eBrowser, http.StatusOK, ""},
			{http.MethodHead, "/qr", e2eBrowser, http.StatusOK, ""},
		} {
			what := fmt.Sprintf("%s %s%s as %q", c.method, door, c.suffix, c.ua)
			r, err := send(hc, c.method, doorURL+c.suffix, "", "User-Agent", c.ua)
			g.Expect(err).NotTo(HaveOccurred(), what)
			g.Expect(r.status).To(Equal(c.status), "%s: %s", what, r)
			g.Expect(r.header.Get("Location")).To(BeEmpty(), what)
			g.Expect(r.showsDestination()).To(BeFalse(), "%s shows the destination: %s", what, r)
			g.Expect(r.body).To(ContainSubstring(c.body), what)
			if c.suffix == "/qr" && c.method == http.MethodGet {
				g.Expect(qrtest.ScanPNG(t, []byte(r.body))).To(Equal(doorURL), "the QR code is the short URL")
			}
		}
		form, err := send(hc, http.MethodGet, doorURL, "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(form.header.Get("Content-Security-Policy")).To(ContainSubstring("form-action 'self'"))
		g.Expect(form.header.Get("X-Robots-Tag")).To(ContainSubstring("noindex"))
		g.Expect(form.header.Get("Cache-Control")).To(Equal("no-store"))
		g.Expect(form.body).NotTo(ContainSubstring("<script"))
		g.Expect(form.body).NotTo(ContainSubstring(pages.GateRefused), "a fresh form has no refusal")
	})

	var refusedForm gateReply // the one answer of a password that did not open a link
	t.Run("a wrong password answers the form and spends no use; the right one answers 303 and is the use; then it answers as a used-up link, a replay too", func(t *testing.T) {
		g := newG(t)
		person := ge.nextAddr()
		refusedBefore := ge.gateMetric("refused")
		wrong := ge.post(g, person, door, "incorrect horse")
		g.Expect(wrong.status).To(Equal(http.StatusOK), "%s", wrong)
		g.Expect(wrong.body).To(ContainSubstring(pages.GateRefused))
		g.Expect(wrong.body).To(ContainSubstring(`type="password"`))
		g.Expect(wrong.showsDestination()).To(BeFalse(), "%s", wrong)
		g.Expect(ge.gateMetric("refused")).To(BeNumerically(">", refusedBefore), "counted as refused")
		refusedForm = wrong

		// maxUses is 1: had the wrong password spent the use, the right
		// one would answer as a used-up link does (410).
		right := ge.post(g, person, door, doorPassword)
		g.Expect(right.status).To(Equal(http.StatusSeeOther), "%s", right)
		g.Expect(right.header.Get("Location")).To(Equal(dest("door")))
		g.Expect(right.header.Get("Cache-Control")).To(Equal("no-store"))
		// At once, while the use is this replica's alone to know of (not
		// yet written), and again once status says Exhausted: the 303's
		// post replayed by its own client, and the right password from
		// someone else, get what a used-up link answers (410), never a
		// second redirect. (A GET gets the form until the link's status
		// says Exhausted, and 410 after: the gate asks before a use is
		// taken.)
		usedUp := func(phase string, get int) {
			r, err := send(from(ge.nextAddr()), http.MethodGet, doorURL, "")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.showsDestination()).To(BeFalse(), "%s, a GET: %s", phase, r)
			g.Expect(r.status).To(BeElementOf(get, http.StatusGone), "%s, a GET: %s", phase, r)
			testtiming.Of(t).Logf("%s, a GET of the link answers %d", phase, r.status)
			for _, addr := range []string{person, ge.nextAddr()} {
				again := ge.post(g, addr, door, doorPassword)
				g.Expect(again.status).To(Equal(http.StatusGone), "%s, the right password from %s: %s", phase, addr, again)
				g.Expect(again.header.Get("Location")).To(BeEmpty())
				g.Expect(again.showsDestination()).To(BeFalse(), "%s", again)
			}
		}
		usedUp("right after the use", http.StatusOK)
		g.Eventually(func(g Gomega) {
			st := ge.mustKubectl("get", "shortlink", "door", "-n", gateNS, "-o", "jsonpath={.status.uses} {.status.state}")
			g.Expect(st).To(Equal("1 Exhausted"))
		}).WithTimeout(loadedMachine * 2 * 10 * time.Second).Should(Succeed()) // written within two flush intervals (--uses-flush-interval, 10s)
		usedUp("once Exhausted", http.StatusGone)
		g.Consistently(func() string {
			return ge.mustKubectl("get", "shortlink", "door", "-n", gateNS, "-o", "jsonpath={.status.uses}")
		}).WithTimeout(2*10*time.Second).WithPolling(2*time.Second).Should(Equal("1"), "nothing after the use is one")

		// The password read from stdin opens its link.
		right = ge.post(g, ge.nextAddr(), prompted, promptedPassword)
		g.Expect(right.status).To(Equal(http.StatusSeeOther), "%s", right)
		g.Expect(right.header.Get("Location")).To(Equal(dest("prompted")))
	})

	t.Run("a used-up gated link shows its destination nowhere: GET, HEAD, previewers, the preview page, the QR code", func(t *testing.T) {
		g := newG(t)
		g.Eventually(func() (int, error) {
			r, err := send(from("127.0.0.1"), http.MethodGet, doorURL, "")
			return r.status, err
		}).Should(Equal(http.StatusGone))
		var leaks []string
		for _, c := range []struct{ method, suffix, ua string }{
			{http.MethodGet, "", e2eBrowser},
			{http.MethodHead, "", e2eBrowser},
			{http.MethodGet, "", "Slackbot"},
			{http.MethodGet, "/qr", e2eBrowser},
			{http.MethodGet, "+", "Slackbot"},
			{http.MethodGet, "+", e2eBrowser},
		} {
			what := fmt.Sprintf("%s %s%s as %q", c.method, door, c.suffix, c.ua)
			r, err := send(from("127.0.0.1"), c.method, doorURL+c.suffix, "", "User-Agent", c.ua)
			g.Expect(err).NotTo(HaveOccurred(), what)
			if r.showsDestination() {
				leaks = append(leaks, fmt.Sprintf("%s: %s", what, r))
			}
		}
		g.Expect(leaks).To(BeEmpty(), "answers that show a used-up gated link's destination to whoever has its short URL")
	})

	t.Run("a password posted to another link's path: 405 on an ungated link, refused on a gated one", func(t *testing.T) {
		g := newG(t)
		addr := ge.nextAddr()
		r, err := send(from(addr), http.MethodPost, pr.base+open, passwordForm(otherPassword))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.status).To(Equal(http.StatusMethodNotAllowed), "%s", r)
		g.Expect(r.header.Get("Location")).To(BeEmpty())
		// other's password on prompted, prompted's on other: each link
		// opens for its own only.
		for _, c := range []struct{ path, password string }{{prompted, otherPassword}, {other, promptedPassword}, {other, doorPassword}} {
			r := ge.post(g, addr, c.path, c.password)
			sameAnswer(g, refusedForm, r, "another link's password on "+c.path)
		}
		// Another view of the link takes no post.
		for _, suffix := range []string{"+", "/qr"} {
			r, err := send(from(addr), http.MethodPost, pr.base+other+suffix, passwordForm(otherPassword))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.status).To(Equal(http.StatusMethodNotAllowed), "POST %s%s: %s", other, suffix, r)
		}
	})

	t.Run("an oversized body is answered 413 and its connection closed", func(t *testing.T) { ge.testOversizedBody(t, other) })
	t.Run(fmt.Sprintf("a slow form post (its head, then a byte of its body every 400ms) is closed within %d x --header-timeout (%s), never redirected", loadedMachine, gateHeaderTimeout),
		func(t *testing.T) { ge.testSlowPost(t, other, otherPassword) })

	t.Run(fmt.Sprintf("guesses past the limits (%d a client, then one every %s; %d a link, then one every %s) get the form a wrong password gets, counted as limited",
		gate.DefaultLimits.PerClient.Burst, gate.DefaultLimits.PerClient.Every, gate.DefaultLimits.PerLink.Burst, gate.DefaultLimits.PerLink.Every), func(t *testing.T) {
		g := newG(t)
		// guessUntilLimited posts wrong passwords to path, each from the
		// address addr returns, until linkforge_redirector_gate_total
		// {result="limited"} counts one; it fails if more attempts than
		// the rate lets through by then were checked (answered the form;
		// a 503 was not checked and spends no attempt). It returns the
		// limited answer and the last refused one.
		guessUntilLimited := func(path string, addr func() string, rate gate.Rate) (limited, refused gateReply) {
			began := time.Now()
			checked := 0 // a guess answered 503 was not checked, and spent no attempt
			for attempt := 1; ; attempt++ {
				before := ge.gateMetric("limited")
				r, err := send(from(addr()), http.MethodPost, pr.base+path, passwordForm(fmt.Sprintf("guess %d", attempt)))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(r.status).To(Or(Equal(http.StatusOK), Equal(http.StatusServiceUnavailable)), "%s", r)
				g.Expect(r.showsDestination()).To(BeFalse())
				if ge.gateMetric("limited") > before {
					g.Expect(r.status).To(Equal(http.StatusOK), "a limited guess gets the form")
					testtiming.Of(t).Logf("%s: attempt %d was limited, %s after the first (its answer took %s)", path, attempt, time.Since(began).Round(time.Millisecond), r.took.Round(time.Millisecond))
					return r, refused
				}
				if r.status == http.StatusOK {
					refused = r
					checked++
				}
				allowed := rate.Burst + int(time.Since(began)/rate.Every)
				g.Expect(checked).To(BeNumerically("<=", allowed), "%d attempts went through, where the limit lets %d through in %s", checked, allowed, time.Since(began))
			}
		}
		crowd := create(g, "", "crowd", dest("crowd"), "--password-hash", hash(doorPassword))
		g.Eventually(func() (int, error) {
			r, err := send(from("127.0.0.1"), http.MethodGet, pr.base+crowd, "")
			return r.status, err
		}).Should(Equal(http.StatusOK))

		guesser := ge.nextAddr()
		limited, refused := guessUntilLimited(other, func() string { return guesser }, gate.DefaultLimits.PerClient)
		sameAnswer(g, refusedForm, limited, "a guess limited by its client")
		if refused.status != 0 {
			sameAnswer(g, refusedForm, refused, "a wrong guess")
		}
		// Limited across links: the guesser's next guess, at another
		// link (unless a token came back meanwhile: then checked, or 503).
		before := ge.gateMetric("limited")
		r, err := send(from(guesser), http.MethodPost, pr.base+crowd, passwordForm("guess"))
		g.Expect(err).NotTo(HaveOccurred())
		if ge.gateMetric("limited") > before {
			sameAnswer(g, refusedForm, r, "a guess limited by its client, at another link")
		} else {
			g.Expect(r.status).To(Or(Equal(http.StatusOK), Equal(http.StatusServiceUnavailable)), "%s", r)
			testtiming.Of(t).Logf("the guesser's bucket refilled before its guess at another link (%s): %d", gate.DefaultLimits.PerClient.Every, r.status)
		}

		// A link's limit, met by guesses from as many addresses.
		limited, _ = guessUntilLimited(crowd, ge.nextAddr, gate.DefaultLimits.PerLink)
		sameAnswer(g, refusedForm, limited, "a guess limited by its link")
		// The right password now, from someone who never guessed: the
		// same form while the link is limited (or, if a token came back
		// meanwhile, the redirect).
		before = ge.gateMetric("limited")
		r, err = send(from(ge.nextAddr()), http.MethodPost, pr.base+crowd, passwordForm(doorPassword))
		g.Expect(err).NotTo(HaveOccurred())
		if ge.gateMetric("limited") > before {
			sameAnswer(g, refusedForm, r, "the right password while its link is limited")
		} else {
			g.Expect(r.status).To(Or(Equal(http.StatusSeeOther), Equal(http.StatusServiceUnavailable)), "%s", r)
			testtiming.Of(t).Logf("the link's bucket refilled before the right password (%s): %d", gate.DefaultLimits.PerLink.Every, r.status)
		}
	})

	t.Run("signed-in groups through an auth proxy trusted by its address: an allowed group or user opens the link, anyone else gets 403, the proxy's headers from elsewhere or sent twice sign nobody in", func(t *testing.T) {
		g := newG(t)
		team := create(g, "", "team", dest("team"), "--allow-group", "sre", "--allow-user", "carol@example.com")
		both := create(g, "", "both", dest("both"), "--allow-group", "sre", "--password-hash", hash(otherPassword))
		proxy := newAuthProxy(t, pr.base)
		as := func(user, path string) gateReply {
			req, _ := http.NewRequest(http.MethodGet, proxy.URL+path, nil)
			req.SetBasicAuth(user, authProxyUsers[user].password)
			// A client's own try at the headers: the proxy replaces them.
			req.Header.Set(gateUserHeader, "alice@example.com")
			req.Header.Set(gateGroupsHeader, "sre")
			resp, err := noFollow.Do(req)
			g.Expect(err).NotTo(HaveOccurred())
			defer func() { _ = resp.Body.Close() }()
			b, _ := io.ReadAll(resp.Body)
			return gateReply{status: resp.StatusCode, header: resp.Header, body: string(b)}
		}
		g.Eventually(func() int { return as("alice@example.com", team).status }).Should(Equal(http.StatusFound))
		admitted, forbidden := ge.gateMetric("admitted"), ge.gateMetric("forbidden")
		for _, c := range []struct {
			user, path string
			status     int
			location   string
		}{
			{"alice@example.com", team, http.StatusFound, dest("team")}, // in sre
			{"carol@example.com", team, http.StatusFound, dest("team")}, // an allowed user
			{"bob@example.com", team, http.StatusForbidden, ""},         // in marketing
			{"alice@example.com", both, http.StatusFound, dest("both")},
			{"bob@example.com", both, http.StatusOK, ""}, // the password form
		} {
			r := as(c.user, c.path)
			g.Expect(r.status).To(Equal(c.status), "%s via the proxy to %s: %s", c.user, c.path, r)
			g.Expect(r.header.Get("Location")).To(Equal(c.location))
			if c.location == "" {
				g.Expect(r.showsDestination()).To(BeFalse(), "%s", r)
			}
		}
		g.Expect(ge.gateMetric("admitted")).To(Equal(admitted+3), "counted as admitted")
		g.Expect(ge.gateMetric("forbidden")).To(Equal(forbidden+1), "counted as forbidden")

		// Straight to the redirector: from 127.0.0.1, not a trusted
		// proxy, the headers are nobody's; from the proxy's address they
		// are read, unless the user header comes twice.
		for _, c := range []struct {
			addr   string
			header []string
			status int
		}{
			{"127.0.0.1", []string{gateUserHeader, "alice@example.com", gateGroupsHeader, "sre"}, http.StatusForbidden},
			{"127.0.0.1", []string{gateUserHeader, "carol@example.com"}, http.StatusForbidden},
			{gateProxyAddr, []string{gateUserHeader, "alice@example.com", gateGroupsHeader, "sre"}, http.StatusFound},
			{gateProxyAddr, []string{gateUserHeader, "alice@example.com", gateUserHeader, "alice@example.com", gateGroupsHeader, "sre"}, http.StatusForbidden},
			{gateProxyAddr, []string{gateUserHeader, "mallory@example.com", gateUserHeader, "carol@example.com"}, http.StatusForbidden},
		} {
			r, err := send(from(c.addr), http.MethodGet, pr.base+team, "", c.header...)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.status).To(Equal(c.status), "from %s with %v: %s", c.addr, c.header, r)
			if c.status != http.StatusFound {
				g.Expect(r.showsDestination()).To(BeFalse(), "%s", r)
			}
		}
	})

	// A second replica, with --auth-sign-in-url.
	signIn, signInProbes := startSignInReplica(t, g, bin, tmp, kc.Redirector, pr.base)
	signInFor := func(short string) string { return strings.ReplaceAll(gateSignIn, "{url}", url.QueryEscape(short)) }

	t.Run("with --auth-sign-in-url, whoever is not signed in is sent to sign in, {url} the short URL whatever the Host", func(t *testing.T) {
		g := newG(t)
		team := "/" + gateNS + "/" + ge.mustKubectl("get", "shortlink", "team", "-n", gateNS, "-o", "jsonpath={.status.code}")
		teamURL := ge.mustKubectl("get", "shortlink", "team", "-n", gateNS, "-o", "jsonpath={.status.shortURL}")
		g.Expect(teamURL).To(Equal(pr.base + team))
		g.Eventually(func() (int, error) {
			r, err := send(from("127.0.0.1"), http.MethodGet, signIn+team, "")
			return r.status, err
		}).Should(Equal(http.StatusFound), "the replica has the link")
		signInBefore := metricWith(signInProbes, "linkforge_redirector_gate_total", `result="sign-in"`)
		for _, c := range []struct {
			name   string
			header []string
		}{
			{"the short URL", nil},
			{"a Host of the client's choosing", []string{"Host", "evil.example"}},
		} {
			r, err := send(from("127.0.0.1"), http.MethodGet, signIn+team, "", c.header...)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.status).To(Equal(http.StatusFound), "%s: %s", c.name, r)
			g.Expect(r.showsDestination()).To(BeFalse(), "%s: %s", c.name, r)
			g.Expect(r.header.Get("Location")).To(Equal(signInFor(teamURL)), "%s: {url} is the short URL the person comes back to", c.name)
		}
		g.Expect(metricWith(signInProbes, "linkforge_redirector_gate_total", `result="sign-in"`)).To(Equal(signInBefore+2), "counted as sign-in")
		// A post is no sign-in: 403.
		r, err := send(from(ge.nextAddr()), http.MethodPost, signIn+team, passwordForm(otherPassword))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.status).To(Equal(http.StatusForbidden), "%s", r)
		// Signed in through the proxy, the same replica redirects.
		proxy := newAuthProxy(t, signIn)
		req, _ := http.NewRequest(http.MethodGet, proxy.URL+team, nil)
		req.SetBasicAuth("alice@example.com", authProxyUsers["alice@example.com"].password)
		resp, err := noFollow.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		g.Expect(fmt.Sprintf("%d %s", resp.StatusCode, resp.Header.Get("Location"))).To(Equal("302 " + dest("team")))
	})

	t.Run("with --auth-sign-in-url, a vanity host's short form comes back to the vanity short URL, as its QR code names it", func(t *testing.T) {
		g := newG(t)
		const vanityNS, vanityHost = "gate-vanity", "go.gate.example"
		ge.mustKubectl("create", "namespace", vanityNS)
		ge.mustKubectl("annotate", "namespace", vanityNS, "linkforge.io/domain="+vanityHost)
		_, stderr, err := ge.kubectlLinkforge("", "create", "crew", dest("crew"), "-n", vanityNS, "--allow-group", "sre", "--timeout", "2m")
		g.Expect(err).NotTo(HaveOccurred(), stderr)
		code := ge.mustKubectl("get", "shortlink", "crew", "-n", vanityNS, "-o", "jsonpath={.status.code}")
		g.Eventually(func() (int, error) {
			r, err := send(from("127.0.0.1"), http.MethodGet, signIn+"/"+code, "", "Host", vanityHost)
			return r.status, err
		}).Should(Equal(http.StatusFound), "the replica has the link and its namespace's host")
		// The short URL of the vanity form, as the redirector's QR code of it says.
		qr, err := send(from("127.0.0.1"), http.MethodGet, signIn+"/"+code+"/qr", "", "Host", vanityHost)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(qr.status).To(Equal(http.StatusOK), "%s", qr)
		short := qrtest.ScanPNG(t, []byte(qr.body))
		g.Expect(short).To(Equal("http://" + vanityHost + "/" + code))
		r, err := send(from("127.0.0.1"), http.MethodGet, signIn+"/"+code, "", "Host", vanityHost)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.status).To(Equal(http.StatusFound), "%s", r)
		g.Expect(r.header.Get("Location")).To(Equal(signInFor(short)), "{url} is the short URL the person comes back to")
	})
}

// startSignInReplica starts a redirector with gateAuthFlags and
// --auth-sign-in-url=gateSignIn as a second replica beside the pair's
// (the same public base URL), and returns its base URL and its probes'
// address once it is ready.
func startSignInReplica(t *testing.T, g *WithT, bin, tmp, kubeconfig, publicBase string) (base, probes string) {
	return startRedirector(t, g, bin, tmp, kubeconfig, "redirector-signin",
		append([]string{"--peer-bind-address", "0", "--public-base-url", publicBase, "--auth-sign-in-url", gateSignIn}, gateAuthFlags...)...)
}

// startRedirector starts the redirector as name, with kubeconfig and args
// (beside its addresses, which it picks), stopped when t ends (its log on
// a failure, and no forbidden request allowed), and returns its base URL
// and its probes' address once it is ready.
func startRedirector(t *testing.T, g *WithT, bin, tmp, kubeconfig, name string, args ...string) (base, probes string) {
	addr, err := devenv.FreeAddr()
	g.Expect(err).NotTo(HaveOccurred())
	probes, err = devenv.FreeAddr()
	g.Expect(err).NotTo(HaveOccurred())
	red, err := devenv.Start(name, filepath.Join(tmp, name+".log"), filepath.Join(bin, "redirector"),
		append([]string{"--kubeconfig", kubeconfig, "--bind-address", addr, "--health-probe-bind-address", probes}, args...)...)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := red.Stop(15 * time.Second); err != nil {
			t.Error(err)
		}
		expectNoForbidden(t, red)
		if t.Failed() {
			if b, err := os.ReadFile(red.Log); err == nil {
				t.Logf("--- %s log ---\n%s", red.Name, tail(string(b), 4000))
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	g.Expect(devenv.WaitHTTP(ctx, "http://"+probes+"/readyz", http.StatusOK)).To(Succeed())
	return "http://" + addr, probes
}

// testOversizedBody: a password post to the gated link path whose body passes the
// redirector's 4 KiB, by its Content-Length or as its chunks arrive, is
// answered 413 and its connection closed, counted as refused and never a
// password.
func (ge *gateEnv) testOversizedBody(t *testing.T, path string) {
	g := newG(t)
	before := metricWith(ge.probes, "linkforge_redirector_refused_requests_total", `code="413"`)
	checks := ge.gateMetric("refused") + ge.gateMetric("passed") + ge.gateMetric("limited") + ge.gateMetric("busy")
	head := "POST " + path + " HTTP/1.1\r\nHost: " + ge.addr + "\r\nContent-Type: application/x-www-form-urlencoded\r\n"
	chunk := "3e8\r\n" + strings.Repeat("a", 1000) + "\r\n"
	for _, c := range []struct{ name, request string }{
		// fasthttp refuses the length before it reads the body.
		{"a Content-Length past 4 KiB", head + "Content-Length: 1048576\r\n\r\npassword="},
		// 4 chunks of 1,000 bytes are read; the size of a fifth passes the limit.
		{"a chunked body that grows past 4 KiB", head + "Transfer-Encoding: chunked\r\n\r\n" + strings.Repeat(chunk, 4) + "3e8\r\n"},
	} {
		conn, err := dialFrom(ge.nextAddr(), ge.addr)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = io.WriteString(conn, c.request)
		g.Expect(err).NotTo(HaveOccurred(), c.name)
		// Closed at once; a connection kept would wait for its next
		// request for --idle-timeout (120s): the deadline is below it.
		_ = conn.SetReadDeadline(time.Now().Add(loadedMachine * gateHeaderTimeout))
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		g.Expect(err).NotTo(HaveOccurred(), c.name)
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusRequestEntityTooLarge), "%s: %s", c.name, b)
		_, err = br.ReadByte()
		g.Expect(closedByPeer(err)).To(BeTrue(), "%s: the connection is closed after the 413, got %v", c.name, err)
		_ = conn.Close()
	}
	g.Expect(metricWith(ge.probes, "linkforge_redirector_refused_requests_total", `code="413"`)).To(Equal(before+2), "counted as refused, 413")
	g.Expect(ge.gateMetric("refused")+ge.gateMetric("passed")+ge.gateMetric("limited")+ge.gateMetric("busy")).To(Equal(checks), "never a password")
}

// testSlowPost: a post of the right password to path whose body comes a
// byte every 400ms is closed within loadedMachine x --header-timeout
// (which bounds a request's arrival, body included), and not before it.
func (ge *gateEnv) testSlowPost(t *testing.T, path, password string) {
	g := newG(t)
	// The right password, padded to 150 bytes: a minute to send, so
	// that only a redirector that waits past the bound could take it.
	body := passwordForm(password) + "&pad="
	body += strings.Repeat("x", 150-len(body))
	began := time.Now()
	conn, err := dialFrom(ge.nextAddr(), ge.addr)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = conn.Close() }()
	_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n", path, ge.addr, len(body))
	g.Expect(err).NotTo(HaveOccurred())
	stop := make(chan struct{})
	dribbled := make(chan int, 1)
	go func() {
		tick := time.NewTicker(400 * time.Millisecond)
		defer tick.Stop()
		sent := 0
		defer func() { dribbled <- sent }()
		for sent < len(body) {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := io.WriteString(conn, body[sent:sent+1]); err != nil {
				return
			}
			sent++
		}
	}()
	_ = conn.SetReadDeadline(began.Add(loadedMachine*gateHeaderTimeout + 10*time.Second))
	answer, err := io.ReadAll(conn)
	closedAfter := time.Since(began)
	close(stop)
	sent := <-dribbled
	testtiming.Of(t).Logf("the slow post: %d of %d bytes of its body sent, closed after %s, answered %q", sent, len(body), closedAfter.Round(time.Millisecond), firstLine(answer))
	g.Expect(err == nil || closedByPeer(err)).To(BeTrue(), "the redirector closes the connection before the read deadline: %v; read %q", err, answer)
	g.Expect(closedAfter).To(BeNumerically("<=", loadedMachine*gateHeaderTimeout), "closed within %d x --header-timeout", loadedMachine)
	g.Expect(closedAfter).To(BeNumerically(">=", gateHeaderTimeout), "not before --header-timeout")
	g.Expect(sent).To(BeNumerically("<", len(body)), "the body was never complete")
	g.Expect(string(answer)).NotTo(ContainSubstring(gateSecret))
	g.Expect(string(answer)).NotTo(HavePrefix("HTTP/1.1 303"))
}

// authProxyUsers are the people the test's auth proxy knows, with the
// groups it names for them.
var authProxyUsers = map[string]struct{ password, groups string }{
	"alice@example.com": {"alice-pw", "sre, oncall"},
	"bob@example.com":   {"bob-pw", "marketing"},
	"carol@example.com": {"carol-pw", ""},
}

// newAuthProxy is an oauth2-proxy-style auth proxy in front of target: it
// signs people in its own way (basic auth), and passes on their requests
// with the user and groups in gateUserHeader and gateGroupsHeader (the
// client's own removed), from gateProxyAddr, the one peer the
// redirector's --auth-proxies trusts.
func newAuthProxy(t *testing.T, target string) *httptest.Server {
	to, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(gateProxyAddr)}, Timeout: 10 * time.Second}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(to)
			pr.Out.Header.Del(gateUserHeader)
			pr.Out.Header.Del(gateGroupsHeader)
			pr.Out.Header.Del("Authorization")
			if user, _, ok := pr.In.BasicAuth(); ok {
				pr.Out.Header.Set(gateUserHeader, user)
				if groups := authProxyUsers[user].groups; groups != "" {
					pr.Out.Header.Set(gateGroupsHeader, groups)
				}
			}
		},
		Transport: &http.Transport{DialContext: d.DialContext, DisableCompression: true},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		user, password, ok := req.BasicAuth()
		if u, known := authProxyUsers[user]; !ok || !known || u.password != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "sign in", http.StatusUnauthorized)
			return
		}
		rp.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// dialFrom dials addr from the loopback address local.
func dialFrom(local, addr string) (net.Conn, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 10 * time.Second}
	return d.Dial("tcp", addr)
}

// closedByPeer reports whether a read's error is the peer closing the
// connection (EOF, or a reset when it closed with input unread).
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || strings.Contains(fmt.Sprint(err), "connection reset")
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\r\n")
	return s
}
