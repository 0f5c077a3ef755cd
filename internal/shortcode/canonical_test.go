package shortcode

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// canonicalCases hold, per Canonicalization rule of the package doc, inputs
// beyond the conformance vectors. want is the canonical URL; reason, when set,
// is the expected InvalidURLError reason instead.
var canonicalCases = []struct {
	rule, in, want, reason string
}{
	// 1. Trim (strings.TrimSpace: Unicode white space too).
	{"trim", "\t http://example.com/a \n", "http://example.com/a", ""},
	{"trim", "\u00a0http://example.com/\u2003", "http://example.com/", ""},
	{"trim", "\r\n\t ", "", ReasonEmpty},
	{"trim", "\u3000", "", ReasonEmpty},

	// 2. Limits.
	{"limits", "http://example.com/" + strings.Repeat("a", MaxURLLength-19), "http://example.com/" + strings.Repeat("a", MaxURLLength-19), ""},
	{"limits", "http://example.com/" + strings.Repeat("a", MaxURLLength-18), "", ReasonTooLong},
	{"limits", "  http://example.com/" + strings.Repeat("a", MaxURLLength-19) + "  ", "http://example.com/" + strings.Repeat("a", MaxURLLength-19), ""},
	{"limits", "http://example.com/\x00" + strings.Repeat("a", MaxURLLength), "", ReasonTooLong}, // length is checked first
	{"limits", "http://example.com/a\tb", "", ReasonControlCharacter},
	{"limits", "http://example.com/#frag\x00", "", ReasonControlCharacter},
	{"limits", "http://example.com/\x7f", "", ReasonControlCharacter},
	{"limits", "http://exa\x01mple.com/", "", ReasonControlCharacter},
	{"limits", "ftp://example.com/\n", "", ReasonScheme}, // trailing LF is trimmed first
	{"limits", "ftp://example.com/\na", "", ReasonControlCharacter},

	// 3. Shape.
	{"shape", "example.com/path", "", ReasonNotAbsolute},
	{"shape", "//example.com/path", "", ReasonNotAbsolute},
	{"shape", "http:example.com", "", ReasonNotAbsolute},
	{"shape", "://example.com", "", ReasonNotAbsolute},
	{"shape", "1http://example.com", "", ReasonNotAbsolute},
	{"shape", "ht tp://example.com", "", ReasonNotAbsolute},
	{"shape", "http//example.com", "", ReasonNotAbsolute},
	{"shape", "http:\\\\example.com", "", ReasonNotAbsolute},

	// 4. Scheme.
	{"scheme", "HtTpS://example.com", "https://example.com/", ""},
	{"scheme", "HTTP://example.com", "http://example.com/", ""},
	{"scheme", "httpx://example.com", "", ReasonScheme},
	{"scheme", "ws://example.com", "", ReasonScheme},
	{"scheme", "file:///etc/passwd", "", ReasonScheme}, // scheme before host
	{"scheme", "javascript://%0Aalert(1)", "", ReasonScheme},
	{"scheme", "git+ssh://example.com/", "", ReasonScheme},

	// 5. Userinfo.
	{"userinfo", "http://user@example.com", "", ReasonUserinfo},
	{"userinfo", "http://:@example.com", "", ReasonUserinfo},
	{"userinfo", "http://@example.com/", "", ReasonUserinfo},
	{"userinfo", "https://bank.example@evil.example/", "", ReasonUserinfo},
	{"userinfo", "http://user@/", "", ReasonUserinfo}, // checked before the host
	{"userinfo", "http://example.com/@user", "http://example.com/@user", ""},
	{"userinfo", "http://example.com?a=@b", "http://example.com/?a=@b", ""},
	{"userinfo", "http://example.com#@evil", "http://example.com/", ""},

	// 5. Host: registered names.
	{"host", "http://EXAMPLE.Com", "http://example.com/", ""},
	{"host", "http://my_host.internal:8080/", "http://my_host.internal:8080/", ""},
	{"host", "http://192.168.0.1/", "http://192.168.0.1/", ""},
	{"host", "http://a-b.c-d.example.", "http://a-b.c-d.example./", ""},
	{"host", "http://exa%6Dple.com/", "", ReasonHost},
	{"host", "http://exa!mple.com/", "", ReasonHost},
	{"host", "http://example.com\\.evil.com/", "", ReasonHost},
	{"host", "http://:8080/", "", ReasonHost},
	{"host", "http://", "", ReasonHost},
	{"host", "http://?q=1", "", ReasonHost},
	{"host", "http://#f", "", ReasonHost},
	{"host", "http://2001:db8::1/", "", ReasonHost}, // unbracketed IPv6
	{"host", "http://example.com:80:80/", "", ReasonHost},
	// 5. Host: IDNA (UTS #46 lookup profile), only for non-ASCII hosts.
	{"idna", "https://BÜCHER.example/", "https://xn--bcher-kva.example/", ""},
	{"idna", "http://münchen.de", "http://xn--mnchen-3ya.de/", ""},
	{"idna", "http://日本.jp:8080", "http://xn--wgv71a.jp:8080/", ""},
	{"idna", "http://example\u3002com/", "http://example.com/", ""},                              // ideographic full stop
	{"idna", "http://\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.com", "http://example.com/", ""}, // full-width letters
	{"idna", "http://xn--bcher-kva.example", "http://xn--bcher-kva.example/", ""},                // ASCII: no IDNA
	{"idna", "http://bü cher.example", "", ReasonHost},
	{"idna", "http://a\u00a0b.example", "", ReasonHost},
	{"idna", "http://bücher_x.example", "", ReasonHost}, // STD3 rules in a non-ASCII host
	{"idna", "http://\xff\xfe.example", "", ReasonHost}, // invalid UTF-8 (idna alone would map it to U+FFFD)
	{"idna", "http://b\xfcr.example", "", ReasonHost},   // Latin-1, not UTF-8
	// 5. Host: IPv6 literals.
	{"ipv6", "http://[::1]/", "http://[::1]/", ""},
	{"ipv6", "http://[2001:DB8::A]:8080/x", "http://[2001:db8::a]:8080/x", ""},
	{"ipv6", "https://[::FFFF:192.0.2.1]:443", "https://[::ffff:192.0.2.1]/", ""},
	{"ipv6", "http://[2001:db8:0:0::1]/", "http://[2001:db8:0:0::1]/", ""}, // kept as written
	{"ipv6", "http://[::1", "", ReasonHost},
	{"ipv6", "http://[::1]x/", "", ReasonHost},
	{"ipv6", "http://[1.2.3.4]/", "", ReasonHost},
	{"ipv6", "http://[fe80::1%25eth0]/", "", ReasonHost},
	{"ipv6", "http://[zz::1]/", "", ReasonHost},
	{"ipv6", "http://[]/", "", ReasonHost},
	{"ipv6", "http://[v1.fe]/", "", ReasonHost},

	// 5. Port.
	{"port", "http://example.com:8080", "http://example.com:8080/", ""},
	{"port", "https://example.com:80/", "https://example.com:80/", ""},
	{"port", "http://example.com:443/", "http://example.com:443/", ""},
	{"port", "https://example.com:/", "https://example.com/", ""},
	{"port", "http://[::1]:/", "http://[::1]/", ""},
	{"port", "http://example.com:0080/", "http://example.com/", ""}, // leading zeros dropped
	{"port", "http://example.com:08080/", "http://example.com:8080/", ""},
	{"port", "http://example.com:000000000000000000080", "http://example.com/", ""},
	{"port", "http://example.com:65535/", "http://example.com:65535/", ""},
	{"port", "http://example.com:1", "http://example.com:1/", ""},
	{"port", "http://example.com:65536/", "", ReasonPort},
	{"port", "http://example.com:0/", "", ReasonPort},
	{"port", "http://example.com:00/", "", ReasonPort},
	{"port", "http://example.com:1234567/", "", ReasonPort},
	{"port", "http://example.com:-1/", "", ReasonPort},
	{"port", "http://example.com:+80/", "", ReasonPort},
	{"port", "http://example.com:8o/", "", ReasonPort},
	{"port", "http://example.com: 80/", "", ReasonPort},
	{"port", "http://example.com:８０/", "", ReasonPort}, // full-width digits

	// 6.1 Percent-encoding normalization.
	{"path-pct", "http://x.test/%7e%7E", "http://x.test/~~", ""},
	{"path-pct", "http://x.test/%41%62%2d%5F", "http://x.test/Ab-_", ""},
	{"path-pct", "http://x.test/%2f%3a%c3%a9", "http://x.test/%2F%3A%C3%A9", ""}, // ':' is allowed but stays encoded
	{"path-pct", "http://x.test/%", "http://x.test/%25", ""},
	{"path-pct", "http://x.test/a%4", "http://x.test/a%254", ""},
	{"path-pct", "http://x.test/%zz", "http://x.test/%25zz", ""},
	{"path-pct", "http://x.test/%%41", "http://x.test/%25A", ""},
	{"path-pct", "http://x.test/%25", "http://x.test/%25", ""},
	{"path-pct", "http://x.test/%2541", "http://x.test/%2541", ""},
	// 6.2 Encoding.
	{"path-enc", "http://x.test/a b", "http://x.test/a%20b", ""},
	{"path-enc", "http://x.test/é", "http://x.test/%C3%A9", ""},
	{"path-enc", "http://x.test/<>\"{}|\\^`[]", "http://x.test/%3C%3E%22%7B%7D%7C%5C%5E%60%5B%5D", ""},
	{"path-enc", "http://x.test/!$&'()*+,;=:@~", "http://x.test/!$&'()*+,;=:@~", ""},
	{"path-enc", "http://x.test/\xff", "http://x.test/%FF", ""},
	// 6.3 Slash runs.
	{"path-slash", "http://x.test///", "http://x.test/", ""},
	{"path-slash", "http://x.test/a//b/", "http://x.test/a/b", ""},
	{"path-slash", "http://x.test/a/%2F/b", "http://x.test/a/%2F/b", ""}, // an encoded slash is data
	// 6.4 Dot segments.
	{"path-dots", "http://x.test/../a", "http://x.test/a", ""},
	{"path-dots", "http://x.test/a/b/../../..", "http://x.test/", ""},
	{"path-dots", "http://x.test/a/%2e%2E/b", "http://x.test/b", ""}, // decoded first (6.1)
	{"path-dots", "http://x.test/a/%2e/b", "http://x.test/a/b", ""},
	{"path-dots", "http://x.test/a/.../b", "http://x.test/a/.../b", ""},
	{"path-dots", "http://x.test/a/.b/..c", "http://x.test/a/.b/..c", ""},
	{"path-dots", "http://x.test/./a/.", "http://x.test/a", ""},
	{"path-dots", "http://x.test/a/b/..", "http://x.test/a", ""},
	{"path-dots", "http://x.test/a//../b", "http://x.test/b", ""}, // slashes collapse before dots
	{"path-dots", "http://x.test/a/b/./../c/./d/..", "http://x.test/a/c", ""},
	// 6.5 Empty path and trailing slash.
	{"path-end", "http://x.test", "http://x.test/", ""},
	{"path-end", "http://x.test?x", "http://x.test/?x", ""},
	{"path-end", "http://x.test#x", "http://x.test/", ""},
	{"path-end", "http://x.test/a/", "http://x.test/a", ""},
	{"path-end", "http://x.test/", "http://x.test/", ""},
	{"path-end", "http://x.test/A/B", "http://x.test/A/B", ""}, // paths keep their case

	// 7.1 Split and drop empty pieces.
	{"query-split", "http://x.test/?&&", "http://x.test/", ""},
	{"query-split", "http://x.test/p?", "http://x.test/p", ""},
	{"query-split", "http://x.test/?&a&", "http://x.test/?a", ""},
	{"query-split", "http://x.test/?a=1%26b=2", "http://x.test/?a=1%26b=2", ""}, // %26 is not a separator
	// 7.2 Normalization.
	{"query-norm", "http://x.test/?q=a b", "http://x.test/?q=a%20b", ""},
	{"query-norm", "http://x.test/?q=%7e%2b+", "http://x.test/?q=~%2B+", ""},
	{"query-norm", "http://x.test/?q=é", "http://x.test/?q=%C3%A9", ""},
	{"query-norm", "http://x.test/?q=a%", "http://x.test/?q=a%25", ""},
	{"query-norm", "http://x.test/?u=http://y.test/p?z", "http://x.test/?u=http://y.test/p?z", ""},
	{"query-norm", "http://x.test/?a=[1]|\"", "http://x.test/?a=%5B1%5D%7C%22", ""},
	{"query-norm", "http://x.test/?a&b=", "http://x.test/?a&b=", ""}, // no '=' added, none removed
	// 7.3 Stable sort by key.
	{"query-sort", "http://x.test/?B=1&a=2&A=3", "http://x.test/?A=3&B=1&a=2", ""},
	{"query-sort", "http://x.test/?a=2&a=1", "http://x.test/?a=2&a=1", ""}, // by key only, stable
	{"query-sort", "http://x.test/?a=1&a", "http://x.test/?a=1&a", ""},
	{"query-sort", "http://x.test/?ab=1&a=2", "http://x.test/?a=2&ab=1", ""},
	{"query-sort", "http://x.test/?a-b=1&a=2", "http://x.test/?a=2&a-b=1", ""}, // key "a" < "a-b", though "a=" > "a-"
	{"query-sort", "http://x.test/?a&=x", "http://x.test/?=x&a", ""},
	{"query-sort", "http://x.test/?%7E=1&z=2", "http://x.test/?z=2&~=1", ""}, // keys compared after normalization
	{"query-sort", "http://x.test/?b=%3D&a==", "http://x.test/?a==&b=%3D", ""},

	// 8. Fragment.
	{"fragment", "http://x.test/p#a?b", "http://x.test/p", ""},
	{"fragment", "http://x.test/?a=1#b=2&c", "http://x.test/?a=1", ""},
	{"fragment", "http://x.test/#é x%", "http://x.test/", ""},

	// 9. Everything at once.
	{"all", "  HTTPS://Bücher.Example:0443//a/./b/../%7Ec d/?z=%7a&y&&x=1#frag ", "https://xn--bcher-kva.example/a/~c%20d?x=1&y&z=z", ""},
	{"all", "http://[::1]:8080?b&a#", "http://[::1]:8080/?a&b", ""},
}

