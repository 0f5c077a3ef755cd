package events

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/uuid"

	"github.com/linkforge/linkforge/internal/agent"
)

func TestRefererHost(t *testing.T) {
	long := strings.Repeat("a", MaxRefererHostLen+1)
	for _, tc := range []struct{ referer, want string }{
		{"https://www.example.com/page?q=1#x", "www.example.com"},
		{"http://Example.COM", "Example.COM"},
		{"https://user:pw@example.com:8443/a", "example.com"},
		{"https://a@b@example.com/", "example.com"},
		{"https://[2001:db8::1]:443/p", "[2001:db8::1]"},
		{"https://[2001:db8::1/p", ""},
		{"android-app://com.google.android.gm/", "com.google.android.gm"},
		{"https://example.com?x", "example.com"},
		{"/relative/path", ""},
		{"example.com/path", ""},
		{"https:/example.com", ""},
		{"://example.com", ""},
		{"1http://example.com", ""},
		{"https://", ""},
		{"https://:443/", ""},
		{"https://exa mple.com/", ""},
		{"https://ex\x00ample.com/", ""},
		{"https://exämple.com/", ""},
		{"https://" + long + "/", ""},
		{"https://" + long[:MaxRefererHostLen-8] + "/", long[:MaxRefererHostLen-8]},
		{"https://" + long[:MaxRefererLen-8], long[:MaxRefererLen-8]},
		{"https://" + long[:MaxRefererLen-8] + "x", ""},
		{"https://" + long[:100] + "/" + long, long[:100]},
		{"", ""},
	} {
		var r Record
		r.SetReferer([]byte(tc.referer))
		if got := r.RefererHost(); got != tc.want {
			t.Errorf("SetReferer(%q): host %q, want %q", tc.referer, got, tc.want)
		}
	}
}

func FuzzRefererHost(f *testing.F) {
	for _, s := range []string{"https://u@h:1/p", "http://[::1]/", "x://", "https://a.b?c#d"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, referer []byte) {
		host := refererHost(referer, true)
		if len(host) > MaxRefererHostLen || !bytes.Contains(referer, host) {
			t.Fatalf("refererHost(%q) = %q: not a part of it, or too long", referer, host)
		}
		if bytes.ContainsAny(host, "/?#@ \"\\<>") {
			t.Fatalf("refererHost(%q) = %q: holds a delimiter", referer, host)
		}
		var r Record
		r.SetReferer(referer)
		if got := r.RefererHost(); got != string(host) && (len(referer) <= MaxRefererLen || got != "") {
			t.Fatalf("the record gives %q, not %q", got, host)
		}
	})
}

func TestSetCountry(t *testing.T) {
	for _, tc := range []struct{ header, want string }{
		{"de", "DE"}, {"US", "US"}, {"T1", "T1"}, {"XX", "XX"},
		{"", ""}, {"D", ""}, {"DEU", ""}, {"d-", ""}, {"é", ""},
	} {
		var r Record
		r.SetCountry([]byte("ZZ")) // a reused record forgets the last country
		r.SetCountry([]byte(tc.header))
		if got := r.Country(); got != tc.want {
			t.Errorf("SetCountry(%q) = %q, want %q", tc.header, got, tc.want)
		}
	}
}

func TestSetUserAgentKeepsHeadAndTail(t *testing.T) {
	head := "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X) " + strings.Repeat("x", 300)
	tail := " (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
	var r Record
	r.SetUserAgent([]byte(head + tail))
	got := r.UserAgent()
	if len(got) != MaxUserAgentLen || !strings.HasPrefix(got, head[:userAgentHead]) || !strings.HasSuffix(got, tail) {
		t.Fatalf("kept %q: want the first %d and last %d bytes", got, userAgentHead, MaxUserAgentLen-userAgentHead)
	}
	if bot, _ := classify(r.userAgent[:r.uaLen]); !bot {
		t.Error("a long Googlebot User-Agent is not a bot: its tail was lost")
	}
	r.SetUserAgent([]byte("curl/8.5.0"))
	if r.UserAgent() != "curl/8.5.0" {
		t.Errorf("a short User-Agent kept as %q", r.UserAgent())
	}
}

