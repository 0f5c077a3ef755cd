package rules

import "unicode/utf8"

// AppendPath appends to dst the target URL with rest (what follows the
// code in the short URL's path, still percent-encoded as the request
// carried it, with or without its leading '/') added to the target's path,
// before the target's query and fragment:
//
//	AppendPath(nil, "https://ex.com/docs?x=1", "/guide/intro") = "https://ex.com/docs/guide/intro?x=1"
//
// It is safe by construction: the scheme and host are the target's, since
// only its path grows, and no server that decodes the result, however many
// times and however leniently, reads a segment of it that climbs above the
// target's path. Each segment of rest is read as the most lenient server
// would read it: fully decoded (decodeSegment: percent-encodings over and
// over, as a server behind a decoding proxy does; IIS's %uXXXX; overlong
// UTF-8 such as %c0%ae; the Unicode look-alikes that NFKC or a best-fit
// mapping turn into '.', '/' or '\'), then cut at its first ';' (the path
// parameters Tomcat, Jetty and Spring strip before they resolve: "..;x"
// is "..") or NUL. Read so, '/' and '\' separate segments, "." is dropped
// and ".." removes the segment before it within rest, never one of the
// target's; empty segments are dropped. A segment that is none of those is
// kept as written (its percent-encodings as they are, the bytes a path may
// not hold encoded); one whose decoding holds separators is written as its
// decoded parts, each encoded once. ok is false, and dst as it was, when a
// segment is still encoded after maxDecodes decodings: no client needs
// that many, and reading on would let a request cost more than its length.
// It does not allocate beyond growing dst, but for a segment whose
// decoding holds a separator (an encoded one, encoded twice or more).
func AppendPath(dst []byte, target string, rest []byte) (out []byte, ok bool) {
	start := len(dst)
	end := pathEnd(target)
	dst = append(dst, target[:end]...)
	base := len(dst) // rest never removes a byte before here
	seen, trailing := false, false
	for len(rest) > 0 {
		seg, next, sep := nextSegment(rest)
		rest = next
		// The segment decoded, in dst's spare capacity: dst keeps its
		// length, and what is appended next overwrites it.
		at := len(dst)
		buf := append(dst, seg...)
		decoded, ok := decodeSegment(buf[at:])
		if !ok {
			return buf[:start], false
		}
		dst = buf[:at]
		if indexSep(decoded) < 0 {
			switch dotKey(decoded) {
			case 1: // "."
				seen, trailing = true, true
			case 2: // ".."
				dst = popSegment(dst, base)
				seen, trailing = true, true
			default:
				if len(decoded) > 0 {
					dst = appendSegment(addSlash(dst), seg)
					seen, trailing = true, sep && len(rest) == 0
				}
			}
			continue
		}
		// Separators only a decoding reveals: the decoded parts, each
		// resolved as a segment and encoded once (they are decoded in
		// full, so a decoding reads each back as it is here).
		parts := append([]byte(nil), decoded...)
		for len(parts) > 0 {
			i := indexSep(parts)
			part := parts
			if i >= 0 {
				part, parts = parts[:i], parts[i+1:]
			} else {
				parts = nil
			}
			switch dotKey(part) {
			case 1:
				seen, trailing = true, true
			case 2:
				dst = popSegment(dst, base)
				seen, trailing = true, true
			default:
				if len(part) > 0 {
					dst = appendEncoded(addSlash(dst), part)
					seen, trailing = true, i >= 0 && len(parts) == 0 || sep && len(rest) == 0 && i < 0
				}
			}
		}
	}
	if seen && trailing && len(dst) > 0 && dst[len(dst)-1] != '/' {
		dst = append(dst, '/')
	}
	return append(dst, target[end:]...), true
}

// addSlash appends the '/' that starts a segment, unless dst ends in one.
func addSlash(dst []byte) []byte {
	if len(dst) == 0 || dst[len(dst)-1] != '/' {
		dst = append(dst, '/')
	}
	return dst
}

// indexSep is the index of the first '/' or '\' of b, or -1.
func indexSep(b []byte) int {
	for i, c := range b {
		if c == '/' || c == '\\' {
			return i
		}
	}
	return -1
}

