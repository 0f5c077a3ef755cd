package redirect

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/explain"
	"github.com/linkforge/linkforge/internal/shortcode"
)

const (
	uaPerson    = uaDesktop
	uaPreviewer = "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"
)

// TestExplainAgreesWithTheRedirect is the check of internal/explain (issue
// 54): for every state and routing feature, the answer it describes, from
// the ShortLink as the manager and the CLI read it (FromShortLink) and
// from the link as this redirector's index holds it (what the preview page
// says), is the answer the redirect handler sends: the status, the
// Location, and the words that name them. A previewer's GET gets the card
// exactly when the description says previewers get one.
func TestExplainAgreesWithTheRedirect(t *testing.T) {
	past, future := epoch.Add(-time.Minute), epoch.Add(time.Hour)
	at := func(t time.Time) *metav1.Time { return ptr.To(metav1.NewTime(t)) }
	expired := func(l *linkv1.ShortLink) {
		l.Spec.ExpiresAt = at(past)
		l.Status.FinishedAt = at(past)
	}
	expiredURL := func(l *linkv1.ShortLink) { l.Spec.ExpiredURL = "https://example.com/ended" }
	exhausted := func(l *linkv1.ShortLink) {
		l.Spec.MaxUses = ptr.To[int64](3)
		l.Status.Uses, l.Status.FinishedAt = 3, at(past)
	}
	idle := func(l *linkv1.ShortLink) {
		l.Spec.IdleTimeout = &metav1.Duration{Duration: time.Hour}
		l.Status.FinishedAt = at(past)
	}
	scheduled := func(l *linkv1.ShortLink) { l.Spec.ActivatesAt = at(future) }
	goneFallback := map[string]string{GoneRedirectAnnotation: "https://example.com/gone-page"}
	notFoundFallback := map[string]string{NotFoundRedirectAnnotation: "https://example.com/no-such-link"}

	for _, tc := range []struct {
		name        string
		url         string
		mut         []func(*linkv1.ShortLink)
		annotations map[string]string // the namespace's
		deleted     bool              // then deleted: a tombstone answers
		// state is Answer.State; split, the URLs a click may go to instead
		// of spec.url's share.
		state string
		split []string
	}{
		{name: "plain", url: "https://example.com/a", state: "Active"},
		{name: "a URL whose canonical form differs: the Location is as written",
			url: "https://Example.com/overview/?utm_source=linkforge&lang=en", state: "Active"},
		{name: "a URL that needs escaping", url: "https://example.com/caf\u00e9 menu", state: "Active"},
		{name: "301, expiry, maxUses, forwardQuery", url: "https://example.com/b", state: "Active", mut: []func(*linkv1.ShortLink){func(l *linkv1.ShortLink) {
			l.Spec.RedirectStatus, l.Spec.ExpiresAt, l.Spec.MaxUses, l.Spec.ForwardQuery = 301, at(future), ptr.To[int64](5), true
		}}},
		{name: "expired", url: "https://example.com/c", mut: []func(*linkv1.ShortLink){expired}, state: "Expired"},
		{name: "expired by the clock before the controller saw it", url: "https://example.com/c2", state: "Expired",
			mut: []func(*linkv1.ShortLink){func(l *linkv1.ShortLink) { l.Spec.ExpiresAt = at(past) }}},
		{name: "expired with expiredURL (issue 54: status said 410)", url: "https://example.com/d", mut: []func(*linkv1.ShortLink){expired, expiredURL}, state: "Expired"},
		{name: "expired behind a gone fallback", url: "https://example.com/e", mut: []func(*linkv1.ShortLink){expired}, annotations: goneFallback, state: "Expired"},
		{name: "expiredURL ahead of the gone fallback", url: "https://example.com/f", mut: []func(*linkv1.ShortLink){expired, expiredURL}, annotations: goneFallback, state: "Expired"},
		{name: "exhausted", url: "https://example.com/g", mut: []func(*linkv1.ShortLink){exhausted}, state: "Exhausted"},
		{name: "exhausted with expiredURL", url: "https://example.com/h", mut: []func(*linkv1.ShortLink){exhausted, expiredURL}, state: "Exhausted"},
		{name: "idle", url: "https://example.com/i", mut: []func(*linkv1.ShortLink){idle}, state: "Expired"},
		{name: "idle with expiredURL", url: "https://example.com/i2", mut: []func(*linkv1.ShortLink){idle, expiredURL}, state: "Expired"},
		{name: "scheduled", url: "https://example.com/j", mut: []func(*linkv1.ShortLink){scheduled}, state: "Scheduled"},
		{name: "scheduled behind a not-found fallback", url: "https://example.com/k", mut: []func(*linkv1.ShortLink){scheduled}, annotations: notFoundFallback, state: "Scheduled"},
		{name: "expired before it activated", url: "https://example.com/l", state: "Expired",
			mut: []func(*linkv1.ShortLink){scheduled, expired, expiredURL}},
		{name: "rules: a click no rule matches", url: "https://example.com/m", state: "Active", mut: []func(*linkv1.ShortLink){func(l *linkv1.ShortLink) {
			l.Spec.Rules = []linkv1.RedirectRule{{URL: "https://beta.example.com/", QueryParams: []linkv1.QueryParamMatch{{Name: "beta"}}}}
		}}},
		{name: "variants", url: "https://example.com/n", state: "Active", split: []string{"https://example.com/n-b"}, mut: []func(*linkv1.ShortLink){func(l *linkv1.ShortLink) {
			l.Spec.Variants = []linkv1.Variant{{URL: "https://example.com/n-b", Weight: 50}}
		}}},
		{name: "variants, the test ending later", url: "https://example.com/n2", state: "Active", split: []string{"https://example.com/n2-b"}, mut: []func(*linkv1.ShortLink){func(l *linkv1.ShortLink) {
			l.Spec.Variants = []linkv1.Variant{{URL: "https://example.com/n2-b", Weight: 50}}
			l.Spec.VariantsEnd = &linkv1.VariantsEnd{At: metav1.NewTime(future), URL: "https://example.com/n2-b"}
		}}},
		{name: "variants, the test ended: the winner takes every click", url: "https://example.com/n3", state: "Active", mut: []func(*linkv1.ShortLink){func(l *linkv1.ShortLink) {
			l.Spec.Variants = []linkv1.Variant{{URL: "https://example.com/n3-b", Weight: 50}}
			l.Spec.VariantsEnd = &linkv1.VariantsEnd{At: metav1.NewTime(past), URL: "https://example.com/n3-b"}
		}}},
		{name: "a password gate: the form, previewers a card", url: "https://example.com/gated", state: "Active",
			mut: []func(*linkv1.ShortLink){gated(linkv1.LinkAccess{PasswordHash: gatedHash})}},
		{name: "a sign-in gate: 403 without a sign-in", url: "https://example.com/gated-groups", state: "Active",
			mut: []func(*linkv1.ShortLink){gated(linkv1.LinkAccess{Groups: []string{"sre"}})}},
		{name: "forwardPath", url: "https://example.com/o/", state: "Active", mut: []func(*linkv1.ShortLink){func(l *linkv1.ShortLink) { l.Spec.ForwardPath = true }}},
		{name: "a card", url: "https://example.com/p", state: "Active", mut: []func(*linkv1.ShortLink){withCard("Launch", "", "")}},
		{name: "maxUses: previewers get a card", url: "https://example.com/q", state: "Active", mut: []func(*linkv1.ShortLink){func(l *linkv1.ShortLink) { l.Spec.MaxUses = ptr.To[int64](9) }}},
		{name: "not confirmed for its spec (Pending, Conflict)", url: "https://example.com/r", state: explain.StateNotServed, mut: []func(*linkv1.ShortLink){decided(linkv1.ReasonProgressing)}},
		{name: "deleted once finished", url: "https://example.com/s", mut: []func(*linkv1.ShortLink){expired}, deleted: true, state: explain.StateRemoved},
		{name: "deleted once finished, with expiredURL", url: "https://example.com/t", mut: []func(*linkv1.ShortLink){exhausted, expiredURL}, deleted: true, state: explain.StateRemoved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.addNS(nsWith("ns", tc.annotations))
			sl := link("ns", "x", "x1", tc.url, tc.mut...)
			canonical, err := shortcode.Canonicalize(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			sl.Status.CanonicalURL = canonical // as the controller writes it: what the code is computed from, not what is sent
			h.add(sl)
			fb := explain.NamespaceFallbacks(tc.annotations)
			now := h.clock.Now()
			var views []explain.Link
			switch e := h.r.index.Lookup("ns", "x1"); {
			case tc.deleted:
				h.del(sl)
				views = append(views, h.r.index.Lookup("ns", "x1").explained())
			case e != nil:
				views = append(views, explain.FromShortLink(sl), e.explained())
			default: // not in the index: nothing of it to preview
				views = append(views, explain.FromShortLink(sl))
			}
			person := h.get("GET", "", "/ns/x1", "User-Agent", uaPerson)
			previewer := h.get("GET", "", "/ns/x1", "User-Agent", uaPreviewer)
			for i, v := range views {
				a := explain.Describe(v, now, fb)
				what := fmt.Sprintf("view %d (%s)", i, a.Sentence(v.Code))
				if a.State != tc.state {
					t.Errorf("%s: state %s, want %s", what, a.State, tc.state)
				}
				if person.status != a.Status {
					t.Errorf("%s: the redirect answers %d, the description %d", what, person.status, a.Status)
				}
				loc := person.header.Get("Location")
				if loc != a.Location && !slices.Contains(tc.split, loc) {
					t.Errorf("%s: the redirect sends Location %q, the description %q", what, loc, a.Location)
				}
				// The words name what the click gets.
				if !strings.Contains(a.Words, fmt.Sprintf("%d %s", person.status, http.StatusText(person.status))) ||
					a.Location != "" && !strings.Contains(a.Words, a.Location) {
					t.Errorf("%s: the words do not say %d %s", what, person.status, a.Location)
				}
				card := previewer.status == http.StatusOK
				if card != (a.Previewers != "") {
					t.Errorf("%s: a previewer gets %d, the description says %q", what, previewer.status, a.Previewers)
				}
				if !card && (previewer.status != person.status || previewer.header.Get("Location") != loc && len(tc.split) == 0) {
					t.Errorf("%s: a previewer gets %s, a person %s", what, previewer, person)
				}
			}
			if len(views) == 0 {
				t.Fatal("no view of the link to describe")
			}
		})
	}
}