func TestSetCodeCutsAtTheLimit(t *testing.T) {
	var r Record
	r.SetCode([]byte(strings.Repeat("c", MaxCodeLen+10)))
	if len(r.Code()) != MaxCodeLen {
		t.Errorf("kept %d bytes of a long code, want %d", len(r.Code()), MaxCodeLen)
	}
	r.SetCodeString("abc")
	if r.Code() != "abc" {
		t.Errorf("code %q, want abc", r.Code())
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		ua     string
		bot    bool
		device string
	}{
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36", false, DeviceDesktop},
		{"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15", false, DeviceDesktop},
		{"Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0", false, DeviceDesktop},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1", false, DeviceMobile},
		{"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Mobile Safari/537.36", false, DeviceMobile},
		{"Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1", false, DeviceTablet},
		{"Mozilla/5.0 (Linux; Android 13; SM-X700) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36", false, DeviceTablet},
		{"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", true, DeviceUnknown},
		{"Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)", true, DeviceUnknown},
		{"facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)", true, DeviceUnknown},
		{"WhatsApp/2.23.20.0", true, DeviceUnknown},
		{"curl/8.5.0", true, DeviceUnknown},
		{"python-requests/2.32.3", true, DeviceUnknown},
		{"Go-http-client/1.1", true, DeviceUnknown},
		{"", true, DeviceUnknown},
		// The classes internal/rules reads too (internal/agent's corpus):
		// in-app browsers are people, a CUBOT is a phone, and a link
		// prefetcher is a bot whose "Microsoft" holds no ChromeOS "cros".
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 12_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/16B92 [Pinterest/iOS]", false, DeviceMobile},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 15_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/15.2 Mobile/15E148 Snapchat/11.68.0.37 (like Safari/8612.3.6.0.4, panda)", false, DeviceMobile},
		{"Mozilla/5.0 (Linux; Android 9; CUBOT X19) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/110.0.5481.65 Mobile Safari/537.36", false, DeviceMobile},
		{"Microsoft Office Existence Discovery", true, DeviceUnknown},
		{"Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/121.0.6167.160 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", true, DeviceMobile},
		{"kube-probe/1.29", true, DeviceUnknown},
	} {
		bot, device := classify([]byte(tc.ua))
		if bot != tc.bot || device != tc.device {
			t.Errorf("classify(%q) = %v, %s; want %v, %s", tc.ua, bot, device, tc.bot, tc.device)
		}
	}
}

// TestDeviceNamesAreForms: the event's device is agent.Form's name, and
// the schema's enum (docs/events.schema.json) names these four.
func TestDeviceNamesAreForms(t *testing.T) {
	for f, want := range map[agent.Form]string{agent.FormUnknown: DeviceUnknown, agent.FormDesktop: DeviceDesktop, agent.FormMobile: DeviceMobile, agent.FormTablet: DeviceTablet} {
		if f.String() != want {
			t.Errorf("agent.Form %d is %q, the event's device %q", f, f.String(), want)
		}
	}
}

// TestBuilderRemembersClasses: the class a builder remembers for a
// User-Agent is classify's, whether the agent is new, seen before, or
// has taken the slot of another (more agents than slots).
func TestBuilderRemembersClasses(t *testing.T) {
	b := newBuilder(false)
	agents := make([]string, 0, 3+3*uaClassSlots)
	agents = append(agents, "", "curl/8.5.0", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) Mobile/15E148")
	for i := range 3 * uaClassSlots {
		agents = append(agents, fmt.Sprintf("Mozilla/5.0 (%s %d) Gecko", []string{"Windows NT", "iPad", "Android", "X11; bot"}[i%4], i))
	}
	for round := range 3 {
		for _, ua := range agents {
			bot, device := b.classify([]byte(ua))
			if wantBot, wantDevice := classify([]byte(ua)); bot != wantBot || device != wantDevice {
				t.Fatalf("round %d: the builder's class of %q is %v, %s; classify's %v, %s", round, ua, bot, device, wantBot, wantDevice)
			}
		}
		slices.Reverse(agents)
	}
}

