package rules

// The languages condition reads Accept-Language as RFC 9110 (section
// 12.5.4) defines it: a list of language ranges, each with an optional
// weight, "q=" and a qvalue from 0 to 1 with at most three decimals (1
// without one):
//
//   - An entry whose weight is not a valid qvalue ("q=.9", "q=0.0000",
//     "q=1.5", "q=high", a second q) is ignored, as is one whose range is
//     not a language tag (letters, digits and '-'); '_' is read as '-'
//     (de_DE is de-DE), as Java and POSIX locales write it. Other
//     parameters than q are ignored.
//   - "*" and entries with q=0 name no language a rule could match.
//   - The client accepts the entries with the highest q of its header
//     and every entry with q >= AcceptThreshold (0.9): "fr-CH, de;q=0.9"
//     accepts fr-CH and de; "en;q=0.8, de;q=0.5" accepts en alone.
//
// A rule's languages hold when one of its ranges matches an accepted
// entry by RFC 4647 basic filtering (matchesRange). Rules are tried in
// order, so a client accepting two languages goes to the first rule that
// names one of them.

// AcceptThreshold is the q, in thousandths, from which an Accept-Language
// entry is accepted even when another has a higher one: 0.9, what a
// browser gives the first language after the one a person put first
// ("de-CH,de;q=0.9,en;q=0.8"), and what Shlink matches.
const AcceptThreshold = 900

// qInvalid is the quality of an entry that is ignored.
const qInvalid = -1

// acceptFloor is the lowest q, in thousandths, that an entry of header
// needs to be accepted: the highest q of its entries that name a language,
// or AcceptThreshold if that is higher; 0 when no entry can be accepted.
func acceptFloor(header []byte) int {
	top := 0
	for len(header) > 0 {
		var q int
		_, q, header = nextLanguage(header)
		if q > top {
			top = q
			if top >= AcceptThreshold {
				return AcceptThreshold // none can be higher than what is accepted anyway
			}
		}
	}
	return top
}

// nextLanguage reads the first entry of an Accept-Language header: its
// tag (spaces trimmed) and its q in thousandths, qInvalid for an entry
// that is ignored, "*" or empty; rest is what follows its ','.
func nextLanguage(header []byte) (tag []byte, q int, rest []byte) {
	entry, rest := cut(header, ',')
	tag, params := cut(entry, ';')
	tag = trimSpace(tag)
	if !languageTag(tag) {
		return tag, qInvalid, rest
	}
	return tag, quality(params), rest
}

// languageTag reports whether tag reads as a language tag (letters,
// digits, '-' or '_'; "*" is not one).
func languageTag(tag []byte) bool {
	if len(tag) == 0 {
		return false
	}
	for _, c := range tag {
		if !tagChar(c) {
			return false
		}
	}
	return true
}

// tagChar reports whether c may be part of a language tag as clients
// write them: an ASCII letter or digit, '-' or '_'.
func tagChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// quality reads the weight of an entry's parameters, in thousandths: 1000
// without one, qInvalid for an invalid or repeated one. The name q is read
// in any case, with spaces around the parameter and its '=' ignored.
func quality(params []byte) int {
	q := 1000
	seen := false
	for len(params) > 0 {
		var p []byte
		p, params = cut(params, ';')
		name, value := cut(p, '=')
		if name = trimSpace(name); len(name) != 1 || lowerASCII(name[0]) != 'q' {
			continue
		}
		if seen {
			return qInvalid
		}
		seen = true
		if q = parseQ(trimSpace(value)); q < 0 {
			return qInvalid
		}
	}
	return q
}

// parseQ reads a qvalue in thousandths (RFC 9110: "0" [ "." 0*3DIGIT ] or
// "1" [ "." 0*3("0") ]), qInvalid if v is not one.
func parseQ(v []byte) int {
	if len(v) == 0 || v[0] != '0' && v[0] != '1' {
		return qInvalid
	}
	q := int(v[0]-'0') * 1000
	if len(v) == 1 {
		return q
	}
	if v[1] != '.' || len(v) > 5 {
		return qInvalid
	}
	scale := 100
	for _, c := range v[2:] {
		if c < '0' || c > '9' {
			return qInvalid
		}
		q += int(c-'0') * scale
		scale /= 10
	}
	if q > 1000 {
		return qInvalid
	}
	return q
}

// acceptsAnyRange reports whether an entry header accepts falls under
// one of the lower-case ranges: the reference the packed rules agree with.
func acceptsAnyRange(header []byte, ranges []string) bool {
	floor := acceptFloor(header)
	if floor <= 0 {
		return false
	}
	for rest := header; len(rest) > 0; {
		var tag []byte
		var q int
		tag, q, rest = nextLanguage(rest)
		if q < floor {
			continue
		}
		for _, r := range ranges {
			if matchesRange(tag, r) {
				return true
			}
		}
	}
	return false
}

// matchesRange reports whether tag falls under the lower-case range rng by
// RFC 4647 basic filtering: equal, or rng followed by '-' starts the tag;
// ASCII case ignored, '_' read as '-'. No tag falls under any range.
func matchesRange(tag []byte, rng string) bool {
	if len(tag) == 0 || len(tag) < len(rng) {
		return false
	}
	for i := 0; i < len(rng); i++ {
		if tagByte(tag[i]) != rng[i] {
			return false
		}
	}
	return len(tag) == len(rng) || tagByte(tag[len(rng)]) == '-'
}

// tagByte is a byte of a language tag as ranges are written: lower case,
// '_' as '-'.
func tagByte(c byte) byte {
	if c == '_' {
		return '-'
	}
	return lowerASCII(c)
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

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
