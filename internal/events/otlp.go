package events

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strings"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"golang.org/x/net/http/httpguts"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// ServiceName is the OTLP resource's service.name.
const ServiceName = "linkforge-redirector"

// The OTLP log record attributes of an event (docs/events.md). Where the
// OpenTelemetry semantic conventions name a field, the name is theirs.
const (
	AttrEventID       = "linkforge.event.id"
	AttrNamespace     = "linkforge.link.namespace"
	AttrName          = "linkforge.link.name"
	AttrUID           = "linkforge.link.uid"
	AttrCode          = "linkforge.link.code"
	AttrOrphan        = "linkforge.link.orphan"
	AttrTarget        = "linkforge.link.target"
	AttrRule          = "linkforge.link.rule"
	AttrVariant       = "linkforge.link.variant"
	AttrGated         = "linkforge.link.gated"
	AttrGatePassed    = "linkforge.link.gate_passed"
	AttrStatus        = "http.response.status_code"
	AttrRefererHost   = "linkforge.referer.host"
	AttrBot           = "linkforge.user_agent.bot"
	AttrDevice        = "linkforge.user_agent.device"
	AttrCountry       = "geo.country.iso_code"
	AttrClientAddress = "client.address"
)

// otlpSink posts events as OpenTelemetry log records in the OTLP/HTTP
// protobuf encoding (otlpEncoder), one request per batch, and reads the
// answer with the official protos. It retries as OTLP says: 429, 502, 503
// and 504 (and network errors), after their Retry-After. A 2xx is a
// delivery; its answer's partial_success says how many records the
// receiver rejected (not retried, as OTLP says: counted as failed, reason
// rejected).
type otlpSink struct {
	url    string
	client *http.Client
	header http.Header
	gzip   *gzip.Writer // nil: no compression
	enc    *otlpEncoder
	// the last batch's request, reused by its retries
	last []byte
	// buf and zbuf hold the last batch's request, and its gzip: reused by
	// the next batch, since each request's body is released when its
	// answer has come (requestBody).
	buf  []byte
	zbuf bytes.Buffer
}

func newOTLPSink(c *Config) (*otlpSink, error) {
	u, err := c.OTLP.LogsURL()
	if err != nil {
		return nil, err
	}
	client := newHTTPClient(c.OTLP.HTTPClient, c.OTLP.Timeout)
	header := http.Header{}
	for k, v := range otlpEnvHeaders() {
		header.Set(k, v)
	}
	for k, v := range c.OTLP.Headers {
		header.Set(k, v)
	}
	if c.OTLP.BearerToken != "" {
		header.Set("Authorization", "Bearer "+c.OTLP.BearerToken)
	}
	header.Set("Content-Type", "application/x-protobuf")
	header.Set("User-Agent", ServiceName)
	s := &otlpSink{url: u, client: client, header: header, enc: newOTLPEncoder(c.Instance)}
	if c.OTLP.Gzip {
		header.Set("Content-Encoding", "gzip")
		s.gzip = gzip.NewWriter(io.Discard)
	}
	return s, nil
}

// otlpEnvHeaders are the headers of OTEL_EXPORTER_OTLP_LOGS_HEADERS, or
// else of OTEL_EXPORTER_OTLP_HEADERS, as the OTLP exporters read them:
// key=value pairs separated by commas, both URL-encoded; a pair that is
// not one is left out.
func otlpEnvHeaders() map[string]string {
	v, ok := os.LookupEnv("OTEL_EXPORTER_OTLP_LOGS_HEADERS")
	if !ok {
		v = os.Getenv("OTEL_EXPORTER_OTLP_HEADERS")
	}
	return parseOTLPHeaders(v)
}

func parseOTLPHeaders(v string) map[string]string {
	headers := map[string]string{}
	for _, pair := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(pair, "=")
		if !ok {
			continue
		}
		k, err1 := url.PathUnescape(strings.TrimSpace(k))
		val, err2 := url.PathUnescape(strings.TrimSpace(val))
		if err1 != nil || err2 != nil || k == "" || !httpguts.ValidHeaderFieldName(k) || !httpguts.ValidHeaderFieldValue(val) {
			continue
		}
		headers[k] = val
	}
	return headers
}

func (*otlpSink) name() string { return SinkOTLP }

func (s *otlpSink) close(context.Context) error {
	s.client.CloseIdleConnections()
	return nil
}

func (s *otlpSink) send(ctx context.Context, batch []Event, again bool) (int, attempt) {
	// A retry sends the same request (OTLP takes all of a batch or none).
	if !again || s.last == nil {
		body, err := s.encode(batch)
		if err != nil {
			s.last = nil
			return 0, attempt{err: fmt.Errorf("encode the OTLP request: %w", err)}
		}
		s.last = body
	}
	bodies := &requestBodies{b: s.last}
	defer bodies.release()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, nil)
	if err != nil {
		return 0, attempt{err: err}
	}
	bodies.setOn(req)
	req.Header = s.header.Clone()
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, attempt{err: err, retry: true} // no answer: network, timeout
	}
	defer func() { _ = resp.Body.Close() }()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return otlpAccepted(resp, answer, len(batch))
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusBadGateway ||
		resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusGatewayTimeout:
		return 0, httpFailure(resp, answer, true)
	}
	return 0, httpFailure(resp, answer, false) // OTLP: any other failure is not retried
}

// otlpAccepted reads the answer of a 2xx to a request of n records: how
// many the receiver took, and for the rest why not. A 2xx is a delivery
// (OTLP/HTTP: the request was processed): an empty answer, or one that is
// not an ExportLogsServiceResponse (protobuf, or JSON when the receiver
// says so) takes all n, noted as a warning, since retrying would not make
// it better. Its partial_success rejects rejected_log_records of them
// (the sink cannot know which: the last ones, for the counts), or with
// none rejected carries the receiver's warning.
func otlpAccepted(resp *http.Response, answer []byte, n int) (int, attempt) {
	var msg collogspb.ExportLogsServiceResponse
	var err error
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
		err = protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(answer, &msg)
	} else {
		err = proto.Unmarshal(answer, &msg)
	}
	if err != nil {
		return n, attempt{warning: fmt.Errorf("%s %s answered %s with a body that is not an OTLP answer (%v): counted as delivered", resp.Request.Method, resp.Request.URL.Redacted(), resp.Status, err)}
	}
	ps := msg.GetPartialSuccess()
	rejected := ps.GetRejectedLogRecords()
	switch {
	case rejected > 0:
		taken := n - int(min(rejected, int64(n)))
		return taken, attempt{rejected: true, err: fmt.Errorf("%s %s answered %s with a partial success: %d of %d log records rejected: %q",
			resp.Request.Method, resp.Request.URL.Redacted(), resp.Status, rejected, n, firstLine([]byte(ps.GetErrorMessage())))}
	case ps.GetErrorMessage() != "":
		return n, attempt{warning: fmt.Errorf("%s %s took every log record with a warning: %q", resp.Request.Method, resp.Request.URL.Redacted(), firstLine([]byte(ps.GetErrorMessage())))}
	}
	return n, attempt{}
}

// encode returns the request body of batch.
func (s *otlpSink) encode(batch []Event) ([]byte, error) {
	s.buf = s.enc.appendRequest(s.buf[:0], batch)
	if s.gzip == nil {
		return s.buf, nil
	}
	s.zbuf.Reset()
	s.gzip.Reset(&s.zbuf)
	if _, err := s.gzip.Write(s.buf); err != nil {
		return nil, err
	}
	if err := s.gzip.Close(); err != nil {
		return nil, err
	}
	return s.zbuf.Bytes(), nil
}
