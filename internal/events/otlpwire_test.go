package events

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/google/go-cmp/cmp"
)

// sdkOTLP is the reference the OTLP sink is checked against: the
// OpenTelemetry log SDK and its OTLP/HTTP exporter, sending the log
// records of events as the sink did with them (docs/events.md), to a
// server that keeps the request.
type sdkOTLP struct {
	exporter *otlploghttp.Exporter
	logger   otellog.Logger
	records  *keepRecords
	body     chan []byte
}

// keepRecords is the logger provider's processor: it keeps the records
// for the test to export.
type keepRecords struct{ records []sdklog.Record }

func (*keepRecords) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }
func (k *keepRecords) OnEmit(_ context.Context, r *sdklog.Record) error {
	k.records = append(k.records, r.Clone())
	return nil
}
func (*keepRecords) Shutdown(context.Context) error   { return nil }
func (*keepRecords) ForceFlush(context.Context) error { return nil }

func newSDKOTLP(t testing.TB, instance string) *sdkOTLP {
	t.Helper()
	s := &sdkOTLP{records: &keepRecords{}, body: make(chan []byte, 1)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.body <- b
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(srv.Close)
	exp, err := otlploghttp.New(context.Background(), otlploghttp.WithEndpointURL(srv.URL+"/v1/logs"),
		otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", ServiceName)}
	if instance != "" {
		attrs = append(attrs, attribute.String("service.instance.id", instance))
	}
	provider := sdklog.NewLoggerProvider(sdklog.WithResource(resource.NewSchemaless(attrs...)),
		sdklog.WithProcessor(s.records), sdklog.WithAllowKeyDuplication())
	s.exporter, s.logger = exp, provider.Logger(ScopeName)
	t.Cleanup(func() { _ = exp.Shutdown(context.Background()); _ = provider.Shutdown(context.Background()) })
	return s
}

// request is the request the SDK sends of batch.
func (s *sdkOTLP) request(t testing.TB, batch []Event) *collogspb.ExportLogsServiceRequest {
	t.Helper()
	s.records.records = nil
	for i := range batch {
		e := &batch[i]
		var r otellog.Record
		r.SetEventName(EventType)
		r.SetTimestamp(e.Time)
		r.SetObservedTimestamp(e.Time)
		r.SetSeverity(otellog.SeverityInfo)
		r.SetSeverityText("INFO")
		r.SetBody(attribute.StringValue(e.Subject()))
		r.AddAttributes(
			attribute.String(AttrEventID, e.ID), attribute.String(AttrCode, e.Code), attribute.Bool(AttrOrphan, e.Orphan),
			attribute.Int(AttrRule, e.Rule), attribute.Int(AttrVariant, e.Variant))
		if e.Gated { // a gated link's click, as the JSON has gated and gatePassed
			r.AddAttributes(attribute.Bool(AttrGated, true))
		}
		if e.Gate != GateNone {
			r.AddAttributes(attribute.Bool(AttrGatePassed, e.Gate == GatePassed))
		}
		r.AddAttributes(attribute.Int(AttrStatus, e.Status), attribute.Bool(AttrBot, e.Bot), attribute.String(AttrDevice, e.Device))
		for _, kv := range [...]struct{ k, v string }{
			{AttrNamespace, e.Namespace}, {AttrName, e.Name}, {AttrUID, e.UID}, {AttrTarget, e.Target},
			{AttrRefererHost, e.RefererHost}, {AttrCountry, e.Country}, {AttrClientAddress, e.ClientAddress},
		} {
			if kv.v != "" {
				r.AddAttributes(attribute.String(kv.k, kv.v))
			}
		}
		s.logger.Emit(context.Background(), r)
	}
	if err := s.exporter.Export(context.Background(), s.records.records); err != nil {
		t.Fatalf("the SDK exports no request: %v", err)
	}
	var req collogspb.ExportLogsServiceRequest
	if err := proto.Unmarshal(<-s.body, &req); err != nil {
		t.Fatal(err)
	}
	return &req
}

// sinkOTLPRequest is the request the OTLP sink sends of batch, read with
// the official protos.
func sinkOTLPRequest(t testing.TB, instance string, batch []Event) *collogspb.ExportLogsServiceRequest {
	t.Helper()
	var req collogspb.ExportLogsServiceRequest
	if err := proto.Unmarshal(newOTLPEncoder(instance).appendRequest(nil, batch), &req); err != nil {
		t.Fatalf("the sink's request is not an ExportLogsServiceRequest: %v", err)
	}
	return &req
}

// TestOTLPEncodingMatchesSDK: the request the OTLP sink writes is, read
// with the official protos, the request the log SDK's OTLP exporter sends
// for the same events: resource, scope, and every field of every record
// (a batch large enough that the lengths of the outer messages take
// several bytes).
func TestOTLPEncodingMatchesSDK(t *testing.T) {
	var batch []Event
	for range 40 {
		for _, e := range encodingCases() {
			if utf8.ValidString(e.Code) { // the SDK cannot marshal the others (FuzzOTLPEncoding)
				batch = append(batch, e)
			}
		}
	}
	for _, instance := range []string{"redirector-0", ""} {
		sdk := newSDKOTLP(t, instance)
		for _, b := range [][]Event{batch[:1], batch[1:5], batch} {
			if d := cmp.Diff(sdk.request(t, b), sinkOTLPRequest(t, instance, b), protocmp.Transform()); d != "" {
				t.Fatalf("instance %q, %d events: the sink's request differs from the SDK's (- SDK, + sink):\n%s", instance, len(b), d)
			}
		}
	}
}

// FuzzOTLPEncoding: for any strings, the sink's request reads with the
// official protos as the SDK's for the same strings made UTF-8 (protobuf
// strings are; the SDK fails to marshal others, the sink writes U+FFFD
// for each byte that is not). The Referer's host, the country and the
// client address are what the builder makes of any (builtRefererHost,
// builtCountry, builtAddress): the encoder writes them without a look.
func FuzzOTLPEncoding(f *testing.F) {
	for _, e := range encodingCases() {
		f.Add(e.Namespace, e.Name, e.UID, e.Code, e.Target, e.RefererHost, e.Country, e.ClientAddress, e.Orphan, e.Rule, e.Time.UnixNano(), e.Gated, uint8(e.Gate))
	}
	sdk := newSDKOTLP(f, "redirector-0")
	f.Fuzz(func(t *testing.T, ns, name, uid, code, target, referer, country, client string, orphan bool, rule int, at int64, gated bool, gate uint8) {
		referer, country, client = builtRefererHost(referer), builtCountry(country), builtAddress(client)
		e := Event{ID: "6f1b2c3d-4e5f-8a7b-8000-00000000002a", Time: time.Unix(0, at), Namespace: ns, Name: name, UID: uid, Code: code,
			Orphan: orphan, Target: target, Rule: rule, Status: 302, RefererHost: referer, Device: DeviceDesktop, Country: country, ClientAddress: client,
			Gated: gated, Gate: Gate(gate)} // any byte: the attribute says passed for GatePassed alone
		got := sinkOTLPRequest(t, "redirector-0", []Event{e})
		for _, s := range []*string{&e.Namespace, &e.Name, &e.UID, &e.Code, &e.Target, &e.RefererHost, &e.Country, &e.ClientAddress} {
			*s = validUTF8(*s)
		}
		if d := cmp.Diff(sdk.request(t, []Event{e}), got, protocmp.Transform()); d != "" {
			t.Fatalf("the sink's request differs from the SDK's (- SDK, + sink):\n%s", d)
		}
	})
}

func TestValidUTF8(t *testing.T) {
	for in, want := range map[string]string{"": "", "abc": "abc", "caf\u00e9": "caf\u00e9", "a\xffb": "a\ufffdb", "\xc3(\xe2\x82": "\ufffd(\ufffd\ufffd"} {
		if got := validUTF8(in); got != want || asEncodingJSONReads(t, in) != want {
			t.Errorf("validUTF8(%q) = %q, encoding/json reads %q; want %q", in, got, asEncodingJSONReads(t, in), want)
		}
	}
}

func TestOTLPEnvHeaders(t *testing.T) {
	got := parseOTLPHeaders(" api-key = s%20ecret ,X-Scope-OrgID=team-a,novalue,=empty,bad key=x,X-Ok=%zz,X-Two=a=b")
	want := map[string]string{"api-key": "s ecret", "X-Scope-OrgID": "team-a", "X-Two": "a=b"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("headers (- want, + got):\n%s", d)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "a=1")
	if h := otlpEnvHeaders(); h["a"] != "1" {
		t.Errorf("OTEL_EXPORTER_OTLP_HEADERS: %v", h)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_LOGS_HEADERS", "b=2")
	if h := otlpEnvHeaders(); h["b"] != "2" || len(h) != 1 {
		t.Errorf("OTEL_EXPORTER_OTLP_LOGS_HEADERS: %v, want it alone", h)
	}
}
