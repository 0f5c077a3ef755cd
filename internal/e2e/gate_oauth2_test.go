package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/linkforge/linkforge/internal/devenv"
	"github.com/linkforge/linkforge/internal/testenv"
)

// oauth2UserHeader is the header in which oauth2-proxy names the user by
// email. Its X-Forwarded-User is the OIDC subject (the sub claim; the
// email only with --prefer-email-to-user), an opaque id at most
// providers: the test's provider makes it one (sub-<name>), so a link's
// users list of emails opens only when the redirector reads this header.
const oauth2UserHeader = "X-Forwarded-Email"

// TestGatedLinksBehindOAuth2Proxy runs issue 55's sign-in gate through a
// real auth proxy: oauth2-proxy (bin/oauth2-proxy, built from its Go module
// by make tools) with --provider=oidc against oauth2-proxy's mock OpenID
// Connect provider (bin/mockoidc), in front of the shipped redirector with
// --auth-user-header X-Forwarded-Email, --auth-groups-header
// X-Forwarded-Groups and --auth-proxies 127.0.0.2/32. A person is a Go
// http.Client with a cookie jar that follows the whole login (oauth2-proxy,
// the provider's authorize endpoint, oauth2-proxy's callback, back to the
// short URL) and stops at the link's destination. Two deployments, as
// docs/security.md gives them: oauth2-proxy in front of every link (it sends
// whoever has no session to the provider itself), and in front of every link
// but asking only where a link does (--skip-auth-route '^/' with the
// redirector's --auth-sign-in-url at oauth2-proxy's /oauth2/start?rd={url}).
//
// oauth2-proxy has no flag for the source address of its upstream
// connections, and Linux gives a connection to any 127.0.0.0/8 address the
// source 127.0.0.1 (the route's src), whatever address the redirector
// listens on. So each oauth2-proxy's upstream is a TCP relay of the test
// (delayProxy, no delay) that dials the redirector from 127.0.0.2, as the
// auth proxy's own pod address would be in a cluster: it copies bytes, and
// the requests and headers the redirector reads are oauth2-proxy's.
func TestGatedLinksBehindOAuth2Proxy(t *testing.T) {
	t.Parallel() // its own control plane, binaries and ports (newCluster)
	g := newG(t)
	oauth2Proxy, mockOIDC := testenv.OAuth2ProxyBinary(t, root), testenv.MockOIDCBinary(t, root)
	bin, tmp, cp := newCluster(t)
	kc := installOperator(t, cp, tmp)
	provider := startMockOIDC(t, g, mockOIDC, tmp)

	authFlags := []string{"--auth-user-header", oauth2UserHeader, "--auth-groups-header", gateGroupsHeader, "--auth-proxies", gateProxyAddr + "/32"}
	// Every link behind sign-in: the pair's redirector, no sign-in URL.
	everyAddr, err := devenv.FreeAddr()
	g.Expect(err).NotTo(HaveOccurred())
	every := "http://" + everyAddr
	pr := startPair(t, g, bin, tmp, kc,
		func(string) []string { return []string{"--metrics-bind-address", "0"} },
		func(string) []string {
			return append([]string{"--peer-bind-address", "127.0.0.1:0", "--peer-allow-local", "--public-base-url", every}, authFlags...)
		})
	startOAuth2Proxy(t, g, oauth2Proxy, tmp, "oauth2-proxy-every", provider, everyAddr, delayProxy(t, gateProxyAddr, pr.redirectAddr, 0),
		"--skip-provider-button")

	// Sign-in where a link asks: a second redirector, whose sign-in URL is
	// the second oauth2-proxy's /oauth2/start.
	askAddr, err := devenv.FreeAddr()
	g.Expect(err).NotTo(HaveOccurred())
	ask := "http://" + askAddr
	askSignIn := ask + "/oauth2/start?rd={url}"
	askBase, askProbes := startRedirector(t, g, bin, tmp, kc.Redirector, "redirector-ask",
		append([]string{"--peer-bind-address", "0", "--public-base-url", ask, "--auth-sign-in-url", askSignIn}, authFlags...)...)
	askRedirector := strings.TrimPrefix(askBase, "http://")
	startOAuth2Proxy(t, g, oauth2Proxy, tmp, "oauth2-proxy-ask", provider, askAddr, delayProxy(t, gateProxyAddr, askRedirector, 0),
		"--skip-auth-route", "^/", "--whitelist-domain", askAddr)

	dest := func(name string) string { return "https://example.com/" + gateSecret + "/" + name }
	e := &env{t: t, cp: cp}
	const ns = "sso"
	e.mustKubectl("create", "namespace", ns)
	e.applyYAML(fmt.Sprintf(`apiVersion: linkforge.io/v1alpha1
kind: ShortLink
metadata: {name: team, namespace: %[1]s}
spec:
  url: %[2]s
  access: {groups: [sre], users: [carol@example.com]}
---
apiVersion: linkforge.io/v1alpha1
kind: ShortLink
metadata: {name: open, namespace: %[1]s}
spec: {url: 'https://example.com/open'}
`, ns, dest("team")))
	e.mustKubectl("wait", "--for=condition=Ready", "shortlink", "team", "open", "-n", ns, "--timeout=60s")
	team := "/" + ns + "/" + e.mustKubectl("get", "shortlink", "team", "-n", ns, "-o", "jsonpath={.status.code}")
	open := "/" + ns + "/" + e.mustKubectl("get", "shortlink", "open", "-n", ns, "-o", "jsonpath={.status.code}")
	// Both redirectors have the links: nobody signed in gets 403 from the
	// first, the sign-in from the second.
	g.Eventually(func() (int, error) {
		r, err := send(from("127.0.0.1"), http.MethodGet, pr.base+team, "")
		return r.status, err
	}).Should(Equal(http.StatusForbidden))
	g.Eventually(func() (string, error) {
		r, err := send(from("127.0.0.1"), http.MethodGet, "http://"+askRedirector+team, "")
		return r.header.Get("Location"), err
	}).Should(HavePrefix(ask + "/oauth2/start"))

	hosts := map[string]string{everyAddr: "proxy", askAddr: "proxy", provider.host: "provider"}
	// signIn queues c's person at the provider, follows the login from
	// target and checks where it ended: the hops of login, then c's status
	// and Location, and nothing of the destination without one.
	signIn := func(g Gomega, target string, login []string, c signInCase) {
		provider.queue(g, c.email, c.groups...)
		r, hops, err := browse(target, hosts)
		g.Expect(err).NotTo(HaveOccurred(), "%s: %v", c.email, hops)
		g.Expect(hops).To(Equal(login), c.email)
		g.Expect(r.status).To(Equal(c.status), "%s: %s", c.email, r)
		g.Expect(r.header.Get("Location")).To(Equal(c.location), c.email)
		if c.location == "" {
			g.Expect(r.showsDestination()).To(BeFalse(), "%s", r)
		}
	}
	gateMetric := func(probes, result string) float64 {
		return metricWith(probes, "linkforge_redirector_gate_total", `result="`+result+`"`)
	}

	t.Run("oauth2-proxy in front of every link: a person signs in at the provider and comes back to the short URL, redirected if in an allowed group or an allowed user (by email), 403 if not", func(t *testing.T) {
		g := newG(t)
		login := []string{"proxy " + team, "provider /oidc/authorize", "proxy /oauth2/callback", "proxy " + team}
		admitted, forbidden := gateMetric(pr.redirectProbes, "admitted"), gateMetric(pr.redirectProbes, "forbidden")
		for _, c := range []signInCase{
			{"alice@example.com", []string{"sre", "oncall"}, http.StatusFound, dest("team")},
			{"carol@example.com", nil, http.StatusFound, dest("team")},
			{"bob@example.com", []string{"marketing"}, http.StatusForbidden, ""},
		} {
			signIn(g, every+team, login, c)
		}
		g.Expect(gateMetric(pr.redirectProbes, "admitted")).To(Equal(admitted+2), "the redirector admitted alice and carol")
		g.Expect(gateMetric(pr.redirectProbes, "forbidden")).To(Equal(forbidden+1), "the 403 is the redirector's")

		// Whoever has no session is sent to the provider before anything
		// reaches the redirector, to an open link too.
		r, err := send(noFollow, http.MethodGet, every+open, "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.status).To(Equal(http.StatusFound), "%s", r)
		g.Expect(r.header.Get("Location")).To(HavePrefix(provider.Issuer + "/authorize"))
	})

	t.Run("straight to the redirector from 127.0.0.1, oauth2-proxy's headers sign nobody in: 403", func(t *testing.T) {
		g := newG(t)
		r, err := send(from("127.0.0.1"), http.MethodGet, pr.base+team, "",
			oauth2UserHeader, "alice@example.com", "X-Forwarded-User", "sub-alice", gateGroupsHeader, "sre")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.status).To(Equal(http.StatusForbidden), "%s", r)
		g.Expect(r.showsDestination()).To(BeFalse(), "%s", r)
	})

	t.Run("oauth2-proxy asking only where a link does: an open link redirects anyone; a gated one sends to /oauth2/start?rd={url} and back, redirected if allowed, 403 if not", func(t *testing.T) {
		g := newG(t)
		r, err := send(noFollow, http.MethodGet, ask+open, "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(fmt.Sprintf("%d %s", r.status, r.header.Get("Location"))).To(Equal("302 https://example.com/open"), "no sign-in for an open link")

		// The headers a client sends itself oauth2-proxy removes: without a
		// session, nobody is signed in.
		r, err = send(noFollow, http.MethodGet, ask+team, "", oauth2UserHeader, "alice@example.com", gateGroupsHeader, "sre")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.status).To(Equal(http.StatusFound), "%s", r)
		g.Expect(r.header.Get("Location")).To(Equal(strings.ReplaceAll(askSignIn, "{url}", url.QueryEscape(ask+team))), "sent to sign in, to come back to the short URL")

		login := []string{"proxy " + team, "proxy /oauth2/start", "provider /oidc/authorize", "proxy /oauth2/callback", "proxy " + team}
		admitted, forbidden := gateMetric(askProbes, "admitted"), gateMetric(askProbes, "forbidden")
		for _, c := range []signInCase{
			{"alice@example.com", []string{"oncall", "sre"}, http.StatusFound, dest("team")},
			// Signed in, and not allowed: 403, not the sign-in again,
			// which signs the same person in and comes back, for ever.
			{"bob@example.com", []string{"marketing"}, http.StatusForbidden, ""},
		} {
			signIn(g, ask+team, login, c)
		}
		g.Expect(gateMetric(askProbes, "admitted")).To(Equal(admitted+1), "the redirector admitted alice")
		g.Expect(gateMetric(askProbes, "forbidden")).To(Equal(forbidden+1), "the 403 is the redirector's")
	})
}

