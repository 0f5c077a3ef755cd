package explain

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

var now = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// TestDescribe is the words of each state, as messages quote them. That
// they are what the redirect does is TestExplainAgreesWithTheRedirect's,
// in internal/redirect, which drives the handler.
func TestDescribe(t *testing.T) {
	base := Link{Code: "c", Serves: true, Status: 302, Location: "https://example.com/a"}
	with := func(f func(*Link)) Link { l := base; f(&l); return l }
	gone := Fallbacks{Gone: "https://example.com/gone"}
	for _, tc := range []struct {
		name   string
		link   Link
		fb     Fallbacks
		state  string
		status int
		loc    string
		words  string
		prev   string
	}{
		{"active", base, Fallbacks{}, "Active", 302, "https://example.com/a",
			"redirects to https://example.com/a with 302 Found", ""},
		{"active, every option", with(func(l *Link) {
			l.Status, l.Rules, l.Variants, l.ForwardQuery, l.ForwardPath, l.ExpiresAt, l.MaxUses = 308, 2, 1, true, true, now.Add(time.Hour), 10
		}), Fallbacks{}, "Active", 308, "https://example.com/a",
			"redirects to https://example.com/a with 308 Permanent Redirect, or by 2 rule(s) to their targets, split with 1 variant(s), " +
				"adding what follows the code in the short URL to the path, adding the short URL's query string until 2026-11-01T13:00:00Z, for at most 10 uses",
			"link previewers (chat apps, crawlers) get a card (its namespace's, or a neutral one), not a redirect, and spend no use"},
		{"a test that ends", with(func(l *Link) {
			l.Variants, l.VariantsEndAt, l.VariantsEndURL = 1, now.Add(time.Hour), "https://example.com/b"
		}), Fallbacks{}, "Active", 302, "https://example.com/a",
			"redirects to https://example.com/a with 302 Found, split with 1 variant(s) until 2026-11-01T13:00:00Z, then all to https://example.com/b", ""},
		{"a test that ended: the winner takes the split", with(func(l *Link) {
			l.Rules, l.Variants, l.VariantsEndAt, l.VariantsEndURL = 1, 1, now, "https://example.com/b"
		}), Fallbacks{}, "Active", 302, "https://example.com/b",
			"redirects to https://example.com/b with 302 Found, or by 1 rule(s) to their targets", ""},
		{"a card", with(func(l *Link) { l.Card = true }), Fallbacks{}, "Active", 302, "https://example.com/a",
			"redirects to https://example.com/a with 302 Found", "link previewers (chat apps, crawlers) get its card, not a redirect"},
		{"expired by the clock", with(func(l *Link) { l.ExpiresAt = now }), Fallbacks{}, "Expired", 410, "",
			"expired at 2026-11-01T12:00:00Z and answers 410 Gone", ""},
		{"expired, with expiredURL and a gone fallback", with(func(l *Link) { l.ExpiresAt, l.ExpiredURL = now.Add(-time.Hour), "https://example.com/ended" }),
			gone, "Expired", 302, "https://example.com/ended",
			"expired at 2026-11-01T11:00:00Z and redirects to https://example.com/ended with 302 Found, its spec.expiredURL", ""},
		{"exhausted, behind a gone fallback", with(func(l *Link) { l.Finish, l.MaxUses = Exhausted, 3 }), gone, "Exhausted", 302, "https://example.com/gone",
			"served all 3 uses and redirects to https://example.com/gone with 302 Found, the fallback page for finished links", ""},
		{"idle", with(func(l *Link) { l.Finish, l.IdleTimeout = Idle, 90*time.Minute }), Fallbacks{}, "Expired", 410, "",
			"was not used for its idleTimeout of 1h30m0s and answers 410 Gone", ""},
		{"deleted", with(func(l *Link) { l.Finish = Removed; l.Location = "" }), Fallbacks{}, StateRemoved, 410, "",
			"finished and was deleted and answers 410 Gone", ""},
		{"scheduled", with(func(l *Link) { l.ActivatesAt = now.Add(time.Minute) }), Fallbacks{NotFound: "https://example.com/nf"}, "Scheduled", 302, "https://example.com/nf",
			"redirects from 2026-11-01T12:01:00Z on, to https://example.com/a with 302 Found; until then it answers like an unknown code " +
				"(a redirect to https://example.com/nf with 302 Found, the fallback page for unknown codes)", ""},
		{"expired before it activates", with(func(l *Link) { l.ActivatesAt, l.ExpiresAt = now.Add(time.Hour), now.Add(-time.Hour) }), Fallbacks{}, "Expired", 404, "",
			"expired at 2026-11-01T11:00:00Z before it activates at 2026-11-01T13:00:00Z: until then it answers like an unknown code (404 Not Found), then it answers 410 Gone", ""},
		{"not served", with(func(l *Link) { l.Serves = false }), Fallbacks{}, StateNotServed, 404, "",
			"is not served: the link holds no code confirmed for its current spec, and the code answers as an unknown one (404 Not Found)", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Describe(tc.link, now, tc.fb)
			if a.State != tc.state || a.Status != tc.status || a.Location != tc.loc || a.Words != tc.words || a.Previewers != tc.prev {
				t.Errorf("Describe = %+v\nwant state %s, %d %q,\n words %q,\n previewers %q", a, tc.state, tc.status, tc.loc, tc.words, tc.prev)
			}
		})
	}
}

