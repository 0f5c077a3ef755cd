package shortcode

import (
	"errors"
	"strings"
	"testing"
)

// maxCanonical bounds the canonical length: percent-encoding triples a byte
// and IDNA can stretch a host about 4.5 times (U+337F ㍿ -> xn--...).
const maxCanonical = 8 * MaxURLLength

func FuzzCanonicalize(f *testing.F) {
	v := loadVectors(f)
	for _, c := range v.Valid {
		f.Add(c.URL)
		f.Add(c.Canonical)
	}
	for _, c := range v.Invalid {
		f.Add(c.URL)
	}
	for _, c := range canonicalCases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := Canonicalize(in)
		if err != nil {
			var ie *InvalidURLError
			if !errors.As(err, &ie) || ie.Reason == "" || ie.Detail == "" || ie.URL != in {
				t.Fatalf("Canonicalize(%q): bad error %#v", in, err)
			}
			if got != "" {
				t.Fatalf("Canonicalize(%q) = %q with error %v", in, got, err)
			}
			return
		}
		if !strings.HasPrefix(got, "http://") && !strings.HasPrefix(got, "https://") {
			t.Fatalf("Canonicalize(%q) = %q: bad scheme", in, got)
		}
		if len(got) > maxCanonical {
			t.Fatalf("Canonicalize(%q) is %d bytes long", in, len(got))
		}
		for i := 0; i < len(got); i++ {
			// Everything is ASCII: hosts are punycode, the rest is encoded.
			if c := got[i]; c < 0x21 || c >= 0x7f || c == '#' {
				t.Fatalf("Canonicalize(%q) = %q: byte 0x%02x at %d", in, got, c, i)
			}
		}
		again, err := Canonicalize(got)
		if len(got) > MaxURLLength {
			// Encoding can push a canonical URL past the input limit; it
			// cannot be fed back in then.
			var ie *InvalidURLError
			if !errors.As(err, &ie) || ie.Reason != ReasonTooLong {
				t.Fatalf("Canonicalize(%q) (%d bytes) = %q, %v; want too long", got, len(got), again, err)
			}
			return
		}
		if err != nil || again != got {
			t.Fatalf("not idempotent: Canonicalize(%q) = %q; again: %q, %v", in, got, again, err)
		}
	})
}

// benchURL is a typical link of about 100 bytes that needs every kind of
// work: case, default port, slash run, dot segment, trailing slash, query
// sort and fragment.
const benchURL = "https://Example.com:443/docs//guides/./getting-started/?utm_source=newsletter&utm_medium=email&b=2&a=1#top"

func BenchmarkCanonicalizeAndCode(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchURL)))
	for b.Loop() {
		c, err := Canonicalize(benchURL)
		if err != nil {
			b.Fatal(err)
		}
		_ = Code(c, "team-a", 0)
	}
}

func BenchmarkCanonicalizeCanonical(b *testing.B) {
	c, err := Canonicalize(benchURL)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = Canonicalize(c)
	}
}

func BenchmarkCodes(b *testing.B) {
	c, err := Canonicalize(benchURL)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = Codes(c, "team-a")
	}
}
