// Package shortcode implements the linkforge short-code algorithm: URL
// canonicalization, the hash input and the Base58 code. This comment is the
// normative statement of the algorithm; the conformance vectors in
// testdata/vectors.json, computed by an independent implementation, follow it
// and the tests reproduce every one of them.
//
// A ShortLink's code is a pure function of three things: its URL, its
// namespace and a retry salt. Anyone who knows the rules below can compute a
// code offline (the linkforge code command does) and get the same answer as
// the operator. The package is pure (no I/O, no Kubernetes imports) so that
// the controller, the redirector and the CLI compute exactly the same codes.
//
// # Canonicalization
//
// Input: the spec.url string. Output: the canonical URL, or an
// [InvalidURLError] with a reason. The steps, in this order:
//
//  1. Trim leading and trailing white space ([strings.TrimSpace]). Empty
//     after trimming: invalid ("empty").
//  2. Limits. More than [MaxURLLength] (2048) bytes after trimming: invalid
//     ("too long"). Any ASCII control byte (0x00-0x1F, 0x7F) anywhere,
//     fragment included: invalid ("control character"). This is what keeps
//     CR and LF out of a Location header.
//  3. Shape. The URL must be a scheme, "://" and an authority, optionally
//     followed by a path, by "?" and a query, and by "#" and a fragment.
//     Anything else (such as "not a url",
//     "javascript:alert(1)" or "http:/x") is invalid ("not an absolute
//     URL").
//  4. Scheme, lower-cased; only http and https are accepted (otherwise
//     invalid: "scheme").
//  5. Authority. Userinfo ("user@", "user:pw@") is rejected ("userinfo"):
//     it is the classic phishing trick (https://bank.example@evil.example/).
//     The host is lower-cased; a non-ASCII host is converted to its ASCII
//     (punycode) form with IDNA (the lookup profile). A registered name may
//     then hold only a-z 0-9 . - _; an IPv6 literal keeps its brackets
//     ([2001:db8::1]). An empty or otherwise bad host is invalid ("host").
//     The port is digits only, 1-65535 (otherwise invalid: "port"), written
//     without leading zeros; ":80" on http, ":443" on https and an empty
//     port ("host:") are removed.
//  6. Path, by the path rules 6.1 to 6.5 below.
//  7. Query (everything between the first "?" and the "#"), by the query
//     rules 7.1 to 7.4 below.
//  8. The fragment is dropped.
//  9. Reconstruct: scheme "://" host [":" port] path ["?" query].
//
// Path rules:
//
//	6.1 Percent-encoding normalization: a %XX triplet that encodes an
//	    unreserved character (A-Z a-z 0-9 - . _ ~) is decoded; every other
//	    triplet keeps its encoding with upper-case hex (%2f -> %2F). A "%"
//	    that does not start a valid triplet becomes %25.
//	6.2 Every byte that may not appear in a path (anything but unreserved,
//	    !$&'()*+,;= and : @ /, and the "%" of a triplet) is percent-encoded
//	    with upper-case hex: a space becomes %20, the UTF-8 bytes of a
//	    non-ASCII character become %C3%A9 and so on.
//	6.3 Runs of slashes collapse to one (//a///b -> /a/b).
//	6.4 Dot segments are removed (RFC 3986 section 5.2.4:
//	    /a/./b/../c -> /a/c).
//	6.5 An empty path becomes "/"; a trailing slash is removed unless the
//	    path is exactly "/".
//
// Query rules:
//
//	7.1 Split on "&"; drop empty pieces.
//	7.2 Normalize each piece as in 6.1 and 6.2, where the allowed set is
//	    unreserved, !$'()*+,;= and : @ / ? (so "+" stays "+" and a space
//	    becomes %20). Pieces are not decoded and re-encoded beyond that:
//	    "a" stays "a" (no "=" is added), "a=" stays "a=".
//	7.3 The key of a piece is the text before its first "=" (the whole
//	    piece if it has none). Sort the pieces by key, byte-wise
//	    (case-sensitive); pieces with equal keys keep their original
//	    relative order (a stable sort).
//	7.4 Join with "&". If nothing is left, the canonical URL has no "?".
//
// Examples (all in the conformance vectors):
//
//	HTTP://Example.COM/path                 http://example.com/path
//	http://example.com:80/path/             http://example.com/path
//	http://example.com/path?z=1&a=2#frag    http://example.com/path?a=2&z=1
//	https://example.com:443                 https://example.com/
//	http://example.com//a///b               http://example.com/a/b
//	http://example.com/a/./b/../c/          http://example.com/a/c
//	http://example.com/%7euser/%2fx         http://example.com/~user/%2Fx
//	http://example.com/p?b=2&a=1&b=1&&a=0   http://example.com/p?a=1&a=0&b=2&b=1
//	https://bücher.example/café             https://xn--bcher-kva.example/caf%C3%A9
//	https://example.com/path?name=John Doe&email=test@example.com
//	                                        https://example.com/path?email=test@example.com&name=John%20Doe
//
// # Hash input
//
// The hash input ([HashInput]) joins the canonical URL and the name of the
// link's namespace with "|", and for salts 1 to 9 also the salt in decimal:
//
//	input = canonical + "|" + namespace                  (salt 0)
//	input = canonical + "|" + namespace + "|" + salt     (salt 1..9)
//
// # Code derivation
//
// [Code] turns a hash input into a code:
//
//  1. digest = SHA-256(input), over the UTF-8 bytes of input.
//  2. Take the first 16 bytes of digest as one unsigned 128-bit big-endian
//     integer.
//  3. Write it in base 58 with the alphabet
//     123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz (no 0, O,
//     I or l), most significant digit first.
//  4. Left-pad with "1" (the zero digit) to at least [Length] (10)
//     characters, then keep the first 10.
//
// Example: http://example.com/path in namespace ws_abc123 gives WhpJT5u5Ka at
// salt 0 and 3Rg3B7UopT at salt 1.
//
// # Salts and collisions
//
// A collision is when the code a link would take is already held, in the same
// namespace, by a link with a different target. The target of a link is its
// canonical URL plus every spec field that changes what a redirect does
// (expiry, maxUses, redirectStatus, forwardQuery); which link holds a code is
// the ownership rule of package internal/claim. On a collision the link tries
// salt 1, 2, ... up to [MaxSalt] (9): ten attempts in all ([Codes] gives the
// ten codes in salt order). If all ten are held, the link gets no code and
// reports the conflict in its status; it never takes a code that another
// target holds.
//
// Custom codes (spec.code) skip the hash entirely.
//
// # Collision odds
//
// With 10 Base58 characters the space is 58^10 ~ 4.3e17, but the leading
// digit of a 128-bit number in base 58 takes one of only about 32 values, so
// the effective space is about 2.3e17. The birthday odds of at least one
// collision among n links in one namespace are n^2 / (2 * 2.3e17): 2e-10 for
// 10,000 links, 2e-6 for a million, 2e-2 for 100 million, written as
// fractions, not percents. Tests therefore force collisions (the controller
// takes an injectable code function) instead of hoping for them.
package shortcode
