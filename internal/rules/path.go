package rules

// AppendPath appends to dst the target URL with rest (what follows the
// code in the short URL's path, still percent-encoded as the request
// carried it, with or without its leading '/') added to the target's path,
// before the target's query and fragment:
//
//	AppendPath(nil, "https://ex.com/docs?x=1", "/guide/intro") = "https://ex.com/docs/guide/intro?x=1"
//
// It is safe by construction: the scheme and host are the target's, since
// only its path grows; "." and ".." segments of rest are resolved within
// rest, so they never climb above the target's path (nor do their
// percent-encoded forms, nor '\' or an encoded '/' or '\', which count as
// '/' because some servers read them so); empty segments are dropped.
// Percent-encodings of rest are kept as written; bytes a path may not hold
// (spaces, '?', '#', non-ASCII bytes, a '%' that starts no encoding...) are
// percent-encoded. It does not allocate beyond growing dst.
func AppendPath(dst []byte, target string, rest []byte) []byte {
	end := pathEnd(target)
	dst = append(dst, target[:end]...)
	base := len(dst) // rest never removes a byte before here
	seen, trailing := false, false
	for len(rest) > 0 {
		seg, next, sep := nextSegment(rest)
		rest = next
		switch dotSegment(seg) {
		case 1: // "."
			seen, trailing = true, true
			continue
		case 2: // ".."
			dst = popSegment(dst, base)
			seen, trailing = true, true
			continue
		}
		if len(seg) == 0 {
			continue
		}
		if len(dst) == 0 || dst[len(dst)-1] != '/' {
			dst = append(dst, '/')
		}
		dst = appendSegment(dst, seg)
		seen, trailing = true, sep && len(rest) == 0
	}
	if seen && trailing && len(dst) > 0 && dst[len(dst)-1] != '/' {
		dst = append(dst, '/')
	}
	return append(dst, target[end:]...)
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

// dotSegment is 1 for ".", 2 for "..", 0 otherwise; a '.' may be written %2E.
func dotSegment(seg []byte) int {
	dots := 0
	for i := 0; i < len(seg); i++ {
		switch {
		case seg[i] == '.':
		case seg[i] == '%' && i+2 < len(seg) && seg[i+1] == '2' && lowerASCII(seg[i+2]) == 'e':
			i += 2
		default:
			return 0
		}
		dots++
		if dots > 2 {
			return 0
		}
	}
	return dots
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
