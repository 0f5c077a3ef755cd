package events

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
)

// sdkDecode reads req with the SDK's HTTP binding, as a receiver does: a
// batch or one structured event.
func sdkDecode(t testing.TB, req *http.Request) []cloudevents.Event {
	t.Helper()
	if cehttp.IsHTTPBatch(req.Header) {
		evs, err := cehttp.NewEventsFromHTTPRequest(req)
		if err != nil {
			t.Fatalf("the SDK reads no batch: %v", err)
		}
		return evs
	}
	e, err := cehttp.NewEventFromHTTPRequest(req)
	if err != nil {
		t.Fatalf("the SDK reads no event: %v", err)
	}
	return []cloudevents.Event{*e}
}

// sinkRequests are the requests the sink makes of batch, as the SDK's HTTP
// binding writes them.
func sinkRequests(t testing.TB, batch []Event, single bool) []*http.Request {
	t.Helper()
	s := newCloudEventsSink(&Config{Source: DefaultSource + "/redirector-0", CloudEvents: CloudEventsConfig{URL: "http://receiver/", Single: single}})
	encoded := s.encode(batch)
	reqs := make([]*http.Request, 0, len(encoded))
	for _, r := range encoded {
		req, err := http.NewRequest(http.MethodPost, "http://receiver/", nil)
		if err == nil {
			err = cehttp.WriteRequest(context.Background(), &r.msg, req)
		}
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, req)
	}
	return reqs
}