// browse GETs target as a person's browser does: a cookie jar of its own,
// redirects followed on hosts (host:port to the name hops gives it: the
// proxy, the provider) and stopped at any other (a link's destination),
// at most 10. hops is each request's host's name and path, in order.
func browse(target string, hosts map[string]string) (r gateReply, hops []string, err error) {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return r, nil, err
	}
	u, err := url.Parse(target)
	if err != nil {
		return r, nil, err
	}
	hops = []string{hosts[u.Host] + " " + u.Path}
	hc := &http.Client{
		Jar:     jar,
		Timeout: gateClientTimeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			name, ok := hosts[req.URL.Host]
			if !ok {
				return http.ErrUseLastResponse
			}
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			hops = append(hops, name+" "+req.URL.Path)
			return nil
		},
	}
	r, err = send(hc, http.MethodGet, target, "")
	return r, hops, err
}

// oidcProvider is the test OpenID Connect provider (bin/mockoidc), as the
// line it prints says.
type oidcProvider struct {
	Issuer       string `json:"issuer"`
	ClientID     string `json:"clientID"`
	ClientSecret string `json:"clientSecret"`
	Users        string `json:"users"`
	host         string // its host:port
}

// startMockOIDC starts bin/mockoidc on a free loopback port, stopped when t
// ends, and returns it once it has said where it is.
func startMockOIDC(t *testing.T, g *WithT, bin, tmp string) *oidcProvider {
	addr, err := devenv.FreeAddr()
	g.Expect(err).NotTo(HaveOccurred())
	p := devenv.StartLogged(t, tmp, "mockoidc", bin, "--listen", addr)
	var o oidcProvider
	g.Eventually(func(g Gomega) {
		b, err := os.ReadFile(p.Log)
		g.Expect(err).NotTo(HaveOccurred())
		line, _, _ := bytes.Cut(b, []byte("\n"))
		g.Expect(json.Unmarshal(line, &o)).To(Succeed(), "its first line: %s", b)
	}).Should(Succeed(), "mockoidc prints its issuer, client and users URL")
	u, err := url.Parse(o.Issuer)
	g.Expect(err).NotTo(HaveOccurred())
	o.host = u.Host
	g.Expect(o.host).To(Equal(addr))
	return &o
}

