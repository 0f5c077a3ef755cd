package shortcode

import (
	"errors"
	"testing"

	"github.com/linkforge/linkforge/internal/shortcode/conformance"
)

func loadVectors(tb testing.TB) *conformance.Vectors {
	tb.Helper()
	v, err := conformance.Load()
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

func TestVectorsValid(t *testing.T) {
	for _, v := range loadVectors(t).Valid {
		got, err := Canonicalize(v.URL)
		if err != nil {
			t.Errorf("Canonicalize(%q): unexpected error %v", v.URL, err)
			continue
		}
		if got != v.Canonical {
			t.Errorf("Canonicalize(%q) = %q, want %q", v.URL, got, v.Canonical)
		}
		if len(v.Codes) == 0 {
			t.Errorf("vector %q has no codes", v.URL)
		}
		for _, c := range v.Codes {
			if code := Code(v.Canonical, c.Namespace, c.Salt); code != c.Code {
				t.Errorf("Code(%q, %q, %d) = %q, want %q", v.Canonical, c.Namespace, c.Salt, code, c.Code)
			}
			if code := Codes(v.Canonical, c.Namespace)[c.Salt]; code != c.Code {
				t.Errorf("Codes(%q, %q)[%d] = %q, want %q", v.Canonical, c.Namespace, c.Salt, code, c.Code)
			}
		}
	}
}

func TestVectorsInvalid(t *testing.T) {
	for _, v := range loadVectors(t).Invalid {
		got, err := Canonicalize(v.URL)
		var ie *InvalidURLError
		if !errors.As(err, &ie) {
			t.Errorf("Canonicalize(%q) = %q, %v; want *InvalidURLError %q", v.URL, got, err, v.Reason)
			continue
		}
		if ie.Reason != v.Reason {
			t.Errorf("Canonicalize(%q) reason = %q (%v), want %q", v.URL, ie.Reason, err, v.Reason)
		}
		if ie.URL != v.URL {
			t.Errorf("Canonicalize(%q) error URL = %q", v.URL, ie.URL)
		}
		if got != "" {
			t.Errorf("Canonicalize(%q) returned %q with an error", v.URL, got)
		}
	}
}
