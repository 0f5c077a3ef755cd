package events

import (
	"net/netip"
	"testing"
)

// TestReduceClientAddress: IPv4 to its /24, IPv6 to its /32, and the IPv6
// addresses that carry an IPv4 address (mapped, 6to4, Teredo) to that
// address's /24.
func TestReduceClientAddress(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"203.0.113.77", "203.0.113.0"},
		{"0.0.0.0", "0.0.0.0"},
		{"255.255.255.255", "255.255.255.0"},
		{"::ffff:203.0.113.77", "203.0.113.0"},
		// 6to4 (RFC 3056): 2002:c633:6417 is 198.51.100.23.
		{"2002:c633:6417::1", "198.51.100.0"},
		{"2002:c633:6417:abcd:1234:5678:9abc:def0", "198.51.100.0"},
		// Teredo (RFC 4380 and its example): the server 65.54.227.120,
		// the client's address 192.0.2.45 inverted in the last 32 bits.
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "192.0.2.0"},
		{"2001::ffff:ffff", "0.0.0.0"},
		// Native IPv6: its /32.
		{"2001:db8:abcd:1234::1", "2001:db8::"},
		{"2001:1:4136:e378:8000:63bf:3fff:fdd2", "2001:1::"}, // 2001:1::/32 is not Teredo
		{"2003:c633:6417::1", "2003:c633::"},                 // nor 2003::/16 6to4
		{"2a00:1450:4001:80b::200e", "2a00:1450::"},
		{"fe80::1%eth0", "fe80::"},
		{"::1", "::"},
		{"::", "::"},
		{"64:ff9b::198.51.100.23", "64:ff9b::"}, // NAT64: the server's address, not the client's
	} {
		got := ReduceClientAddress(netip.MustParseAddr(tc.in))
		if got.String() != tc.want {
			t.Errorf("ReduceClientAddress(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
	if ReduceClientAddress(netip.Addr{}).IsValid() {
		t.Error("the zero address reduced to a valid one")
	}
}

// FuzzReduceClientAddress: for any address, the reduction is the reference
// one (a netip.Prefix of the IPv4 address it carries, or of the IPv6
// address), keeps no zone, is the same for every address of its network,
// and reduces to itself.
func FuzzReduceClientAddress(f *testing.F) {
	for _, s := range []string{"203.0.113.77", "::ffff:1.2.3.4", "2002:c633:6417::1", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001:db8::1", "fe80::1%eth0"} {
		a := netip.MustParseAddr(s)
		b := a.As16()
		f.Add(b[:], a.Is4(), a.Zone(), []byte{0xff, 0x12})
	}
	f.Fuzz(func(t *testing.T, raw []byte, is4 bool, zone string, host []byte) {
		if len(raw) < 16 {
			return
		}
		a := netip.AddrFrom16([16]byte(raw[:16]))
		if is4 {
			a = a.Unmap()
			if !a.Is4() {
				a = netip.AddrFrom4([4]byte(raw[12:16]))
			}
		} else {
			a = a.WithZone(zone)
		}
		got := ReduceClientAddress(a)
		want := referenceReduction(t, a)
		if got != want {
			t.Fatalf("ReduceClientAddress(%s) = %s, the reference %s", a, got, want)
		}
		if got.Zone() != "" || ReduceClientAddress(got) != got {
			t.Fatalf("ReduceClientAddress(%s) = %s: a zone, or not reduced", a, got)
		}
		// Another host of the same network: every bit outside what the
		// reduction keeps flipped by host.
		other := flipHostBits(a, host)
		if r := ReduceClientAddress(other); r != got {
			t.Fatalf("%s reduces to %s, but %s of the same network to %s", a, got, other, r)
		}
	})
}

// referenceReduction reduces a with netip.Prefix, by the RFCs' layouts.
func referenceReduction(t *testing.T, a netip.Addr) netip.Addr {
	prefix := func(a netip.Addr, bits int) netip.Addr {
		p, err := a.WithZone("").Prefix(bits)
		if err != nil {
			t.Fatal(err)
		}
		return p.Addr()
	}
	if a.Is4() || a.Is4In6() {
		return prefix(a.Unmap(), 24)
	}
	b := a.As16()
	if netip.MustParsePrefix("2002::/16").Contains(a.WithZone("")) {
		return prefix(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), 24)
	}
	if netip.MustParsePrefix("2001::/32").Contains(a.WithZone("")) {
		return prefix(netip.AddrFrom4([4]byte{b[12] ^ 0xff, b[13] ^ 0xff, b[14] ^ 0xff, b[15] ^ 0xff}), 24)
	}
	return prefix(a, 32)
}

// flipHostBits returns a with the bits that its reduction drops XORed with
// host's (repeated): those of the host part of the IPv4 address it
// carries, or of the IPv6 address past its /32.
func flipHostBits(a netip.Addr, host []byte) netip.Addr {
	if len(host) == 0 {
		return a
	}
	mask := func(i int) byte { return host[i%len(host)] }
	if a.Is4() {
		b := a.As4()
		b[3] ^= mask(0)
		return netip.AddrFrom4(b)
	}
	b := a.As16()
	switch {
	case a.Is4In6():
		b[15] ^= mask(0)
	case b[0] == 0x20 && b[1] == 0x02:
		b[5] ^= mask(0)
		for i := 6; i < 16; i++ {
			b[i] ^= mask(i)
		}
	case b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0:
		for i := 4; i < 12; i++ { // the server, flags and port
			b[i] ^= mask(i)
		}
		b[15] ^= mask(15)
	default:
		for i := 4; i < 16; i++ {
			b[i] ^= mask(i)
		}
		if netip.AddrFrom16(b).Is4In6() != a.Is4In6() {
			return a // flipped into another kind: not the same network
		}
	}
	return netip.AddrFrom16(b).WithZone(a.Zone())
}
