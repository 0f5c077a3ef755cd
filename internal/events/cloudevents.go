package events

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding/format"
	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/cloudevents/sdk-go/v2/types"
)

// SinkCloudEvents and SinkOTLP are the sink labels of the metrics.
const (
	SinkCloudEvents = "cloudevents"
	SinkOTLP        = "otlp"
)

// maxResponseBody is how much of a receiver's answer is read (to reuse
// the connection, and for the error message).
const maxResponseBody = 64 << 10

// cloudEventsSink posts CloudEvents 1.0 in the HTTP binding: a batch per
// request (application/cloudevents-batch+json), or one structured event
// per request. It encodes the events itself (ceEncoder) into a
// message the SDK's HTTP binding writes into the request; it signs, sends
// and reads the answer.
type cloudEventsSink struct {
	cfg    CloudEventsConfig
	enc    *ceEncoder
	client *http.Client
	// the last batch encoded, reused by its retries
	last struct {
		n          int
		perRequest int // events in each request: 1 or n
		reqs       []encoded
	}
	// buf holds the bodies of the last batch's requests: reused by the
	// next batch, since each request's body is released when its answer
	// has come (requestBody).
	buf []byte
}

// encoded is a request body ready to send, and the id it is signed with.
type encoded struct {
	id     string
	msg    encodedMessage
	events int
}

func newCloudEventsSink(c *Config) *cloudEventsSink {
	return &cloudEventsSink{cfg: c.CloudEvents, enc: newCEEncoder(sourceAttribute(c.Source)),
		client: newHTTPClient(c.CloudEvents.HTTPClient, c.CloudEvents.Timeout)}
}

// sourceAttribute is source as the SDK's event writes it (a URI
// reference, parsed and written again).
func sourceAttribute(source string) string {
	if u := types.ParseURIRef(source); u != nil {
		return u.String()
	}
	return source
}

func (*cloudEventsSink) name() string { return SinkCloudEvents }
func (s *cloudEventsSink) close(context.Context) error {
	s.client.CloseIdleConnections()
	return nil
}

// CloudEvent returns e as the SDK's CloudEvent of source: what the sink
// sends (encodeCloudEvent), for receivers and tests.
func CloudEvent(e *Event, source string) (cloudevents.Event, error) {
	ce := cloudevents.New(cloudevents.CloudEventsVersionV1)
	ce.SetID(e.ID)
	ce.SetSource(source)
	ce.SetType(EventType)
	ce.SetTime(e.Time)
	ce.SetSubject(e.Subject())
	// The event itself, not its bytes: the SDK writes bytes as data_base64.
	if err := ce.SetData(cloudevents.ApplicationJSON, e); err != nil {
		return ce, err
	}
	return ce, ce.Validate()
}

func (s *cloudEventsSink) send(ctx context.Context, batch []Event, again bool) (int, attempt) {
	reqs := s.last.reqs
	if again && len(batch) <= s.last.n {
		// A retry sends the batch again, or in single mode the part of
		// it not yet sent: the same bodies (the same events with the
		// same ids), a suffix of them.
		reqs = reqs[len(reqs)-len(batch)/s.last.perRequest:]
	} else {
		reqs = s.encode(batch)
	}
	sent := 0
	for _, r := range reqs {
		if a := s.post(ctx, r); a.err != nil {
			return sent, a
		}
		sent += r.events
	}
	return sent, attempt{}
}

// encode returns the requests of batch, kept for its retries. Their ids
// are copied: the batch's strings are not the sink's after send.
func (s *cloudEventsSink) encode(batch []Event) []encoded {
	// One buffer for the batch, the requests' bodies slices of it.
	body := s.buf[:0]
	var reqs []encoded
	if s.cfg.Single {
		reqs = make([]encoded, len(batch))
		for i := range batch {
			start := len(body)
			body = s.enc.appendEvent(body, &batch[i])
			reqs[i] = encoded{id: strings.Clone(batch[i].ID), msg: encodedMessage{format: format.JSON, body: body[start:len(body):len(body)]}, events: 1}
		}
	} else {
		body = append(body, '[')
		for i := range batch {
			if i > 0 {
				body = append(body, ',')
			}
			body = s.enc.appendEvent(body, &batch[i])
		}
		body = append(body, ']')
		reqs = append(s.last.reqs[:0], encoded{id: strings.Clone(batch[0].ID), msg: encodedMessage{format: format.JSONBatch, body: body}, events: len(batch)})
	}
	s.buf = body
	s.last.n, s.last.reqs = len(batch), reqs
	s.last.perRequest = reqs[0].events
	return reqs
}

// post makes one request, written by the SDK's HTTP binding.
func (s *cloudEventsSink) post(ctx context.Context, r encoded) attempt {
	bodies := &requestBodies{b: r.msg.body}
	defer bodies.release()
	msg := r.msg
	msg.reader, _ = bodies.next()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.URL, nil)
	if err == nil {
		err = cehttp.WriteRequest(ctx, &msg, req)
	}
	if err != nil {
		return attempt{err: err}
	}
	// The binding knows the length of the readers it made, not of ours,
	// nor how to make another.
	req.ContentLength, req.GetBody = int64(len(r.msg.body)), bodies.next
	if len(s.cfg.SigningKey) > 0 {
		signRequest(req.Header, s.cfg.SigningKey, r.id, time.Now(), r.msg.body)
	}
	if s.cfg.BearerToken != "" {
		req.Header.Set("Authorization", "Bearer "+s.cfg.BearerToken)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return attempt{err: err, retry: true}
	}
	defer func() { _ = resp.Body.Close() }()
	body := io.LimitReader(resp.Body, maxResponseBody)
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		// Read to its end (to reuse the connection) through io.Discard's
		// pooled buffer: a batch's answer is not worth an allocation.
		_, _ = io.Copy(io.Discard, body)
		return attempt{}
	}
	answer, _ := io.ReadAll(body)
	return httpFailure(resp, answer, resp.StatusCode == http.StatusRequestTimeout ||
		resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500)
}

// httpFailure is the attempt of a request the receiver answered with
// resp's failure status; retry says whether the status is retried.
func httpFailure(resp *http.Response, answer []byte, retry bool) attempt {
	a := attempt{retry: retry, err: fmt.Errorf("%s %s answered %s: %q", resp.Request.Method, resp.Request.URL.Redacted(), resp.Status, firstLine(answer))}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		a.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return a
}

// firstLine is the start of a receiver's answer, for a log line.
func firstLine(b []byte) string {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	if len(b) > 200 {
		b = b[:200]
	}
	return string(b)
}

// parseRetryAfter reads a Retry-After value: delay seconds or an HTTP
// date; 0 when it is neither or in the past.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, int64(24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