func TestCanonicalizeRules(t *testing.T) {
	for _, tc := range canonicalCases {
		got, err := Canonicalize(tc.in)
		if tc.reason != "" {
			var ie *InvalidURLError
			if !errors.As(err, &ie) || ie.Reason != tc.reason {
				t.Errorf("%s: Canonicalize(%q) = %q, %v; want reason %q", tc.rule, tc.in, got, err, tc.reason)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: Canonicalize(%q) = %q, %v; want %q", tc.rule, tc.in, got, err, tc.want)
			continue
		}
		if again, err := Canonicalize(got); again != got || err != nil {
			t.Errorf("%s: not idempotent: Canonicalize(%q) = %q, %v", tc.rule, got, again, err)
		}
	}
}

// TestCanonicalizeManyPieces exercises the growth paths past the on-stack
// buffers: more pieces than the piece array holds, output longer than it.
func TestCanonicalizeManyPieces(t *testing.T) {
	var in, want []string
	for i := 99; i >= 0; i-- {
		in = append(in, fmt.Sprintf("k%02d=%s", i, strings.Repeat("v", i%7)))
	}
	for i := 0; i < 100; i++ {
		want = append(want, fmt.Sprintf("k%02d=%s", i, strings.Repeat("v", i%7)))
	}
	got, err := Canonicalize("http://x.test/?" + strings.Join(in, "&"))
	if w := "http://x.test/?" + strings.Join(want, "&"); err != nil || got != w {
		t.Errorf("got %q, %v; want %q", got, err, w)
	}

	long := strings.Repeat("é", 400) // 800 bytes in, 2400 out
	got, err = Canonicalize("http://x.test/" + long + "?b=" + long + "&a=1")
	enc := strings.Repeat("%C3%A9", 400)
	if w := "http://x.test/" + enc + "?a=1&b=" + enc; err != nil || got != w {
		t.Errorf("long: got %d bytes, %v; want %d bytes", len(got), err, len(w))
	}
}

func TestInvalidURLError(t *testing.T) {
	tests := []struct{ in, reason, errText string }{
		{"ftp://example.com", ReasonScheme, `scheme: scheme "ftp" is not allowed; use http or https`},
		{"http://example.com:99999/", ReasonPort, `port: port "99999" is out of range; use 1-65535`},
		{"http://exa mple.com/", ReasonHost, `host: host "exa mple.com" contains ' '`},
		{"http://2001:db8::1/", ReasonHost, `in brackets`},
		{"", ReasonEmpty, "empty: "},
		{"  http://x.test/a\r\nb", ReasonControlCharacter, "CR (0x0D) at byte 18"},
		{"http:/x.test", ReasonNotAbsolute, `expected "//" after "http:"`},
		{"javascript:alert(1)", ReasonNotAbsolute, "http(s)://host/path"},
	}
	for _, tc := range tests {
		_, err := Canonicalize(tc.in)
		var ie *InvalidURLError
		if !errors.As(err, &ie) {
			t.Fatalf("Canonicalize(%q): %v is not an *InvalidURLError", tc.in, err)
		}
		if ie.Reason != tc.reason || ie.URL != tc.in || ie.Detail == "" {
			t.Errorf("Canonicalize(%q) = %#v", tc.in, ie)
		}
		if !strings.HasPrefix(err.Error(), ie.Reason+": "+ie.Detail) || !strings.Contains(err.Error(), tc.errText) {
			t.Errorf("Canonicalize(%q).Error() = %q, want it to contain %q", tc.in, err.Error(), tc.errText)
		}
	}
	// Credentials never reach the message.
	_, err := Canonicalize("https://alice:s3cret@example.com/")
	if err == nil || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "alice") {
		t.Errorf("userinfo error leaks credentials or is missing: %v", err)
	}
	// Every invalid case in the rule table has a detail.
	for _, tc := range canonicalCases {
		if tc.reason == "" {
			continue
		}
		_, err := Canonicalize(tc.in)
		var ie *InvalidURLError
		if errors.As(err, &ie) && (ie.Detail == "" || err.Error() != ie.Reason+": "+ie.Detail) {
			t.Errorf("Canonicalize(%q): bad error %#v", tc.in, ie)
		}
	}
}

func TestCanonicalizeAllocs(t *testing.T) {
	canonical := "https://example.com/docs/guides/getting-started?a=1&b=2&utm_source=news"
	if n := testing.AllocsPerRun(100, func() { _, _ = Canonicalize(canonical) }); n != 0 {
		t.Errorf("Canonicalize(canonical) allocates %v times, want 0", n)
	}
	messy := "  HTTPS://Example.com:443/docs//guides/./getting-started/?utm_source=news&b=2&a=1#top"
	if n := testing.AllocsPerRun(100, func() { _, _ = Canonicalize(messy) }); n > 1 {
		t.Errorf("Canonicalize(messy) allocates %v times, want <= 1", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = Code(canonical, "default", 3) }); n > 1 {
		t.Errorf("Code allocates %v times, want <= 1", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = Codes(canonical, "default") }); n > 1 {
		t.Errorf("Codes allocates %v times, want <= 1", n)
	}
}
