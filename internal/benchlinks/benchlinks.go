// Package benchlinks gives the synthetic links of the benchmarks
// (hack/redirector-bench, hack/bench-scale) what a link with routing and
// a card has, so that every benchmark measures the same such link.
package benchlinks

import (
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// WithRules gives the i-th synthetic link's spec the routing of a real app
// campaign: the stores for iOS and Android, pages for German and for French
// desktops, a beta by query, a campaign by header, a promotion in a time
// window (past, so it never holds), a page for bots that follow a referral,
// and a three-way split of the rest. A browser's request
// (hitpath.Options.Browser: desktop Chrome, en-US, a newsletter's query)
// meets none of the rules, so it reads every one, and goes to the split:
// the most a click on such a link costs.
func WithRules(spec *linkv1.ShortLinkSpec, i int) {
	n := strconv.Itoa(i)
	window := func(from, to time.Time) (*metav1.Time, *metav1.Time) {
		a, b := metav1.NewTime(from), metav1.NewTime(to)
		return &a, &b
	}
	after, before := window(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	spec.Rules = []linkv1.RedirectRule{
		{URL: linkv1.TargetURL("https://apps.apple.com/app/id" + n), Devices: []linkv1.DeviceClass{linkv1.DeviceIOS}},
		{URL: linkv1.TargetURL("https://play.google.com/store/apps/details?id=com.example.app" + n), Devices: []linkv1.DeviceClass{linkv1.DeviceAndroid}},
		{URL: linkv1.TargetURL("https://www.example.com/de/articles/" + n), Languages: []string{"de"}},
		{URL: linkv1.TargetURL("https://www.example.com/fr/articles/" + n), Languages: []string{"fr"}, Devices: []linkv1.DeviceClass{linkv1.DeviceDesktop}},
		{URL: linkv1.TargetURL("https://beta.example.com/articles/" + n), QueryParams: []linkv1.QueryParamMatch{{Name: "beta", Value: ptrTo("1")}}},
		{URL: linkv1.TargetURL("https://www.example.com/spring/" + n), Headers: []linkv1.HeaderMatch{{Name: "X-Campaign", Value: "spring"}}},
		{URL: linkv1.TargetURL("https://www.example.com/promo/" + n), After: after, Before: before},
		{URL: linkv1.TargetURL("https://www.example.com/crawl/" + n), QueryParams: []linkv1.QueryParamMatch{{Name: "ref"}}, Devices: []linkv1.DeviceClass{linkv1.DeviceBot}},
	}
	spec.Variants = []linkv1.Variant{
		{URL: linkv1.TargetURL("https://www.example.com/articles/2026/" + n + "/b"), Weight: 30},
		{URL: linkv1.TargetURL("https://www.example.com/articles/2026/" + n + "/c"), Weight: 30},
		{URL: linkv1.TargetURL("https://www.example.com/articles/2026/" + n + "/d"), Weight: 20},
	}
}

// WithCard gives the i-th synthetic link's spec a card as a campaign's
// article would have: a title, a sentence of description and an image.
func WithCard(spec *linkv1.ShortLinkSpec, i int) {
	n := strconv.Itoa(i)
	spec.Card = &linkv1.LinkCard{
		Title:       "Spring articles, part " + n,
		Description: "What changed this spring in the articles of part " + n + ", with the figures and a summary.",
		Image:       linkv1.TargetURL("https://www.example.com/images/articles/" + n + ".png"),
	}
}

func ptrTo[T any](v T) *T { return &v }
