package shortcode

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

const (
	// Length is the length of a hashed short code.
	Length = 10
	// MaxSalt is the last retry salt: salts 0..MaxSalt, ten attempts in all.
	MaxSalt = 9
	// MaxURLLength is the longest accepted URL in bytes, after trimming.
	MaxURLLength = 2048
)

// Reasons of an InvalidURLError, exactly as in the conformance vectors.
const (
	ReasonEmpty            = "empty"
	ReasonTooLong          = "too long"
	ReasonControlCharacter = "control character"
	ReasonNotAbsolute      = "not an absolute URL"
	ReasonScheme           = "scheme"
	ReasonUserinfo         = "userinfo"
	ReasonHost             = "host"
	ReasonPort             = "port"
)

// InvalidURLError reports why a URL cannot be canonicalized.
type InvalidURLError struct {
	URL    string // the input as given
	Reason string // short machine reason, one of the Reason* constants
	Detail string // a sentence a user can act on
}

// Error returns the reason first, then the detail. It never repeats the URL,
// which may carry credentials.
func (e *InvalidURLError) Error() string {
	return e.Reason + ": " + e.Detail
}

func invalid(raw, reason, detail string) error {
	return &InvalidURLError{URL: raw, Reason: reason, Detail: detail}
}

// charset is a byte-indexed membership table; a table lookup is cheaper than
// a switch in the per-byte loops.
type charset [256]bool

func makeCharset(extra string) *charset {
	var c charset
	for b := 'a'; b <= 'z'; b++ {
		c[b] = true
		c[b-'a'+'A'] = true
	}
	for b := '0'; b <= '9'; b++ {
		c[b] = true
	}
	for i := 0; i < len(extra); i++ {
		c[extra[i]] = true
	}
	return &c
}

var (
	// unreserved is RFC 3986 unreserved; triplets encoding these are decoded.
	unreserved = makeCharset("-._~")
	// pathAllowed: unreserved, sub-delims, ':' and '@' (path rule 6.2 of the
	// package doc).
	// '%' is absent on purpose: it is handled as a triplet or encoded.
	pathAllowed = makeCharset("-._~!$&'()*+,;=:@/")
	// queryAllowed: as the path, without '&' (the separator) and with '?'
	// (query rule 7.2 of the package doc).
	queryAllowed = makeCharset("-._~!$'()*+,;=:@/?")
	// hostAllowed: what a registered name may hold after lower-casing/IDNA.
	hostAllowed = makeCharset(".-_")
	// schemeChars: RFC 3986 scheme characters after the first letter.
	schemeChars = makeCharset("+-.")
)

const upperHex = "0123456789ABCDEF"

// stackBuf is the size of the on-stack output buffer: typical URLs fit, so
// canonicalizing an already canonical URL allocates nothing.
const stackBuf = 512

// Canonicalize returns the canonical form of raw per the Canonicalization
// section of the package doc, or an *InvalidURLError.
func Canonicalize(raw string) (string, error) {
	// 1. Trim.
	s := strings.TrimSpace(raw)
	if s == "" {
		return "", invalid(raw, ReasonEmpty, "the URL is empty; give an absolute http or https URL such as https://example.com/")
	}

	// 2. Limits. Control bytes are rejected everywhere, fragment included,
	// so that CR/LF can never reach a Location header.
	if len(s) > MaxURLLength {
		return "", invalid(raw, ReasonTooLong, fmt.Sprintf("the URL is %d bytes long; the limit is %d bytes", len(s), MaxURLLength))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			// s is raw minus leading space, so Index finds its offset in raw.
			pos := strings.Index(raw, s) + i + 1
			return "", invalid(raw, ReasonControlCharacter, fmt.Sprintf("the URL contains the control character %s at byte %d; remove it", controlName(c), pos))
		}
	}

	// 3. Shape: scheme "://" authority [path] ["?" query] ["#" fragment].
	colon := strings.IndexByte(s, ':')
	if colon <= 0 || !validScheme(s[:colon]) || !strings.HasPrefix(s[colon:], "://") {
		if colon > 0 && (strings.EqualFold(s[:colon], "http") || strings.EqualFold(s[:colon], "https")) {
			return "", invalid(raw, ReasonNotAbsolute, fmt.Sprintf(`expected "//" after %q; write e.g. https://example.com/page`, s[:colon+1]))
		}
		return "", invalid(raw, ReasonNotAbsolute, "the URL must have the form http(s)://host/path, e.g. https://example.com/page")
	}

	// 4. Scheme.
	var scheme string
	switch {
	case strings.EqualFold(s[:colon], "http"):
		scheme = "http"
	case strings.EqualFold(s[:colon], "https"):
		scheme = "https"
	default:
		return "", invalid(raw, ReasonScheme, fmt.Sprintf("scheme %q is not allowed; use http or https", s[:colon]))
	}

	rest := s[colon+3:]
	authEnd := 0 // a loop: strings.IndexAny builds its byte set on every call
	for authEnd < len(rest) && rest[authEnd] != '/' && rest[authEnd] != '?' && rest[authEnd] != '#' {
		authEnd++
	}
	authority, rest := rest[:authEnd], rest[authEnd:]
	// 8. The fragment is dropped; it may hold anything (but control bytes).
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		rest = rest[:i]
	}
	path, query := rest, ""
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		path, query = rest[:i], rest[i+1:]
	}

	var buf [stackBuf]byte
	out := append(buf[:0], scheme...)
	out = append(out, "://"...)

	// 5. Authority.
	out, err := appendAuthority(out, raw, authority, scheme)
	if err != nil {
		return "", err
	}

	// 6. Path.
	out = appendPath(out, path)

	// 7. Query.
	if query != "" {
		out = appendQuery(out, query)
	}

	// 9. Reconstructed. Returning the input when nothing changed saves the
	// only allocation of the canonical case (the comparison allocates nothing).
	if string(out) == s {
		return s, nil
	}
	return string(out), nil
}

