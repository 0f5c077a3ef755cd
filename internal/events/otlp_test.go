package events

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/proto"

	"github.com/linkforge/linkforge/internal/testenv"
)

// otlpReceiver decodes OTLP/HTTP log requests with the OpenTelemetry
// protocol's own types, and answers with respond's status.
type otlpReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	requests []otlpRequest
	respond  func(n int) (int, http.Header)
	// body, when set, is the body of a 200 to request n, else an empty
	// ExportLogsServiceResponse.
	body func(n int) []byte
}

type otlpRequest struct {
	at     time.Time
	header http.Header
	req    *collogspb.ExportLogsServiceRequest
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/logs" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want a protobuf POST to /v1/logs", http.StatusNotFound)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var msg collogspb.ExportLogsServiceRequest
		if err := proto.Unmarshal(b, &msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		n := len(r.requests)
		r.requests = append(r.requests, otlpRequest{at: time.Now(), header: req.Header.Clone(), req: &msg})
		respond, answer := r.respond, r.body
		r.mu.Unlock()
		if status := answerOf(w, respond, n); status != http.StatusOK {
			w.WriteHeader(status)
			return
		}
		if answer != nil {
			_, _ = w.Write(answer(n))
			return
		}
		resp, _ := proto.Marshal(&collogspb.ExportLogsServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(resp)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *otlpReceiver) got() []otlpRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]otlpRequest(nil), r.requests...)
}

// records are the log records of the requests answered 200.
func (r *otlpReceiver) records(statusOf func(int) int) []*logspb.LogRecord {
	var out []*logspb.LogRecord
	for n, req := range r.got() {
		if statusOf(n) != http.StatusOK {
			continue
		}
		for _, rl := range req.req.ResourceLogs {
			for _, sl := range rl.ScopeLogs {
				out = append(out, sl.LogRecords...)
			}
		}
	}
	return out
}

func otlpConfig(endpoint string) Config {
	cfg := testConfig("")
	cfg.CloudEvents.URL = ""
	cfg.OTLP.Endpoint = endpoint
	return cfg
}

func attrs(kvs []*commonpb.KeyValue) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = v.IntValue
		case *commonpb.AnyValue_BoolValue:
			m[kv.Key] = v.BoolValue
		default:
			m[kv.Key] = kv.Value.String()
		}
	}
	return m
}

// TestOTLPRecordsCarryTheFields: the log records decode with the OTLP
// protobuf types and carry the documented resource, event name and
// attributes.
func TestOTLPRecordsCarryTheFields(t *testing.T) {
	for _, gz := range []bool{false, true} {
		recv := newOTLPReceiver(t)
		cfg := otlpConfig(recv.URL) // no path: /v1/logs is added
		cfg.OTLP.Gzip, cfg.OTLP.BearerToken, cfg.OTLP.Headers = gz, "t0ken", map[string]string{"X-Scope-OrgID": "team-a"}
		p := start(t, cfg)
		offer(t, p, 0, 15)
		waitFor(t, func() bool { return countsOf(p, SinkOTLP).sent == 15 }, "15 log records sent")
		reqs := recv.got()
		for _, r := range reqs {
			if r.header.Get("Authorization") != "Bearer t0ken" || r.header.Get("X-Scope-OrgID") != "team-a" {
				t.Errorf("headers %v: want the bearer token and X-Scope-OrgID", r.header)
			}
			res := attrs(r.req.ResourceLogs[0].Resource.Attributes)
			if res["service.name"] != ServiceName || res["service.instance.id"] != "redirector-0" {
				t.Errorf("resource %v", res)
			}
		}
		ids := map[string]bool{}
		for i, lr := range recv.records(allOK) {
			a := attrs(lr.Attributes)
			want := map[string]any{
				AttrNamespace: "team-a", AttrName: "link-" + itoa(i), AttrUID: "uid-" + itoa(i), AttrCode: code(i),
				AttrOrphan: false, AttrTarget: "https://example.com/docs", AttrRule: int64(-1), AttrVariant: int64(-1), AttrStatus: int64(302),
				AttrRefererHost: "news.example.org", AttrBot: false, AttrDevice: DeviceMobile, AttrCountry: "DE",
				AttrClientAddress: "198.51.100.0",
			}
			for k, v := range want {
				if a[k] != v {
					t.Errorf("record %d: %s = %v, want %v", i, k, a[k], v)
				}
			}
			id, _ := a[AttrEventID].(string)
			if len(id) != 36 || ids[id] {
				t.Errorf("record %d: event id %q missing or repeated", i, id)
			}
			ids[id] = true
			if lr.EventName != EventType || lr.SeverityNumber != logspb.SeverityNumber_SEVERITY_NUMBER_INFO ||
				lr.TimeUnixNano == 0 || lr.Body.GetStringValue() != "team-a/link-"+itoa(i) {
				t.Errorf("record %d: event name %q, severity %v, time %d, body %v", i, lr.EventName, lr.SeverityNumber, lr.TimeUnixNano, lr.Body)
			}
		}
		if n := len(recv.records(allOK)); n != 15 {
			t.Errorf("received %d records, want 15", n)
		}
		countsOf(p, SinkOTLP).conserved(t)
	}
}

