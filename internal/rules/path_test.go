package rules

import (
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
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
		// Dot segments as lenient servers read them (issue 53): path
		// parameters (Tomcat, Jetty, Spring strip ";..." first), encodings
		// decoded more than once, IIS's %u, overlong UTF-8, Unicode
		// look-alikes, a NUL that ends a C string.
		{"https://docs.example.com/v2/app", "/..;/admin", "https://docs.example.com/v2/app/admin"},
		{"https://ex.com/docs", "/a/..;jsessionid=1/b", "https://ex.com/docs/b"},
		{"https://ex.com/docs", "/.;x/a/%2e%2e%3bx/b", "https://ex.com/docs/b"},
		{"https://ex.com/docs", "/..;/..;/..;/etc/passwd", "https://ex.com/docs/etc/passwd"},
		{"https://ex.com/docs", "/%252e%252e/%252E./x", "https://ex.com/docs/x"},
		{"https://ex.com/docs", "/%2525252e%2525252e/x", "https://ex.com/docs/x"},
		{"https://ex.com/docs", "/%c0%ae%c0%ae/%C0%AE./x", "https://ex.com/docs/x"},
		{"https://ex.com/docs", "/a/%e0%80%ae%e0%80%ae/%f0%80%80%ae./x", "https://ex.com/docs/x"},
		{"https://ex.com/docs", "/%c0%ae%c0%ae%c0%af%c0%ae%c0%ae%c1%9cx", "https://ex.com/docs/x"},
		{"https://ex.com/docs", "/%u002e%u002E/%uff0e%uff0e/x", "https://ex.com/docs/x"},
		{"https://ex.com/docs", "/\uff0e\uff0e/\u2025/\ufe30/x", "https://ex.com/docs/x"},
		{"https://ex.com/docs", "/..\uff1bx/\uff05\uff12\uff45.", "https://ex.com/docs/%EF%BC%85%EF%BC%92%EF%BD%85."},
		{"https://ex.com/docs", "/..\uff1bx/\uff052e.", "https://ex.com/docs/"},
		{"https://ex.com/docs", "/a/..%00.jpg/x", "https://ex.com/docs/x"},
		{"https://ex.com/docs", "/a/..\u2215..\u2215b", "https://ex.com/docs/b"},
		// A separator only a second decoding reveals separates.
		{"https://ex.com/docs", "/a%252fb", "https://ex.com/docs/a/b"},
		{"https://ex.com/docs", "/a%252f..%252f..%252fb/", "https://ex.com/docs/b/"},
		{"https://ex.com/docs", "/%25c0%25af%2525/x", "https://ex.com/docs/%25/x"},
		// Not dot segments: kept as written.
		{"https://ex.com/docs", "/a;v=1/b;c", "https://ex.com/docs/a;v=1/b;c"},
		{"https://ex.com/docs", "/..a;/.x;..", "https://ex.com/docs/..a;/.x;.."},
		{"https://ex.com/docs", "/a%2541/%e2%80%a6", "https://ex.com/docs/a%2541/%e2%80%a6"},
		{"https://ex.com/docs", "/;x/;", "https://ex.com/docs/;x/;"},
	} {
		if got, ok := AppendPath(nil, tc.target, []byte(tc.rest)); string(got) != tc.want || !ok {
			t.Errorf("AppendPath(%q, %q) = %q, %v, want %q", tc.target, tc.rest, got, ok, tc.want)
		}
	}
	prefix := []byte("Location: ")
	if got, _ := AppendPath(prefix, "https://ex.com/d", []byte("/x")); string(got) != "Location: https://ex.com/d/x" {
		t.Errorf("AppendPath appends to dst: %q", got)
	}
	// Encoded more than maxDecodes times over: refused, dst as it was.
	for _, rest := range []string{"/%252525252e", "/a/%25252525252F", "/%25" + strings.Repeat("25", 5000) + "2e"} {
		if got, ok := AppendPath(prefix, "https://ex.com/d", []byte(rest)); ok || string(got) != "Location: " {
			t.Errorf("AppendPath(%q) = %q, %v: want it refused", rest, got, ok)
		}
	}
	if _, ok := AppendPath(nil, "https://ex.com/d", []byte("/%2525252e")); !ok {
		t.Errorf("four decodings are read")
	}
}

// checkAppendPath holds AppendPath's promises for any target and rest:
// the target's scheme, authority and path come first and its query and
// fragment last; what is added between is a sequence of "/segment" with no
// byte a path may not hold, no separator that some server reads as one,
// and no dot segment however leniently it is read (leniently, below); and
// that reading of it is what RFC 3986's remove_dot_segments (5.2.4) makes
// of the same reading of rest. A rest AppendPath refuses is encoded more
// than maxDecodes times over.
func checkAppendPath(t *testing.T, target, rest string) {
	out, ok := AppendPath(nil, target, []byte(rest))
	if !ok {
		if depth := encodings(rest); depth <= maxDecodes {
			t.Fatalf("AppendPath(%q, %q) refused a path %d decodings read in full", target, rest, depth)
		}
		return
	}
	got := string(out)
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
	if added != "" && added[0] != '/' && !strings.HasSuffix(head, "/") {
		t.Fatalf("AppendPath(%q, %q) = %q: the added part does not start a segment", target, rest, got)
	}
	read := leniently(added)
	for _, seg := range read {
		if seg == "." || seg == ".." {
			t.Fatalf("AppendPath(%q, %q) = %q: a server reads dot segment %q in %q", target, rest, got, seg, added)
		}
	}
	want := nonEmpty(strings.Split(removeDotSegments("/"+strings.Join(nonEmpty(leniently(rest)), "/")), "/"))
	if strings.Join(nonEmpty(read), "/") != strings.Join(want, "/") {
		t.Fatalf("AppendPath(%q, %q) = %q, read as %q; the reference resolves %q to %q", target, rest, got, nonEmpty(read), rest, want)
	}
}

