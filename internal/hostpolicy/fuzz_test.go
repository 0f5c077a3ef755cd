package hostpolicy

import (
	"strings"
	"testing"

	"github.com/linkforge/linkforge/internal/shortcode"
)

// FuzzList: any annotation parses without panicking; each pattern is its own
// normal form and matches itself; a wildcard never matches its own domain or
// a host that merely ends with the domain's text.
func FuzzList(f *testing.F) {
	for _, s := range []string{"*.example.com, docs.vendor.io", "169.254.169.254 [fd00:ec2::254]", "https://x, *, *., ,,", "A.B.C. *.D.E.."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, annotation string) {
		l := Parse(annotation)
		_ = l.String()
		for _, p := range l.Patterns {
			again, ok := ParsePattern(string(p))
			if !ok || again != p {
				t.Fatalf("pattern %q re-parses as %q, %v", p, again, ok)
			}
			suffix := p.wildcardSuffix()
			if suffix == "" {
				if _, ok := l.Match(Key(string(p))); !ok {
					t.Fatalf("exact pattern %q does not match its own key %q", p, Key(string(p)))
				}
				continue
			}
			domain := suffix[1:]
			if _, ok := FromEntries([]string{string(p)}).Match(domain); ok {
				t.Fatalf("%q matches its apex %q", p, domain)
			}
			if _, ok := FromEntries([]string{string(p)}).Match("x" + domain); ok {
				t.Fatalf("%q matches the lookalike %q", p, "x"+domain)
			}
			if _, ok := l.Match("a.b" + suffix); !ok {
				t.Fatalf("%q does not match %q", p, "a.b"+suffix)
			}
		}
		if len(l.Patterns)+len(l.Invalid) != len(strings.FieldsFunc(annotation, isSeparator))-duplicates(l, annotation) {
			t.Fatalf("%q: %d patterns and %d invalid entries do not account for every entry", annotation, len(l.Patterns), len(l.Invalid))
		}
	})
}

// duplicates counts the valid entries dropped as repeats.
func duplicates(l List, annotation string) int {
	valid := 0
	for _, e := range strings.FieldsFunc(annotation, isSeparator) {
		if _, ok := ParsePattern(e); ok {
			valid++
		}
	}
	return valid - len(l.Patterns)
}

// FuzzJudge: any URL the canonicalizer accepts gets a decision without
// panicking; Key is idempotent; a refusal says why.
func FuzzJudge(f *testing.F) {
	for _, s := range []string{"https://example.com/", "http://2852039166/", "http://[::ffff:a9fe:a9fe]:80/", "https://bücher.example./x", "http://0x7f.1/"} {
		f.Add(s, "*.example.com 127.0.0.1")
	}
	f.Fuzz(func(t *testing.T, url, annotation string) {
		canonical, err := shortcode.Canonicalize(url)
		if err != nil {
			return
		}
		host := HostOf(canonical)
		if k := Key(host); Key(k) != k {
			t.Fatalf("Key(%q) = %q, but Key(%q) = %q", host, k, k, Key(k))
		}
		allow := Parse(annotation)
		v := Policy{Namespace: "n", Allow: &allow, Deny: []Named{{Name: "d", List: Parse(annotation)}}}.Judge(canonical)
		if v.Allowed == (v.Message != "") {
			t.Fatalf("%q: allowed=%v with message %q", canonical, v.Allowed, v.Message)
		}
	})
}