// sdkRequest is the request the SDK makes of the SDK's events of batch.
func sdkRequest(t testing.TB, batch []Event) *http.Request {
	t.Helper()
	ces := make([]cloudevents.Event, len(batch))
	for i := range batch {
		ce, err := CloudEvent(&batch[i], DefaultSource+"/redirector-0")
		if err != nil {
			t.Fatalf("the SDK refuses event %+v: %v", batch[i], err)
		}
		ces[i] = ce
	}
	req, err := cehttp.NewHTTPRequestFromEvents(context.Background(), "http://receiver/", ces)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// sameEvent fails unless the SDK read got as it read want: the same
// attributes, and data that decodes to the same Event. The subject is
// compared where the SDK writes the event's subject faithfully (sdkKeeps).
func sameEvent(t testing.TB, got, want *cloudevents.Event, subject string) {
	t.Helper()
	if got.SpecVersion() != want.SpecVersion() || got.ID() != want.ID() || got.Source() != want.Source() ||
		got.Type() != want.Type() || sdkKeeps(subject) && got.Subject() != want.Subject() || !got.Time().Equal(want.Time()) ||
		got.DataContentType() != want.DataContentType() || got.DataSchema() != want.DataSchema() ||
		len(got.Extensions()) != 0 || len(want.Extensions()) != 0 || got.DataBase64 != want.DataBase64 {
		t.Errorf("attributes differ:\n got %s\nwant %s", got, want)
	}
	var g, w Event
	if err := json.Unmarshal(got.Data(), &g); err != nil {
		t.Fatalf("data %q: %v", got.Data(), err)
	}
	if err := json.Unmarshal(want.Data(), &w); err != nil {
		t.Fatalf("the SDK's data %q: %v", want.Data(), err)
	}
	if g != w {
		t.Errorf("data differ:\n got %+v\nwant %+v", g, w)
	}
}

// sdkKeeps says whether the SDK's event writes s as a JSON string that
// reads back as s: it writes bytes that are not UTF-8 as they are (not
// JSON; its reader keeps them, others read U+FFFD) and loses U+2028 and
// U+2029. The sink writes JSON that reads back as encoding/json's does:
// U+FFFD for each such byte, and U+2028 and U+2029 kept.
func sdkKeeps(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsAny(s, "\u2028\u2029")
}

// encodingCases are events whose strings need every kind of escaping.
func encodingCases() []Event {
	at := time.Date(2026, 11, 26, 10, 15, 4, 123456789, time.UTC)
	link := Event{ID: "6f1b2c3d-4e5f-8a7b-8000-00000000002a", Time: at, Namespace: "team-a", Name: "docs", UID: "3f1c2a4e-8b9d-4c7e-a1f2-0e9d8c7b6a55",
		Code: "docs", Target: "https://example.com/documentation", Rule: NoRule, Variant: NoVariant, Status: 302, RefererHost: "news.example.org",
		Device: DeviceMobile, Country: "DE", ClientAddress: "198.51.100.0"}
	cases := []Event{link}
	add := func(f func(e *Event)) {
		e := link
		f(&e)
		cases = append(cases, e)
	}
	add(func(e *Event) { // an orphan: no link fields
		*e = Event{ID: e.ID, Time: at.Truncate(time.Second), Code: "wp-login.php", Orphan: true, Rule: NoRule, Variant: NoVariant, Status: 404, Bot: true, Device: DeviceUnknown, ClientAddress: "2001:db8::"}
	})
	add(func(e *Event) { e.Target = `https://example.com/a?b=<script>&c="d"\e` })
	add(func(e *Event) { e.Code, e.Orphan = "caf\u00e9/\u65e5\u672c/\U0001F600\u2028\u2029", true })
	add(func(e *Event) { e.Code, e.Orphan = "nul\x00tab\tnl\nret\rdel\x7fesc\x1b", true })
	add(func(e *Event) { e.Code, e.Orphan = "bad\xffutf8\xc3(\xe2\x82", true }) // bytes of the path that are not UTF-8
	add(func(e *Event) { e.Rule, e.Status, e.Time = 7, 307, at.Add(-123456789) })
	add(func(e *Event) { e.Target, e.RefererHost, e.Country, e.ClientAddress, e.UID = "", "", "", "", "" })
	add(func(e *Event) { e.Time = time.Date(1999, 12, 31, 23, 59, 59, 100, time.FixedZone("x", 3600)) })
	add(func(e *Event) { e.Gated, e.Gate, e.Status, e.Target = true, GateNotPassed, 200, "" }) // a gated link's form
	add(func(e *Event) { e.Gated, e.Gate, e.Status = true, GatePassed, 303 })                  // its right password
	return cases
}

// TestCloudEventEncodingMatchesSDK: the SDK's HTTP binding reads the
// sink's requests, batched and single, as it reads the requests of the
// SDK's own events (CloudEvent) for the same events; where the SDK writes
// valid UTF-8 the bytes of each event are the SDK's too.
func TestCloudEventEncodingMatchesSDK(t *testing.T) {
	cases := encodingCases()
	want := sdkDecode(t, sdkRequest(t, cases))
	for _, single := range []bool{false, true} {
		var got []cloudevents.Event
		for _, req := range sinkRequests(t, cases, single) {
			if ct, wantCT := req.Header.Get("Content-Type"), map[bool]string{false: cloudevents.ApplicationCloudEventsBatchJSON, true: cloudevents.ApplicationCloudEventsJSON}[single]; ct != wantCT {
				t.Errorf("single %v: Content-Type %q, want %q", single, ct, wantCT)
			}
			got = append(got, sdkDecode(t, req)...)
		}
		if len(got) != len(want) {
			t.Fatalf("single %v: %d events read, want %d", single, len(got), len(want))
		}
		for i := range got {
			sameEvent(t, &got[i], &want[i], cases[i].Subject())
			if s, w := got[i].Subject(), asEncodingJSONReads(t, strings.TrimSpace(cases[i].Subject())); s != w {
				t.Errorf("single %v: subject %q, want %q", single, s, w)
			}
		}
	}
	for i := range cases {
		ce, _ := CloudEvent(&cases[i], DefaultSource+"/redirector-0")
		sdk, err := ce.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		ours := encodeCloudEvent(&cases[i], DefaultSource+"/redirector-0")
		if !json.Valid(ours) {
			t.Errorf("case %d: not JSON: %s", i, ours)
		}
		if checked := asChecked(cases[i]); checked.plain == 0 && i == 0 {
			t.Error("the first case's strings are all Plain, yet not marked so")
		} else if fast := encodeCloudEvent(&checked, DefaultSource+"/redirector-0"); !bytes.Equal(fast, ours) {
			t.Errorf("case %d, its Plain strings not looked at: %s\nwant %s", i, fast, ours)
		}
		if plain := !strings.ContainsAny(cases[i].Code+cases[i].Target, "<>&\"\\\u2028\u2029\x7f") && utf8.ValidString(cases[i].Code) &&
			!strings.ContainsFunc(cases[i].Code, func(r rune) bool { return r < ' ' }); plain && !bytes.Equal(ours, sdk) {
			t.Errorf("case %d: bytes differ from the SDK's:\n ours %s\n  sdk %s", i, ours, sdk)
		}
	}
}

// FuzzCloudEventEncoding: for any strings, the sink's batch is JSON that
// the SDK reads as the event's values (bytes that are not UTF-8 read as
// U+FFFD, as encoding/json writes them), and as the SDK's own encoding of
// the event when that is valid. The country and the client address are
// what the builder makes of any (builtCountry, builtAddress): the encoder
// writes them without a look.
func FuzzCloudEventEncoding(f *testing.F) {
	for _, e := range encodingCases() {
		f.Add(e.Namespace, e.Name, e.UID, e.Code, e.Target, e.RefererHost, e.Country, e.ClientAddress, e.Orphan, e.Rule, e.Time.UnixNano(), e.Gated, uint8(e.Gate))
	}
	f.Fuzz(func(t *testing.T, ns, name, uid, code, target, referer, country, client string, orphan bool, rule int, at int64, gated bool, gate uint8) {
		if orphan && strings.TrimSpace(code) == "" || !orphan && (ns == "" || name == "") {
			return // no such event: an orphan has a code, a link a namespace and name
		}
		country, client = builtCountry(country), builtAddress(client)
		e := Event{ID: "6f1b2c3d-4e5f-8a7b-8000-00000000002a", Time: time.Unix(0, at).UTC(), Namespace: ns, Name: name, UID: uid, Code: code,
			Orphan: orphan, Target: target, Rule: rule, Status: 302, RefererHost: referer, Device: DeviceDesktop, Country: country, ClientAddress: client,
			Gated: gated, Gate: Gate(gate % 3)}
		if y := e.Time.Year(); y < 0 || y > 9999 {
			return // RFC 3339 has four digits of year
		}
		// Strings a caller checked (Record.LinkPlain, TargetPlain) are
		// written without a look, and as the encoder writes them with one.
		checked := asChecked(e)
		if fast, slow := encodeCloudEvent(&checked, DefaultSource), encodeCloudEvent(&e, DefaultSource); !bytes.Equal(fast, slow) {
			t.Fatalf("with the Plain strings not looked at:\n %s\nwant\n %s", fast, slow)
		}
		e = checked
		got := sdkDecode(t, sinkRequests(t, []Event{e}, false)[0])
		if len(got) != 1 {
			t.Fatalf("%d events read, want 1", len(got))
		}
		var data Event
		if err := json.Unmarshal(got[0].Data(), &data); err != nil {
			t.Fatal(err)
		}
		want := e
		for _, s := range []*string{&want.Namespace, &want.Name, &want.UID, &want.Code, &want.Target, &want.RefererHost, &want.Country, &want.ClientAddress} {
			*s = asEncodingJSONReads(t, *s)
		}
		data.ID, data.Time, data.plain = want.ID, want.Time, want.plain
		if data != want {
			t.Errorf("data read\n %+v\nwant\n %+v", data, want)
		}
		if got[0].ID() != e.ID || got[0].Subject() != asEncodingJSONReads(t, strings.TrimSpace(e.Subject())) || !got[0].Time().Equal(e.Time) {
			t.Errorf("attributes read: %s", got[0])
		}
		sameEvent(t, &got[0], &sdkDecode(t, sdkRequest(t, []Event{e}))[0], e.Subject())
	})
}

// asChecked is e with its strings marked Plain where a caller that checks
// them would mark them (Record.LinkPlain, TargetPlain).
func asChecked(e Event) Event {
	if !e.Orphan && e.Namespace != "" && e.Name != "" && Plain(e.Namespace) && Plain(e.Name) && Plain(e.UID) && Plain(e.Code) {
		e.plain |= plainLink
	}
	if Plain(e.Target) {
		e.plain |= plainTarget
	}
	return e
}

// builtRefererHost is what the builder makes of a Referer whose host is
// s: s lower-cased, or none.
func builtRefererHost(s string) string {
	var r Record
	r.SetReferer([]byte("https://" + s + "/"))
	return strings.ToLower(r.RefererHost())
}

// builtCountry is what the builder makes of a country header's value s
// (Record.SetCountry).
func builtCountry(s string) string {
	var r Record
	r.SetCountry([]byte(s))
	return r.Country()
}

// builtAddress is what the builder makes of a client address s that the
// whole address is kept of: its text without a zone, or none.
func builtAddress(s string) string {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return ""
	}
	return a.Unmap().WithZone("").String()
}

