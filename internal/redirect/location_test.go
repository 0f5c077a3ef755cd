package redirect

import (
	"strings"
	"testing"
)

func TestNormalizeHost(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"go.example.com", "go.example.com"},
		{"Go.Example.COM:8080", "go.example.com"},
		{"go.example.com.", "go.example.com"},
		{" go.example.com ", "go.example.com"},
		{"[::1]:80", "[::1]"},
		{"[::1]", "[::1]"},
		{"", ""},
		{"go.example.com:", "go.example.com"},
		{"go.example.com:65535", "go.example.com"},
		// Refused: a port that is not one, userinfo (issue 40: a vanity host
		// with a 2,200-digit port was served, and drawn into QR codes).
		{"go.example.com:" + strings.Repeat("9", 2200), ""},
		{"go.example.com:65536", ""},
		{"go.example.com:080080", ""},
		{"go.example.com:80x", ""},
		{"go.example.com:+80", ""},
		{"user@go.example.com", ""},
		{"user:pass@go.example.com:80", ""},
		{"[::1]:" + strings.Repeat("1", 50), ""},
		{"[::1", ""},
		{"[::1]x", ""},
	} {
		if got := normalizeHost(tc.in); got != tc.want {
			t.Errorf("normalizeHost(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
