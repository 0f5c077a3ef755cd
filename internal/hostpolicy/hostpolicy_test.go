package hostpolicy

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestParsePattern(t *testing.T) {
	for _, c := range []struct {
		entry string
		want  Pattern
		ok    bool
	}{
		{"docs.example.com", "docs.example.com", true},
		{"Docs.EXAMPLE.com", "docs.example.com", true},
		{"docs.example.com.", "docs.example.com", true},
		{"docs.example.com..", "docs.example.com", true},
		{"*.example.com", "*.example.com", true},
		{"*.Example.COM.", "*.example.com", true},
		{"*.com", "*.com", true},
		{"localhost", "localhost", true},
		{"my_host-1.internal", "my_host-1.internal", true},
		{"xn--bcher-kva.example", "xn--bcher-kva.example", true},
		{"169.254.169.254", "169.254.169.254", true},
		{"0.0.0.0", "0.0.0.0", true},
		{"255.255.255.255", "255.255.255.255", true},
		{"[fd00:ec2::254]", "[fd00:ec2::254]", true},
		{"[FD00:EC2::254]", "[fd00:ec2::254]", true},
		{"[::ffff:169.254.169.254]", "[::ffff:169.254.169.254]", true},
		// Not patterns.
		{"", "", false},
		{".", "", false},
		{"*", "*", false},
		{"*.", "*", false},
		{"*example.com", "*example.com", false},
		{"*.*.example.com", "*.*.example.com", false},
		{"a.*.example.com", "a.*.example.com", false},
		{"https://example.com", "https://example.com", false},
		{"example.com:443", "example.com:443", false},
		{"example.com/path", "example.com/path", false},
		{"bücher.example", "bücher.example", false},
		{"example..com", "example..com", false},
		{".example.com", ".example.com", false},
		{"256.1.1.1", "256.1.1.1", false},
		{"01.2.3.4", "01.2.3.4", false},
		{"1.2.3", "1.2.3", false},
		{"2852039166", "2852039166", false},
		{"0xa9fea9fe", "0xa9fea9fe", false},
		{"foo.0x", "foo.0x", false},
		{"foo.123", "foo.123", false},
		{"*.1.2", "*.1.2", false},
		{"[fd00::1", "[fd00::1", false},
		{"[fd00::1%eth0]", "[fd00::1%eth0]", false},
		{"[]", "[]", false},
		{"exa mple.com", "exa mple.com", false},
	} {
		got, ok := ParsePattern(c.entry)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("ParsePattern(%q) = %q, %v; want %q, %v", c.entry, got, ok, c.want, c.ok)
		}
	}
}

func TestParseSplitsAtCommasAndSpace(t *testing.T) {
	l := Parse(" *.example.com,docs.vendor.io\n\tgo.example.org , ,, https://bad.example\r\fEXAMPLE.net *.example.com ")
	want := []Pattern{"*.example.com", "docs.vendor.io", "go.example.org", "example.net"}
	if !slices.Equal(l.Patterns, want) {
		t.Errorf("patterns %q, want %q (duplicates once, in order)", l.Patterns, want)
	}
	if !slices.Equal(l.Invalid, []string{"https://bad.example"}) {
		t.Errorf("invalid %q", l.Invalid)
	}
	if got := Parse("").Patterns; len(got) != 0 {
		t.Errorf("empty annotation: %q", got)
	}
}

func TestKey(t *testing.T) {
	for host, want := range map[string]string{
		"example.com":                "example.com",
		"example.com.":               "example.com",
		"example.com..":              "example.com",
		"xn--bcher-kva.example":      "xn--bcher-kva.example",
		"169.254.169.254":            "169.254.169.254",
		"169.254.169.254.":           "169.254.169.254",
		"2852039166":                 "169.254.169.254",
		"0xa9fea9fe":                 "169.254.169.254",
		"0xa9.0xfe.0xa9.0xfe":        "169.254.169.254",
		"0251.0376.0251.0376":        "169.254.169.254",
		"169.254.43518":              "169.254.169.254",
		"169.16689662":               "169.254.169.254",
		"127.1":                      "127.0.0.1",
		"0x7f.1":                     "127.0.0.1",
		"0":                          "0.0.0.0",
		"0x":                         "0.0.0.0",
		"00":                         "0.0.0.0",
		"1.2.3.256":                  "1.2.3.256", // not an address: kept
		"1.2.3.4.5":                  "1.2.3.4.5",
		"08.1.1.1":                   "08.1.1.1", // 8 is no octal digit
		"4294967296":                 "4294967296",
		"4294967295":                 "255.255.255.255",
		"foo.1":                      "foo.1",
		"1..2":                       "1..2",
		"[fd00:ec2::254]":            "[fd00:ec2::254]",
		"[fd00:0ec2:0:0::254]":       "[fd00:ec2::254]",
		"[::ffff:169.254.169.254]":   "169.254.169.254",
		"[::ffff:a9fe:a9fe]":         "169.254.169.254",
		"[0:0:0:0:0:ffff:a9fe:a9fe]": "169.254.169.254",
		"[2001:db8::1]":              "[2001:db8::1]",
		"[2001:db8:0:0:0:0:0:1]":     "[2001:db8::1]",
	} {
		if got := Key(host); got != want {
			t.Errorf("Key(%q) = %q, want %q", host, got, want)
		}
	}
}

