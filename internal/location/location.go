// Package location is the Location header of a redirect: a link's target
// as its spec writes it (trimmed, made a valid URI), never the canonical
// form its code is computed from, and the request's query appended to it
// for spec.forwardQuery. The redirector sends it; the manager, the CLI and
// the preview page quote it (internal/explain), so that what they say is
// what the redirect sends. It is pure and allocates nothing for a URL that
// needs no escaping.
package location

import (
	"strings"

	"github.com/linkforge/linkforge/internal/rules"
)

// uriByte[c] is true for the bytes a URI may hold literally (RFC 3986:
// unreserved, gen-delims, sub-delims, and '%' as the start of a
// percent-encoding).
var uriByte = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "-._~:/?#[]@!$&'()*+,;=%" {
		t[c] = true
	}
	return t
}()

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// validPct reports whether s[i] == '%' starts a percent-encoding.
func validPct(s string, i int) bool {
	return i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2])
}

// needsEscape reports whether byte i of s must be percent-encoded. hashSeen
// says whether a '#' came before it: a fragment may not hold another '#'.
func needsEscape(s string, i int, hashSeen bool) bool {
	c := s[i]
	switch {
	case !uriByte[c]:
		return true
	case c == '%':
		return !validPct(s, i)
	case c == '#':
		return hashSeen
	}
	return false
}

const upperHex = "0123456789ABCDEF"

// escapeURI percent-encodes the bytes of s that a URI may not hold: spaces,
// control bytes, non-ASCII bytes (the UTF-8 of a non-ASCII character becomes
// its %XX sequence), the ASCII characters RFC 3986 excludes (" < > \ ^ ` { | }),
// a '%' that does not start a percent-encoding, and any '#' after the first.
// Everything else, including existing percent-encodings, is kept as written.
// allowHash false treats every '#' as one to escape (for a forwarded query).
// It returns s itself when nothing needs encoding.
func escapeURI(s string, allowHash bool) string {
	hashSeen := !allowHash
	first := -1
	for i := 0; i < len(s); i++ {
		if needsEscape(s, i, hashSeen) {
			first = i
			break
		}
		if s[i] == '#' {
			hashSeen = true
		}
	}
	if first < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:first])
	for i := first; i < len(s); i++ {
		c := s[i]
		if needsEscape(s, i, hashSeen) {
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&15])
			continue
		}
		if c == '#' {
			hashSeen = true
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Of computes the Location header of a link from its spec.url (or of any
// target a link redirects to): the URL as written, trimmed, with the bytes
// a URI may not hold percent-encoded. It returns specURL itself (no copy)
// when it needs no change but trimming.
func Of(specURL string) string {
	return escapeURI(strings.TrimSpace(specURL), true)
}

// WithQuery appends a request's raw query to a target URL (spec.forwardQuery):
// after the target's own query with '&', or as a new query with '?', and
// before the target's fragment. A name both carry is sent once, with the
// request's values: the target's pairs of that name are dropped
// (rules.QueryWithout), so that a link shared with ?utm_source=newsletter
// counts as the newsletter's, not as the source its target names; a name
// the request repeats stays repeated, as the client sent it. fragAt is the
// index of the target's '#' (-1 without one) and hasQuery says whether the
// target has a '?' before it.
func WithQuery(target string, fragAt int, hasQuery bool, rawQuery string) string {
	if rawQuery == "" {
		return target
	}
	rawQuery = escapeURI(rawQuery, false)
	base, frag := target, ""
	if fragAt >= 0 {
		base, frag = target[:fragAt], target[fragAt:]
	}
	sep := "?"
	if hasQuery {
		q := strings.IndexByte(base, '?')
		if own := rules.QueryWithout(base[q+1:], rawQuery); len(own) != len(base)-q-1 {
			base = base[:q+1] + own
		}
		sep = "&"
		if last := base[len(base)-1]; last == '?' || last == '&' {
			sep = ""
		}
	}
	return base + sep + rawQuery + frag
}