// dotKey is 1 when a decoded segment, cut at its first ';' or NUL, is
// ".", 2 when it is "..", 0 otherwise.
func dotKey(decoded []byte) int {
	n := 0
	for _, c := range decoded {
		if c == ';' || c == 0 {
			break
		}
		if c != '.' || n == 2 {
			return 0
		}
		n++
	}
	return n
}

// pathEnd finds the end of an absolute URL's path: the first '?' or '#'
// after "scheme://authority".
func pathEnd(target string) int {
	i := 0
	for k := 0; k+2 < len(target); k++ {
		if target[k] == ':' && target[k+1] == '/' && target[k+2] == '/' {
			i = k + 3
			break
		}
	}
	for i < len(target) && target[i] != '/' && target[i] != '?' && target[i] != '#' {
		i++
	}
	for i < len(target) && target[i] != '?' && target[i] != '#' {
		i++
	}
	return i
}

// nextSegment splits rest at its first separator: '/', '\', %2F or %5C.
// sep reports whether there was one.
func nextSegment(rest []byte) (seg, next []byte, sep bool) {
	for i := 0; i < len(rest); i++ {
		switch {
		case rest[i] == '/' || rest[i] == '\\':
			return rest[:i], rest[i+1:], true
		case rest[i] == '%' && i+2 < len(rest) && rest[i+1] == '2' && lowerASCII(rest[i+2]) == 'f',
			rest[i] == '%' && i+2 < len(rest) && rest[i+1] == '5' && lowerASCII(rest[i+2]) == 'c':
			return rest[:i], rest[i+3:], true
		}
	}
	return rest, nil, false
}

// maxDecodes is how many times decodeSegment decodes a segment at most:
// a segment still encoded after that is refused.
const maxDecodes = 4

// decodeSegment decodes seg in place until a decoding changes nothing
// (decodeOnce), at most maxDecodes times: the segment as the most lenient
// server reads it. ok is false when it is still encoded after that.
func decodeSegment(seg []byte) (decoded []byte, ok bool) {
	for range maxDecodes + 1 {
		var changed bool
		if seg, changed = decodeOnce(seg); !changed {
			return seg, true
		}
	}
	return seg, false
}

// decodeOnce decodes b in place, once, as the servers known to read paths
// leniently do, each left to right: %XX (RFC 3986); %uXXXX (IIS), as the
// UTF-8 of the code point; the overlong UTF-8 of an ASCII byte (two to four
// bytes: %c0%ae is '.', %c0%af '/', %c1%9c '\'), which old IIS and Java
// decoders took for it; and the Unicode look-alikes that NFKC or Windows'
// best-fit mapping turn into '.', '/' or '\' (unicodeAlike). Each of these
// only shortens, so it is done in place.
func decodeOnce(b []byte) (out []byte, changed bool) {
	j := 0
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == '%' && i+2 < len(b) && isHex(b[i+1]) && isHex(b[i+2]):
			b[j] = unhex(b[i+1])<<4 | unhex(b[i+2])
			i, j, changed = i+3, j+1, true
			continue
		case c == '%' && i+5 < len(b) && (b[i+1] == 'u' || b[i+1] == 'U') &&
			isHex(b[i+2]) && isHex(b[i+3]) && isHex(b[i+4]) && isHex(b[i+5]):
			r := rune(unhex(b[i+2]))<<12 | rune(unhex(b[i+3]))<<8 | rune(unhex(b[i+4]))<<4 | rune(unhex(b[i+5]))
			j += utf8.EncodeRune(b[j:], r) // at most 3 bytes for the 6 read
			i, changed = i+6, true
			continue
		case c >= 0xc0:
			if n, ascii, ok := overlongASCII(b[i:]); ok {
				b[j] = ascii
				i, j, changed = i+n, j+1, true
				continue
			}
			if n, alike := unicodeAlike(b[i:]); n > 0 {
				j += copy(b[j:], alike)
				i, changed = i+n, true
				continue
			}
		}
		b[j] = c
		i, j = i+1, j+1
	}
	return b[:j], changed
}

