package clientaddr

import (
	"net/netip"
	"strings"
	"testing"
)

func mustProxies(t testing.TB, list string) Proxies {
	t.Helper()
	p, err := ParseProxies(list)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func values(v ...string) [][]byte {
	out := make([][]byte, len(v))
	for i, s := range v {
		out[i] = []byte(s)
	}
	return out
}

// TestClient: the header is read only from a trusted peer, from the right,
// through trusted hops; what a client writes to the left of the first
// untrusted address is never read.
func TestClient(t *testing.T) {
	p := mustProxies(t, "10.0.0.0/8, 192.168.1.1,fd00::/8")
	for _, tc := range []struct {
		name   string
		peer   string
		values []string
		want   string
		result Result
	}{
		{"an untrusted peer: its header is ignored", "203.0.113.9", []string{"198.51.100.1"}, "203.0.113.9", Peer},
		{"an untrusted peer without the header", "203.0.113.9", nil, "203.0.113.9", Peer},
		{"X-Real-IP through the ingress", "10.1.2.3", []string{"203.0.113.77"}, "203.0.113.77", Header},
		{"X-Forwarded-For: the client the ingress appended", "10.1.2.3", []string{"203.0.113.77"}, "203.0.113.77", Header},
		{"spoofed left-most entries are ignored", "10.1.2.3", []string{"1.2.3.4, 5.6.7.8, 203.0.113.77"}, "203.0.113.77", Header},
		{"trusted hops are skipped", "10.1.2.3", []string{"6.6.6.6, 203.0.113.77, 10.9.9.9, 192.168.1.1"}, "203.0.113.77", Header},
		{"a spoofed trusted address left of the client is not reached", "10.1.2.3", []string{"10.0.0.1, 203.0.113.77"}, "203.0.113.77", Header},
		{"several lines read as one list, the last line last", "10.1.2.3", []string{"6.6.6.6, 198.51.100.7", "10.0.0.5"}, "198.51.100.7", Header},
		{"only trusted addresses: the leftmost", "10.1.2.3", []string{"10.0.0.9, 10.0.0.5"}, "10.0.0.9", Header},
		{"no header from a trusted peer", "10.1.2.3", nil, "10.1.2.3", Missing},
		{"an empty header", "10.1.2.3", []string{" , ,"}, "10.1.2.3", Missing},
		{"garbage where the client should be", "10.1.2.3", []string{"unknown"}, "10.1.2.3", Invalid},
		{"garbage behind a trusted hop: the hop", "10.1.2.3", []string{"not-an-ip, 10.0.0.5"}, "10.0.0.5", Invalid},
		{"garbage left of the client is never read", "10.1.2.3", []string{"not-an-ip, 203.0.113.77"}, "203.0.113.77", Header},
		{"ports and brackets", "10.1.2.3", []string{"[2001:db8::7]:4711, 10.0.0.2:80"}, "2001:db8::7", Header},
		{"an IPv4 address with a port", "10.1.2.3", []string{"203.0.113.77:51234"}, "203.0.113.77", Header},
		{"IPv6 in brackets without a port", "10.1.2.3", []string{"[2001:db8::1]"}, "2001:db8::1", Header},
		{"IPv4-mapped IPv6 is IPv4", "10.1.2.3", []string{"::ffff:203.0.113.77"}, "203.0.113.77", Header},
		{"a mapped trusted hop is skipped", "10.1.2.3", []string{"203.0.113.77, ::ffff:10.0.0.3"}, "203.0.113.77", Header},
		{"an IPv6 proxy", "fd00::1", []string{"2001:db8::9"}, "2001:db8::9", Header},
		{"a zone is no client", "10.1.2.3", []string{"fe80::1%eth0"}, "10.1.2.3", Invalid},
		{"a port out of range", "10.1.2.3", []string{"203.0.113.77:65536"}, "10.1.2.3", Invalid},
		{"a bracket never closed", "10.1.2.3", []string{"[2001:db8::1"}, "10.1.2.3", Invalid},
		{"tabs and spaces around entries", "10.1.2.3", []string{"\t203.0.113.77 \t,\t 10.0.0.1 "}, "203.0.113.77", Header},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, res := p.Client(netip.MustParseAddr(tc.peer), values(tc.values...))
			if got != netip.MustParseAddr(tc.want) || res != tc.result {
				t.Errorf("Client(%s, %q) = %s, %s; want %s, %s", tc.peer, tc.values, got, Results[res], tc.want, Results[tc.result])
			}
		})
	}
}

