package redirect

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/uses"
)

// Agents of the tests: a few previewers of each class that reads links,
// and people. internal/agent's corpus holds the rest, with sources.
var (
	previewerAgents = []string{
		"Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
		"Slackbot 1.0 (+https://api.slack.com/robots)",
		"facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
		"WhatsApp/2.23.20.0",
		"Twitterbot/1.0",
		"LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)",
		"Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)",
		"TelegramBot (like TwitterBot)",
		"Mozilla/5.0 (Windows NT 6.1; WOW64) SkypeUriPreview Preview/0.5",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_11_1) AppleWebKit/601.2.4 (KHTML, like Gecko) Version/9.0.1 Safari/601.2.4 facebookexternalhit/1.1 Facebot Twitterbot/1.0",
		"Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
		"Mozilla/5.0 (compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)",
		"Microsoft Office Existence Discovery",
	}
	browserAgent = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
)

// countingHarness is a redirector that counts uses through a fake API
// server, and reads back what its writes left in the links' status.
type countingHarness struct {
	*harness
	u  *uses.Uses
	cl client.Client
}

func newCountingHarness(t *testing.T, links ...*linkv1.ShortLink) *countingHarness {
	t.Helper()
	for _, l := range links {
		l.ResourceVersion = "" // the fake API server's own
	}
	cl := fakeLinkClient(links...)
	u := uses.New(uses.Options{Client: cl, Holder: "a", Registry: prometheus.NewRegistry()})
	h := &countingHarness{harness: newHarnessWith(t, Options{Uses: u}), u: u, cl: cl}
	for _, l := range links {
		live := &linkv1.ShortLink{}
		if err := cl.Get(context.Background(), client.ObjectKeyFromObject(l), live); err != nil {
			t.Fatal(err)
		}
		l.ResourceVersion = live.ResourceVersion // the informer shows the API's version
		h.add(l)
	}
	return h
}

// status is the link's status after a flush of what this replica counted.
func (h *countingHarness) status(name string) linkv1.ShortLinkStatus {
	h.t.Helper()
	h.u.Flush(context.Background(), false)
	live := &linkv1.ShortLink{}
	if err := h.cl.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, live); err != nil {
		h.t.Fatal(err)
	}
	return live.Status
}

func withCard(title, description, image string) func(*linkv1.ShortLink) {
	return func(l *linkv1.ShortLink) {
		l.Spec.Card = &linkv1.LinkCard{Title: title, Description: description, Image: linkv1.TargetURL(image)}
	}
}