func TestBuildEvent(t *testing.T) {
	r := Record{Time: 1_700_000_000_123_456_789, Namespace: "team-a", Name: "docs", UID: "u-1", Target: "https://example.com/docs", Status: 302, Rule: NoRule, Variant: NoVariant}
	r.SetCodeString("abc")
	r.SetReferer([]byte("https://News.Example.org/item?id=1"))
	r.SetUserAgent([]byte("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) Mobile/15E148"))
	r.SetCountry([]byte("de"))
	r.SetClientIP(net.ParseIP("198.51.100.23"))
	e := eventOf(newBuilder(false), &r)
	if _, err := uuid.Parse(e.ID); err != nil {
		t.Errorf("id %q: %v", e.ID, err)
	}
	want := Event{ID: e.ID, Time: e.Time, Namespace: "team-a", Name: "docs", UID: "u-1", Code: "abc", Target: "https://example.com/docs",
		Rule: NoRule, Variant: NoVariant, Status: 302, RefererHost: "news.example.org", Device: DeviceMobile, Country: "DE", ClientAddress: "198.51.100.0"}
	if e != want {
		t.Errorf("event\n %+v\nwant\n %+v", e, want)
	}
	if e.Time.UnixNano() != r.Time || e.Time.Location().String() != "UTC" {
		t.Errorf("time %v, want %d in UTC", e.Time, r.Time)
	}
	if e := eventOf(newBuilder(true), &r); e.ClientAddress != "198.51.100.23" {
		t.Errorf("KeepClientAddress: %s, want the whole address", e.ClientAddress)
	}
	for _, g := range []Gate{GateNotPassed, GatePassed} {
		r.SetGate(g)
		gated := want
		gated.ID, gated.Gated, gated.Gate = "", true, g
		if e := eventOf(newBuilder(false), &r); !sameEventButID(e, gated) {
			t.Errorf("a gated link's event, %d:\n %+v\nwant\n %+v", g, e, gated)
		}
	}
	orphan := Record{Status: 404, Rule: NoRule, Variant: NoVariant}
	orphan.SetCodeString("nope")
	if e := eventOf(newBuilder(false), &orphan); !e.Orphan || e.Subject() != "nope" || e.ClientAddress != "" || e.Gated || e.Gate != GateNone {
		t.Errorf("orphan event %+v: want orphan, subject the code, no address", e)
	}
}

func TestIDsAreUniqueUUIDv8(t *testing.T) {
	s := newIDSource()
	seen := map[string]bool{}
	for range 1000 {
		id := s.next()
		u, err := uuid.Parse(id)
		if seen[id] || err != nil || u.String() != id || u.Version() != 8 || u.Variant() != uuid.RFC4122 {
			t.Fatalf("id %q: repeated or not a UUIDv8", id)
		}
		seen[id] = true
	}
	if a, b := newIDSource(), newIDSource(); a.next() == b.next() {
		t.Error("two pipelines made the same first id")
	}
}

// eventOf is the event b builds of rec.
func eventOf(b *builder, rec *Record) Event {
	var e Event
	b.build(&e, rec, nil)
	return e
}