// TestFromShortLink: how the link finished is read from its status as the
// controller writes it.
func TestFromShortLink(t *testing.T) {
	created := metav1.NewTime(now.Add(-24 * time.Hour))
	at := func(t time.Time) *metav1.Time { return ptr.To(metav1.NewTime(t)) }
	for _, tc := range []struct {
		name string
		mut  func(*linkv1.ShortLink)
		want Finish
	}{
		{"running", func(*linkv1.ShortLink) {}, Running},
		{"finished at its expiry", func(l *linkv1.ShortLink) {
			l.Spec.TTL = &metav1.Duration{Duration: time.Hour}
			l.Status.FinishedAt = at(created.Add(time.Hour))
		}, Expired},
		{"uses", func(l *linkv1.ShortLink) { l.Spec.MaxUses, l.Status.Uses = ptr.To[int64](2), 2 }, Exhausted},
		{"idle before its expiry", func(l *linkv1.ShortLink) {
			l.Spec.TTL, l.Spec.IdleTimeout = &metav1.Duration{Duration: 48 * time.Hour}, &metav1.Duration{Duration: time.Hour}
			l.Status.FinishedAt = at(now)
		}, Idle},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &linkv1.ShortLink{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created, Generation: 1},
				Spec:   linkv1.ShortLinkSpec{URL: " https://example.com/x y "},
				Status: linkv1.ShortLinkStatus{Code: "c", ConfirmedGeneration: 1}}
			tc.mut(l)
			got := FromShortLink(l)
			if got.Finish != tc.want || got.Location != "https://example.com/x%20y" || !got.Serves || got.Status != 302 {
				t.Errorf("FromShortLink = %+v, want finish %d", got, tc.want)
			}
		})
	}
}

// FuzzDescribe: whatever the link, the answer is one the redirector can
// give, and its words name it.
func FuzzDescribe(f *testing.F) {
	f.Add(true, uint8(2), uint8(0), int64(0), int64(0), int64(0), false, "", false, false)
	f.Add(true, uint8(8), uint8(1), int64(-60), int64(60), int64(3), true, "https://e/x", true, true)
	f.Fuzz(func(t *testing.T, serves bool, status, finish uint8, expires, activates, maxUses int64, card bool, expiredURL string, nf, gone bool) {
		l := Link{Code: "c", Serves: serves, Status: 300 + int(status%9), Location: "https://example.com/a",
			Finish: Finish(finish % 5), MaxUses: max(maxUses, 0), Card: card, ExpiredURL: expiredURL}
		if expires != 0 {
			l.ExpiresAt = now.Add(time.Duration(expires) * time.Second)
		}
		if activates != 0 {
			l.ActivatesAt = now.Add(time.Duration(activates) * time.Second)
		}
		var fb Fallbacks
		if nf {
			fb.NotFound = "https://example.com/nf"
		}
		if gone {
			fb.Gone = "https://example.com/gone"
		}
		a := Describe(l, now, fb)
		redirect := a.Status/100 == 3
		if redirect != (a.Location != "") {
			t.Fatalf("%+v: status %d with Location %q", l, a.Status, a.Location)
		}
		if a.State == "" || !strings.Contains(a.Words, fmt.Sprint(a.Status)) {
			t.Fatalf("%+v: %+v", l, a)
		}
	})
}
