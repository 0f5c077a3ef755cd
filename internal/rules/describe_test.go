package rules

import (
	"slices"
	"testing"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

func TestDescribe(t *testing.T) {
	if got := Describe(&linkv1.ShortLinkSpec{URL: " https://example.com/ "}); !slices.Equal(got, []string{"Clicks go to https://example.com/."}) {
		t.Errorf("plain: %q", got)
	}
	want := []string{
		`Clicks with beta=1 in the query go to https://example.com/beta.`,
		`Clicks between 2030-06-01T12:00:00Z and 2030-06-01T13:00:00Z go to https://example.com/launch.`,
		`Clicks with the header X-Canary: yes go to https://example.com/canary.`,
		`Clicks in CH or LI go to https://example.com/ch.`,
		`Clicks from iOS clients go to https://apps.apple.com/app/x.`,
		`Clicks from Android clients go to https://play.google.com/store/apps/details?id=x.`,
		`Clicks preferring de go to https://example.de/.`,
		`Clicks from desktop or bot clients and with the query parameter "ref" go to https://example.com/ref.`,
		`Other clicks are split, each visitor keeping their share: 20% to https://example.com/b, 20% to https://example.com/c, 10% to https://example.com/d, 50% to https://example.com/default.`,
		`Once the link has finished, clicks go to https://example.com/over.`,
		`What follows the short URL's path is added to the destination's path.`,
	}
	if got := Describe(eightRules()); !slices.Equal(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	after := &linkv1.ShortLinkSpec{URL: "https://a.example/", Rules: []linkv1.RedirectRule{
		{URL: "https://new.example/", After: mt(t0)}, {URL: "https://old.example/", Before: mt(t0)},
	}}
	if got := Describe(after); !slices.Equal(got, []string{
		"Clicks from 2030-06-01T12:00:00Z on go to https://new.example/.",
		"Clicks before 2030-06-01T12:00:00Z go to https://old.example/.",
		"Other clicks go to https://a.example/.",
	}) {
		t.Errorf("one-sided windows: %q", got)
	}
	full := &linkv1.ShortLinkSpec{URL: "https://a.example/", Variants: []linkv1.Variant{{URL: "https://b.example/", Weight: 100}}}
	if got := Describe(full); !slices.Equal(got, []string{"Clicks are split, each visitor keeping their share: 100% to https://b.example/."}) {
		t.Errorf("a split without spec.url's share: %q", got)
	}
	full.VariantsEnd = &linkv1.VariantsEnd{At: *mt(t0), URL: "https://b.example/"}
	if got := Describe(full); !slices.Equal(got, []string{
		"Clicks are split, each visitor keeping their share: 100% to https://b.example/.",
		"From 2030-06-01T12:00:00Z on, they all go to https://b.example/.",
	}) {
		t.Errorf("a split that ends: %q", got)
	}
}
