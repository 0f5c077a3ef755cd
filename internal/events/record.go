package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
)

// NoRule is Record.Rule when no rule of the link chose the target, and
// NoVariant is Record.Variant when no variant did (no rule matched and the
// click went to spec.url, or the link has neither).
const (
	NoRule    = -1
	NoVariant = -1
)

// Sizes of a Record's copies of request bytes. The request's buffers are
// reused by the next request, so what a Record keeps of them is copied into
// arrays of a fixed size: a Record is a value with no pointer to the request.
const (
	// MaxCodeLen is the longest code kept (spec.code's limit); a longer
	// requested code (an orphan) is cut to it.
	MaxCodeLen = 64
	// MaxRefererLen is how much of a Referer is kept, its host read from
	// it off the hit path: a host that does not end within it is left out.
	MaxRefererLen = 256
	// MaxRefererHostLen is the longest Referer host: a DNS name's limit.
	MaxRefererHostLen = 253
	// MaxUserAgentLen is how much of a User-Agent is kept for classifying
	// it: all of a shorter one, else its first userAgentHead and last
	// MaxUserAgentLen-userAgentHead bytes, where browsers and bots put the
	// words the classes are read from.
	MaxUserAgentLen = 256
	userAgentHead   = 192
	countryLen      = 2
)

// Record is what the redirector hands over for one answered request: a value
// of a fixed size (no allocation to build or hand over), copied into the
// pipeline's ring by Offer.
//
// The string fields must be strings that already exist and do not change
// (the index's interned namespace, the link's name, uid, code and target):
// Offer copies their headers, not their bytes. What comes from the request
// goes through the setters, which copy the bytes.
type Record struct {
	// Time of the answer in Unix nanoseconds; Offer reads the clock when it
	// is 0.
	Time int64
	// Namespace, Name and UID of the link that answered; empty for an orphan
	// (a code no link holds).
	Namespace, Name, UID string
	// Target is the URL the link chose, without the request's query that
	// the link may forward (a query can carry personal data).
	Target string
	// Status is the HTTP status of the answer.
	Status uint16
	// Rule is the index in spec.rules of the rule that chose Target, or
	// NoRule; Variant the index in spec.variants of the variant that did,
	// or NoVariant.
	Rule, Variant int16
	// LinkPlain says that Namespace, Name, UID and the code (SetCode) of
	// a link's record are all Plain, and TargetPlain that Target is: the
	// caller checked them once per link, when it read the link, so that
	// the encoders need not look at them per event. False when unknown.
	LinkPlain, TargetPlain bool
	// Client is the client's address, reduced to its network
	// (ReduceClientAddress) when the event is built unless
	// Config.KeepClientAddress.
	Client netip.Addr

	codeLen uint8
	// bits are whether the Referer was longer than MaxRefererLen
	// (bitRefererCut) and the gate (SetGate), in the one byte the first
	// had alone: the Record has no padding, and a field more would cost
	// it 8 bytes (688 now, TestRecordSize).
	bits       recordBits
	refererLen uint16
	uaLen      uint16
	country    [countryLen]byte
	code       [MaxCodeLen]byte
	referer    [MaxRefererLen]byte
	userAgent  [MaxUserAgentLen]byte
}

// copyTo copies r into dst, of its arrays only the bytes in use: a
// request fills a few dozen of the 576 bytes they keep (none of a
// Referer or User-Agent it did not send), and the ring's slots are
// written and read in the request's time. TestRecordCopyTo fails when a
// field is added here but not there.
func (r *Record) copyTo(dst *Record) {
	dst.Time = r.Time
	dst.Namespace, dst.Name, dst.UID, dst.Target = r.Namespace, r.Name, r.UID, r.Target
	dst.Status, dst.Rule, dst.Variant = r.Status, r.Rule, r.Variant
	dst.LinkPlain, dst.TargetPlain = r.LinkPlain, r.TargetPlain
	dst.Client = r.Client
	dst.codeLen, dst.bits, dst.refererLen, dst.uaLen = r.codeLen, r.bits, r.refererLen, r.uaLen
	dst.country = r.country
	// A copy calls memmove even of nothing; many requests send no
	// Referer, some no User-Agent.
	if r.codeLen > 0 {
		copy(dst.code[:], r.code[:r.codeLen])
	}
	if r.refererLen > 0 {
		copy(dst.referer[:], r.referer[:r.refererLen])
	}
	if r.uaLen > 0 {
		copy(dst.userAgent[:], r.userAgent[:r.uaLen])
	}
}