// asEncodingJSONReads is s written by encoding/json and read back.
func asEncodingJSONReads(t testing.TB, s string) string {
	b, err := json.Marshal(s)
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// FuzzJSONPieces: appendJSONChars writes any string as a JSON string that
// reads back as encoding/json's writing of it reads back; plain8 finds a
// byte to escape wherever one is; appendRFC3339Nano and a timeText (in
// the second it remembers or not) write what time.RFC3339Nano formats.
func FuzzJSONPieces(f *testing.F) {
	f.Add("plain ascii text, long enough for words", int64(1795688104123456789))
	f.Add("<&>\"\\\x00\x1f\x7f\u2028\xff caf\u00e9", int64(0))
	f.Add("12345678<", int64(1795688104000000000))
	f.Add("", int64(-1))
	f.Fuzz(func(t *testing.T, s string, at int64) {
		b := appendJSONChars([]byte{'"'}, s)
		b = append(b, '"')
		var back string
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%q written as %s: not JSON: %v", s, b, err)
		}
		if want := asEncodingJSONReads(t, s); back != want {
			t.Errorf("%q written as %s reads %q, want %q", s, b, back, want)
		}
		if Plain(s) && (string(b) != `"`+s+`"` || strings.TrimSpace(s) != s || strings.TrimFunc(s, unicode.IsSpace) != s) {
			t.Errorf("Plain(%q), but it is written as %s, or trimmed of spaces it is not itself", s, b)
		}
		for i := 0; i+8 <= len(s); i++ {
			plain := true
			for _, c := range []byte(s[i : i+8]) {
				plain = plain && c < utf8.RuneSelf && jsonPlain[c]
			}
			if plain8(load64(s, i)) != plain {
				t.Fatalf("plain8(%q) = %v, want %v", s[i:i+8], !plain, plain)
			}
		}
		tm := time.Unix(0, at).In(time.FixedZone("x", int(at%50000)))
		if got, want := string(appendRFC3339Nano(nil, tm)), tm.UTC().Format(time.RFC3339Nano); got != want {
			t.Errorf("appendRFC3339Nano(%v) = %s, want %s", tm, got, want)
		}
		// One timeText for times in the second it remembers and in others.
		var c timeText
		for _, tm := range []time.Time{tm, tm.Add(time.Duration(at % 1_500_000_000)), tm.Add(time.Duration(at % 7)), tm} {
			if got, want := string(c.append(nil, tm)), tm.UTC().Format(time.RFC3339Nano); got != want {
				t.Errorf("timeText.append(%v) after others = %s, want %s", tm, got, want)
			}
		}
	})
}

