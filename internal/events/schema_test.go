package events

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

const schemaFile = "../../docs/events.schema.json"

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	f, err := os.Open(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("%s: %v", schemaFile, err)
	}
	if err := c.AddResource(schemaFile, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(schemaFile)
	if err != nil {
		t.Fatalf("%s: %v", schemaFile, err)
	}
	return s
}

func validate(t *testing.T, s *jsonschema.Schema, raw []byte) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return s.Validate(v)
}

// TestEmittedEventsMatchTheSchema: the events a pipeline sends (a redirect
// with every field, an orphan with none of the optional ones, an address
// kept whole, IPv6) are valid against docs/events.schema.json, and the
// schema refuses events that break it.
func TestEmittedEventsMatchTheSchema(t *testing.T) {
	s := compileSchema(t)
	recv := newCEReceiver(t)
	cfg := testConfig(recv.URL)
	cfg.KeepClientAddress = true
	p := start(t, cfg)
	full := record(1)
	orphan := Record{Status: 404, Rule: NoRule, Variant: NoVariant}
	orphan.SetCodeString("no-such-code")
	v6 := record(2)
	v6.Client = netipMust("2001:db8:abcd:12::7")
	v6.SetUserAgent(nil)
	v6.SetReferer([]byte("https://[2001:db8::1]:8443/x"))
	form, passed := record(3), record(4) // a gated link's: its form, its right password
	form.Status, form.Target = 200, ""
	form.SetGate(GateNotPassed)
	passed.Status = 303
	passed.SetGate(GatePassed)
	for _, r := range []Record{full, orphan, v6, form, passed} {
		if !p.Offer(&r) {
			t.Fatal("offer refused")
		}
	}
	waitFor(t, func() bool { return countsOf(p, SinkCloudEvents).sent == 5 }, "5 events sent")
	raw := make([]json.RawMessage, 0, 5)
	for _, req := range recv.got() {
		var batch []json.RawMessage
		if err := json.Unmarshal(req.body, &batch); err != nil {
			t.Fatal(err)
		}
		raw = append(raw, batch...)
	}
	if len(raw) != 5 {
		t.Fatalf("%d events received, want 5", len(raw))
	}
	for _, ev := range raw {
		if err := validate(t, s, ev); err != nil {
			t.Errorf("an emitted event is not valid:\n%s\n%v", ev, err)
		}
	}

	// The schema can fail: each change breaks the first event.
	for _, bad := range []struct{ from, to string }{
		{`"type":"io.linkforge.click.v1"`, `"type":"io.linkforge.click.v2"`},
		{`"status":302`, `"status":"302"`},
		{`"device":"mobile"`, `"device":"phone"`},
		{`"code":"c00001",`, ``},
		{`"country":"DE"`, `"country":"Germany"`},
		{`"clientAddress":"198.51.100.23"`, `"clientAddress":"not-an-address"`},
		{`"rule":-1`, `"rule":-2`},
		{`"variant":-1`, `"variant":-2`},
		{`"orphan":false`, `"orphan":false,"extra":1`},
		{`"orphan":false`, `"orphan":false,"gated":true`},      // gated without gatePassed
		{`"orphan":false`, `"orphan":false,"gatePassed":true`}, // gatePassed without gated
		{`"orphan":false`, `"orphan":false,"gated":false`},     // gated is there only when true
	} {
		changed := bytes.Replace(raw[0], []byte(bad.from), []byte(bad.to), 1)
		if bytes.Equal(changed, raw[0]) {
			t.Fatalf("%s is not in the event %s", bad.from, raw[0])
		}
		if validate(t, s, changed) == nil {
			t.Errorf("the schema takes an event with %s", bad.to)
		}
	}
	// A gated link's events say gated and whether the click passed; the
	// schema refuses them without either, or with either of another type.
	for i, want := range map[int]string{3: `"gated":true,"gatePassed":false`, 4: `"gated":true,"gatePassed":true`} {
		if !bytes.Contains(raw[i], []byte(want)) {
			t.Errorf("a gated link's event has no %s: %s", want, raw[i])
		}
	}
	for _, bad := range []struct{ from, to string }{
		{`,"gatePassed":false`, ``},
		{`"gated":true,`, ``},
		{`"gatePassed":false`, `"gatePassed":"false"`},
		{`"gatePassed":false`, `"gatePassed":0`},
		{`"gated":true`, `"gated":"true"`},
	} {
		changed := bytes.Replace(raw[3], []byte(bad.from), []byte(bad.to), 1)
		if bytes.Equal(changed, raw[3]) {
			t.Fatalf("%s is not in the event %s", bad.from, raw[3])
		}
		if validate(t, s, changed) == nil {
			t.Errorf("the schema takes a gated link's event with %q replaced by %q", bad.from, bad.to)
		}
	}
	for _, ev := range raw[:3] { // the others are no longer for gates
		if bytes.Contains(ev, []byte(`"gate`)) {
			t.Errorf("an event of a link without a gate, or an orphan's, says gated or gatePassed: %s", ev)
		}
	}
}

// TestDocumentedExampleMatchesTheSchema: the example event in
// docs/events.md is valid too.
func TestDocumentedExampleMatchesTheSchema(t *testing.T) {
	s := compileSchema(t)
	doc, err := os.ReadFile("../../docs/events.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- example event -->\\s*```json\\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/events.md has no example event (a json block after <!-- example event -->)")
	}
	var batch []json.RawMessage
	if err := json.Unmarshal(m[1], &batch); err != nil {
		t.Fatalf("the example is not a JSON batch: %v", err)
	}
	for _, ev := range batch {
		if err := validate(t, s, ev); err != nil {
			t.Errorf("the documented example is not valid:\n%s\n%v", ev, err)
		}
	}
}
