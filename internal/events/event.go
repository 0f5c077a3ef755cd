package events

import (
	"crypto/rand"
	"encoding/binary"
	"hash/maphash"
	"net/netip"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/linkforge/linkforge/internal/agent"
)

// EventType is the type of a click event: the CloudEvents type attribute
// and the OpenTelemetry log record's event name. Its version changes when a
// field changes meaning or goes away; new fields may be added within a
// version.
const EventType = "io.linkforge.click.v1"

// Device classes of a User-Agent: agent.Form's names.
const (
	DeviceDesktop = "desktop"
	DeviceMobile  = "mobile"
	DeviceTablet  = "tablet"
	DeviceUnknown = "unknown"
)

// Event is a click event as the sinks send it, built by the batcher from a
// Record. Its JSON form is the CloudEvent's data (docs/events.md,
// docs/events.schema.json).
type Event struct {
	// ID is unique per event (a UUID) and the same on every delivery
	// attempt: receivers deduplicate on it.
	ID   string    `json:"-"`
	Time time.Time `json:"-"`

	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	UID       string `json:"uid,omitempty"`
	Code      string `json:"code"`
	// Orphan: no link holds the code.
	Orphan bool `json:"orphan"`
	// Gated says that the link is gated (spec.access), and Gate whether
	// the click passed its gate (gatePassed: true or false). The event of
	// a link without a gate, or of an orphan, has neither (Gated false,
	// Gate GateNone): it is no longer than before gates. No event has the
	// password or its hash. (Beside Orphan and plain, in the padding of
	// their word: the Event stays 224 bytes.)
	Gated bool `json:"gated,omitempty"`
	Gate  Gate `json:"gatePassed,omitzero"`
	// plain says which strings the record said were Plain: the
	// encoders write them without a look.
	plain       plainStrings
	Target      string `json:"target,omitempty"`
	Rule        int    `json:"rule"`
	Variant     int    `json:"variant"`
	Status      int    `json:"status"`
	RefererHost string `json:"refererHost,omitempty"`
	Bot         bool   `json:"bot"`
	Device      string `json:"device"`
	Country     string `json:"country,omitempty"`
	// ClientAddress is the client's network (ReduceClientAddress: IPv4
	// /24, IPv6 /32, an IPv6 address that carries an IPv4 address as that
	// one) unless the pipeline keeps it whole.
	ClientAddress string `json:"clientAddress,omitempty"`
}

// plainStrings are the strings of an Event known to be Plain.
type plainStrings uint8

const (
	// plainLink: Namespace, Name, UID and Code (Record.LinkPlain) of a
	// link's event: its Namespace and Name are set.
	plainLink plainStrings = 1 << iota
	// plainTarget: Target (Record.TargetPlain).
	plainTarget
)

// Plain reports whether s is written in an event's JSON as it is: only
// ASCII from '!' to DEL, none of the characters JSON escapes (" \)
// nor those encoding/json escapes for HTML (< > &). Trimmed of spaces (as
// the SDK trims the subject) it is the same. A caller that checks its
// strings with it once (a link's, when it reads the link) says so in a
// Record (LinkPlain, TargetPlain), and the encoders do not check them per
// event.
func Plain(s string) bool {
	for i := range len(s) {
		if c := s[i]; c >= utf8.RuneSelf || c == ' ' || !jsonPlain[c] {
			return false
		}
	}
	return true
}

// Subject is the CloudEvents subject: the link's namespace/name, or the code
// of an orphan.
func (e *Event) Subject() string {
	if e.Orphan {
		return e.Code
	}
	return e.Namespace + "/" + e.Name
}

// idSource makes event ids: UUIDv8 (RFC 9562) of a random 64-bit prefix per
// pipeline and a counter, unique without a random read per event. It keeps
// the text of the last id and counts in it: an id is one increment of a
// hex digit (rarely a carry) and a copy, where writing the counter's 16
// hex digits cost ten times as much. One goroutine uses it (the batcher's
// builder).
type idSource struct {
	// text is the last id: the prefix's 19 characters (its version set),
	// then the counter's 17 (its variant set, a '-' after its fourth).
	text [uuidLen]byte
}

