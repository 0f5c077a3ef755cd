package gate

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestCheckHash(t *testing.T) {
	valid := "$2b$10$" + strings.Repeat("a", 53)
	for _, tc := range []struct {
		hash, want string // want: a part of the error ("" none)
	}{
		{valid, ""},
		{"$2a$12$" + strings.Repeat("./", 26) + "Z", ""},
		{"$2y$11$" + strings.Repeat("9", 53), ""},
		{"hunter2", "write the hash, never the password"},
		{"", "not a bcrypt hash"},
		{"$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA", "not a bcrypt hash"},
		{"$2b$04$" + strings.Repeat("a", 53), "bcrypt cost 4: use 10 to 12"},
		{"$2b$13$" + strings.Repeat("a", 53), "bcrypt cost 13: use 10 to 12"},
		{"$2b$10$" + strings.Repeat("a", 52), "53 characters"},
		{"$2b$10$" + strings.Repeat("a", 52) + "!", "53 characters"},
		{"$2x$10$" + strings.Repeat("a", 53), "53 characters"},
		{valid + "\n", "53 characters"},
	} {
		err := CheckHash(tc.hash)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.hash, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: %v, want %q", tc.hash, err, tc.want)
		}
	}
}

// FuzzCheckHash: CheckHash accepts exactly what the CRD's pattern admits,
// and never panics.
func FuzzCheckHash(f *testing.F) {
	f.Add("$2b$10$" + strings.Repeat("a", 53))
	f.Add("$2b$1")
	f.Add("$2")
	f.Fuzz(func(t *testing.T, h string) {
		if (CheckHash(h) == nil) != hashForm.MatchString(h) {
			t.Fatalf("%q: CheckHash and the pattern disagree", h)
		}
	})
}

// One hash at the lowest cost, then what matches it and what does not:
// the wrong password, a longer one bcrypt would cut, an empty one, and
// any password against a hash that is not one.
func TestHashAndVerify(t *testing.T) {
	h, err := Hash([]byte("correct horse"), MinCost)
	if err != nil || CheckHash(h) != nil {
		t.Fatalf("Hash: %q, %v", h, err)
	}
	for _, tc := range []struct {
		hash, password string
		want           bool
	}{
		{h, "correct horse", true},
		{h, "correct horsf", false},
		{h, "", false},
		{h, "correct horse" + strings.Repeat("x", 60), false}, // 73 bytes: never
		{"not a hash", "correct horse", false},
	} {
		if got := Verify(tc.hash, []byte(tc.password)); got != tc.want {
			t.Errorf("Verify(%.12q, %.20q) = %v", tc.hash, tc.password, got)
		}
	}
	for _, tc := range []struct {
		password string
		cost     int
		want     string
	}{
		{"", 0, "an empty password"},
		{strings.Repeat("x", 73), 0, "a password of 73 bytes"},
		{"x", 9, "bcrypt cost 9"},
		{"x", 13, "bcrypt cost 13"},
	} {
		if _, err := Hash([]byte(tc.password), tc.cost); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Hash(%d bytes, %d): %v, want %q", len(tc.password), tc.cost, err, tc.want)
		}
	}
}

// testClock is a settable clock.
type testClock struct{ now time.Time }

func (c *testClock) Now() time.Time          { return c.now }
func (c *testClock) advance(d time.Duration) { c.now = c.now.Add(d) }