// SetCode copies the code requested (the link's code, or an orphan's path).
func (r *Record) SetCode(code []byte) {
	r.codeLen = uint8(copy(r.code[:], code))
}

// SetCodeString is SetCode for a code held as a string.
func (r *Record) SetCodeString(code string) {
	r.codeLen = uint8(copy(r.code[:], code))
}

// Code is the code SetCode kept.
func (r *Record) Code() string { return string(r.code[:r.codeLen]) }

// SetReferer keeps the start of a Referer header: the event has its host
// (no scheme, user, port, path or query), where the click came from without
// what page. A value with no host (a relative or malformed one), or whose
// host does not end within MaxRefererLen bytes, gives none.
func (r *Record) SetReferer(referer []byte) {
	r.refererLen = 0
	r.bits &^= bitRefererCut
	if len(referer) > MaxRefererLen {
		r.bits |= bitRefererCut
	}
	if len(referer) > 0 { // most requests send none: no call to copy nothing
		r.refererLen = uint16(copy(r.referer[:], referer))
	}
}

// RefererHost is the host of the Referer SetReferer kept, as sent (the
// event lower-cases it).
func (r *Record) RefererHost() string {
	return string(refererHost(r.referer[:r.refererLen], !r.refererCut()))
}

// refererCut reports whether the Referer was longer than MaxRefererLen.
func (r *Record) refererCut() bool { return r.bits&bitRefererCut != 0 }

// refererHost returns the host of an absolute URL, or nil. When u is not
// all of the URL (complete false), a host must end within it.
func refererHost(u []byte, complete bool) []byte {
	rest := afterScheme(u)
	if rest == nil {
		return nil
	}
	auth, ended := rest, complete
	if i := bytes.IndexAny(rest, "/?#"); i >= 0 {
		auth, ended = rest[:i], true
	}
	if !ended {
		return nil
	}
	if i := bytes.LastIndexByte(auth, '@'); i >= 0 { // user info ends at the last '@'
		auth = auth[i+1:]
	}
	host := hostOf(auth)
	if len(host) == 0 || len(host) > MaxRefererHostLen || !printable(host) {
		return nil
	}
	return host
}

// afterScheme returns what follows "scheme://" in u, or nil.
func afterScheme(u []byte) []byte {
	i := bytes.IndexByte(u, ':')
	if i <= 0 || !bytes.HasPrefix(u[i:], []byte("://")) {
		return nil
	}
	for j, c := range u[:i] {
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		later := '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.' // not first
		if !letter && (j == 0 || !later) {
			return nil
		}
	}
	return u[i+3:]
}

// hostOf returns the host of an authority without its port; an IPv6
// literal keeps its brackets.
func hostOf(auth []byte) []byte {
	if len(auth) > 0 && auth[0] == '[' {
		i := bytes.IndexByte(auth, ']')
		if i < 0 {
			return nil
		}
		return auth[:i+1]
	}
	if i := bytes.IndexByte(auth, ':'); i >= 0 {
		return auth[:i]
	}
	return auth
}

// printable reports whether host has only visible ASCII, none of the bytes
// that would make it markup: a name, not garbage.
func printable(host []byte) bool {
	for _, c := range host {
		if c <= ' ' || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' {
			return false
		}
	}
	return true
}