// queue makes email, in groups, the user whom the next login signs in.
func (o *oidcProvider) queue(g Gomega, email string, groups ...string) {
	body, err := json.Marshal(map[string]any{"email": email, "groups": groups})
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	resp, err := http.Post(o.Users, "application/json", bytes.NewReader(body))
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.ExpectWithOffset(1, resp.StatusCode).To(Equal(http.StatusNoContent))
}

// startOAuth2Proxy starts oauth2-proxy as name at addr, in front of
// upstream, signing people in at provider with OIDC and passing their
// email and groups upstream, with extra flags; stopped when t ends, and
// ready (its /ping) when it returns. The cookie is not Secure: the test
// speaks plain HTTP on loopback.
func startOAuth2Proxy(t *testing.T, g *WithT, bin, tmp, name string, provider *oidcProvider, addr, upstream string, extra ...string) {
	secret := make([]byte, 32)
	_, err := rand.Read(secret)
	g.Expect(err).NotTo(HaveOccurred())
	args := append([]string{
		"--provider", "oidc", "--oidc-issuer-url", provider.Issuer,
		"--client-id", provider.ClientID, "--client-secret", provider.ClientSecret,
		"--scope", "openid email profile groups", "--code-challenge-method", "S256",
		"--email-domain", "*", "--pass-user-headers=true",
		"--cookie-secret", base64.URLEncoding.EncodeToString(secret), "--cookie-secure=false",
		"--http-address", addr, "--redirect-url", "http://" + addr + "/oauth2/callback",
		"--upstream", "http://" + upstream + "/",
	}, extra...)
	devenv.StartLogged(t, tmp, name, bin, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	g.Expect(devenv.WaitHTTP(ctx, "http://"+addr+"/ping", http.StatusOK)).To(Succeed(), "%s is up", name)
}

// signInCase is a person who signs in through oauth2-proxy, and where
// the login ends.
type signInCase struct {
	email    string
	groups   []string
	status   int
	location string
}
