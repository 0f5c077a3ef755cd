package hostpolicy

import (
	"net/netip"
	"strconv"
	"strings"
)

// endsInNumber is the WHATWG URL standard's "ends in a number" for a
// lower-case host without trailing dots: its last label is all digits, or 0x
// and hex digits. Browsers read such a host as an IPv4 address (or refuse it).
func endsInNumber(host string) bool {
	last := host[strings.LastIndexByte(host, '.')+1:]
	if allDigits(last) {
		return true
	}
	hex, ok := strings.CutPrefix(last, "0x")
	if !ok {
		return false
	}
	for i := 0; i < len(hex); i++ {
		if !isHexDigit(hex[i]) {
			return false
		}
	}
	return true
}

// parseIPv4 is the WHATWG IPv4 parser for a lower-case host without trailing
// dots: one to four numbers (decimal, 0-prefixed octal, 0x-prefixed hex),
// each but the last at most 255, the last filling the remaining bytes.
func parseIPv4(host string) (netip.Addr, bool) {
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		n, ok := ipv4Number(p)
		if !ok {
			return netip.Addr{}, false
		}
		nums[i] = n
	}
	last := len(nums) - 1
	for _, n := range nums[:last] {
		if n > 255 {
			return netip.Addr{}, false
		}
	}
	if nums[last] >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, false
	}
	v := nums[last]
	for i, n := range nums[:last] {
		v += n << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// ipv4Number parses one part; an empty part fails, "0x" alone is 0.
func ipv4Number(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	base := 10
	switch {
	case strings.HasPrefix(s, "0x"):
		s, base = s[2:], 16
	case len(s) > 1 && s[0] == '0':
		s, base = s[1:], 8
	}
	if s == "" {
		return 0, true
	}
	// ParseUint with an explicit base takes no sign, prefix or underscore;
	// a number too large for 64 bits is too large for IPv4 too.
	n, err := strconv.ParseUint(s, base, 64)
	return n, err == nil
}