func newIDSource() *idSource {
	var prefix [8]byte
	_, _ = rand.Read(prefix[:])
	prefix[6] = prefix[6]&0x0f | 0x80 // version 8
	s := &idSource{}
	head := appendHex(appendHex(appendHex(s.text[:0], prefix[:4], '-'), prefix[4:6], '-'), prefix[6:8], '-')
	appendCounter(head, 0)
	return s
}

func (s *idSource) next() string {
	var b [uuidLen]byte
	return string(s.appendNext(b[:0]))
}

// uuidLen is the length of a UUID's text; idCounterStart is where an
// id's counter starts in it.
const (
	uuidLen        = 36
	idCounterStart = 19
)

// appendCounter appends the text of counter n of an id (its last 17
// characters): its 64 bits big-endian with the top two replaced by the
// variant (RFC 9562), in hex, a '-' after the fourth digit.
func appendCounter(dst []byte, n uint64) []byte {
	var tail [8]byte
	binary.BigEndian.PutUint64(tail[:], n)
	tail[0] = tail[0]&0x3f | 0x80 // variant RFC 9562
	return appendHex(appendHex(dst, tail[:2], '-'), tail[2:], 0)
}

// appendNext appends the next id's text to dst (the text of
// uuid.UUID.String, without its allocation): the counter's text plus
// one, as appendCounter writes the counter plus one.
func (s *idSource) appendNext(dst []byte) []byte {
	t := &s.text
	for i := uuidLen - 1; i >= idCounterStart; i-- {
		switch c := t[i]; {
		case c == '-':
			continue
		case c == 'f':
			t[i] = '0' // and carry
			continue
		case c == '9':
			t[i] = 'a'
		case i == idCounterStart && c == 'b':
			t[i] = '8' // the variant's digit (10xx): its two bits wrap
		default:
			t[i] = c + 1
		}
		break
	}
	n := len(dst)
	dst = slices.Grow(dst, uuidLen)[:n+uuidLen]
	*(*[uuidLen]byte)(dst[n:]) = *t // a copy of a known size: no call
	return dst
}

// appendHex appends b in lower-case hex, then sep unless it is 0.
func appendHex(dst, b []byte, sep byte) []byte {
	const hexDigits = "0123456789abcdef"
	for _, c := range b {
		dst = append(dst, hexDigits[c>>4], hexDigits[c&0x0f])
	}
	if sep != 0 {
		dst = append(dst, sep)
	}
	return dst
}

// builder makes the events of Records, on the batcher's goroutine only.
type builder struct {
	ids        *idSource
	keepClient bool
	// classes remembers the class of the User-Agents seen last, by a hash
	// of their bytes: most clicks come from a few browsers' agents, and
	// hashing one costs a tenth of classifying it.
	seed    maphash.Seed
	classes [uaClassSlots]uaClass
}

// uaClassSlots is how many User-Agent classes a builder remembers.
const uaClassSlots = 1024

type uaClass struct {
	hash   uint64 // of the User-Agent's bytes; 0: empty slot
	bot    bool
	device string
}

func newBuilder(keepClient bool) *builder {
	return &builder{ids: newIDSource(), keepClient: keepClient, seed: maphash.MakeSeed()}
}

