package events

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
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
// per request. The SDK builds the requests; this sink signs, sends and
// reads the answer.
type cloudEventsSink struct {
	cfg    CloudEventsConfig
	source string
	client *http.Client
	// the last batch encoded, reused by its retries
	last struct {
		end        *Event // its last event
		n          int
		perRequest int // events in each request: 1 or n
		reqs       []encoded
	}
}

// encoded is a request body ready to send, and the id it is signed with.
type encoded struct {
	id, contentType string
	body            []byte
	events          int
}

func newCloudEventsSink(c *Config) *cloudEventsSink {
	client := c.CloudEvents.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: c.CloudEvents.Timeout}
	} else {
		cp := *client
		client = &cp
	}
	// A redirect is an answer we do not follow: a POST is not replayed
	// elsewhere with the signature of this URL.
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cloudEventsSink{cfg: c.CloudEvents, source: c.Source, client: client}
}

func (*cloudEventsSink) name() string                { return SinkCloudEvents }
func (*cloudEventsSink) close(context.Context) error { return nil }

// CloudEvent returns e as a CloudEvent of source.
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

func (s *cloudEventsSink) send(ctx context.Context, batch []Event) (int, attempt) {
	reqs, err := s.encode(ctx, batch)
	if err != nil {
		return 0, attempt{err: fmt.Errorf("encode the CloudEvents: %w", err)}
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

// encode returns the requests of batch: the same bodies for its retries
// (the same events with the same ids), a suffix of them after a partial
// success in single mode.
func (s *cloudEventsSink) encode(ctx context.Context, batch []Event) ([]encoded, error) {
	// A retry sends the batch again, or in single mode the part of it not
	// yet sent: a suffix of the last batch, which ends at the same event.
	if n := len(batch); s.last.end == &batch[n-1] && n <= s.last.n {
		return s.last.reqs[len(s.last.reqs)-n/s.last.perRequest:], nil
	}
	ces := make([]cloudevents.Event, len(batch))
	for i := range batch {
		ce, err := CloudEvent(&batch[i], s.source)
		if err != nil {
			return nil, fmt.Errorf("event %s: %w", batch[i].ID, err)
		}
		ces[i] = ce
	}
	var reqs []encoded
	if s.cfg.Single {
		structured := binding.WithForceStructured(ctx)
		reqs = make([]encoded, len(ces))
		for i := range ces {
			req, err := cehttp.NewHTTPRequestFromEvent(structured, s.cfg.URL, ces[i])
			if err != nil {
				return nil, err
			}
			if reqs[i], err = readRequest(req, ces[i].ID(), 1); err != nil {
				return nil, err
			}
		}
	} else {
		// The batch format is a JSON array of the events in the JSON format:
		// each written by the SDK's MarshalJSON (what its
		// NewHTTPRequestFromEvents does through encoding/json, which then
		// parses every event again to compact it: a third of the sink's
		// CPU).
		body := []byte{'['}
		for i := range ces {
			b, err := ces[i].MarshalJSON()
			if err != nil {
				return nil, fmt.Errorf("event %s: %w", ces[i].ID(), err)
			}
			if i > 0 {
				body = append(body, ',')
			}
			body = append(body, b...)
		}
		body = append(body, ']')
		reqs = []encoded{{id: ces[0].ID(), contentType: cloudevents.ApplicationCloudEventsBatchJSON, body: body, events: len(ces)}}
	}
	s.last.end, s.last.n, s.last.reqs = &batch[len(batch)-1], len(batch), reqs
	s.last.perRequest = reqs[0].events
	return reqs, nil
}

// readRequest takes the body and content type of a request the SDK built.
func readRequest(req *http.Request, id string, events int) (encoded, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return encoded{}, err
	}
	return encoded{id: id, contentType: req.Header.Get("Content-Type"), body: body, events: events}, nil
}

// post makes one request.
func (s *cloudEventsSink) post(ctx context.Context, r encoded) attempt {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.URL, bytes.NewReader(r.body))
	if err != nil {
		return attempt{err: err}
	}
	req.Header.Set("Content-Type", r.contentType)
	if len(s.cfg.SigningKey) > 0 {
		signRequest(req.Header, s.cfg.SigningKey, r.id, time.Now(), r.body)
	}
	if s.cfg.BearerToken != "" {
		req.Header.Set("Authorization", "Bearer "+s.cfg.BearerToken)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return attempt{err: err, retry: true}
	}
	defer func() { _ = resp.Body.Close() }()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return attempt{}
	}
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
