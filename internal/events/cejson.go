package events

import (
	"bytes"
	"context"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/binding/format"
)

// encodeCloudEvent is e as a CloudEvent of source in the CloudEvents
// JSON format: ceEncoder's, for one event.
func encodeCloudEvent(e *Event, source string) []byte {
	return newCEEncoder(source).appendEvent(nil, e)
}

// ceEncoder writes events as CloudEvents of one source in the CloudEvents
// JSON format: the attributes in the order the SDK's event.Event writes
// them, then data as encoding/json writes the Event. It is what
// CloudEvent(e, source).MarshalJSON() gives, read back the same by any
// JSON reader (TestCloudEventEncodingMatchesSDK, FuzzCloudEventEncoding),
// without its cost: the SDK's event holds the data as bytes that
// encoding/json made, and writing a batch of them cost ten times the rest
// of the sink. It keeps what repeats from event to event: the attributes
// that are the same for all, and the text of the last second.
type ceEncoder struct {
	// sourceAndType are the attributes after the id, written once.
	sourceAndType string
	time          timeText
}

// newCEEncoder returns the encoder of source, in the form the SDK writes
// it (sourceAttribute).
func newCEEncoder(source string) *ceEncoder {
	b := appendJSONChars([]byte(`","source":"`), source)
	b = append(b, `","type":"`+EventType+`"`...)
	return &ceEncoder{sourceAndType: string(b)}
}

// appendEvent appends e as a CloudEvent.
func (c *ceEncoder) appendEvent(dst []byte, e *Event) []byte {
	// The id, time, device, country and client address are the builder's,
	// of characters JSON writes as they are: appended without a look.
	// The constant pieces are of at most 16 bytes, which the compiler
	// stores without a call (longer ones call memmove: split).
	dst = append(dst, `{"specversion":"`...)
	dst = append(dst, `1.0","id":"`...)
	dst = append(dst, e.ID...)
	dst = append(dst, c.sourceAndType...)
	// The subject as the SDK's SetSubject keeps it: without the spaces
	// around it, none when empty.
	if e.Orphan {
		if code := strings.TrimSpace(e.Code); code != "" {
			dst = append(dst, `,"subject":"`...)
			dst = appendJSONChars(dst, code)
			dst = append(dst, '"')
		}
	}
	var ns, name span // of the subject, where data can copy them
	switch {
	case e.Orphan:
	case e.plain&plainLink != 0:
		// Checked once per link: no spaces to trim, nothing to escape.
		dst = append(dst, `,"subject":"`...)
		dst = append(dst, e.Namespace...)
		dst = append(dst, '/')
		dst = append(dst, e.Name...)
		dst = append(dst, '"')
	default:
		dst = append(dst, `,"subject":"`...)
		trimmed := strings.TrimLeftFunc(e.Namespace, unicode.IsSpace)
		ns.start = len(dst)
		dst = appendJSONChars(dst, trimmed)
		if len(trimmed) == len(e.Namespace) {
			ns.end = len(dst)
		}
		dst = append(dst, '/')
		trimmed = strings.TrimRightFunc(e.Name, unicode.IsSpace)
		name.start = len(dst)
		dst = appendJSONChars(dst, trimmed)
		if len(trimmed) == len(e.Name) {
			name.end = len(dst)
		}
		dst = append(dst, '"')
	}
	dst = append(dst, `,"datacontenttyp`...)
	dst = append(dst, `e":"application/`...)
	dst = append(dst, `json","time":"`...)
	dst = c.time.append(dst, e.Time)
	dst = append(dst, `","data":`...)
	dst = appendEventData(dst, e, ns, name)
	return append(dst, '}')
}

// span is where a string's escaped bytes are in an encoding; none when
// end is 0.
type span struct{ start, end int }