// TestOTLPRetries: 429 and 503 with Retry-After are retried after it, with
// the same records; 500 and 400 are not retried (OTLP says so); a
// receiver that cuts connections is retried.
func TestOTLPRetries(t *testing.T) {
	for _, tc := range []struct {
		name    string
		status  int
		header  http.Header
		retried bool
		minGap  time.Duration
	}{
		{"429 Retry-After", 429, http.Header{"Retry-After": {"1"}}, true, time.Second},
		{"503 Retry-After", 503, http.Header{"Retry-After": {"1"}}, true, time.Second},
		{"502", 502, nil, true, 0},
		{"500", 500, nil, false, 0},
		{"400", 400, nil, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recv := newOTLPReceiver(t)
			statusOf := func(n int) int {
				if n == 0 {
					return tc.status
				}
				return http.StatusOK
			}
			recv.respond = func(n int) (int, http.Header) { return statusOf(n), tc.header }
			p := start(t, otlpConfig(recv.URL))
			offer(t, p, 0, 5)
			if !tc.retried {
				waitFor(t, func() bool { return countsOf(p, SinkOTLP).failed == 5 }, "5 events failed")
				if c := countsOf(p, SinkOTLP); c.retries != 0 || len(recv.got()) != 1 {
					t.Errorf("counts %+v, %d requests: want no retry", c, len(recv.got()))
				}
				return
			}
			waitFor(t, func() bool { return countsOf(p, SinkOTLP).sent == 5 }, "5 events sent")
			reqs := recv.got()
			if len(reqs) != 2 || !proto.Equal(reqs[0].req, reqs[1].req) {
				t.Fatalf("%d requests: want the same one twice", len(reqs))
			}
			if gap := reqs[1].at.Sub(reqs[0].at); gap < tc.minGap {
				t.Errorf("retried after %s: Retry-After asked for %s", gap, tc.minGap)
			}
			c := countsOf(p, SinkOTLP)
			if c.retries != 1 {
				t.Errorf("counts %+v: want 1 retry", c)
			}
			c.conserved(t)
		})
	}
}

// TestSinksAreIndependent: a CloudEvents receiver that is down does not
// hold up the OTLP sink.
func TestSinksAreIndependent(t *testing.T) {
	ce, otlp := newCEReceiver(t), newOTLPReceiver(t)
	ce.set(func(r *ceReceiver) { r.down = true })
	cfg := testConfig(ce.URL)
	cfg.OTLP.Endpoint = otlp.URL
	p := start(t, cfg)
	for i := 0; i < 300; i += 10 {
		offer(t, p, i, i+10)
		waitFor(t, func() bool { return countsOf(p, SinkOTLP).sent == i+10 }, "each batch sent to OTLP while the other sink is down")
	}
	ceCounts := countsOf(p, SinkCloudEvents)
	if ceCounts.sent != 0 || ceCounts.bufferFull != 200 || ceCounts.depth != 100 {
		t.Errorf("CloudEvents counts %+v: want 100 buffered, 200 dropped", ceCounts)
	}
	ceCounts.conserved(t)
	countsOf(p, SinkOTLP).conserved(t)
}

