package hostpolicy

import (
	"fmt"
	"net/netip"
	"strings"
)

// AllowedHostsAnnotation on a Namespace lists the hosts its ShortLinks may
// redirect to.
const AllowedHostsAnnotation = "linkforge.io/allowed-hosts"

// maxShown is how many patterns a message lists before "and N more": a
// condition message is at most 32768 bytes.
const maxShown = 20

// Pattern is a valid entry of a list, normalized (lower case, no trailing
// dot): what messages show.
type Pattern string

// wildcardSuffix is the ".d" of a "*.d" pattern, or "".
func (p Pattern) wildcardSuffix() string {
	if strings.HasPrefix(string(p), "*.") {
		return string(p[1:])
	}
	return ""
}

// List is a parsed allow-list or deny-list.
type List struct {
	// Patterns are the valid entries, normalized, in the order written, without duplicates.
	Patterns []Pattern
	// Invalid are the entries that are not patterns (lower-cased, without
	// trailing dots, as the policy shows them); they match nothing.
	Invalid []string

	exact     map[string]Pattern // key -> pattern
	wildcards []Pattern
}

// Parse reads the value of the linkforge.io/allowed-hosts annotation:
// entries separated by commas and ASCII white space.
func Parse(value string) List {
	return FromEntries(strings.FieldsFunc(value, isSeparator))
}

func isSeparator(r rune) bool {
	switch r {
	case ',', ' ', '\t', '\n', '\r', '\f':
		return true
	}
	return false
}

// FromEntries reads a list of entries, one pattern each (a DestinationDenyList's hosts).
func FromEntries(entries []string) List {
	l := List{exact: make(map[string]Pattern, len(entries))}
	seen := make(map[Pattern]bool, len(entries))
	for _, e := range entries {
		p, ok := ParsePattern(e)
		if !ok {
			l.Invalid = append(l.Invalid, string(p))
			continue
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		l.Patterns = append(l.Patterns, p)
		if p.wildcardSuffix() != "" {
			l.wildcards = append(l.wildcards, p)
		} else if _, dup := l.exact[Key(string(p))]; !dup {
			l.exact[Key(string(p))] = p
		}
	}
	return l
}

// ParsePattern normalizes one entry and reports whether it is a pattern.
func ParsePattern(entry string) (Pattern, bool) {
	e := trimDots(lowerASCII(entry))
	switch {
	case isDottedQuad(e), isBracketedIPv6(e):
		return Pattern(e), true
	case strings.HasPrefix(e, "*."):
		return Pattern(e), isDomain(e[2:])
	}
	return Pattern(e), isDomain(e)
}

// Match returns the pattern that matches key (a [Key]), if any: an exact
// pattern before a wildcard.
func (l List) Match(key string) (Pattern, bool) {
	if p, ok := l.exact[key]; ok {
		return p, true
	}
	for _, p := range l.wildcards {
		if strings.HasSuffix(key, p.wildcardSuffix()) {
			return p, true
		}
	}
	return "", false
}

// String lists the patterns for a message ("nothing" for none), and the
// ignored entries.
func (l List) String() string {
	var b strings.Builder
	switch {
	case len(l.Patterns) == 0:
		b.WriteString("nothing")
	case len(l.Patterns) <= maxShown:
		b.WriteString(joinPatterns(l.Patterns))
	default:
		fmt.Fprintf(&b, "%s and %d more", joinPatterns(l.Patterns[:maxShown]), len(l.Patterns)-maxShown)
	}
	if n := len(l.Invalid); n > 0 {
		shown := l.Invalid[:min(n, maxShown)]
		quoted := make([]string, len(shown))
		for i, e := range shown {
			quoted[i] = fmt.Sprintf("%q", e)
		}
		fmt.Fprintf(&b, " (ignored, not host patterns: %s", strings.Join(quoted, ", "))
		if n > maxShown {
			fmt.Fprintf(&b, " and %d more", n-maxShown)
		}
		b.WriteString(")")
	}
	return b.String()
}

func joinPatterns(ps []Pattern) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = string(p)
	}
	return strings.Join(s, ", ")
}

// Changed returns the patterns that are in exactly one of a and b: the hosts
// whose decision a change from a to b may change.
func Changed(a, b List) List {
	in := func(l List, p Pattern) bool {
		for _, q := range l.Patterns {
			if q == p {
				return true
			}
		}
		return false
	}
	var out []string
	for _, p := range a.Patterns {
		if !in(b, p) {
			out = append(out, string(p))
		}
	}
	for _, p := range b.Patterns {
		if !in(a, p) {
			out = append(out, string(p))
		}
	}
	return FromEntries(out)
}