func validScheme(s string) bool {
	if c := s[0] | 0x20; c < 'a' || c > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !schemeChars[s[i]] {
			return false
		}
	}
	return true
}

func controlName(c byte) string {
	switch c {
	case 0:
		return "NUL (0x00)"
	case '\t':
		return "TAB (0x09)"
	case '\n':
		return "LF (0x0A)"
	case '\r':
		return "CR (0x0D)"
	case 0x7f:
		return "DEL (0x7F)"
	}
	return fmt.Sprintf("0x%02X", c)
}

// appendAuthority validates the authority (Canonicalization step 5 of the
// package doc) and appends host [":" port] in canonical form.
func appendAuthority(out []byte, raw, authority, scheme string) ([]byte, error) {
	// Any '@' means userinfo: the authority ends before '/', '?' and '#', so
	// an '@' here can only be a userinfo delimiter.
	if strings.IndexByte(authority, '@') >= 0 {
		return nil, invalid(raw, ReasonUserinfo, `a user name or password before "@" is not allowed (it can disguise the real host); remove everything up to and including "@"`)
	}

	var host, port string
	if strings.HasPrefix(authority, "[") {
		end := strings.IndexByte(authority, ']')
		if end < 0 {
			return nil, invalid(raw, ReasonHost, fmt.Sprintf("host %q has no closing ']'", authority))
		}
		host, port = authority[:end+1], authority[end+1:]
		if port != "" {
			if port[0] != ':' {
				return nil, invalid(raw, ReasonHost, fmt.Sprintf(`unexpected %q after the IPv6 address %q; only ":port" may follow it`, port, host))
			}
			port = port[1:]
		}
		// netip accepts exactly the RFC 4291 text forms (embedded IPv4
		// included); zones and IPv4 in brackets are refused.
		ip, err := netip.ParseAddr(host[1 : len(host)-1])
		if err != nil || !ip.Is6() || ip.Zone() != "" {
			return nil, invalid(raw, ReasonHost, fmt.Sprintf("host %q is not a valid IPv6 address", host))
		}
		// The literal is kept as written, lower-cased (not re-compressed):
		// the algorithm only asks for lower-casing.
		for i := 0; i < len(host); i++ {
			out = append(out, lower(host[i]))
		}
	} else {
		// The last ':' starts the port, so that an unbracketed IPv6 address
		// fails as a host (with a hint) rather than as a port.
		host = authority
		if i := strings.LastIndexByte(authority, ':'); i >= 0 {
			host, port = authority[:i], authority[i+1:]
		}
		if host == "" {
			return nil, invalid(raw, ReasonHost, "the host is empty; write e.g. https://example.com/")
		}
		if !isASCII(host) {
			// idna maps invalid UTF-8 to U+FFFD without an error; refuse it.
			if !utf8.ValidString(host) {
				return nil, invalid(raw, ReasonHost, fmt.Sprintf("host %q is not valid UTF-8", host))
			}
			// UTS #46 lookup profile: maps (lower-cases, NFC, full-width
			// dots) and validates, then punycode-encodes.
			a, err := idna.Lookup.ToASCII(host)
			if err != nil {
				return nil, invalid(raw, ReasonHost, fmt.Sprintf("host %q is not a valid internationalized domain name: %v", host, err))
			}
			if a == "" {
				return nil, invalid(raw, ReasonHost, fmt.Sprintf("host %q is empty after IDNA mapping", host))
			}
			host = a
		}
		for i := 0; i < len(host); i++ {
			c := lower(host[i])
			if !hostAllowed[c] {
				hint := ""
				if c == ':' {
					hint = "; put an IPv6 address in brackets, e.g. http://[2001:db8::1]/"
				}
				return nil, invalid(raw, ReasonHost, fmt.Sprintf("host %q contains %q, which is not allowed; a host name may hold only letters, digits, '.', '-' and '_'%s", host, rune(c), hint))
			}
			out = append(out, c)
		}
	}

	return appendPort(out, raw, port, scheme)
}