func TestParseProxies(t *testing.T) {
	p := mustProxies(t, "10.0.0.0/8,192.0.2.10 2001:db8::/32\t::ffff:198.51.100.0/120,10.1.2.3/8")
	if got := p.String(); got != "10.0.0.0/8,192.0.2.10/32,2001:db8::/32,198.51.100.0/24,10.0.0.0/8" {
		t.Errorf("read as %s", got)
	}
	for _, a := range []string{"10.255.0.1", "192.0.2.10", "2001:db8:1::1", "198.51.100.200"} {
		if !p.Trusts(netip.MustParseAddr(a)) {
			t.Errorf("%s not trusted", a)
		}
	}
	for _, a := range []string{"11.0.0.1", "192.0.2.11", "2001:db9::1", "198.51.101.1"} {
		if p.Trusts(netip.MustParseAddr(a)) {
			t.Errorf("%s trusted", a)
		}
	}
	if e := mustProxies(t, " , "); !e.Empty() {
		t.Error("an empty list trusts something")
	}
	for list, want := range map[string]string{
		"10.0.0.0/33":  `"10.0.0.0/33" is neither a CIDR`,
		"ingress":      `"ingress" is neither a CIDR`,
		"fe80::1%eth0": `"fe80::1%eth0" is neither a CIDR`,
		"10.0.0.0/8;":  `"10.0.0.0/8;" is neither a CIDR`,
	} {
		if _, err := ParseProxies(list); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseProxies(%q): %v, want %q", list, err, want)
		}
	}
}

// FuzzClient: whatever the header says, the client is the peer or an
// address the header holds; from an untrusted peer it is the peer; no
// address written left of an untrusted one is ever chosen; and Client
// does not allocate unless an entry is not an address.
func FuzzClient(f *testing.F) {
	f.Add("10.1.2.3", "1.2.3.4, 203.0.113.77, 10.0.0.1", "")
	f.Add("203.0.113.9", "198.51.100.1", "10.0.0.1")
	f.Add("fd00::1", "[2001:db8::7]:4711,, ::ffff:10.0.0.3", "unknown")
	p := mustProxies(f, "10.0.0.0/8,fd00::/8")
	f.Fuzz(func(t *testing.T, peerText, first, second string) {
		peer, err := netip.ParseAddr(peerText)
		if err != nil || peer.Zone() != "" {
			return
		}
		peer = peer.Unmap()
		v := values(first, second)
		got, res := p.Client(peer, v)
		if !p.Trusts(peer) && (got != peer || res != Peer) {
			t.Fatalf("an untrusted peer's header was read: %s, %s", got, Results[res])
		}
		// The entries from the right; the client must be among those up to
		// and including the first untrusted one.
		var reachable []netip.Addr
	walk:
		for i := len(v) - 1; i >= 0; i-- {
			entries := strings.Split(string(v[i]), ",")
			for j := len(entries) - 1; j >= 0; j-- {
				e := strings.Trim(entries[j], " \t")
				if e == "" {
					continue
				}
				a, ok := ParseEntry([]byte(e))
				if !ok {
					break walk
				}
				reachable = append(reachable, a)
				if !p.Trusts(a) {
					break walk
				}
			}
		}
		if got != peer && (len(reachable) == 0 || !containsAddr(reachable, got)) {
			t.Fatalf("Client(%s, %q) = %s, not among the reachable %v", peer, v, got, reachable)
		}
		if n := testing.AllocsPerRun(3, func() { p.Client(peer, v) }); n != 0 && res != Invalid {
			t.Fatalf("%v allocations", n)
		}
	})
}

func containsAddr(as []netip.Addr, a netip.Addr) bool {
	for _, b := range as {
		if a == b {
			return true
		}
	}
	return false
}
