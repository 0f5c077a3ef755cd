package events

import "net/netip"

// Prefix lengths of ReduceClientAddress: what is kept of a client's address.
const (
	// ReducedIPv4Bits: an IPv4 address keeps its /24, the last octet
	// cleared, as Google Analytics' IP anonymization does and Matomo's at
	// its lowest setting.
	ReducedIPv4Bits = 24
	// ReducedIPv6Bits: an IPv6 address keeps its /32, the block a
	// regional registry allocates to an ISP (RIPE NCC's IPv6 policy: a
	// /32 at least), so that it names a provider, not a customer: a /48,
	// what Google Analytics and Matomo keep by default, is what one site
	// is assigned (RFC 6177), one subscriber, and a /56 or /64 is one
	// household. Piwik PRO's strongest mask keeps a /32 too
	// (docs/events.md#privacy).
	ReducedIPv6Bits = 32
)

// ReduceClientAddress returns the network of a client's address that leaves
// the redirector by default (click events, the access log): an IPv4
// address's /24 and an IPv6 address's /32 (ReducedIPv6Bits). An IPv6
// address that carries an IPv4 address is reduced as that IPv4 address
// is, to its /24: an IPv4-mapped address (::ffff:a.b.c.d), a 6to4 address
// (2002::/16, RFC 3056: the IPv4 address in bits 16-47) and a Teredo
// address (2001::/32, RFC 4380: the client's public IPv4 address, its bits
// inverted, in the last 32), since their /32, or the /48 a site is given,
// holds part or all of the subscriber's IPv4 address. A zone is dropped;
// the zero Addr stays the zero Addr. It is the one reduction of the
// product: the events' builder and the redirector's access log call it.
func ReduceClientAddress(a netip.Addr) netip.Addr {
	if a.Is4() {
		return reduceIPv4(a.As4())
	}
	if !a.Is6() {
		return netip.Addr{}
	}
	b := a.As16() // without the zone
	switch {
	case a.Is4In6():
		return reduceIPv4([4]byte(b[12:16]))
	case b[0] == 0x20 && b[1] == 0x02: // 6to4, 2002:V4AD:DR00::/48
		return reduceIPv4([4]byte(b[2:6]))
	case b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0: // Teredo, 2001:0::/32
		return reduceIPv4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
	}
	clear(b[ReducedIPv6Bits/8:])
	return netip.AddrFrom16(b)
}

func reduceIPv4(b [4]byte) netip.Addr {
	b[3] = 0 // ReducedIPv4Bits
	return netip.AddrFrom4(b)
}