// overlongASCII reads an overlong UTF-8 encoding of an ASCII byte at the
// start of b (C0 or C1 and one continuation byte; E0 80-81 and one; F0 80
// 80-81 and one): its length and the byte.
func overlongASCII(b []byte) (n int, ascii byte, ok bool) {
	cont := func(c byte) bool { return c&0xc0 == 0x80 }
	switch {
	case len(b) >= 2 && (b[0] == 0xc0 || b[0] == 0xc1) && cont(b[1]):
		return 2, (b[0]&0x1f)<<6 | b[1]&0x3f, true
	case len(b) >= 3 && b[0] == 0xe0 && (b[1] == 0x80 || b[1] == 0x81) && cont(b[2]):
		return 3, (b[1]&0x3f)<<6 | b[2]&0x3f, true
	case len(b) >= 4 && b[0] == 0xf0 && b[1] == 0x80 && (b[2] == 0x80 || b[2] == 0x81) && cont(b[3]):
		return 4, (b[2]&0x3f)<<6 | b[3]&0x3f, true
	}
	return 0, 0, false
}

// unicodeAlikes are the characters that NFKC normalization or Windows'
// best-fit mapping (IIS) turn into a dot, a separator, the ';' before a
// path parameter or a '%' that starts an encoding: every character whose
// NFKC form is made of those alone (path_test.go lists them from the
// Unicode tables), and best fit's division slash.
var unicodeAlikes = [...]struct{ utf8, ascii string }{
	{"\u2024", "."},  // ONE DOT LEADER
	{"\u2025", ".."}, // TWO DOT LEADER
	{"\ufe30", ".."}, // PRESENTATION FORM FOR VERTICAL TWO DOT LEADER
	{"\ufe52", "."},  // SMALL FULL STOP
	{"\uff0e", "."},  // FULLWIDTH FULL STOP
	{"\u2215", "/"},  // DIVISION SLASH (best fit)
	{"\uff0f", "/"},  // FULLWIDTH SOLIDUS
	{"\ufe68", "\\"}, // SMALL REVERSE SOLIDUS
	{"\uff3c", "\\"}, // FULLWIDTH REVERSE SOLIDUS
	{"\u037e", ";"},  // GREEK QUESTION MARK
	{"\ufe14", ";"},  // PRESENTATION FORM FOR VERTICAL SEMICOLON
	{"\ufe54", ";"},  // SMALL SEMICOLON
	{"\uff1b", ";"},  // FULLWIDTH SEMICOLON
	{"\ufe6a", "%"},  // SMALL PERCENT SIGN
	{"\uff05", "%"},  // FULLWIDTH PERCENT SIGN
}

// unicodeAlike reads a look-alike at the start of b: its length in b and
// what it reads as; n is 0 if there is none.
func unicodeAlike(b []byte) (n int, ascii string) {
	for _, a := range unicodeAlikes {
		if len(b) >= len(a.utf8) && string(b[:len(a.utf8)]) == a.utf8 {
			return len(a.utf8), a.ascii
		}
	}
	return 0, ""
}

// appendEncoded appends a decoded segment, each byte a path may not hold
// (a '%' among them) percent-encoded.
func appendEncoded(dst, seg []byte) []byte {
	for _, c := range seg {
		if pathByte[c] {
			dst = append(dst, c)
		} else {
			dst = append(dst, '%', upperHex[c>>4], upperHex[c&15])
		}
	}
	return dst
}

// popSegment removes the last segment rest added to dst, never a byte
// before base.
func popSegment(dst []byte, base int) []byte {
	for i := len(dst) - 1; i >= base; i-- {
		if dst[i] == '/' {
			return dst[:i]
		}
	}
	return dst[:base]
}

// pathByte[c]: bytes a path segment may hold as they are (RFC 3986 pchar
// without '%', which appendSegment checks).
var pathByte = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "-._~!$&'()*+,;=:@" {
		t[c] = true
	}
	return t
}()

const upperHex = "0123456789ABCDEF"

func appendSegment(dst, seg []byte) []byte {
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		switch {
		case pathByte[c]:
			dst = append(dst, c)
		case c == '%' && i+2 < len(seg) && isHex(seg[i+1]) && isHex(seg[i+2]):
			dst = append(dst, seg[i:i+3]...)
			i += 2
		default:
			dst = append(dst, '%', upperHex[c>>4], upperHex[c&15])
		}
	}
	return dst
}