// build makes e the event of rec, with the next id. The strings it makes
// (id, code, Referer host, country, client address) are appended to text
// and point into it (the batch's: see batch), and it returns text.
func (b *builder) build(e *Event, rec *Record, text []byte) []byte {
	start := len(text)
	text = b.ids.appendNext(text)
	idEnd := len(text)
	text = append(text, rec.code[:rec.codeLen]...)
	codeEnd := len(text)
	host := refererHost(rec.referer[:rec.refererLen], !rec.refererCut())
	text = append(text, host...)
	lowerASCII(text[len(text)-len(host):])
	hostEnd := len(text)
	text = rec.appendCountry(text)
	countryEnd := len(text)
	text = b.appendClient(text, rec.Client)
	// After the appends: one that moved text to a larger array left the
	// strings of the events before this one in the old array, which
	// they keep alive.
	s := text[start:]
	str := unsafe.String(unsafe.SliceData(s), len(s)) // never empty: the id
	idEnd, codeEnd, hostEnd, countryEnd = idEnd-start, codeEnd-start, hostEnd-start, countryEnd-start
	bot, device := b.classify(rec.userAgent[:rec.uaLen])
	gate := rec.Gate()
	var plain plainStrings
	if rec.LinkPlain && rec.Namespace != "" && rec.Name != "" { // a link's
		plain |= plainLink
	}
	if rec.TargetPlain {
		plain |= plainTarget
	}
	*e = Event{
		ID:            str[:idEnd],
		Time:          time.Unix(0, rec.Time).UTC(),
		Namespace:     rec.Namespace,
		Name:          rec.Name,
		UID:           rec.UID,
		Code:          str[idEnd:codeEnd],
		Orphan:        rec.Name == "",
		Gated:         gate != GateNone,
		Gate:          gate,
		plain:         plain,
		Target:        rec.Target,
		Rule:          max(int(rec.Rule), NoRule),
		Variant:       max(int(rec.Variant), NoVariant),
		Status:        int(rec.Status),
		RefererHost:   str[codeEnd:hostEnd],
		Bot:           bot,
		Device:        device,
		Country:       str[hostEnd:countryEnd],
		ClientAddress: str[countryEnd:],
	}
	return text
}

// appendClient appends the client's address as the event has it
// (ReduceClientAddress unless kept), if there is one. An IPv4 address, the
// most common, is written here at a tenth of the cost of netip's AppendTo:
// each octet's text and its dot in one store of four bytes (octetText),
// which the next overwrites past the text's end.
func (b *builder) appendClient(text []byte, a netip.Addr) []byte {
	if b.keepClient {
		a = a.Unmap().WithZone("")
	} else {
		a = ReduceClientAddress(a)
	}
	if a.Is4() {
		ip := a.As4()
		n := len(text)
		text = slices.Grow(text, 16+4)
		w := (*[16 + 4]byte)(text[n : n+16+4])
		end := 0
		for _, o := range ip {
			end &= 15 // at most 12: no bounds check below
			*(*[4]byte)(w[end : end+4]) = octetText[o].text
			end += int(octetText[o].len)
		}
		return text[:n+end-1] // without the last dot
	}
	if !a.IsValid() {
		return text
	}
	return a.AppendTo(text)
}

// octetText is the decimal text of each byte value and a dot, in four
// bytes (what follows the dot is not its), and its length.
var octetText = func() (t [256]struct {
	text [4]byte
	len  uint8
}) {
	for o := range t {
		s := strconv.Itoa(o) + "."
		copy(t[o].text[:], s)
		t[o].len = uint8(len(s))
	}
	return t
}()

// lowerASCII lower-cases the ASCII letters of b in place.
func lowerASCII(b []byte) {
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
}

// classify is classify(ua), remembered.
func (b *builder) classify(ua []byte) (bool, string) {
	h := maphash.Bytes(b.seed, ua) | 1 // never 0, the empty slot
	c := &b.classes[h%uaClassSlots]
	if c.hash != h {
		c.bot, c.device = classify(ua)
		c.hash = h
	}
	return c.bot, c.device
}

// classify reads a User-Agent's class (agent.Classify, the product's one
// classifier of clients): whether no person drives the client (a crawler,
// previewer, prefetcher, monitor or HTTP library, or an empty agent: every
// browser sends one) and the form of the device it names, the event's
// device (agent.Form's names are the Device constants).
func classify(ua []byte) (bot bool, device string) {
	a := agent.Classify(ua)
	return a.Bot(), a.Form().String()
}