// A single-use link fetched by every previewer of the list, twice each,
// with GET and HEAD: each gets a card and none the destination; the
// person then gets the one redirect, and the next click 410.
func TestPreviewersNeverSpendALimitedLink(t *testing.T) {
	once := link("ns", "once", "once1", "https://example.com/invitation-secret")
	once.Spec.MaxUses = ptr.To[int64](1)
	h := newCountingHarness(t, once)
	for _, ua := range previewerAgents {
		for _, method := range []string{"GET", "GET", "HEAD"} {
			g := h.get(method, "", "/ns/once1", "User-Agent", ua)
			if g.status != http.StatusOK || g.header.Get("Location") != "" || !strings.HasPrefix(g.header.Get("Content-Type"), "text/html") {
				t.Fatalf("%s by %q: %d Location %q Content-Type %q, want 200, the card and no Location", method, ua, g.status, g.header.Get("Location"), g.header.Get("Content-Type"))
			}
			if strings.Contains(string(g.body), "invitation-secret") {
				t.Fatalf("%s by %q: the card names the destination:\n%s", method, ua, g.body)
			}
			if method == "GET" && !strings.Contains(string(g.body), `<meta property="og:title" content="Shared link">`) {
				t.Fatalf("GET by %q: not the default card:\n%s", ua, g.body)
			}
			if g.header.Get("X-Robots-Tag") != "noindex, nofollow" || g.header.Get("Cache-Control") != "no-store" {
				t.Fatalf("%s by %q: X-Robots-Tag %q, Cache-Control %q", method, ua, g.header.Get("X-Robots-Tag"), g.header.Get("Cache-Control"))
			}
		}
	}
	// The preview page ("+") of a limited link names its destination: for
	// people; a previewer of the "+" URL gets the card.
	if g := h.get("GET", "", "/ns/once1+", "User-Agent", previewerAgents[0]); g.status != http.StatusOK || strings.Contains(string(g.body), "invitation-secret") {
		t.Fatalf("the preview page as a previewer: %d\n%s", g.status, g.body)
	}
	if g := h.get("GET", "", "/ns/once1+", "User-Agent", browserAgent); !strings.Contains(string(g.body), "invitation-secret") {
		t.Fatalf("the preview page as a person does not name the destination:\n%s", g.body)
	}
	if st := h.status("once"); st.Uses != 0 || st.PreviewerFetches != int64(2*len(previewerAgents)) || st.LastUsedAt != nil {
		t.Fatalf("after the previewers: uses %d, previewerFetches %d, lastUsedAt %v; want 0, %d, none", st.Uses, st.PreviewerFetches, st.LastUsedAt, 2*len(previewerAgents))
	}
	if g := h.get("GET", "", "/ns/once1", "User-Agent", browserAgent); g.String() != "Found https://example.com/invitation-secret" {
		t.Fatalf("the person's click: %s, want the redirect", g)
	}
	if g := h.get("GET", "", "/ns/once1", "User-Agent", browserAgent); g.status != http.StatusGone {
		t.Fatalf("the second person's click: %s, want 410", g)
	}
	if st := h.status("once"); st.Uses != 1 {
		t.Fatalf("uses %d, want 1", st.Uses)
	}
	cards := 0.0
	for _, byAnswer := range h.r.metrics.previewerFetches {
		if byAnswer[1] != nil {
			cards += testutil.ToFloat64(byAnswer[1])
		}
	}
	if got := cards; got != float64(2*len(previewerAgents)) {
		t.Errorf("previewer_fetches_total{answer=card} = %v, want %d", got, 2*len(previewerAgents))
	}
}

// Whatever User-Agent a client sends, a limited link serves at most
// maxUses redirects: a client that claims to be a previewer gets the card.
func TestSpoofedPreviewerGetsTheCard(t *testing.T) {
	three := link("ns", "three", "three1", "https://example.com/three")
	three.Spec.MaxUses = ptr.To[int64](3)
	h := newCountingHarness(t, three)
	redirects := 0
	agents := append([]string{"", "curl/8.5.0", browserAgent, "Slackbot", "slackbot", "SLACKBOT-LINKEXPANDING", "x\x00Slackbot"}, previewerAgents...)
	for round := range 3 {
		for _, ua := range agents {
			g := h.get("GET", "", "/ns/three1", "User-Agent", ua)
			if g.header.Get("Location") != "" {
				redirects++
			}
			if g.header.Get("Location") != "" && strings.Contains(strings.ToLower(ua), "bot") {
				t.Errorf("round %d: %q got the destination", round, ua)
			}
		}
	}
	if redirects != 3 {
		t.Errorf("%d redirects, want maxUses (3)", redirects)
	}
}

