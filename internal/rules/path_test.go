package rules

import (
	"strings"
	"testing"
)

func TestAppendPath(t *testing.T) {
	for _, tc := range []struct{ target, rest, want string }{
		{"https://ex.com/docs", "/guide/intro", "https://ex.com/docs/guide/intro"},
		{"https://ex.com/docs", "guide/intro", "https://ex.com/docs/guide/intro"},
		{"https://ex.com/docs/", "/guide", "https://ex.com/docs/guide"},
		{"https://ex.com", "/a", "https://ex.com/a"},
		{"https://ex.com?x=1#top", "/a", "https://ex.com/a?x=1#top"},
		{"https://ex.com/docs?x=1", "/a/b/", "https://ex.com/docs/a/b/?x=1"},
		{"https://ex.com/docs#f", "a", "https://ex.com/docs/a#f"},
		{"https://ex.com/docs", "", "https://ex.com/docs"},
		{"https://ex.com/docs", "/", "https://ex.com/docs"},
		{"https://ex.com/docs", "//", "https://ex.com/docs"},
		// Dot segments resolve within rest and never climb above the target's path.
		{"https://ex.com/docs", "/a/../b", "https://ex.com/docs/b"},
		{"https://ex.com/docs", "/../../etc/passwd", "https://ex.com/docs/etc/passwd"},
		{"https://ex.com/docs/", "/..", "https://ex.com/docs/"},
		{"https://ex.com/docs", "/a/..", "https://ex.com/docs/"},
		{"https://ex.com/docs", "/./a/./b", "https://ex.com/docs/a/b"},
		{"https://ex.com/docs", "/%2e%2e/%2E./.%2e/x", "https://ex.com/docs/x"},
		{"https://ex.com/docs", "/a/%2e%2e%2fb", "https://ex.com/docs/b"},
		{"https://ex.com/docs", `/a\..\..\b`, "https://ex.com/docs/b"},
		{"https://ex.com/docs", "/..%2F..%5Cx", "https://ex.com/docs/x"},
		{"https://ex.com/docs", "/...", "https://ex.com/docs/..."},
		{"https://ex.com/docs", "/..a", "https://ex.com/docs/..a"},
		{"https://ex.com", "/..", "https://ex.com/"},
		{"https://ex.com", "/../evil.com", "https://ex.com/evil.com"},
		// No scheme or host change: "//host" and "@" stay in the path.
		{"https://ex.com/docs", "//evil.com/x", "https://ex.com/docs/evil.com/x"},
		{"https://ex.com", "/@evil.com", "https://ex.com/@evil.com"},
		{"https://ex.com", "/https://evil.com", "https://ex.com/https:/evil.com"},
		// Percent-encoding kept; what a path may not hold, encoded.
		{"https://ex.com/docs", "/a%20b/%C3%BC", "https://ex.com/docs/a%20b/%C3%BC"},
		{"https://ex.com/docs", "/a b/ü", "https://ex.com/docs/a%20b/%C3%BC"},
		{"https://ex.com/docs", "/100%/x%zz", "https://ex.com/docs/100%25/x%25zz"},
		{"https://ex.com/docs", "/a?b#c", "https://ex.com/docs/a%3Fb%23c"},
		{"https://ex.com/docs", "/a\r\nLocation: x", "https://ex.com/docs/a%0D%0ALocation:%20x"},
		{"https://ex.com/docs", "/<script>\"'", "https://ex.com/docs/%3Cscript%3E%22'"},
		{"https://ex.com/docs", "/a;b=c,d:e@f!$&'()*+", "https://ex.com/docs/a;b=c,d:e@f!$&'()*+"},
		// An encoded slash counts as one (some servers decode it).
		{"https://ex.com/docs", "/a%2Fb", "https://ex.com/docs/a/b"},
		{"https://ex.com:8443/d", "/x", "https://ex.com:8443/d/x"},
		{"https://[2001:db8::1]/d?q", "/x", "https://[2001:db8::1]/d/x?q"},
	} {
		if got := string(AppendPath(nil, tc.target, []byte(tc.rest))); got != tc.want {
			t.Errorf("AppendPath(%q, %q) = %q, want %q", tc.target, tc.rest, got, tc.want)
		}
	}
	prefix := []byte("Location: ")
	if got := string(AppendPath(prefix, "https://ex.com/d", []byte("/x"))); got != "Location: https://ex.com/d/x" {
		t.Errorf("AppendPath appends to dst: %q", got)
	}
}

// checkAppendPath holds AppendPath's promises for any target and rest: the
// target's scheme, authority and path come first and its query and
// fragment last; what is added between is a sequence of "/segment" with no
// dot segment (plain or encoded), no byte a path may not hold, and no
// separator that some server reads as one ('\', an encoded '/' or '\').
func checkAppendPath(t *testing.T, target, rest string) {
	got := string(AppendPath(nil, target, []byte(rest)))
	end := pathEnd(target)
	head, tail := target[:end], target[end:]
	if !strings.HasPrefix(got, head) || !strings.HasSuffix(got[len(head):], tail) {
		t.Fatalf("AppendPath(%q, %q) = %q: not %q + added + %q", target, rest, got, head, tail)
	}
	added := got[len(head) : len(got)-len(tail)]
	for i := 0; i < len(added); i++ {
		c := added[i]
		if !pathByte[c] && c != '/' && c != '%' {
			t.Fatalf("AppendPath(%q, %q) = %q: byte %q added as is", target, rest, got, c)
		}
		if c == '%' && (i+2 >= len(added) || !isHex(added[i+1]) || !isHex(added[i+2])) {
			t.Fatalf("AppendPath(%q, %q) = %q: a '%%' that starts no encoding", target, rest, got)
		}
	}
	for _, seg := range strings.Split(added, "/") {
		if dotSegment([]byte(seg)) != 0 {
			t.Fatalf("AppendPath(%q, %q) = %q: dot segment %q added", target, rest, got, seg)
		}
		if s, _, sep := nextSegment([]byte(seg)); sep {
			t.Fatalf("AppendPath(%q, %q) = %q: a separator in segment %q", target, rest, got, s)
		}
	}
}

func FuzzAppendPath(f *testing.F) {
	for _, s := range [][2]string{
		{"https://ex.com/docs", "/a/../b"}, {"https://ex.com", "/%2e%2e/x"}, {"https://ex.com/d?q#f", `\..\x`},
		{"https://ex.com/", "/a%2F..%2F..%2Fb"}, {"http://h", "/ü/%zz/ /"}, {"", "/x"}, {"x", ".."},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(checkAppendPath)
}
