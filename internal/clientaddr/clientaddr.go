// Package clientaddr is the one definition of a request's client address
// in the redirector: the address its split, its rules, its click events
// and its access log all read (docs/serving.md, "The client address").
//
// The client is the peer of the connection (the socket's address), unless
// that peer is a proxy the operator trusts (--trusted-proxies, CIDRs) and
// the operator names the header such proxies set (--client-address-header).
// Then the header is read as ingress controllers read X-Forwarded-For
// (nginx's real_ip_recursive, Envoy's trusted hops): a comma-separated list
// of addresses, each proxy appending the address of its own peer, read
// from the right. Each address a trusted proxy wrote is taken, until one
// that no trusted proxy could have written names the client: the first
// address, from the right, outside the trusted CIDRs. Whatever a client
// writes itself lies to the left of what the trusted proxies appended, so
// it is never read unless every proxy to its right is trusted. X-Real-IP,
// a single address, is the list of one.
//
// Like internal/rules it is pure: no I/O, no clock, no shared state.
package clientaddr

import (
	"fmt"
	"net/netip"
	"strings"
	"unsafe"
)

// Proxies are the trusted proxies: the peers whose client-address header
// is read.
type Proxies struct {
	prefixes []netip.Prefix
}

// ParseProxies reads a list of trusted proxies: CIDRs (10.0.0.0/8,
// fd00::/8) or single addresses (192.0.2.10, a /32 or /128), separated by
// commas and spaces. An IPv4-mapped IPv6 prefix is read as its IPv4 one.
func ParseProxies(list string) (Proxies, error) {
	var p Proxies
	for _, s := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil || a.Zone() != "" {
				return Proxies{}, fmt.Errorf("%q is neither a CIDR such as 10.0.0.0/8 nor an IP address", s)
			}
			pfx = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		if pfx.Addr().Is4In6() && pfx.Bits() >= 96 {
			pfx = netip.PrefixFrom(pfx.Addr().Unmap(), pfx.Bits()-96)
		}
		if pfx.Addr().Zone() != "" {
			return Proxies{}, fmt.Errorf("%q has a zone: name the prefix without one", s)
		}
		p.prefixes = append(p.prefixes, pfx.Masked())
	}
	return p, nil
}

// Empty reports whether no proxy is trusted.
func (p Proxies) Empty() bool { return len(p.prefixes) == 0 }

// String is the list as ParseProxies reads it.
func (p Proxies) String() string {
	s := make([]string, len(p.prefixes))
	for i, pfx := range p.prefixes {
		s[i] = pfx.String()
	}
	return strings.Join(s, ",")
}

// Trusts reports whether a (unmapped) is in one of the trusted CIDRs.
func (p Proxies) Trusts(a netip.Addr) bool {
	for _, pfx := range p.prefixes {
		if pfx.Contains(a) {
			return true
		}
	}
	return false
}

// Result is how Client found the client's address.
type Result uint8

const (
	// Peer: the peer is not a trusted proxy; the client is the peer.
	Peer Result = iota
	// Header: the header named the client (or only trusted proxies, the
	// leftmost of them).
	Header
	// Missing: a trusted peer sent no value of the header; the client is
	// the peer.
	Missing
	// Invalid: a value of the header that a trusted proxy's position
	// makes it the one to read is not an address; the client is the last
	// trusted address read before it (the peer, or a trusted proxy).
	Invalid
	numResults
)

// Results are the names of the results, as metric labels use them.
var Results = [numResults]string{"peer", "header", "missing", "invalid"}

// Client is the client's address of a request from peer (unmapped, as
// FromSlice makes it) whose client-address header has the values given,
// in the order the request carried them (each a comma-separated list):
// peer itself unless p trusts it; else the first address of the values,
// read from the right, that p does not trust, or the leftmost if p
// trusts them all. It reads each value's bytes once, from the right, and
// does not allocate, but for an entry that looks like an address and is
// none (1.2.3.999: netip's error), which only a trusted proxy's position
// makes it read.
func (p Proxies) Client(peer netip.Addr, values [][]byte) (netip.Addr, Result) {
	if !p.Trusts(peer) {
		return peer, Peer
	}
	client, read := peer, false
	for i := len(values) - 1; i >= 0; i-- {
		v := values[i]
		for end := len(v); end > 0; {
			start := end - 1
			for start >= 0 && v[start] != ',' {
				start--
			}
			entry := trimSpace(v[start+1 : end])
			end = start
			if len(entry) == 0 {
				continue // an empty element of a list (RFC 9110, 5.6.1)
			}
			a, ok := ParseEntry(entry)
			if !ok {
				return client, Invalid
			}
			client, read = a, true
			if !p.Trusts(a) {
				return a, Header
			}
		}
	}
	if !read {
		return peer, Missing
	}
	return client, Header
}

// ParseEntry reads one address of an X-Forwarded-For list: an IPv4 or
// IPv6 address, optionally with a port (192.0.2.1:4711, [2001:db8::1]:4711,
// as Azure's and some CDNs' proxies write them) or in brackets; not with a
// zone, and not "unknown" or an obfuscated identifier. IPv4-mapped IPv6
// addresses are read as IPv4.
func ParseEntry(entry []byte) (netip.Addr, bool) {
	s := unsafe.String(unsafe.SliceData(entry), len(entry)) // netip keeps no part of it
	if len(s) > 0 && s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 || end < len(s)-1 && (s[end+1] != ':' || !port(s[end+2:])) {
			return netip.Addr{}, false // not [address] or [address]:port
		}
		s = s[1:end]
	} else if i := strings.IndexByte(s, ':'); i >= 0 && strings.LastIndexByte(s, ':') == i {
		// One colon: IPv4 with a port (an IPv6 address has two or more).
		if !port(s[i+1:]) {
			return netip.Addr{}, false
		}
		s = s[:i]
	}
	// Only what an address holds (a zone, '%', names an interface of the
	// proxy, not a client): netip's error for the rest allocates.
	for i := 0; i < len(s); i++ {
		if !addressByte(s[i]) {
			return netip.Addr{}, false
		}
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// addressByte reports whether c may be part of an IP address: a hex
// digit, '.' or ':'.
func addressByte(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' || c == '.' || c == ':'
}

// port reports whether s is a decimal port, 0-65535.
func port(s string) bool {
	if len(s) == 0 || len(s) > 5 {
		return false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n <= 65535
}

// FromSlice is the address of a 4- or 16-byte IP (a net.IP), IPv4-mapped
// IPv6 as IPv4; the zero Addr for any other length.
func FromSlice(ip []byte) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

func trimSpace(s []byte) []byte {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