func TestHostOf(t *testing.T) {
	for url, want := range map[string]string{
		"https://example.com/":              "example.com",
		"https://example.com:8443/a?b#c":    "example.com",
		"http://example.com./x":             "example.com.",
		"http://[2001:db8::1]:8080/x":       "[2001:db8::1]",
		"http://[2001:db8::1]/":             "[2001:db8::1]",
		"https://xn--bcher-kva.example/caf": "xn--bcher-kva.example",
		"https://example.com?x=1":           "example.com",
		"not a url":                         "",
	} {
		if got := HostOf(url); got != want {
			t.Errorf("HostOf(%q) = %q, want %q", url, got, want)
		}
	}
}

func TestMatch(t *testing.T) {
	l := Parse("*.example.com docs.vendor.io 169.254.169.254 [fd00:ec2::254]")
	for key, want := range map[string]Pattern{
		"a.example.com":       "*.example.com",
		"a.b.example.com":     "*.example.com",
		"example.com":         "", // the apex is not below itself
		"evilexample.com":     "", // a suffix, but not below the domain
		"example.com.evil.io": "",
		"docs.vendor.io":      "docs.vendor.io",
		"a.docs.vendor.io":    "", // an exact host covers no subdomains
		"vendor.io":           "",
		"169.254.169.254":     "169.254.169.254",
		"[fd00:ec2::254]":     "[fd00:ec2::254]",
		"[fd00:ec2::255]":     "",
	} {
		got, ok := l.Match(key)
		if got != want || ok != (want != "") {
			t.Errorf("Match(%q) = %q, %v; want %q", key, got, ok, want)
		}
	}
	if _, ok := Parse("[FD00:0EC2::0:254]").Match(Key("[fd00:ec2::254]")); !ok {
		t.Error("an IPv6 pattern matches the same address written otherwise")
	}
}