// appendEventData appends e's JSON, as encoding/json writes the Event
// (its fields in order, omitempty honoured). ns and name say where dst
// holds the namespace and the name escaped already, if it does.
func appendEventData(dst []byte, e *Event, ns, name span) []byte {
	// Each key written at its place, a constant the compiler stores.
	link, target := e.plain&plainLink != 0, e.plain&plainTarget != 0
	dst = append(dst, '{')
	if link { // a link's, checked once: ns, name, uid and code are set
		dst = append(dst, `"namespace":"`...)
		dst = append(dst, e.Namespace...)
		dst = append(dst, `","name":"`...)
		dst = append(dst, e.Name...)
		if e.UID != "" {
			dst = append(dst, `","uid":"`...)
			dst = append(dst, e.UID...)
		}
		dst = append(dst, `","code":"`...)
		dst = append(dst, e.Code...)
	} else {
		if e.Namespace != "" {
			dst = append(dst, `"namespace":"`...)
			dst = appendEscapedAt(dst, e.Namespace, ns)
			dst = append(dst, `",`...)
		}
		if e.Name != "" {
			dst = append(dst, `"name":"`...)
			dst = appendEscapedAt(dst, e.Name, name)
			dst = append(dst, `",`...)
		}
		if e.UID != "" {
			dst = append(dst, `"uid":"`...)
			dst = appendJSONChars(dst, e.UID)
			dst = append(dst, `",`...)
		}
		dst = append(dst, `"code":"`...)
		dst = appendJSONChars(dst, e.Code)
	}
	if e.Orphan {
		dst = append(dst, `","orphan":true`...)
	} else {
		dst = append(dst, `","orphan":false`...)
	}
	if e.Gated || e.Gate != GateNone { // a gated link's click
		dst = appendGate(dst, e)
	}
	if e.Target != "" {
		dst = append(dst, `,"target":"`...)
		dst = appendValue(dst, e.Target, target)
		dst = append(dst, '"')
	}
	if e.Rule == NoRule && e.Variant == NoVariant { // most clicks
		dst = append(dst, `,"rule":-1,"vari`...)
		dst = append(dst, `ant":-1,"status"`...)
	} else {
		dst = append(dst, `,"rule":`...)
		dst = appendInt(dst, e.Rule)
		dst = append(dst, `,"variant":`...)
		dst = appendInt(dst, e.Variant)
		dst = append(dst, `,"status"`...)
	}
	if st := e.Status; 100 <= st && st < 1000 { // an HTTP status
		r := 2 * (st % 100)
		dst = append(dst, ':', byte('0'+st/100), digitPairs[r], digitPairs[r+1])
	} else {
		dst = append(dst, ':')
		dst = appendInt(dst, st)
	}
	if e.RefererHost != "" {
		dst = append(dst, `,"refererHost":"`...)
		dst = appendJSONChars(dst, e.RefererHost)
		dst = append(dst, '"')
	}
	if e.Bot {
		dst = append(dst, `,"bot":true`...)
	} else {
		dst = append(dst, `,"bot":false`...)
	}
	dst = append(dst, `,"device":"`...)
	dst = append(dst, e.Device...)
	dst = append(dst, '"')
	if e.Country != "" {
		dst = append(dst, `,"country":"`...)
		dst = append(dst, e.Country...)
		dst = append(dst, '"')
	}
	if e.ClientAddress != "" {
		dst = append(dst, `,"clientAddress"`...)
		dst = append(dst, `:"`...)
		dst = append(dst, e.ClientAddress...)
		dst = append(dst, '"')
	}
	return append(dst, '}')
}

// appendGate appends gated and gatePassed as encoding/json writes them:
// gated when true, gatePassed unless GateNone (Gate.MarshalJSON).
func appendGate(dst []byte, e *Event) []byte {
	if e.Gated {
		dst = append(dst, `,"gated":true`...)
	}
	switch e.Gate {
	case GateNone:
	case GatePassed:
		dst = append(dst, `,"gatePassed":`...)
		dst = append(dst, `true`...)
	default:
		dst = append(dst, `,"gatePassed":`...)
		dst = append(dst, `false`...)
	}
	return dst
}

