package rules

import (
	"strings"
	"testing"
	"time"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// FuzzEvaluate feeds any request facts to a link with every kind of
// condition: Evaluate never fails, returns one of the link's targets, is
// deterministic, agrees with the conditions read one by one, and does not
// allocate.
func FuzzEvaluate(f *testing.F) {
	f.Add([]byte(iphoneUA), []byte("de-DE,de;q=0.9"), []byte("beta=1"), []byte("yes"), []byte("CH"), []byte("10.0.0.1"), int64(0))
	f.Add([]byte(botUA), []byte("*;q=0.1,,;;"), []byte("%zz=&&ref"), []byte(""), []byte(" li"), []byte(""), int64(1<<62))
	f.Add([]byte("CUBOT android"), []byte("de;q=1.5"), []byte("b%65ta=%31"), []byte("no"), []byte("x"), []byte("::1"), int64(-1))
	c := mustCompile(f, eightRules())
	spec := eightRules()
	rules := specRules(f, spec)
	targets := map[string]bool{spec.URL: true}
	for _, r := range spec.Rules {
		targets[string(r.URL)] = true
	}
	for _, v := range spec.Variants {
		targets[string(v.URL)] = true
	}
	f.Fuzz(func(t *testing.T, ua, lang, query, canary, country, addr []byte, nowNanos int64) {
		facts := Facts{
			UserAgent: ua, AcceptLanguage: lang, RawQuery: query,
			Headers: headers("X-Canary", string(canary)),
			Now:     t0.Add(time.Duration(nowNanos % int64(2*time.Hour))), Country: country, ClientAddr: addr,
		}
		got := Evaluate(&facts, c)
		if !targets[got.URL] {
			t.Fatalf("Evaluate chose %q, not a target of the link", got.URL)
		}
		if again := Evaluate(&facts, c); again != got {
			t.Fatalf("Evaluate is not deterministic: %+v then %+v", got, again)
		}
		// The first matching rule by the conditions read one by one.
		device := Classify(ua)
		want := -1
		for i := range rules {
			if holdsOneByOne(&rules[i], &facts) {
				want = i
				break
			}
		}
		if got.Rule != want {
			t.Fatalf("rule %d, want %d", got.Rule, want)
		}
		if want == 1 && (facts.Now.Before(t0) || !facts.Now.Before(t0.Add(time.Hour))) {
			t.Fatalf("the window rule matched at %v", facts.Now)
		}
		if want == 4 && device != DeviceIOS || want == 5 && device != DeviceAndroid {
			t.Fatalf("device rule %d matched %s", want, device)
		}
		if n := testing.AllocsPerRun(5, func() { Evaluate(&facts, c) }); n != 0 {
			t.Fatalf("%v allocations", n)
		}
		// A device the redirector remembered gives the same choice.
		facts.Device, facts.DeviceKnown = device, true
		if remembered := Evaluate(&facts, c); remembered != got {
			t.Fatalf("with the device given: %+v, classified: %+v", remembered, got)
		}
	})
}

// FuzzCompile: Compile refuses or accepts any rule without failing, and a
// compiled rule evaluates.
func FuzzCompile(f *testing.F) {
	f.Add("ios", "de", "beta", "1", "X-A", "b", "CH", int32(30))
	f.Add("watch", "de_DE", "", "", "", "", "CHE", int32(0))
	f.Fuzz(func(t *testing.T, device, lang, qname, qvalue, hname, hvalue, country string, weight int32) {
		spec := &linkv1.ShortLinkSpec{
			URL: "https://example.com/",
			Rules: []linkv1.RedirectRule{{
				URL: "https://example.com/r", Devices: []linkv1.DeviceClass{linkv1.DeviceClass(device)}, Languages: []string{lang},
				QueryParams: []linkv1.QueryParamMatch{{Name: qname, Value: &qvalue}}, Headers: []linkv1.HeaderMatch{{Name: hname, Value: hvalue}},
				Countries: []string{country},
			}},
			Variants: []linkv1.Variant{{URL: "https://example.com/v", Weight: weight}},
		}
		c, err := Compile(spec, "seed", nil)
		if err != nil {
			return
		}
		facts := Facts{UserAgent: []byte(device), AcceptLanguage: []byte(lang), RawQuery: []byte(qname + "=" + qvalue),
			Headers: headers(hname, hvalue), Country: []byte(country)}
		got := Evaluate(&facts, c)
		if got.URL == "" {
			t.Fatal("no target")
		}
		if _, err := Key(spec); err != nil {
			t.Fatalf("Key refuses what Compile accepts: %v", err)
		}
	})
}

// specRules are the spec's rules as Compile reads them, before it packs
// them: what holdsOneByOne reads.
func specRules(t testing.TB, spec *linkv1.ShortLinkSpec) []specRule {
	t.Helper()
	out := make([]specRule, len(spec.Rules))
	for i := range spec.Rules {
		r, err := compileRule(&spec.Rules[i], strings.TrimSpace)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = r
	}
	return out
}

// holdsOneByOne is the reference Evaluate's rules agree with: each of the
// rule's conditions read as the API documents it, none skipped, nothing
// remembered.
func holdsOneByOne(r *specRule, f *Facts) bool {
	now := f.Now.UnixNano()
	if r.hasAfter && now < r.after || r.hasBefore && now >= r.before {
		return false
	}
	if len(r.countries) > 0 && !matchesCountry(f.Country, strings.Join(r.countries, "")) {
		return false
	}
	for i := range r.query {
		if !queryHolds(f.RawQuery, &r.query[i]) {
			return false
		}
	}
	if len(r.languages) > 0 && !matchesAnyRange(PreferredLanguage(f.AcceptLanguage), r.languages) {
		return false
	}
	if r.devices != 0 && r.devices&(1<<Classify(f.UserAgent)) == 0 {
		return false
	}
	for i := range r.headers {
		if f.Headers == nil || string(f.Headers.Peek(r.headers[i].name)) != r.headers[i].value {
			return false
		}
	}
	return true
}