// Key is the form in which host (the host of a canonical URL: lower case,
// ASCII, no port) is compared with patterns; see the package doc.
func Key(host string) string {
	h := trimDots(host)
	if isBracketedIPv6(h) {
		a, err := netip.ParseAddr(h[1 : len(h)-1])
		switch {
		case err != nil || !a.Is6() || a.Zone() != "":
			return h
		case a.Is4In6():
			return a.Unmap().String()
		}
		return "[" + a.String() + "]"
	}
	if endsInNumber(h) {
		if a, ok := parseIPv4(h); ok {
			return a.String()
		}
	}
	return h
}

// HostOf returns the host of a canonical URL (scheme "://" host [":" port] ...).
func HostOf(canonicalURL string) string {
	_, rest, ok := strings.Cut(canonicalURL, "://")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if strings.HasPrefix(rest, "[") {
		if i := strings.IndexByte(rest, ']'); i >= 0 {
			return rest[:i+1]
		}
		return rest
	}
	if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		return rest[:i]
	}
	return rest
}

// Named is a deny-list and the name of the object it comes from.
type Named struct {
	Name string
	List List
}

// Policy is what applies to the links of one namespace.
type Policy struct {
	// Namespace is the links' namespace (for messages).
	Namespace string
	// Allow is the namespace's allow-list; nil when the namespace has no
	// linkforge.io/allowed-hosts annotation (every host is allowed).
	Allow *List
	// Deny are the cluster's deny-lists.
	Deny []Named
}

// Verdict is the decision on one destination.
type Verdict struct {
	Allowed bool
	// Message says why a destination is refused, naming the list and the
	// deciding entry; empty when allowed.
	Message string
}

// Judge decides whether a link of p.Namespace may redirect to canonicalURL (a
// canonical URL from package shortcode).
func (p Policy) Judge(canonicalURL string) Verdict {
	host := HostOf(canonicalURL)
	key := Key(host)
	// Of the lists that deny the host, the one with the smallest name is
	// named, whatever order they come in (a cache lists them in map order):
	// the verdict, and so the link's status, must not flip between them.
	denied, by, entry := false, "", Pattern("")
	for _, d := range p.Deny {
		if pat, ok := d.List.Match(key); ok && (!denied || d.Name < by) {
			denied, by, entry = true, d.Name, pat
		}
	}
	if denied {
		return Verdict{Message: fmt.Sprintf("host %s is denied in every namespace by DestinationDenyList %q (entry %s)",
			describe(host, key), by, entry)}
	}
	if p.Allow == nil {
		return Verdict{Allowed: true}
	}
	if _, ok := p.Allow.Match(key); ok {
		return Verdict{Allowed: true}
	}
	return Verdict{Message: fmt.Sprintf("host %s is not allowed in namespace %s: its %s annotation allows only %s",
		describe(host, key), p.Namespace, AllowedHostsAnnotation, p.Allow)}
}

// describe quotes host, and says what it compares as when that differs.
func describe(host, key string) string {
	if key == trimDots(host) {
		return fmt.Sprintf("%q", host)
	}
	return fmt.Sprintf("%q (the address %s)", host, key)
}

func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; 'A' <= c && c <= 'Z' {
					b[j] = c + ('a' - 'A')
				}
			}
			return string(b)
		}
	}
	return s
}

func trimDots(s string) string { return strings.TrimRight(s, ".") }

// isDomain: labels of a-z 0-9 - _ joined by single dots, the last not a number.
func isDomain(s string) bool {
	if s == "" || endsInNumber(s) {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" {
			return false
		}
		for i := 0; i < len(label); i++ {
			if !isLabelByte(label[i]) {
				return false
			}
		}
	}
	return true
}

// isDottedQuad: four decimal numbers 0-255 without leading zeros.
func isDottedQuad(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return false
	}
	for _, p := range parts {
		if p == "" || len(p) > 3 || (len(p) > 1 && p[0] == '0') || !allDigits(p) {
			return false
		}
		if n := atoi(p); n > 255 {
			return false
		}
	}
	return true
}

// isBracketedIPv6 is the lexical form of an IPv6 pattern: "[", hex digits,
// colons and dots, "]". The address is parsed only to normalize it.
func isBracketedIPv6(s string) bool {
	if len(s) < 3 || s[0] != '[' || s[len(s)-1] != ']' {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !isHexDigit(c) && c != ':' && c != '.' {
			return false
		}
	}
	return true
}

// isLabelByte: a-z 0-9 - _, what a label of a lower-case host name may hold.
func isLabelByte(c byte) bool {
	return 'a' <= c && c <= 'z' || isDigit(c) || c == '-' || c == '_'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isHexDigit(c byte) bool { return isDigit(c) || 'a' <= c && c <= 'f' }

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

func atoi(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		n = n*10 + int(s[i]-'0')
	}
	return n
}