// appendPort validates the port of the authority and appends ":port" unless
// it is empty or the scheme's default.
func appendPort(out []byte, raw, port, scheme string) ([]byte, error) {
	if port == "" {
		return out, nil // "host:" means the default port
	}
	for i := 0; i < len(port); i++ {
		if port[i] < '0' || port[i] > '9' {
			return nil, invalid(raw, ReasonPort, fmt.Sprintf("port %q must be digits only", port))
		}
	}
	// Leading zeros are dropped (the canonical form has none); more than
	// five significant digits is out of range without parsing.
	digits := strings.TrimLeft(port, "0")
	n := 0
	if len(digits) <= 5 {
		n, _ = strconv.Atoi(digits)
	}
	if n < 1 || n > 65535 || len(digits) > 5 {
		return nil, invalid(raw, ReasonPort, fmt.Sprintf("port %q is out of range; use 1-65535", port))
	}
	if (n == 80 && scheme == "http") || (n == 443 && scheme == "https") {
		return out, nil
	}
	out = append(out, ':')
	return strconv.AppendInt(out, int64(n), 10), nil
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
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

// appendEscaped does steps 6.1 and 6.2 in one left-to-right pass. One pass is
// equivalent to two: decoding only ever yields unreserved bytes, never a '%'
// or a hex digit that could form a new triplet with what precedes it.
func appendEscaped(out []byte, s string, allowed *charset) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%':
			if i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
				v := unhex(s[i+1])<<4 | unhex(s[i+2])
				if unreserved[v] {
					out = append(out, v)
				} else {
					out = append(out, '%', upperHex[v>>4], upperHex[v&15])
				}
				i += 2
			} else {
				out = append(out, '%', '2', '5') // a lone '%' is data
			}
		case allowed[c]:
			out = append(out, c)
		default:
			out = append(out, '%', upperHex[c>>4], upperHex[c&15])
		}
	}
	return out
}

// appendPath does step 6. It works segment by segment on the raw path: raw
// '/' are exactly the separators (an encoded %2F stays encoded), skipping
// empty segments collapses slash runs, and never writing a '/' without a
// segment after it removes the trailing slash. Dot segments are recognized
// after normalization, so %2E%2E counts as "..". For an absolute path with no
// empty segments this stack walk gives the same result as RFC 3986 5.2.4
// followed by step 6.5.
func appendPath(out []byte, path string) []byte {
	p0 := len(out)
	for path != "" {
		path = path[1:] // path is "" or starts with '/'
		seg := path
		if i := strings.IndexByte(path, '/'); i >= 0 {
			seg, path = path[:i], path[i:]
		} else {
			path = ""
		}
		if seg == "" {
			continue
		}
		segStart := len(out)
		out = append(out, '/')
		out = appendEscaped(out, seg, pathAllowed)
		switch string(out[segStart+1:]) {
		case ".":
			out = out[:segStart]
		case "..":
			out = out[:p0+max(bytes.LastIndexByte(out[p0:segStart], '/'), 0)]
		}
	}
	if len(out) == p0 {
		out = append(out, '/')
	}
	return out
}

// piece is one normalized query piece inside a buffer: [start, end), with
// its key (before the first '=') ending at keyEnd.
type piece struct{ start, end, keyEnd int }

// appendQuery does step 7: pieces are normalized straight into out; only when
// they are not already in key order are they copied aside and written back
// sorted.
func appendQuery(out []byte, query string) []byte {
	q0 := len(out)
	out = append(out, '?')
	var piecesBuf [32]piece
	pieces := piecesBuf[:0]
	sorted := true
	for query != "" {
		p := query
		if i := strings.IndexByte(query, '&'); i >= 0 {
			p, query = query[:i], query[i+1:]
		} else {
			query = ""
		}
		if p == "" {
			continue
		}
		if len(pieces) > 0 {
			out = append(out, '&')
		}
		start := len(out)
		out = appendEscaped(out, p, queryAllowed)
		keyEnd := len(out)
		if i := bytes.IndexByte(out[start:], '='); i >= 0 {
			keyEnd = start + i
		}
		pc := piece{start, len(out), keyEnd}
		if n := len(pieces); n > 0 && bytes.Compare(out[pieces[n-1].start:pieces[n-1].keyEnd], out[start:keyEnd]) > 0 {
			sorted = false
		}
		pieces = append(pieces, pc)
	}
	switch {
	case len(pieces) == 0:
		return out[:q0] // nothing left: no '?'
	case sorted:
		return out
	}
	var tmpBuf [stackBuf]byte
	tmp := append(tmpBuf[:0], out[q0:]...)
	slices.SortStableFunc(pieces, func(a, b piece) int {
		return bytes.Compare(tmp[a.start-q0:a.keyEnd-q0], tmp[b.start-q0:b.keyEnd-q0])
	})
	out = out[:q0+1]
	for i, pc := range pieces {
		if i > 0 {
			out = append(out, '&')
		}
		out = append(out, tmp[pc.start-q0:pc.end-q0]...)
	}
	return out
}
