package claim

import (
	"strings"
	"testing"
	"time"
)

func TestDomainWinners(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	for _, tc := range []struct {
		name   string
		claims map[string]Domain
		want   map[string]string
	}{
		{"none", map[string]Domain{}, map[string]string{}},
		{"two hosts", map[string]Domain{"a": {"a.example", t0}, "b": {"b.example", t0}}, map[string]string{"a.example": "a", "b.example": "b"}},
		{"older wins", map[string]Domain{"z": {"h.example", t0}, "a": {"h.example", t0.Add(time.Second)}}, map[string]string{"h.example": "z"}},
		{"same age: smaller name", map[string]Domain{"z": {"h.example", t0}, "a": {"h.example", t0}, "m": {"h.example", t0}}, map[string]string{"h.example": "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 20 { // map order varies: the answer must not
				got := DomainWinners(tc.claims)
				if len(got) != len(tc.want) {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
				for h, ns := range tc.want {
					if got[h] != ns {
						t.Fatalf("got %v, want %v", got, tc.want)
					}
				}
			}
		})
	}
}

func FuzzNormalizeHost(f *testing.F) {
	for _, s := range []string{"Go.Example.com.", "a.example:443", "[::1]:80", "u@h", "h:99999", " x "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h := NormalizeHost(s)
		if h != strings.ToLower(h) || strings.Contains(h, "@") || strings.HasSuffix(h, ".") && h != "" && !strings.HasSuffix(strings.TrimSpace(s), "..") {
			t.Fatalf("NormalizeHost(%q) = %q: upper case, userinfo or a trailing dot", s, h)
		}
	})
}
