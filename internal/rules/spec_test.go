package rules

import (
	"strings"
	"testing"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

func TestTargets(t *testing.T) {
	if got := Targets(&linkv1.ShortLinkSpec{URL: "https://example.com/"}); got != nil {
		t.Errorf("a plain link has no other targets: %v", got)
	}
	got := Targets(eightRules())
	if len(got) != 8+3+1 {
		t.Fatalf("%d targets", len(got))
	}
	for i, want := range map[int]Target{
		0:  {"spec.rules[0].url", "https://example.com/beta"},
		8:  {"spec.variants[0].url", "https://example.com/b"},
		11: {"spec.expiredURL", "https://example.com/over"},
	} {
		if got[i] != want {
			t.Errorf("target %d: %+v, want %+v", i, got[i], want)
		}
	}
}

// TestKey: links share a code only with identical routing; a link without
// routing keeps the key it had before routing existed ("").
func TestKey(t *testing.T) {
	key := func(s *linkv1.ShortLinkSpec) string {
		t.Helper()
		k, err := Key(s)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	if k := key(&linkv1.ShortLinkSpec{URL: "https://example.com/", ForwardQuery: true}); k != "" {
		t.Errorf("a link without routing adds nothing: %q", k)
	}
	base := key(eightRules())
	for name, edit := range map[string]func(s *linkv1.ShortLinkSpec){
		"no forwardPath":         func(s *linkv1.ShortLinkSpec) { s.ForwardPath = false },
		"another expiredURL":     func(s *linkv1.ShortLinkSpec) { s.ExpiredURL = "https://example.com/gone" },
		"no expiredURL":          func(s *linkv1.ShortLinkSpec) { s.ExpiredURL = "" },
		"rules reordered":        func(s *linkv1.ShortLinkSpec) { s.Rules[4], s.Rules[5] = s.Rules[5], s.Rules[4] },
		"a rule less":            func(s *linkv1.ShortLinkSpec) { s.Rules = s.Rules[:7] },
		"another rule target":    func(s *linkv1.ShortLinkSpec) { s.Rules[0].URL = "https://example.com/beta2" },
		"another query value":    func(s *linkv1.ShortLinkSpec) { s.Rules[0].QueryParams[0].Value = sp("2") },
		"present, not equals":    func(s *linkv1.ShortLinkSpec) { s.Rules[0].QueryParams[0].Value = nil },
		"equals empty":           func(s *linkv1.ShortLinkSpec) { s.Rules[7].QueryParams[0].Value = sp("") },
		"another header value":   func(s *linkv1.ShortLinkSpec) { s.Rules[2].Headers[0].Value = "no" },
		"another window":         func(s *linkv1.ShortLinkSpec) { s.Rules[1].Before = mt(t0.Add(2 * 3600e9)) },
		"another device":         func(s *linkv1.ShortLinkSpec) { s.Rules[4].Devices = []linkv1.DeviceClass{linkv1.DeviceBot} },
		"another language":       func(s *linkv1.ShortLinkSpec) { s.Rules[6].Languages = []string{"de-AT"} },
		"another country":        func(s *linkv1.ShortLinkSpec) { s.Rules[3].Countries = []string{"CH"} },
		"another weight":         func(s *linkv1.ShortLinkSpec) { s.Variants[0].Weight = 21 },
		"variants reordered":     func(s *linkv1.ShortLinkSpec) { s.Variants[0], s.Variants[2] = s.Variants[2], s.Variants[0] },
		"another variant target": func(s *linkv1.ShortLinkSpec) { s.Variants[1].URL = "https://example.com/e" },
		"a split that ends": func(s *linkv1.ShortLinkSpec) {
			s.VariantsEnd = &linkv1.VariantsEnd{At: *mt(t0), URL: string(s.Variants[0].URL)}
		},
		"no variants": func(s *linkv1.ShortLinkSpec) { s.Variants = nil },
	} {
		s := eightRules()
		edit(s)
		if key(s) == base {
			t.Errorf("%s: same key as the original", name)
		}
	}
	for name, edit := range map[string]func(s *linkv1.ShortLinkSpec){
		"targets spelled otherwise": func(s *linkv1.ShortLinkSpec) {
			s.Rules[0].URL = "  HTTPS://Example.COM/beta "
			s.Variants[0].URL = "https://example.com:443/b"
		},
		"sets in another order and case": func(s *linkv1.ShortLinkSpec) {
			s.Rules[7].Devices = []linkv1.DeviceClass{linkv1.DeviceBot, linkv1.DeviceDesktop}
			s.Rules[3].Countries = []string{"LI", "CH"}
			s.Rules[6].Languages = []string{"DE"}
		},
		"header name case": func(s *linkv1.ShortLinkSpec) { s.Rules[2].Headers[0].Name = "x-canary" },
	} {
		s := eightRules()
		edit(s)
		if k := key(s); k != base {
			t.Errorf("%s: another key:\n%q\n%q", name, k, base)
		}
	}
	s := eightRules()
	s.Variants[1].URL = "https://exa mple.com/"
	if _, err := Key(s); err == nil || !strings.Contains(err.Error(), "spec.variants[1].url") {
		t.Errorf("a target that does not canonicalize is named: %v", err)
	}
}
