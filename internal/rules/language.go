package rules

// PreferredLanguage is the language tag an Accept-Language header prefers:
// the entry with the highest q (the first of equals), "*" and q=0 entries
// left out; nil when there is none. It returns a sub-slice of header and
// does not allocate. A malformed q counts as 1, as most servers read it.
func PreferredLanguage(header []byte) []byte {
	// What browsers send: a first entry without parameters (q=1), which
	// nothing after it beats.
	end := 0
	for end < len(header) && header[end] != ',' && header[end] != ';' {
		end++
	}
	if end == len(header) || header[end] == ',' {
		if tag := trimSpace(header[:end]); len(tag) > 1 || len(tag) == 1 && tag[0] != '*' {
			return tag
		}
	}
	var best []byte
	bestQ := -1
	for len(header) > 0 {
		var entry []byte
		entry, header = cut(header, ',')
		tag, params := cut(entry, ';')
		tag = trimSpace(tag)
		if len(tag) == 0 || len(tag) == 1 && tag[0] == '*' {
			continue
		}
		if q := quality(params); q > bestQ {
			best, bestQ = tag, q
			if q == 1000 {
				break // nothing later wins over a first q=1, which browsers send first
			}
		}
	}
	if bestQ <= 0 {
		return nil
	}
	return best
}

// quality reads q from an entry's parameters, in thousandths (RFC 9110: at
// most three decimals).
func quality(params []byte) int {
	for len(params) > 0 {
		var p []byte
		p, params = cut(params, ';')
		p = trimSpace(p)
		if len(p) < 2 || lowerASCII(p[0]) != 'q' || p[1] != '=' {
			continue
		}
		return parseQ(trimSpace(p[2:]))
	}
	return 1000
}

func parseQ(v []byte) int {
	if len(v) == 0 || v[0] != '0' && v[0] != '1' {
		return 1000
	}
	q := int(v[0]-'0') * 1000
	if len(v) == 1 {
		return q
	}
	if v[1] != '.' {
		return 1000
	}
	scale := 100
	for _, c := range v[2:] {
		if c < '0' || c > '9' || scale == 0 {
			return 1000
		}
		q += int(c-'0') * scale
		scale /= 10
	}
	return min(q, 1000)
}

// matchesAnyRange reports whether tag falls under one of the lower-case
// ranges (matchesRange).
func matchesAnyRange(tag []byte, ranges []string) bool {
	for _, r := range ranges {
		if matchesRange(tag, r) {
			return true
		}
	}
	return false
}

// matchesRange reports whether tag falls under the lower-case range rng by
// RFC 4647 basic filtering: equal, or rng followed by '-' starts the tag;
// ASCII case ignored. No tag falls under any range.
func matchesRange(tag []byte, rng string) bool {
	return len(tag) > 0 && hasPrefixFold(tag, rng) && (len(tag) == len(rng) || tag[len(rng)] == '-')
}

// validRange: 1-8 letters, then '-' and 1-8 letters or digits, repeated.
func validRange(r string) bool {
	n := 0
	first := true
	for i := 0; i < len(r); i++ {
		c := r[i]
		switch {
		case c == '-':
			if n == 0 {
				return false
			}
			n, first = 0, false
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || !first && '0' <= c && c <= '9':
			n++
			if n > 8 {
				return false
			}
		default:
			return false
		}
	}
	return n > 0
}

// cut splits s at the first sep.
func cut(s []byte, sep byte) (before, after []byte) {
	for i, c := range s {
		if c == sep {
			return s[:i], s[i+1:]
		}
	}
	return s, nil
}

// hasPrefixFold reports whether s starts with the lower-case ASCII prefix.
func hasPrefixFold(s []byte, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		if lowerASCII(s[i]) != prefix[i] {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