// TestRecordCopyTo: a record copied into a slot that held a longer one
// reads as the record, every field of it.
func TestRecordCopyTo(t *testing.T) {
	// copyTo names each field: one added to Record must be added there.
	if n := reflect.TypeFor[Record]().NumField(); n != 19 {
		t.Fatalf("Record has %d fields, copyTo copies 19: copy the new ones and count them here", n)
	}
	long := Record{Time: 9, Namespace: "old-ns", Name: "old", UID: "old-uid", Target: "https://old.example/", Status: 410, Rule: 7, Variant: 2}
	long.SetCodeString(strings.Repeat("c", MaxCodeLen))
	long.SetReferer([]byte("https://" + strings.Repeat("r", MaxRefererLen)))
	long.SetUserAgent([]byte(strings.Repeat("u", 2*MaxUserAgentLen)))
	long.SetCountry([]byte("FR"))
	long.SetClientIP(net.ParseIP("2001:db8::1"))
	long.SetGate(GatePassed)
	for _, rec := range []Record{
		func() (r Record) {
			r = Record{Time: 1, Namespace: "team-a", Name: "docs", UID: "u-1", Target: "https://example.com/", Status: 302, Rule: NoRule, Variant: 1, LinkPlain: true, TargetPlain: true}
			r.SetCodeString("abc")
			r.SetReferer([]byte("https://news.example.org/x"))
			r.SetUserAgent([]byte("curl/8.5.0"))
			r.SetCountry([]byte("de"))
			r.SetClientIP(net.ParseIP("198.51.100.23"))
			r.SetGate(GateNotPassed)
			return r
		}(),
		{Status: 404, Rule: NoRule, Variant: NoVariant}, // nothing from the request, no gate
	} {
		dst := long
		rec.copyTo(&dst)
		if dst.Time != rec.Time || dst.Namespace != rec.Namespace || dst.Name != rec.Name || dst.UID != rec.UID ||
			dst.Target != rec.Target || dst.Status != rec.Status || dst.Rule != rec.Rule || dst.Variant != rec.Variant ||
			dst.LinkPlain != rec.LinkPlain || dst.TargetPlain != rec.TargetPlain || dst.Client != rec.Client || dst.refererCut() != rec.refererCut() || dst.Gate() != rec.Gate() || dst.Code() != rec.Code() ||
			dst.RefererHost() != rec.RefererHost() || dst.UserAgent() != rec.UserAgent() || dst.Country() != rec.Country() {
			t.Errorf("copied\n %+v\nreads as\n %+v", rec, dst)
		}
		if a, b := eventOf(newBuilder(true), &rec), eventOf(newBuilder(true), &dst); a.ID == "" || !sameEventButID(a, b) {
			t.Errorf("the copy's event\n %+v\nthe record's\n %+v", b, a)
		}
	}
}

// TestRecordSize: a Record is copied into the ring per click and zeroed
// on the stack per request, and an Event is built per click: a field
// that makes either larger is a choice, made here (the gate took no
// byte: it shares refererCut's, and the Event's padding beside Orphan).
func TestRecordSize(t *testing.T) {
	if got, want := unsafe.Sizeof(Record{}), uintptr(688); got != want {
		t.Errorf("a Record is %d bytes, was %d", got, want)
	}
	if got, want := unsafe.Sizeof(Event{}), uintptr(224); got != want {
		t.Errorf("an Event is %d bytes, was %d", got, want)
	}
}

// TestSetGate: the gate a record keeps, and the Referer's cut it shares
// a byte with, are each what was set last, whatever the other is; the
// event says gated and gatePassed of a gated link's click only.
func TestSetGate(t *testing.T) {
	long := []byte("https://example.com/" + strings.Repeat("p", MaxRefererLen))
	for _, tc := range []struct {
		set        Gate
		want       Gate
		gated      bool
		gatePassed string // in the event's JSON; "" for none
	}{
		{GateNone, GateNone, false, ""},
		{GateNotPassed, GateNotPassed, true, "false"},
		{GatePassed, GatePassed, true, "true"},
		{GatePassed + 1, GateNotPassed, true, "false"}, // no such gate: never read as passed
		{255, GateNotPassed, true, "false"},
	} {
		for _, referer := range [][]byte{nil, long, []byte("https://news.example.org/x")} {
			var r Record
			r.SetGate(GatePassed) // a reused record forgets the last gate
			r.SetReferer(long)    // and the last cut
			r.SetGate(tc.set)
			r.SetReferer(referer)
			if r.Gate() != tc.want || r.refererCut() != (len(referer) > MaxRefererLen) {
				t.Errorf("SetGate(%d), then a Referer of %d bytes: gate %d, cut %v; want %d, %v", tc.set, len(referer), r.Gate(), r.refererCut(), tc.want, len(referer) > MaxRefererLen)
			}
			r.SetGate(tc.set) // and the other way round
			if r.Gate() != tc.want || r.refererCut() != (len(referer) > MaxRefererLen) {
				t.Errorf("a Referer of %d bytes, then SetGate(%d): gate %d, cut %v", len(referer), tc.set, r.Gate(), r.refererCut())
			}
		}
		r := Record{Namespace: "ns", Name: "n", Status: 200, Rule: NoRule, Variant: NoVariant}
		r.SetCodeString("c")
		r.SetGate(tc.set)
		e := eventOf(newBuilder(false), &r)
		if e.Gated != tc.gated || e.Gate != tc.want {
			t.Errorf("SetGate(%d): the event has gated %v, gate %d; want %v, %d", tc.set, e.Gated, e.Gate, tc.gated, tc.want)
		}
		data := string(encodeCloudEvent(&e, DefaultSource))
		if got := strings.Contains(data, `"gated":true`); got != tc.gated {
			t.Errorf("SetGate(%d): gated in %s is %v, want %v", tc.set, data, got, tc.gated)
		}
		if i := strings.Index(data, `"gatePassed":`); (i >= 0) != (tc.gatePassed != "") ||
			i >= 0 && !strings.HasPrefix(data[i+len(`"gatePassed":`):], tc.gatePassed) {
			t.Errorf("SetGate(%d): %s, want gatePassed %q", tc.set, data, tc.gatePassed)
		}
	}
}

