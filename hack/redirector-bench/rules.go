package main

import (
	"fmt"
	"net/netip"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/hitpath"
	"github.com/linkforge/linkforge/internal/redirect"
	"github.com/linkforge/linkforge/internal/rules"
)

// Link kinds (--link-kind): plain links, or links with 8 rules and 3
// variants, for the cost of routing (hack/callgrind-bench -only rules,plain).
const (
	kindPlain = "plain"
	kindRules = "rules"
)

// withRules gives the i-th synthetic link's spec the routing of a real app
// campaign: the stores for iOS and Android, pages for German and for French
// desktops, a beta by query, a campaign by header, a promotion in a time
// window (past, so it never holds), a page for bots that follow a referral,
// and a three-way split of the rest. A browser's request
// (hitpath.Options.Browser: desktop Chrome, en-US, a newsletter's query)
// meets none of the rules, so it reads every one, and goes to the split:
// the most a click on such a link costs.
func withRules(spec *linkv1.ShortLinkSpec, i int) {
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

func ptrTo[T any](v T) *T { return &v }

// browserTarget is where a browser's request (hitpath.Options.Browser)
// from 127.0.0.1 goes on link l: the Location the benchmark's client
// checks.
func browserTarget(l *linkv1.ShortLink) (string, error) {
	c, err := rules.Compile(&l.Spec, l.Namespace+"/"+l.Name, redirect.Location)
	if err != nil {
		return "", fmt.Errorf("link %s: %w", l.Name, err)
	}
	f := rules.Facts{
		UserAgent: []byte(hitpath.BrowserUserAgent), AcceptLanguage: []byte(hitpath.BrowserAcceptLanguage),
		RawQuery: []byte(hitpath.BrowserQuery), Headers: noHeaders{}, Now: time.Now(),
		Client: netip.AddrFrom4([4]byte{127, 0, 0, 1}),
	}
	return rules.Evaluate(&f, c).URL, nil
}

type noHeaders struct{}

func (noHeaders) Peek(string) []byte { return nil }