// TestOTLPPartialSuccess: a 2xx is a delivery; the records an answer's
// partial_success rejects (protobuf, or JSON when the receiver says so)
// are counted as failed, reason rejected, logged and not retried; an
// answer that is not OTLP's, or empty, delivers all.
func TestOTLPPartialSuccess(t *testing.T) {
	partial := func(rejected int64, msg string) []byte {
		b, _ := proto.Marshal(&collogspb.ExportLogsServiceResponse{PartialSuccess: &collogspb.ExportLogsPartialSuccess{RejectedLogRecords: rejected, ErrorMessage: msg}})
		return b
	}
	for _, tc := range []struct {
		name         string
		header       http.Header
		body         []byte
		sent, reject int
		log          string
	}{
		{"3 of 10 rejected", nil, partial(3, "3 records over the size limit"), 7, 3, "3 of 10 log records rejected: \\\"3 records over the size limit"},
		{"all rejected", nil, partial(10, "quota"), 0, 10, "10 of 10 log records rejected"},
		{"more rejected than sent (a receiver that lies)", nil, partial(99, ""), 0, 10, "99 of 10 log records rejected"},
		{"a warning, none rejected", nil, partial(0, "attribute names are long"), 10, 0, "attribute names are long"},
		{"JSON, 2 rejected", http.Header{"Content-Type": {"application/json"}}, []byte(`{"partialSuccess":{"rejectedLogRecords":"2","errorMessage":"bad"}}`), 8, 2, "2 of 10 log records rejected"},
		{"a body that is not OTLP's", http.Header{"Content-Type": {"text/plain"}}, []byte("OK\n"), 10, 0, "not an OTLP answer"},
		{"an empty body", nil, []byte{}, 10, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recv := newOTLPReceiver(t)
			recv.respond = func(int) (int, http.Header) { return http.StatusOK, tc.header }
			recv.body = func(int) []byte { return tc.body }
			cfg := otlpConfig(recv.URL)
			logged := &testenv.SyncBuffer{}
			// What the counts said when the warning was logged: a reader
			// who sees the batch counted finds its log line written.
			var running atomic.Pointer[Pipeline]
			var sentAtWarning atomic.Int64
			sentAtWarning.Store(-1)
			cfg.Log = funcr.New(func(_, args string) {
				if p := running.Load(); p != nil && strings.Contains(args, "with a warning") {
					sentAtWarning.Store(int64(countsOf(p, SinkOTLP).sent))
				}
				_, _ = logged.Write([]byte(args + "\n"))
			}, funcr.Options{Verbosity: 1})
			p := start(t, cfg)
			running.Store(p)
			offer(t, p, 0, 10)
			waitFor(t, func() bool { c := countsOf(p, SinkOTLP); return c.sent+c.rejected == 10 }, "10 events sent or rejected")
			c := countsOf(p, SinkOTLP)
			if c.sent != tc.sent || c.rejected != tc.reject || c.failed != 0 || c.retries != 0 || len(recv.got()) != 1 {
				t.Errorf("counts %+v, %d requests: want %d sent, %d rejected, one request", c, len(recv.got()), tc.sent, tc.reject)
			}
			if !strings.Contains(string(logged.Bytes()), tc.log) {
				t.Errorf("the log %q does not say %q", logged.Bytes(), tc.log)
			}
			if tc.reject == 0 && tc.log != "" && sentAtWarning.Load() != 0 {
				t.Errorf("the warning was logged with %d events counted sent: want it logged before they are counted", sentAtWarning.Load())
			}
			c.conserved(t)
		})
	}
}

// TestOTLPLogsURL: --events-otlp-endpoint is a base URL to which /v1/logs
// is appended, --events-otlp-logs-endpoint a URL used as it is, as the
// OTLP exporter specification reads OTEL_EXPORTER_OTLP_ENDPOINT and
// OTEL_EXPORTER_OTLP_LOGS_ENDPOINT.
func TestOTLPLogsURL(t *testing.T) {
	for _, tc := range []struct {
		endpoint, logs string
		want, err      string
	}{
		{"http://collector:4318", "", "http://collector:4318/v1/logs", ""},
		{"http://collector:4318/", "", "http://collector:4318/v1/logs", ""},
		{"https://gw.example.com/otlp", "", "https://gw.example.com/otlp/v1/logs", ""},
		{"https://gw.example.com/otlp/", "", "https://gw.example.com/otlp/v1/logs", ""},
		{"https://gw.example.com/a%2Fb/otlp", "", "https://gw.example.com/a%2Fb/otlp/v1/logs", ""},
		{"https://gw.example.com/otlp?tenant=a", "", "https://gw.example.com/otlp/v1/logs?tenant=a", ""},
		{"", "https://ingest.example.com/api/v2/otlp/logs", "https://ingest.example.com/api/v2/otlp/logs", ""},
		{"", "http://collector:4318/v1/logs", "http://collector:4318/v1/logs", ""},
		{"", "http://collector:4318", "http://collector:4318/", ""},
		{"http://collector:4318/v1/logs", "", "", "give it without /v1/logs, or give the whole URL to --events-otlp-logs-endpoint"},
		{"http://collector:4318/v1/logs/", "", "", "is a base URL"},
		{"http://c:4318", "http://c:4318/v1/logs", "", "are both set: set one"},
		{"ftp://c", "", "", "--events-otlp-endpoint: \"ftp://c\": want an http or https URL"},
		{"", "http://u:secret@c/", "", "--events-otlp-logs-endpoint: \"http://u:xxxxx@c/\" holds a user or password"},
	} {
		c := OTLPConfig{Endpoint: tc.endpoint, LogsEndpoint: tc.logs}
		got, err := c.LogsURL()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q, %q: %q, %v; want an error saying %q", tc.endpoint, tc.logs, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q, %q: %q, %v; want %q", tc.endpoint, tc.logs, got, err, tc.want)
		}
	}
}