func sameEventButID(a, b Event) bool {
	a.ID, b.ID = "", ""
	return a == b
}

// TestIDCounterText: the id's counter counted in its text is the counter
// written (appendCounter), across every carry and the variant's wrap.
func TestIDCounterText(t *testing.T) {
	s := newIDSource()
	prefix := string(s.text[:idCounterStart])
	check := func(n uint64) {
		t.Helper()
		if got, want := s.next(), prefix+string(appendCounter(nil, n)); got != want {
			t.Fatalf("id after counter %#x: %s, want %s", n-1, got, want)
		}
	}
	for n := uint64(1); n <= 70000; n++ {
		check(n)
	}
	for _, n := range []uint64{0xffff, 0xffffffff, 0xffff_ffff_ffff, 0x0fff_ffff_ffff_ffff, 0x1fff_ffff_ffff_ffff, 0x3fff_ffff_ffff_ffff, 0x3fff_ffff_ffff_fffe} {
		copy(s.text[idCounterStart:], appendCounter(nil, n))
		check(n + 1)
		check(n + 2)
	}
}

// TestAppendClientIPv4: the builder's own writing of an IPv4 address is
// netip's, reduced or whole, for octets of one, two and three digits.
func TestAppendClientIPv4(t *testing.T) {
	for _, keep := range []bool{false, true} {
		b := newBuilder(keep)
		for _, o := range []byte{0, 1, 9, 10, 42, 99, 100, 199, 200, 255} {
			for _, ip := range []netip.Addr{netip.AddrFrom4([4]byte{o, 255 - o, o / 2, o}), netip.AddrFrom4([4]byte{o, o, o, o})} {
				want := ip
				if !keep {
					want = ReduceClientAddress(ip)
				}
				if got := string(b.appendClient(nil, ip)); got != want.String() {
					t.Errorf("appendClient(%s), keep %v: %s, want %s", ip, keep, got, want)
				}
			}
		}
	}
}

// TestLinkPlainOfAnOrphan: a record that says its link's strings are
// plain but names no link (an orphan) is an orphan's event, its code
// looked at.
func TestLinkPlainOfAnOrphan(t *testing.T) {
	orphan := Record{Status: 404, Rule: NoRule, Variant: NoVariant, LinkPlain: true, TargetPlain: true}
	orphan.SetCodeString("a&b")
	e := eventOf(newBuilder(false), &orphan)
	if got, want := string(encodeCloudEvent(&e, DefaultSource)), string(encodeCloudEvent(&Event{ID: e.ID, Time: e.Time, Code: e.Code, Orphan: true, Rule: NoRule, Variant: NoVariant, Status: 404, Bot: true, Device: DeviceUnknown}, DefaultSource)); got != want || e.plain&plainLink != 0 {
		t.Errorf("orphan's event\n %s\nwant\n %s", got, want)
	}
}
