package rules

import (
	"net/netip"
	"regexp"
	"strconv"
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
			Now:     t0.Add(time.Duration(nowNanos % int64(2*time.Hour))), Country: country, Client: clientOf(addr),
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
	if len(r.languages) > 0 && !acceptsByRFC(string(f.AcceptLanguage), r.languages) {
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

// The Accept-Language grammar of RFC 9110 (section 12.4.2, 12.5.4), as
// written there: what acceptsByRFC reads independently of language.go.
var (
	rfcQvalue = regexp.MustCompile(`^(0(\.[0-9]{0,3})?|1(\.0{0,3})?)$`)
	rfcTag    = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

// acceptsByRFC is the reference of the languages condition (docs/api.md):
// the entries with a valid weight and a language tag, of which those with
// the highest q and those with q >= 0.9 are accepted (none with q=0), '_'
// read as '-'; a range matches a tag equal to it or that it starts,
// followed by '-'.
func acceptsByRFC(header string, ranges []string) bool {
	type entry struct {
		tag string
		q   float64
	}
	var entries []entry
	top := 0.0
entries:
	for _, e := range strings.Split(header, ",") {
		parts := strings.Split(e, ";")
		tag := strings.Trim(parts[0], " \t")
		if !rfcTag.MatchString(tag) {
			continue
		}
		q, weights := 1.0, 0
		for _, p := range parts[1:] {
			name, value, _ := strings.Cut(p, "=")
			if !strings.EqualFold(strings.Trim(name, " \t"), "q") {
				continue
			}
			weights++
			v := strings.Trim(value, " \t")
			if weights > 1 || !rfcQvalue.MatchString(v) {
				continue entries
			}
			q, _ = strconv.ParseFloat(v, 64)
		}
		entries = append(entries, entry{strings.ReplaceAll(strings.ToLower(tag), "_", "-"), q})
		top = max(top, q)
	}
	for _, e := range entries {
		if e.q == 0 || e.q < top && e.q < 0.9 {
			continue
		}
		for _, r := range ranges {
			if e.tag == r || strings.HasPrefix(e.tag, r+"-") {
				return true
			}
		}
	}
	return false
}

// FuzzAcceptLanguage: for any header, the languages condition agrees with
// the reference read of RFC 9110 (acceptsByRFC), without allocating.
func FuzzAcceptLanguage(f *testing.F) {
	for _, tc := range acceptLanguageCases {
		f.Add(tc.header, tc.ranges[0])
	}
	f.Fuzz(func(t *testing.T, header, rng string) {
		if !validRange(rng) {
			return
		}
		ranges := []string{strings.ToLower(rng), "de"}
		b := []byte(header)
		if got, want := acceptsAnyRange(b, ranges), acceptsByRFC(header, ranges); got != want {
			t.Fatalf("%q accepts one of %v: %v, the reference says %v", header, ranges, got, want)
		}
		if n := testing.AllocsPerRun(3, func() { acceptsAnyRange(b, ranges) }); n != 0 {
			t.Fatalf("%v allocations", n)
		}
	})
}

// clientOf is the address of 4 or 16 fuzzed bytes, else the zero Addr.
func clientOf(b []byte) netip.Addr {
	a, _ := netip.AddrFromSlice(b)
	return a
}
