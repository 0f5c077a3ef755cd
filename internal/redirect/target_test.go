package redirect

import (
	"strings"
	"testing"
)

// FuzzRequestTarget checks requestTarget's fast path against net/url
// (parseTarget) on any target: the same path, query, host and verdict.
func FuzzRequestTarget(f *testing.F) {
	for _, seed := range []string{
		"/", "/ns/code", "/bench-000/lwnQgf8efP", "/bench-000/lwnQgf8efP?utm=1&b=2",
		"/ns/c%41de", "/ns/code?%zz", "/ns/co de/longer-than-eight", "/ns/code\x7fpadding",
		"/ns/code/abcdefgh%", "/abcdefg?abcdefgh", "/abcdefghijklmno\x00", "/\x80\xff\xfe\x81abcdefg",
		"*", "http://host/ns/code", "", "/ns/code#frag", "/12345678\x20", "/1234567!\x21",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, target string) {
		path, query, host, ok := requestTarget(target, "hdr")
		wpath, wquery, whost, wok := parseTarget(target, "hdr")
		if path != wpath || query != wquery || host != whost || ok != wok {
			t.Fatalf("requestTarget(%q) = %q, %q, %q, %v; net/url: %q, %q, %q, %v",
				target, path, query, host, ok, wpath, wquery, whost, wok)
		}
	})
}

// TestPlainWord checks the eight-bytes-at-a-time scan against the table,
// for every byte value at every position of a word of plain bytes.
func TestPlainWord(t *testing.T) {
	for pos := range 8 {
		for c := range 256 {
			b := []byte(strings.Repeat("a", 8))
			b[pos] = byte(c)
			want := targetBytes[c] == targetPlain
			if got := plainWord(uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
				uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56); got != want {
				t.Errorf("plainWord(%q) = %v, want %v", b, got, want)
			}
		}
	}
	for _, w := range []string{"\x80\x80\x80\x80\x80\x80\x80\x80", "\xff\xff\xff\xff\xff\xff\xff\xff", "!!!!!!!!", "~~~~~~~~"} {
		if !plainWord(uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56) {
			t.Errorf("plainWord(%q) = false, want true", w)
		}
	}
}
