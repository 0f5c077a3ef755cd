package redirect

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/clientaddr"
	"github.com/linkforge/linkforge/internal/gate"
	"github.com/linkforge/linkforge/internal/pages"
)

const secretDestination = "https://example.com/for-the-team-only"

// gatedHash is a bcrypt hash of "open sesame" at the lowest cost allowed.
var gatedHash = func() string {
	h, err := gate.Hash([]byte("open sesame"), gate.MinCost)
	if err != nil {
		panic(err)
	}
	return h
}()

func gated(a linkv1.LinkAccess) func(*linkv1.ShortLink) {
	return func(l *linkv1.ShortLink) { l.Spec.Access = &a }
}

// post posts the password form to target, as a browser does.
func (h *harness) post(target, password string, header ...string) got {
	h.t.Helper()
	req, _ := http.NewRequest(methodPost, "http://redirector"+target, strings.NewReader(url.Values{"password": {password}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp := h.do2(req)
	body := make([]byte, 0, 4096)
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		body = append(body, buf[:n]...)
		if err != nil {
			break
		}
	}
	return got{resp.StatusCode, resp.Header, body}
}

// hides fails unless g tells nothing of the destination.
func hides(t *testing.T, what string, g got) {
	t.Helper()
	if strings.Contains(string(g.body), "for-the-team-only") || strings.Contains(g.header.Get("Location"), "for-the-team-only") {
		t.Errorf("%s: %d shows the destination:\n%s", what, g.status, g.body)
	}
}

// A password link: the form for a person's GET, its headers for HEAD, the
// card for a previewer and for the preview page, a wrong password the
// form again with one message, the right one a 303 (never 307/308, which
// would post the password on); nothing before shows the destination, and
// a post is taken only on a gated link's path.
func TestPasswordGate(t *testing.T) {
	h := newHarness(t)
	h.add(link("ns", "secret", "s1", secretDestination, gated(linkv1.LinkAccess{PasswordHash: gatedHash}), withCard("Team notes", "", "")))
	h.add(link("ns", "open", "o1", "https://example.com/open"))

	form := h.get("GET", "", "/ns/s1", "User-Agent", uaPerson)
	if form.status != http.StatusOK || !strings.Contains(string(form.body), `type="password"`) || !strings.Contains(string(form.body), "Team notes") {
		t.Fatalf("a person's GET: %d\n%s", form.status, form.body)
	}
	if csp := form.header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self'") || !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("the form's CSP: %q", csp)
	}
	if form.header.Get("X-Robots-Tag") == "" || form.header.Get("Cache-Control") != "no-store" {
		t.Errorf("the form's headers: %v", form.header)
	}
	hides(t, "the form", form)
	head := h.get("HEAD", "", "/ns/s1", "User-Agent", uaPerson)
	hides(t, "HEAD", head)
	if head.status != http.StatusOK {
		t.Errorf("HEAD: %d", head.status)
	}
	for _, who := range []string{uaPreviewer, uaPerson} {
		hides(t, "the preview page", h.get("GET", "", "/ns/s1+", "User-Agent", who))
	}
	card := h.get("GET", "", "/ns/s1", "User-Agent", uaPreviewer)
	hides(t, "a previewer", card)
	if card.status != http.StatusOK || !strings.Contains(string(card.body), "og:title") {
		t.Errorf("a previewer: %d\n%s", card.status, card.body)
	}

	wrong := h.post("/ns/s1", "open sesamE")
	hides(t, "a wrong password", wrong)
	if wrong.status != http.StatusOK || !strings.Contains(string(wrong.body), pages.GateRefused) {
		t.Errorf("a wrong password: %d\n%s", wrong.status, wrong.body)
	}
	right := h.post("/ns/s1", "open sesame")
	if right.status != http.StatusSeeOther || right.header.Get("Location") != secretDestination || right.header.Get("Cache-Control") != "no-store" {
		t.Errorf("the right password: %d %v", right.status, right.header)
	}
	if g := h.post("/ns/o1", "x"); g.status != http.StatusMethodNotAllowed {
		t.Errorf("a post to a link without a gate: %d", g.status)
	}
	if g := h.post("/ns/s1/qr", "open sesame"); g.status != http.StatusMethodNotAllowed {
		t.Errorf("a post to a gated link's QR code: %d", g.status)
	}
	if g := h.post("/ns/nothing", "open sesame"); g.status != http.StatusMethodNotAllowed {
		t.Errorf("a post to no link: %d", g.status)
	}
}

// Guessing: past the client's limit the right password is refused too,
// with the very answer of a wrong one (status, headers, bytes), and after
// about as long as a check takes; another client is not.
func TestPasswordGateLimitsGuesses(t *testing.T) {
	h := newHarnessWith(t, Options{GateLimits: gate.Limits{PerClient: gate.Rate{Burst: 2, Every: time.Hour}, PerLink: gate.Rate{Burst: 100, Every: time.Second}}})
	h.add(link("ns", "secret", "s1", secretDestination, gated(linkv1.LinkAccess{PasswordHash: gatedHash})))
	wrong := h.post("/ns/s1", "guess 1")
	h.post("/ns/s1", "guess 2")
	locked := h.post("/ns/s1", "open sesame")
	hides(t, "a locked client", locked)
	if locked.status != wrong.status || string(locked.body) != string(wrong.body) || locked.header.Get("Content-Length") != wrong.header.Get("Content-Length") {
		t.Errorf("locked %d (%d bytes) and wrong %d (%d bytes) differ", locked.status, len(locked.body), wrong.status, len(wrong.body))
	}
}

// A sign-in gate: an allowed user or group from the trusted auth proxy
// passes; whoever is not signed in is sent to sign in (or 403 without a
// sign-in URL), someone signed in and not allowed gets 403 (sent to sign
// in, they would come back as the same person: a loop, which
// TestGatedLinksBehindOAuth2Proxy found through a real oauth2-proxy); the
// same headers from a peer that is not the auth proxy, or a user header
// sent twice, sign nobody in.
func TestSignInGate(t *testing.T) {
	trusted, err := clientaddr.ParseProxies("0.0.0.0/0,::/0")
	if err != nil {
		t.Fatal(err)
	}
	none, err := clientaddr.ParseProxies("192.0.2.0/24")
	if err != nil {
		t.Fatal(err)
	}
	access := gated(linkv1.LinkAccess{Users: []string{"ana@example.com"}, Groups: []string{"platform"}})
	opts := Options{AuthUserHeader: "X-Forwarded-User", AuthGroupsHeader: "X-Forwarded-Groups", AuthProxies: trusted,
		SignInURL: "https://auth.example.com/oauth2/start?rd={url}"}
	h := newHarnessWith(t, opts)
	h.add(link("ns", "team", "t1", secretDestination, access))
	for _, tc := range []struct {
		name   string
		header []string
		status int
	}{
		{"an allowed user", []string{"X-Forwarded-User", "ana@example.com"}, http.StatusFound},
		{"a member of an allowed group", []string{"X-Forwarded-User", "bo@example.com", "X-Forwarded-Groups", "dev, platform"}, http.StatusFound},
		{"signed in, in another group", []string{"X-Forwarded-User", "bo@example.com", "X-Forwarded-Groups", "dev"}, http.StatusForbidden},
		{"signed in, in no group", []string{"X-Forwarded-User", "bo@example.com"}, http.StatusForbidden},
		{"nobody signed in", nil, http.StatusFound /* to sign in */},
	} {
		g := h.get("GET", "", "/ns/t1", tc.header...)
		loc := g.header.Get("Location")
		passed := loc == secretDestination
		if want := strings.HasPrefix(tc.name, "an allowed") || strings.HasPrefix(tc.name, "a member"); passed != want || g.status != tc.status {
			t.Errorf("%s: %d %q", tc.name, g.status, loc)
		}
		// No public base URL here: the short URL is the path, which the
		// auth proxy resolves on its own host (never the request's Host).
		if g.status == http.StatusFound && !passed && loc != "https://auth.example.com/oauth2/start?rd="+url.QueryEscape("/ns/t1") {
			t.Errorf("%s: sent to %q", tc.name, loc)
		}
		if g.status == http.StatusForbidden {
			hides(t, tc.name, g)
		}
	}
	req, _ := http.NewRequest("GET", "http://redirector/ns/t1", nil)
	req.Header["X-Forwarded-User"] = []string{"mallory@example.com", "ana@example.com"}
	if g := h.do2(req); g.Header.Get("Location") == secretDestination {
		t.Error("a user header sent twice signed in")
	}

	opts.AuthProxies, opts.SignInURL = none, ""
	h = newHarnessWith(t, opts)
	h.add(link("ns", "team", "t1", secretDestination, access))
	g := h.get("GET", "", "/ns/t1", "X-Forwarded-User", "ana@example.com")
	hides(t, "headers from a peer that is not the auth proxy", g)
	if g.status != http.StatusForbidden {
		t.Errorf("headers from a peer that is not the auth proxy: %d", g.status)
	}
}

// A finished gated link (used up, expired) has no gate left to pass: its
// preview page, for a person or a previewer, is its card with 410, never
// the page that names where the link went.
func TestFinishedGatedLinkHidesItsDestination(t *testing.T) {
	past := epoch.Add(-time.Minute)
	for name, finish := range map[string]func(*linkv1.ShortLink){
		"used up": func(l *linkv1.ShortLink) {
			l.Spec.MaxUses = ptr.To[int64](1)
			l.Status.Uses, l.Status.FinishedAt = 1, &metav1.Time{Time: past}
		},
		"expired": func(l *linkv1.ShortLink) {
			l.Spec.ExpiresAt = &metav1.Time{Time: past}
			l.Status.FinishedAt = &metav1.Time{Time: past}
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.add(link("ns", "secret", "s1", secretDestination, gated(linkv1.LinkAccess{PasswordHash: gatedHash}), finish))
			for _, ua := range []string{uaPerson, uaPreviewer} {
				for _, method := range []string{"GET", "HEAD"} {
					g := h.get(method, "", "/ns/s1+", "User-Agent", ua)
					hides(t, method+" of the preview page by "+ua, g)
					if g.status != http.StatusGone {
						t.Errorf("%s of the preview page by %s: %d, want 410", method, ua, g.status)
					}
				}
				hides(t, "a GET by "+ua, h.get("GET", "", "/ns/s1", "User-Agent", ua))
			}
		})
	}
}