func TestJudge(t *testing.T) {
	allow := Parse("*.example.com, docs.vendor.io, 10.0.0.1")
	deny := []Named{
		{Name: "cloud-metadata", List: FromEntries([]string{"169.254.169.254", "metadata.google.internal", "[fd00:ec2::254]"})},
		{Name: "internal", List: FromEntries([]string{"*.corp.example.com"})},
	}
	restricted := Policy{Namespace: "team-a", Allow: &allow, Deny: deny}
	open := Policy{Namespace: "team-b", Deny: deny}
	for _, c := range []struct {
		name   string
		policy Policy
		url    string // canonical
		want   string // "" allowed, else a substring of the message
	}{
		{"wildcard, one label below", restricted, "https://www.example.com/", ""},
		{"wildcard, deeper", restricted, "https://a.b.c.example.com/x", ""},
		{"wildcard, not the apex", restricted, "https://example.com/", `host "example.com" is not allowed in namespace team-a: its linkforge.io/allowed-hosts annotation allows only *.example.com, docs.vendor.io, 10.0.0.1`},
		{"suffix lookalike", restricted, "https://evilexample.com/", `"evilexample.com" is not allowed`},
		{"exact host", restricted, "https://docs.vendor.io/guide", ""},
		{"exact host, any port", restricted, "https://docs.vendor.io:8443/guide", ""},
		{"exact host, no subdomain", restricted, "https://x.docs.vendor.io/", "is not allowed"},
		{"trailing dot", restricted, "https://docs.vendor.io./", ""},
		{"IDNA under a wildcard", restricted, "https://xn--bcher-kva.example.com/", ""},
		{"IPv4 in another notation", restricted, "http://167772161/", ""},
		{"deny beats allow", restricted, "https://x.corp.example.com/", `host "x.corp.example.com" is denied in every namespace by DestinationDenyList "internal" (entry *.corp.example.com)`},
		{"no annotation: all hosts", open, "https://anything.example.org/", ""},
		{"no annotation: deny-list still applies", open, "http://169.254.169.254/latest/meta-data", `DestinationDenyList "cloud-metadata" (entry 169.254.169.254)`},
		{"decimal IPv4", open, "http://2852039166/", `host "2852039166" (the address 169.254.169.254) is denied`},
		{"hex IPv4", open, "http://0xa9fea9fe/", "is denied"},
		{"IPv4-mapped IPv6", open, "http://[::ffff:a9fe:a9fe]/", "is denied"},
		{"IPv6 written long", open, "http://[fd00:ec2:0:0:0:0:0:254]/", "is denied"},
		{"denied name with a port", open, "http://metadata.google.internal:8080/", "is denied"},
		{"denied name with a trailing dot", open, "http://metadata.google.internal./", "is denied"},
	} {
		v := c.policy.Judge(c.url)
		if c.want == "" {
			if !v.Allowed || v.Message != "" {
				t.Errorf("%s: %s refused: %s", c.name, c.url, v.Message)
			}
			continue
		}
		if v.Allowed || !strings.Contains(v.Message, c.want) {
			t.Errorf("%s: %s: allowed=%v %q; want refused with %q", c.name, c.url, v.Allowed, v.Message, c.want)
		}
	}

	empty := Parse(" , ")
	if v := (Policy{Namespace: "n", Allow: &empty}).Judge("https://example.com/"); v.Allowed ||
		!strings.HasSuffix(v.Message, "allows only nothing") {
		t.Errorf("an empty annotation allows nothing: %+v", v)
	}
	typo := Parse("example.com;docs.example.com")
	if v := (Policy{Namespace: "n", Allow: &typo}).Judge("https://example.com/"); v.Allowed ||
		!strings.Contains(v.Message, `allows only nothing (ignored, not host patterns: "example.com;docs.example.com")`) {
		t.Errorf("an invalid entry is ignored and shown: %+v", v)
	}
}

func TestListStringIsBounded(t *testing.T) {
	var entries []string
	for i := 0; i < 2000; i++ {
		entries = append(entries, fmt.Sprintf("h%d-%s.example", i, strings.Repeat("x", 200)), "bad/"+strings.Repeat("y", 200))
	}
	s := FromEntries(entries).String()
	if len(s) > 16<<10 {
		t.Errorf("message of %d bytes; a condition message holds at most 32768", len(s))
	}
	if strings.Count(s, " and 1980 more") != 2 {
		t.Errorf("the rest is counted: %.200s", s)
	}
}

func TestChanged(t *testing.T) {
	got := Changed(Parse("a.example b.example *.c.example"), Parse("b.example *.c.example d.example"))
	if want := []Pattern{"a.example", "d.example"}; !slices.Equal(got.Patterns, want) {
		t.Errorf("Changed = %q, want %q", got.Patterns, want)
	}
}

// BenchmarkJudge is what a reconcile adds for a namespace with allowed hosts
// and one deny-list: parsing the annotation (the deny-list is parsed once per
// version) and judging one URL.
func BenchmarkJudge(b *testing.B) {
	deny := []Named{{Name: "cloud-metadata", List: FromEntries([]string{"169.254.169.254", "metadata.google.internal", "[fd00:ec2::254]", "*.corp.example.com"})}}
	b.ReportAllocs()
	for b.Loop() {
		allow := Parse("*.example.com, docs.vendor.io")
		if !(Policy{Namespace: "team-a", Allow: &allow, Deny: deny}).Judge("https://www.example.com/docs?a=1").Allowed {
			b.Fatal("refused")
		}
	}
}

// Two lists that deny one host: the verdict names the same one whatever
// order the lists come in (the manager's cache lists them in map order).
func TestJudgeNamesOneListWhateverTheOrder(t *testing.T) {
	a := Named{Name: "a-internal", List: FromEntries([]string{"*.corp.example.com"})}
	b := Named{Name: "b-metadata", List: FromEntries([]string{"evil.corp.example.com"})}
	url := "https://evil.corp.example.com/"
	first := Policy{Namespace: "team-a", Deny: []Named{a, b}}.Judge(url)
	second := Policy{Namespace: "team-a", Deny: []Named{b, a}}.Judge(url)
	if first.Allowed || first != second {
		t.Errorf("verdicts differ by list order: %+v, %+v", first, second)
	}
	if want := `DestinationDenyList "a-internal" (entry *.corp.example.com)`; !strings.Contains(first.Message, want) {
		t.Errorf("message %q, want it to name %s", first.Message, want)
	}
}