func TestLimiterPerClient(t *testing.T) {
	clk := &testClock{now: time.Unix(1_800_000_000, 0)}
	l := NewLimiter(DefaultLimits, clk.Now)
	a := netip.MustParseAddr("203.0.113.7")
	for i := range DefaultLimits.PerClient.Burst {
		if ok, _, _ := l.Attempt("ns/code", a); !ok {
			t.Fatalf("attempt %d of the burst refused", i+1)
		}
	}
	ok, wait, byLink := l.Attempt("ns/other", a) // another link: the client's bucket is the same
	if ok || byLink || wait != 12*time.Second {
		t.Fatalf("past the burst: ok %v, retry after %s, by the link %v; want refused for 12s, by the client", ok, wait, byLink)
	}
	if ok, _, _ := l.Attempt("ns/code", netip.MustParseAddr("203.0.113.8")); !ok {
		t.Error("another client is refused")
	}
	clk.advance(12 * time.Second)
	if ok, _, _ := l.Attempt("ns/code", a); !ok {
		t.Error("refused after a token came back")
	}
	if ok, _, _ := l.Attempt("ns/code", a); ok {
		t.Error("a second attempt with one token")
	}
	// An IPv6 client's /64 is one client.
	v6 := func(i int) netip.Addr { return netip.MustParseAddr(fmt.Sprintf("2001:db8:1:2::%x", i+1)) }
	for i := range DefaultLimits.PerClient.Burst {
		if ok, _, _ := l.Attempt("ns/v6", v6(i)); !ok {
			t.Fatalf("IPv6 attempt %d refused", i+1)
		}
	}
	if ok, _, _ := l.Attempt("ns/v6", v6(99)); ok {
		t.Error("another address of the same /64 is another client")
	}
}

// Guesses from many addresses at once meet the link's own limit: 100
// addresses, each well within its own, take the link's burst and then one
// every PerLink.Every, no more.
func TestLimiterPerLinkAcrossAddresses(t *testing.T) {
	clk := &testClock{now: time.Unix(1_800_000_000, 0)}
	l := NewLimiter(DefaultLimits, clk.Now)
	checked := 0
	for second := range 60 {
		if second > 0 {
			clk.advance(time.Second)
		}
		for i := range 100 {
			a := netip.AddrFrom4([4]byte{198, 51, byte(i), byte(second % 4)})
			if ok, _, _ := l.Attempt("ns/target", a); ok {
				checked++
			}
		}
	}
	// Burst 30, then one every 2 s over 59 s: 30 + 29.
	if want := DefaultLimits.PerLink.Burst + 59/2; checked != want {
		t.Errorf("%d guesses checked in a minute from 100 addresses, want %d", checked, want)
	}
	ok, _, byLink := l.Attempt("ns/target", netip.MustParseAddr("192.0.2.1"))
	if ok || !byLink {
		t.Errorf("a new client on a spent link: ok %v, by the link %v", ok, byLink)
	}
	if ok, _, _ := l.Attempt("ns/elsewhere", netip.MustParseAddr("192.0.2.1")); !ok {
		t.Error("another link is refused")
	}
}

// The limiter's memory is bounded: past MaxTracked clients, the new ones
// share a bucket (limited together, never freed), and a refill later the
// old generation is gone.
func TestLimiterMemoryIsBounded(t *testing.T) {
	clk := &testClock{now: time.Unix(1_800_000_000, 0)}
	limits := DefaultLimits
	limits.MaxTracked = 8
	limits.PerLink = Rate{Burst: 1 << 20, Every: time.Millisecond}
	l := NewLimiter(limits, clk.Now)
	for i := range 8 {
		l.Attempt("ns/x", netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}))
	}
	admitted := 0
	for i := range 20 {
		if ok, _, _ := l.Attempt("ns/x", netip.AddrFrom4([4]byte{10, 0, 1, byte(i)})); ok {
			admitted++
		}
	}
	if admitted != limits.PerClient.Burst {
		t.Errorf("20 clients past the bound: %d admitted, want one bucket's burst (%d)", admitted, limits.PerClient.Burst)
	}
	if n := len(l.clients.current) + len(l.clients.previous); n > 2*limits.MaxTracked {
		t.Errorf("%d buckets remembered", n)
	}
	clk.advance(2 * limits.PerClient.refill())
	l.Attempt("ns/x", netip.MustParseAddr("10.0.2.1"))
	clk.advance(limits.PerClient.refill())
	l.Attempt("ns/x", netip.MustParseAddr("10.0.2.2"))
	if n := len(l.clients.current) + len(l.clients.previous); n != 2 {
		t.Errorf("%d buckets remembered two generations later, want the two clients since", n)
	}
}