// TestPlain8EveryByte: plain8 finds every byte value that is not plain,
// at every position of a word of plain bytes, and next to another one.
func TestPlain8EveryByte(t *testing.T) {
	for c := range 256 {
		want := c < utf8.RuneSelf && jsonPlain[c]
		for pos := range 8 {
			for _, fill := range []byte{'a', '~', ' ', '=', '?', '\x1f', 0xff} {
				w := bytes.Repeat([]byte{fill}, 8)
				w[pos] = byte(c)
				plain := want
				for _, b := range w {
					plain = plain && b < utf8.RuneSelf && jsonPlain[b]
				}
				if got := plain8(load64(string(w), 0)); got != plain {
					t.Fatalf("plain8(%q) = %v, want %v", w, got, plain)
				}
			}
		}
	}
}

// TestPlain: Plain holds for the printable ASCII that JSON writes as it
// is (DEL too), and for no other byte (a space neither: the subject is
// trimmed).
func TestPlain(t *testing.T) {
	for c := range 256 {
		want := c > ' ' && c < utf8.RuneSelf && !strings.ContainsRune(`"\<>&`, rune(c))
		if got := Plain("a" + string(byte(c)) + "b"); got != want {
			t.Errorf("Plain of byte %#x: %v, want %v", c, got, want)
		}
	}
	for _, s := range []string{"", "team-a", "3f1c2a4e-8b9d-4c7e-a1f2-0e9d8c7b6a55", "https://example.com/a?b=c;d=e#f"} {
		if !Plain(s) {
			t.Errorf("Plain(%q) = false", s)
		}
	}
	for _, s := range []string{"https://example.com/a?b=c&d=e", " team-a", "caf\u00e9", "a\u2028"} {
		if Plain(s) {
			t.Errorf("Plain(%q) = true", s)
		}
	}
}

// TestTimeFractionsAndInts: a timeText writes every length of fraction,
// each digit at each place, as time.RFC3339Nano does; appendInt writes
// the numbers it writes without a loop, and others, as strconv does.
func TestTimeFractionsAndInts(t *testing.T) {
	var c timeText
	base := time.Date(2026, 11, 26, 10, 15, 4, 0, time.UTC)
	for place, scale := 0, 1; place < 9; place, scale = place+1, scale*10 {
		for d := range 10 {
			for _, ns := range []int{d * scale, d*scale + 1, 999_999_999 - d*scale, 123_456_789 / scale * scale} {
				tm := base.Add(time.Duration(ns))
				if got, want := string(c.append(nil, tm)), tm.Format(time.RFC3339Nano); got != want {
					t.Errorf("%d ns: %s, want %s", ns, got, want)
				}
			}
		}
	}
	appendInts := func(ns ...int) (s string) {
		for _, n := range ns {
			s += string(appendInt(nil, n)) + " "
		}
		return s
	}
	if got, want := appendInts(-1, 0, 7, 9, 10, 42, 99, 100, 302, 999, 1000, -2, -12345, 1<<40), "-1 0 7 9 10 42 99 100 302 999 1000 -2 -12345 1099511627776 "; got != want {
		t.Errorf("appendInt: %s, want %s", got, want)
	}
}
