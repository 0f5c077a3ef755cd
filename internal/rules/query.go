package rules

import (
	"bytes"
	"strings"
)

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

// QueryWithout is a target's raw query without the pairs whose names the
// request's raw query also carries (spec.forwardQuery: the request's pairs
// are added after it, so that no name is sent twice by both). Names
// compare percent-decoded, '+' as a space, as queryHolds reads them. It
// returns target itself when it keeps every pair, and allocates only when
// it drops one (or for a name over 256 bytes).
func QueryWithout(target, request string) string {
	kept, dropped := []byte(nil), false
	for rest := target; ; {
		pair := rest
		i := strings.IndexByte(rest, '&')
		if i >= 0 {
			pair = rest[:i]
		}
		if name, _, _ := strings.Cut(pair, "="); pair != "" && queryHasName(request, name) {
			if !dropped {
				kept, dropped = append(make([]byte, 0, len(target)), target[:len(target)-len(rest)]...), true
			}
		} else if dropped {
			kept = append(kept, pair...)
			kept = append(kept, '&')
		}
		if i < 0 {
			break
		}
		rest = rest[i+1:]
	}
	if !dropped {
		return target
	}
	return strings.TrimSuffix(string(kept), "&")
}

// queryHasName reports whether a raw query has a pair (not an empty one)
// whose decoded name is rawName's, decoded.
func queryHasName(query, rawName string) bool {
	var buf [256]byte
	name := appendDecoded(buf[:0], rawName)
	for len(query) > 0 {
		pair := query
		if i := strings.IndexByte(query, '&'); i >= 0 {
			pair, query = query[:i], query[i+1:]
		} else {
			query = ""
		}
		key, _, _ := strings.Cut(pair, "=")
		if pair != "" && len(key) >= len(name) && decodedEqual(key, name) {
			return true
		}
	}
	return false
}

// appendDecoded appends raw percent-decoded (decodeAt).
func appendDecoded(dst []byte, raw string) []byte {
	for i := 0; i < len(raw); {
		var c byte
		c, i = decodeAt(raw, i)
		dst = append(dst, c)
	}
	return dst
}

// decodedEqual reports whether raw, percent-decoded (decodeAt), equals want.
func decodedEqual[R, S string | []byte](raw R, want S) bool {
	j := 0
	for i := 0; i < len(raw); {
		var c byte
		c, i = decodeAt(raw, i)
		if j >= len(want) || want[j] != c {
			return false
		}
		j++
	}
	return j == len(want)
}

// decodeAt decodes the byte of a query component at raw[i]: '+' is a
// space, %XX the byte it encodes, and an invalid escape ('%' without two
// hex digits) stands for itself; next is where the next one starts.
func decodeAt[R string | []byte](raw R, i int) (c byte, next int) {
	switch c = raw[i]; {
	case c == '+':
		return ' ', i + 1
	case c == '%' && i+2 < len(raw) && isHex(raw[i+1]) && isHex(raw[i+2]):
		return unhex(raw[i+1])<<4 | unhex(raw[i+2]), i + 3
	}
	return c, i + 1
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