func TestAllowed(t *testing.T) {
	a := Allowed{Users: []string{"ana@example.com"}, Groups: []string{"platform", "sre"}}
	for _, tc := range []struct {
		id   Identity
		want bool
	}{
		{Identity{}, false},
		{Identity{Groups: []string{"platform"}}, false}, // groups without a user: nobody signed in
		{Identity{User: "ana@example.com"}, true},
		{Identity{User: "bo@example.com", Groups: []string{"dev", "sre"}}, true},
		{Identity{User: "bo@example.com", Groups: []string{"Platform"}}, false},
		{Identity{User: "bo@example.com"}, false},
	} {
		if got := a.Admits(tc.id); got != tc.want {
			t.Errorf("%+v: %v", tc.id, got)
		}
	}
	if (Allowed{}).Admits(Identity{User: "x"}) {
		t.Error("an empty list admits")
	}
}

func TestParseGroups(t *testing.T) {
	for header, want := range map[string]string{
		"":                       "",
		"a":                      "a",
		" a , b,,c ":             "a|b|c",
		strings.Repeat("x", 257): "",
		"ok," + strings.Repeat("x", 300) + ",ok2": "ok|ok2",
	} {
		if got := strings.Join(ParseGroups(header), "|"); got != want {
			t.Errorf("%.30q: %q, want %q", header, got, want)
		}
	}
	if n := len(ParseGroups(strings.Repeat("g,", 1000))); n != MaxGroups {
		t.Errorf("%d groups read, want at most %d", n, MaxGroups)
	}
}

func FuzzParseGroups(f *testing.F) {
	f.Add("a, b")
	f.Fuzz(func(t *testing.T, header string) {
		groups := ParseGroups(header)
		if len(groups) > MaxGroups {
			t.Fatalf("%d groups", len(groups))
		}
		for _, g := range groups {
			if g == "" || len(g) > MaxNameBytes || strings.Contains(g, ",") || strings.TrimSpace(g) != g {
				t.Fatalf("group %q", g)
			}
		}
	})
}

// An attempt refunded (not checked: the redirector was busy) is not
// spent, neither the client's nor the link's, and a refund never raises a
// bucket past its burst.
func TestLimiterRefund(t *testing.T) {
	clk := &testClock{now: time.Unix(1_800_000_000, 0)}
	l := NewLimiter(DefaultLimits, clk.Now)
	a := netip.MustParseAddr("198.51.100.4")
	for range 3 * DefaultLimits.PerClient.Burst {
		if ok, _, _ := l.Attempt("ns/code", a); !ok {
			t.Fatal("an attempt refunded each time was refused")
		}
		l.Refund("ns/code", a)
	}
	l.Refund("ns/code", a) // one more than taken: no extra attempt
	for i := range DefaultLimits.PerClient.Burst {
		if ok, _, _ := l.Attempt("ns/code", a); !ok {
			t.Fatalf("attempt %d of the burst refused", i+1)
		}
	}
	if ok, _, _ := l.Attempt("ns/code", a); ok {
		t.Error("a refund raised the bucket past its burst")
	}
}

func TestCost(t *testing.T) {
	for cost := MinCost; cost <= MaxCost; cost++ {
		h, err := Hash([]byte("pw"), cost)
		if err != nil {
			t.Fatal(err)
		}
		if got := Cost(h); got != cost {
			t.Errorf("Cost of a cost-%d hash: %d", cost, got)
		}
	}
	if got := Cost("not a hash"); got != DefaultCost {
		t.Errorf("Cost of an invalid hash: %d, want %d", got, DefaultCost)
	}
}
