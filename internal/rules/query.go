package rules

import "bytes"

// queryHolds reports whether a raw query string (no '?', percent-encoded,
// pairs separated by '&') meets m: a pair named m.name, and with m.hasValue
// one whose value is m.value. Names and values compare once decoded ('+'
// is a space, as in a form), without allocating.
func queryHolds(raw []byte, m *match) bool {
	for len(raw) > 0 {
		pair := raw
		if i := bytes.IndexByte(raw, '&'); i >= 0 {
			pair, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		// Decoding only shortens: a key shorter than the name cannot match;
		// nor can one whose first byte is plain and not the name's (most
		// pairs of a query, at the cost of a comparison).
		if len(pair) < len(m.name) || pair[0] != m.name[0] && pair[0] != '%' && pair[0] != '+' {
			continue
		}
		key, value := pair, []byte(nil)
		if i := bytes.IndexByte(pair, '='); i >= 0 {
			key, value = pair[:i], pair[i+1:]
		}
		if !decodedEqual(key, m.name) {
			continue
		}
		if !m.hasValue || decodedEqual(value, m.value) {
			return true
		}
	}
	return false
}

// decodedEqual reports whether the percent-decoded raw equals want. An
// invalid escape ('%' without two hex digits) stands for itself.
func decodedEqual(raw []byte, want string) bool {
	j := 0
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == '+':
			c = ' '
		case c == '%' && i+2 < len(raw) && isHex(raw[i+1]) && isHex(raw[i+2]):
			c = unhex(raw[i+1])<<4 | unhex(raw[i+2])
			i += 2
		}
		if j >= len(want) || want[j] != c {
			return false
		}
		j++
	}
	return j == len(want)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