// The sign-in's way back ({url}) is the short URL a QR code of the same
// request shows: the public base's long form, or the vanity host the
// namespace claims (its own form, not the public base's, where the code
// alone is a 404), never a host the request alone names.
func TestSignInURLIsTheShortURL(t *testing.T) {
	trusted, err := clientaddr.ParseProxies("192.0.2.0/24")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, Options{AuthUserHeader: "X-Forwarded-User", AuthProxies: trusted,
		SignInURL: "https://auth.example.com/oauth2/start?rd={url}", PublicBaseURL: "https://go.example.com"})
	h.addNS(nsObj("ns", epoch.Add(-48*time.Hour), "go.ns.example"))
	h.add(link("ns", "team", "t1", secretDestination, gated(linkv1.LinkAccess{Groups: []string{"sre"}})))
	for _, tc := range []struct{ host, path, want string }{
		{"go.example.com", "/ns/t1", "https://go.example.com/ns/t1"},
		{"evil.example", "/ns/t1", "https://go.example.com/ns/t1"},
		{"go.ns.example", "/t1", "https://go.ns.example/t1"},
		{"go.ns.example", "/t1?utm=x", "https://go.ns.example/t1?utm=x"},
	} {
		g := h.get("GET", tc.host, tc.path)
		if want := "https://auth.example.com/oauth2/start?rd=" + url.QueryEscape(tc.want); g.status != http.StatusFound || g.header.Get("Location") != want {
			t.Errorf("%s%s: %d to %q, want %q", tc.host, tc.path, g.status, g.header.Get("Location"), want)
		}
	}
}
