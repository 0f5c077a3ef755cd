package shortcode

import (
	"crypto/sha256"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestHashInput(t *testing.T) {
	tests := []struct {
		canonical, namespace string
		salt                 int
		want                 string
	}{
		{"http://example.com/path", "ws_abc123", 0, "http://example.com/path|ws_abc123"},
		{"http://example.com/path", "ws_abc123", 1, "http://example.com/path|ws_abc123|1"},
		{"http://example.com/path", "default", 9, "http://example.com/path|default|9"},
		{"https://x.test/?a=1|2", "team-a", 0, "https://x.test/?a=1|2|team-a"},
		{"http://x.test/", "", 0, "http://x.test/|"},
		{"http://x.test/", "ns", 10, "http://x.test/|ns|10"}, // out of range, still decimal
	}
	for _, tc := range tests {
		if got := HashInput(tc.canonical, tc.namespace, tc.salt); got != tc.want {
			t.Errorf("HashInput(%q, %q, %d) = %q, want %q", tc.canonical, tc.namespace, tc.salt, got, tc.want)
		}
	}
}

// refCode is an independent, slow implementation of the Code derivation of the
// package doc with math/big, to check the fast one.
func refCode(input string) string {
	sum := sha256.Sum256([]byte(input))
	return refBase58(new(big.Int).SetBytes(sum[:16]))
}

func refBase58(n *big.Int) string {
	n = new(big.Int).Set(n)
	var digits []byte
	base := big.NewInt(58)
	mod := new(big.Int)
	for n.Sign() > 0 {
		n.DivMod(n, base, mod)
		digits = append([]byte{alphabet[mod.Int64()]}, digits...)
	}
	s := string(digits)
	if len(s) < Length {
		s = strings.Repeat("1", Length-len(s)) + s
	}
	return s[:Length]
}

func TestEncode128(t *testing.T) {
	pow := func(e int64) *big.Int { return new(big.Int).Exp(big.NewInt(58), big.NewInt(e), nil) }
	sub1 := func(n *big.Int) *big.Int { return new(big.Int).Sub(n, big.NewInt(1)) }
	max128 := sub1(new(big.Int).Lsh(big.NewInt(1), 128))
	tests := []struct {
		n    *big.Int
		want string // "" means: compare with refBase58 only
	}{
		// Left padding with '1' (the zero digit) up to Length.
		{big.NewInt(0), "1111111111"},
		{big.NewInt(1), "1111111112"},
		{big.NewInt(57), "111111111z"},
		{big.NewInt(58), "1111111121"},
		{sub1(pow(9)), "1zzzzzzzzz"},
		{pow(9), "2111111111"},
		// Longer numbers keep their first Length digits.
		{sub1(pow(10)), "zzzzzzzzzz"},
		{pow(10), "2111111111"},
		{pow(21), "2111111111"},
		{new(big.Int).SetUint64(1<<64 - 1), ""},
		{new(big.Int).Lsh(big.NewInt(1), 64), ""},
		{max128, ""},
	}
	for _, tc := range tests {
		want := refBase58(tc.n)
		if tc.want != "" && want != tc.want {
			t.Fatalf("reference gives %q for %v, table says %q", want, tc.n, tc.want)
		}
		b := make([]byte, 16)
		tc.n.FillBytes(b)
		got := encode128(be64(b[:8]), be64(b[8:]))
		if string(got[:]) != want {
			t.Errorf("encode128(%v) = %q, want %q", tc.n, got, want)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		hi, lo := r.Uint64()>>r.IntN(64), r.Uint64()
		n := new(big.Int).Lsh(new(big.Int).SetUint64(hi), 64)
		n.Or(n, new(big.Int).SetUint64(lo))
		if got, want := encode128(hi, lo), refBase58(n); string(got[:]) != want {
			t.Fatalf("encode128(%d:%d) = %q, want %q", hi, lo, got, want)
		}
	}
}

func be64(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

func TestCode(t *testing.T) {
	// The example of Code derivation in the package doc.
	if got := Code("http://example.com/path", "ws_abc123", 0); got != "WhpJT5u5Ka" {
		t.Errorf("salt 0: got %q, want WhpJT5u5Ka", got)
	}
	if got := Code("http://example.com/path", "ws_abc123", 1); got != "3Rg3B7UopT" {
		t.Errorf("salt 1: got %q, want 3Rg3B7UopT", got)
	}
	for _, c := range []string{"http://x.test/", "https://example.com/" + strings.Repeat("a", 3000)} {
		for _, ns := range []string{"default", "", "team-a"} {
			for salt := 0; salt <= MaxSalt; salt++ {
				if got, want := Code(c, ns, salt), refCode(HashInput(c, ns, salt)); got != want {
					t.Errorf("Code(%q, %q, %d) = %q, want %q", c[:min(len(c), 40)], ns, salt, got, want)
				}
			}
		}
	}
}

func TestCodes(t *testing.T) {
	for _, c := range []string{"http://example.com/path", "https://x.test/?a=1", "https://example.com/" + strings.Repeat("b", 3000)} {
		codes := Codes(c, "team-a")
		seen := map[string]bool{}
		for salt, code := range codes {
			if want := Code(c, "team-a", salt); code != want {
				t.Errorf("Codes(%q)[%d] = %q, Code gives %q", c[:min(len(c), 40)], salt, code, want)
			}
			if len(code) != Length || strings.Trim(code, alphabet) != "" {
				t.Errorf("code %q is not %d Base58 characters", code, Length)
			}
			if seen[code] {
				t.Errorf("Codes(%q) repeats %q", c, code)
			}
			seen[code] = true
		}
	}
	if Codes("http://x.test/", "a") == Codes("http://x.test/", "b") {
		t.Error("codes do not depend on the namespace")
	}
}