// An unlimited link without a card keeps redirecting previewers (their
// unfurl of the destination works), but they are not uses, do not touch
// lastUsedAt, and go to spec.url outside the split.
func TestPreviewersOfUnlimitedLinks(t *testing.T) {
	split := link("ns", "ab", "ab1", "https://example.com/a", func(l *linkv1.ShortLink) {
		l.Spec.Variants = []linkv1.Variant{{URL: "https://example.com/b", Weight: 100}}
	})
	plain := link("ns", "plain", "plain1", "https://example.com/plain")
	h := newCountingHarness(t, split, plain)
	for _, ua := range previewerAgents {
		if g := h.get("GET", "", "/ns/ab1", "User-Agent", ua); g.String() != "Found https://example.com/a" {
			t.Errorf("%q on a 100%% split: %s, want spec.url", ua, g)
		}
		if g := h.get("GET", "", "/ns/plain1", "User-Agent", ua); g.String() != "Found https://example.com/plain" {
			t.Errorf("%q: %s, want the redirect", ua, g)
		}
	}
	for range 5 {
		if g := h.get("GET", "", "/ns/ab1", "User-Agent", browserAgent); g.String() != "Found https://example.com/b" {
			t.Errorf("a person on a 100%% split: %s, want the variant", g)
		}
	}
	n := int64(len(previewerAgents))
	if st := h.status("plain"); st.Uses != 0 || st.PreviewerFetches != n || st.LastUsedAt != nil {
		t.Errorf("plain: uses %d, previewerFetches %d, lastUsedAt %v; want 0, %d, none", st.Uses, st.PreviewerFetches, st.LastUsedAt, n)
	}
	st := h.status("ab")
	if st.Uses != 5 || st.PreviewerFetches != n {
		t.Errorf("ab: uses %d, previewerFetches %d; want 5, %d", st.Uses, st.PreviewerFetches, n)
	}
	for _, vu := range st.VariantUses {
		if want := map[string]int64{"https://example.com/a": 0, "https://example.com/b": 5}[vu.URL]; vu.Uses != want {
			t.Errorf("variantUses[%s] = %d, want %d (people only)", vu.URL, vu.Uses, want)
		}
	}
}

// A link's own card is shown to previewers of any link (its escaping is
// internal/pages' TestCardEscapes); people are redirected; the preview
// page shows the card.
func TestLinkCard(t *testing.T) {
	carded := link("ns", "carded", "card1", "https://example.com/carded",
		withCard(`Launch <script>alert(1)</script> & "more"`, "Line one\nline two", "https://img.example.com/c.png?a=1&b=2"))
	h := newCountingHarness(t, carded)
	g := h.get("GET", "", "/ns/card1", "User-Agent", previewerAgents[0])
	body := string(g.body)
	if want := `<meta property="og:title" content="Launch &lt;script&gt;alert(1)&lt;/script&gt; &amp; &#34;more&#34;">`; !strings.Contains(body, want) {
		t.Errorf("the card lacks %s:\n%s", want, body)
	}
	if g.status != http.StatusOK || strings.Contains(body, "<script>") || strings.Contains(body, "example.com/carded") {
		t.Errorf("the card: %d\n%s", g.status, body)
	}
	if g := h.get("GET", "", "/ns/card1", "User-Agent", browserAgent); g.String() != "Found https://example.com/carded" {
		t.Errorf("a person: %s, want the redirect", g)
	}
	if g := h.get("GET", "", "/ns/card1+"); !strings.Contains(string(g.body), "What link previewers") || !strings.Contains(string(g.body), "Line one line two") {
		t.Errorf("the preview page does not show the card:\n%s", g.body)
	}
	// Rendered once per link version.
	again := h.get("GET", "", "/ns/card1", "User-Agent", previewerAgents[1])
	if string(again.body) != body {
		t.Errorf("a second previewer got another page")
	}
}

// A limited link without a card shows its namespace's card.
func TestNamespaceCard(t *testing.T) {
	limited := link("ns", "lim", "lim1", "https://example.com/lim")
	limited.Spec.MaxUses = ptr.To[int64](5)
	h := newCountingHarness(t, limited)
	h.addNS(nsWith("ns", map[string]string{CardTitleAnnotation: "Team A invitations", CardImageAnnotation: "javascript:alert(1)"}))
	g := h.get("GET", "", "/ns/lim1", "User-Agent", previewerAgents[2])
	if body := string(g.body); !strings.Contains(body, `content="Team A invitations"`) || strings.Contains(body, "javascript") || strings.Contains(body, "og:image") {
		t.Errorf("the namespace's card (its invalid image left out):\n%s", body)
	}
}