// leniently is a path as the most lenient server reads it (apart from
// AppendPath's own code): decoded until nothing changes (decodeRef), '\'
// a separator, and a segment that is "." or ".." up to a ';' (a path
// parameter) or a NUL read as that dot segment. Its callers drop the
// empty segments, as AppendPath does and as servers that merge slashes
// (nginx) do before they resolve: "a//.." is "", not "a/".
func leniently(path string) []string {
	segs := strings.Split(strings.ReplaceAll(decodeRef(path), "\\", "/"), "/")
	for i, s := range segs {
		if k, _, _ := strings.Cut(strings.SplitN(s, "\x00", 2)[0], ";"); k == "." || k == ".." {
			segs[i] = k
		}
	}
	return segs
}

// decodeRef decodes s until nothing changes: %XX, %uXXXX, an overlong
// UTF-8 encoding of an ASCII byte, and NFKC normalization with Windows'
// best-fit division slash.
func decodeRef(s string) string {
	for {
		d := bestFit.Replace(norm.NFKC.String(overlongRef(percentRef(s))))
		if d == s {
			return s
		}
		s = d
	}
}

var bestFit = strings.NewReplacer("\u2215", "/")

func percentRef(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' {
			if v, err := strconv.ParseUint(s[i+1:min(i+3, len(s))], 16, 8); err == nil && i+2 < len(s) && s[i+1] != '+' && s[i+1] != '-' {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
			if i+5 < len(s) && (s[i+1] == 'u' || s[i+1] == 'U') && !strings.ContainsAny(s[i+2:i+6], "+-") {
				if v, err := strconv.ParseUint(s[i+2:i+6], 16, 16); err == nil {
					b.WriteRune(rune(v))
					i += 5
					continue
				}
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// overlongRef replaces each UTF-8 sequence of two to four bytes that
// encodes a code point below 0x80 by that byte.
func overlongRef(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		n := 0
		switch c := s[i]; {
		case c&0xe0 == 0xc0:
			n = 2
		case c&0xf0 == 0xe0:
			n = 3
		case c&0xf8 == 0xf0:
			n = 4
		}
		if n > 0 && i+n <= len(s) {
			v, cont := rune(s[i])&(0x7f>>n), true
			for _, c := range []byte(s[i+1 : i+n]) {
				cont = cont && c&0xc0 == 0x80
				v = v<<6 | rune(c&0x3f)
			}
			if cont && v < 0x80 {
				b.WriteByte(byte(v))
				i += n - 1
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeDotSegments is RFC 3986's algorithm (5.2.4), step by step.
func removeDotSegments(in string) string {
	var out []string // the output buffer's segments, each with its leading '/'
	for in != "" {
		switch {
		case strings.HasPrefix(in, "../"):
			in = in[3:]
		case strings.HasPrefix(in, "./"):
			in = in[2:]
		case strings.HasPrefix(in, "/./"):
			in = in[2:]
		case in == "/.":
			in = "/"
		case strings.HasPrefix(in, "/../"):
			in = in[3:]
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case in == "/..":
			in = "/"
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case in == "." || in == "..":
			in = ""
		default:
			i := strings.IndexByte(in[1:], '/') + 1
			if i == 0 {
				i = len(in)
			}
			out, in = append(out, in[:i]), in[i:]
		}
	}
	return strings.Join(out, "")
}

func nonEmpty(segs []string) []string {
	var out []string
	for _, s := range segs {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// encodings is how many decodings change s before it reads in full.
func encodings(s string) int {
	n := 0
	for d := percentRef(s); d != s; d = percentRef(s) {
		s, n = d, n+1
	}
	return n
}

// TestUnicodeAlikes: every character whose NFKC form is ".", "..", '/',
// '\\', ';' or '%' is one of unicodeAlikes, read as that form ("..."
// makes no dot segment).
func TestUnicodeAlikes(t *testing.T) {
	known := map[string]string{}
	for _, a := range unicodeAlikes {
		known[a.utf8] = a.ascii
	}
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		s := string(r)
		n := norm.NFKC.String(s)
		switch n {
		case ".", "..", "/", "\\", ";", "%":
		default:
			continue
		}
		if known[s] != n {
			t.Errorf("U+%04X %q reads as %q under NFKC; unicodeAlikes has %q", r, s, n, known[s])
		}
	}
}

func FuzzAppendPath(f *testing.F) {
	for _, s := range [][2]string{
		{"https://ex.com/docs", "/a/../b"}, {"https://ex.com", "/%2e%2e/x"}, {"https://ex.com/d?q#f", `\..\x`},
		{"https://ex.com/", "/a%2F..%2F..%2Fb"}, {"http://h", "/ü/%zz/ /"}, {"", "/x"}, {"x", ".."},
		{"https://ex.com/v2/app", "/..;/admin"}, {"https://ex.com/d", "/%c0%ae%c0%ae/x"}, {"https://ex.com/d", "/%252e%252e%252fx"},
		{"https://ex.com/d", "/%u002e%uff0e/\uff0e\u2025/x"}, {"https://ex.com/d", "/..%00/%25%32%65%2E"}, {"https://ex.com/d", "/%25c0%25ae./a%252f..%252fb"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(checkAppendPath)
}