// SetUserAgent keeps what the event's User-Agent class is read from: all of
// a User-Agent up to MaxUserAgentLen bytes, else its head and tail.
func (r *Record) SetUserAgent(ua []byte) {
	if len(ua) <= MaxUserAgentLen {
		r.uaLen = uint16(copy(r.userAgent[:], ua))
		return
	}
	copy(r.userAgent[:userAgentHead], ua)
	copy(r.userAgent[userAgentHead:], ua[len(ua)-(MaxUserAgentLen-userAgentHead):])
	r.uaLen = MaxUserAgentLen
}

// UserAgent is what SetUserAgent kept.
func (r *Record) UserAgent() string { return string(r.userAgent[:r.uaLen]) }

// SetCountry keeps a country header's value: the event has it when it is
// a two-character code (ISO 3166-1 alpha-2, or a proxy's own such as XX or
// T1), upper-cased; anything else gives none.
func (r *Record) SetCountry(v []byte) {
	r.country = [countryLen]byte{}
	if len(v) == countryLen {
		r.country = [countryLen]byte(v)
	}
}

// Country is the code SetCountry kept, or "".
func (r *Record) Country() string {
	var c [countryLen]byte
	return string(r.appendCountry(c[:0]))
}

// appendCountry appends the code SetCountry kept, upper-cased, if any.
func (r *Record) appendCountry(dst []byte) []byte {
	var c [countryLen]byte
	for i, b := range r.country {
		switch {
		case 'a' <= b && b <= 'z':
			c[i] = b - 'a' + 'A'
		case 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
			c[i] = b
		default:
			return dst
		}
	}
	return append(dst, c[:]...)
}

// Gate is what the gate of a gated link (spec.access) made of a click: the
// event says that the link is gated and whether the click passed
// (docs/events.md), and nothing else of the gate: never the password or
// its hash.
type Gate uint8

const (
	// GateNone: the link has no gate, or no link answered (an orphan).
	// The event has neither gated nor gatePassed.
	GateNone Gate = iota
	// GateNotPassed: the link is gated and the click did not pass: the
	// password form, a wrong password or one not checked (the limiter,
	// the render budget), a redirect to sign in, 403, a previewer's card,
	// and an answer before the gate (410, a link not active yet).
	GateNotPassed
	// GatePassed: the click passed the gate: the right password, or an
	// allowed user or group named by a trusted auth proxy.
	GatePassed
)

// recordBits are the bits of Record.bits.
type recordBits uint8

const (
	bitRefererCut recordBits = 1 // the Referer was longer than MaxRefererLen
	gateShift                = 1 // the gate's two bits follow
	bitsGate      recordBits = 3 << gateShift
)

// SetGate keeps what the link's gate made of the click (GateNone: no
// gate). A value past GatePassed reads as GateNotPassed.
func (r *Record) SetGate(g Gate) {
	if g > GatePassed {
		g = GateNotPassed
	}
	r.bits = r.bits&^bitsGate | recordBits(g)<<gateShift
}

// Gate is what SetGate kept.
func (r *Record) Gate() Gate { return Gate(r.bits & bitsGate >> gateShift) }

// MarshalJSON writes g as the event's gatePassed: true for GatePassed,
// else false (the event of a link without a gate, GateNone, has none:
// Event.Gate is omitted when zero).
func (g Gate) MarshalJSON() ([]byte, error) {
	if g == GatePassed {
		return []byte("true"), nil
	}
	return []byte("false"), nil
}

// UnmarshalJSON reads gatePassed: true is GatePassed, false GateNotPassed.
func (g *Gate) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil // as encoding/json reads null into a bool
	}
	var passed bool
	if err := json.Unmarshal(b, &passed); err != nil {
		return fmt.Errorf("gatePassed: %w", err)
	}
	*g = GateNotPassed
	if passed {
		*g = GatePassed
	}
	return nil
}

// SetClientIP sets Client from a net.IP (fasthttp's RemoteIP), IPv4-mapped
// IPv6 addresses as IPv4.
func (r *Record) SetClientIP(ip net.IP) {
	a, _ := netip.AddrFromSlice(ip)
	r.Client = a.Unmap()
}