// appendValue appends a string's value: as it is when plain (the record
// said it is Plain), else escaped.
func appendValue(dst []byte, value string, plain bool) []byte {
	if plain {
		return append(dst, value...)
	}
	return appendJSONChars(dst, value)
}

// appendEscapedAt appends value escaped, or a copy of the bytes of dst
// at escaped when that is set (value escaped before).
func appendEscapedAt(dst []byte, value string, escaped span) []byte {
	if escaped.end > 0 {
		return append(dst, dst[escaped.start:escaped.end]...)
	}
	return appendJSONChars(dst, value)
}

// appendInt appends n in decimal: the numbers of an event (a rule's or
// variant's index, -1, an HTTP status) without a loop.
func appendInt(dst []byte, n int) []byte {
	switch {
	case 0 <= n && n < 10:
		return append(dst, byte('0'+n))
	case n == -1:
		return append(dst, '-', '1')
	case 100 <= n && n < 1000:
		r := 2 * (n % 100)
		return append(dst, byte('0'+n/100), digitPairs[r], digitPairs[r+1])
	}
	return strconv.AppendInt(dst, int64(n), 10)
}

// appendJSONChars appends s's characters as a JSON string's (no quotes),
// escaped as encoding/json escapes them: quote, backslash and control
// characters; <, > and & (safe in HTML); U+2028 and U+2029 (safe in
// JavaScript); and each byte that is not UTF-8 as U+FFFD, so that the
// result is always valid JSON (an orphan's code is the request's bytes).
func appendJSONChars(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(s); {
		// Eight plain bytes at a time: most strings are all plain.
		for i+8 <= len(s) && plain8(load64(s, i)) {
			i += 8
		}
		// Fewer than eight left: the last eight bytes of s hold them.
		if i+8 > len(s) && len(s) >= 8 && plain8(load64(s, len(s)-8)) {
			i = len(s)
		}
		if i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonPlain[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(dst, s[start:]...)
}

// load64 is the eight bytes of s at i, little-endian (one load).
func load64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// appendRFC3339Nano appends t in UTC as time.RFC3339Nano formats it (the
// fraction without its trailing zeros, none when whole), at a fifth of
// the cost of t.AppendFormat.
func appendRFC3339Nano(dst []byte, t time.Time) []byte {
	var c timeText
	return c.append(dst, t)
}

// timeText appends times as appendRFC3339Nano, remembering the text of
// the last second it wrote: the events of a batch mostly share theirs, and
// its date and clock cost more to write than the rest.
type timeText struct {
	unix  int64 // the second of text, when set
	set   bool
	text  [len("2006-01-02T15:04:05")]byte
	valid bool // text is a four-digit year's
}

func (c *timeText) append(dst []byte, t time.Time) []byte {
	if unix := t.Unix(); !c.set || unix != c.unix {
		c.unix, c.set = unix, true
		c.valid = appendRFC3339Seconds(c.text[:0], t.UTC()) != nil
	}
	if !c.valid {
		return t.UTC().AppendFormat(dst, time.RFC3339Nano) // what it makes of those
	}
	// Written in place, in room made once: copies of known sizes and
	// digits two at a time, no call.
	n := len(dst)
	dst = slices.Grow(dst, len(c.text)+len(".999999999Z"))[:n+len(c.text)]
	*(*[len(c.text)]byte)(dst[n:]) = c.text
	if ns := uint32(t.Nanosecond()); ns != 0 {
		var f [len(".999999999")]byte
		hi, lo := ns/100_000, ns%100_000 // 4 digits, 5 digits
		f[0], f[1], f[2], f[3], f[4] = '.', digitPairs[2*(hi/100)], digitPairs[2*(hi/100)+1], digitPairs[2*(hi%100)], digitPairs[2*(hi%100)+1]
		mid := lo / 10
		f[5], f[6], f[7], f[8], f[9] = digitPairs[2*(mid/100)], digitPairs[2*(mid/100)+1], digitPairs[2*(mid%100)], digitPairs[2*(mid%100)+1], byte('0'+lo%10)
		width := len(f)
		for f[width-1] == '0' { // ns > 0: a digit is not 0
			width--
		}
		n = len(dst)
		dst = dst[:n+len(f)]
		*(*[len(f)]byte)(dst[n:]) = f
		dst = dst[:n+width]
	}
	return append(dst, 'Z')
}

// digitPairs are the two-digit numbers' digits, 00 to 99.
const digitPairs = "00010203040506070809" + "10111213141516171819" + "20212223242526272829" +
	"30313233343536373839" + "40414243444546474849" + "50515253545556575859" +
	"60616263646566676869" + "70717273747576777879" + "80818283848586878889" + "90919293949596979899"

// appendRFC3339Seconds appends t (in UTC) to its second,
// "2006-01-02T15:04:05"; nil when its year is not of four digits.
func appendRFC3339Seconds(dst []byte, t time.Time) []byte {
	year, month, day := t.Date()
	hour, minute, sec := t.Clock()
	if year < 0 || year > 9999 {
		return nil
	}
	dst = appendDigits(dst, year, 4)
	dst = append(dst, '-')
	dst = appendDigits(dst, int(month), 2)
	dst = append(dst, '-')
	dst = appendDigits(dst, day, 2)
	dst = append(dst, 'T')
	dst = appendDigits(dst, hour, 2)
	dst = append(dst, ':')
	dst = appendDigits(dst, minute, 2)
	dst = append(dst, ':')
	return appendDigits(dst, sec, 2)
}

// appendDigits appends n in width decimal digits, zeros first.
func appendDigits(dst []byte, n, width int) []byte {
	var b [9]byte
	for i := width - 1; i >= 0; i-- {
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return append(dst, b[:width]...)
}

// plain8 says whether the eight bytes of w are all plain ASCII for
// appendJSONChars: none at or above 0x80, below ' ', or one of "\<>&.
// Small enough to be inlined in appendJSONChars's loop.
func plain8(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	// (x-ones)&^x has a byte's high bit set where that byte of x is 0,
	// and only if one is (the classic test, exact for whether any is).
	// '<' and '>' differ in bit 1 alone, '"' and '&' in bit 2: a byte
	// with that bit set is 0 after one xor where it was either.
	angle := (w | ones*2) ^ (ones * '>')
	quoteAmp := (w | ones*4) ^ (ones * '&')
	backslash := w ^ (ones * '\\')
	return (w|(w-ones*' ')&^w|(angle-ones)&^angle|(quoteAmp-ones)&^quoteAmp|(backslash-ones)&^backslash)&highs == 0
}

// jsonPlain says which ASCII bytes appendJSONChars writes as they are.
var jsonPlain = func() (plain [utf8.RuneSelf]bool) {
	for c := byte(' '); c < utf8.RuneSelf; c++ {
		plain[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return plain
}()

// encodedMessage is a binding.Message of CloudEvents the sink encoded in
// a structured format: the SDK's HTTP binding writes it into a request
// (cehttp.WriteRequest: the format's Content-Type and the body) as it
// writes the messages of its own events.
type encodedMessage struct {
	format format.Format // format.JSONBatch or format.JSON
	body   []byte
	// reader, when set, reads body for the request (the sink's
	// requestBody); else a bytes.Reader does.
	reader io.Reader
}

var _ binding.Message = (*encodedMessage)(nil)

func (m *encodedMessage) ReadEncoding() binding.Encoding {
	if m.format == format.JSONBatch {
		return binding.EncodingBatch
	}
	return binding.EncodingStructured
}

func (m *encodedMessage) ReadStructured(ctx context.Context, w binding.StructuredWriter) error {
	r := m.reader
	if r == nil {
		r = bytes.NewReader(m.body)
	}
	return w.SetStructuredEvent(ctx, m.format, r)
}

func (*encodedMessage) ReadBinary(context.Context, binding.BinaryWriter) error {
	return binding.ErrNotBinary
}

func (*encodedMessage) Finish(error) error { return nil }
