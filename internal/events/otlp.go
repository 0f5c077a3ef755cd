package events

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
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
	AttrStatus        = "http.response.status_code"
	AttrRefererHost   = "linkforge.referer.host"
	AttrBot           = "linkforge.user_agent.bot"
	AttrDevice        = "linkforge.user_agent.device"
	AttrCountry       = "geo.country.iso_code"
	AttrClientAddress = "client.address"
)

// otlpSink exports events as OpenTelemetry log records with the SDK's
// OTLP/HTTP exporter. The exporter's own retries are off: the pipeline
// retries, as for every sink, reading the status and Retry-After of the
// exporter's last answer from its transport.
type otlpSink struct {
	exporter *otlploghttp.Exporter
	provider *sdklog.LoggerProvider
	logger   otellog.Logger
	records  *collector
	answers  *lastAnswer
	last     struct {
		end     *Event
		records []sdklog.Record
	}
}

func newOTLPSink(c *Config) (*otlpSink, error) {
	u, err := url.Parse(c.OTLP.Endpoint)
	if err != nil {
		return nil, err
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/logs"
	}
	client := &http.Client{Timeout: c.OTLP.Timeout}
	if c.OTLP.HTTPClient != nil {
		cp := *c.OTLP.HTTPClient
		client = &cp
	}
	base := client.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	answers := &lastAnswer{base: base}
	client.Transport = answers
	headers := map[string]string{}
	for k, v := range c.OTLP.Headers {
		headers[k] = v
	}
	if c.OTLP.BearerToken != "" {
		headers["Authorization"] = "Bearer " + c.OTLP.BearerToken
	}
	opts := []otlploghttp.Option{
		otlploghttp.WithEndpointURL(u.String()),
		otlploghttp.WithHTTPClient(client),
		otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: false}),
	}
	if len(headers) > 0 { // else OTEL_EXPORTER_OTLP_(LOGS_)HEADERS may set them
		opts = append(opts, otlploghttp.WithHeaders(headers))
	}
	if c.OTLP.Gzip {
		opts = append(opts, otlploghttp.WithCompression(otlploghttp.GzipCompression))
	}
	exp, err := otlploghttp.New(context.Background(), opts...)
	if err != nil {
		return nil, err
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", ServiceName)}
	if c.Instance != "" {
		attrs = append(attrs, attribute.String("service.instance.id", c.Instance))
	}
	records := &collector{}
	provider := sdklog.NewLoggerProvider(
		sdklog.WithResource(resource.NewSchemaless(attrs...)),
		sdklog.WithProcessor(records),
		sdklog.WithAllowKeyDuplication(), // our keys are distinct: no map to deduplicate them
	)
	return &otlpSink{
		exporter: exp, provider: provider, records: records, answers: answers,
		logger: provider.Logger("github.com/linkforge/linkforge/internal/events"),
	}, nil
}

func (*otlpSink) name() string { return SinkOTLP }

func (s *otlpSink) close(ctx context.Context) error {
	return errors.Join(s.provider.Shutdown(ctx), s.exporter.Shutdown(ctx))
}

func (s *otlpSink) send(ctx context.Context, batch []Event) (int, attempt) {
	// A retry sends the same records: the batch ends at the same event.
	if s.last.end != &batch[len(batch)-1] {
		s.last.records = s.encode(batch)
		s.last.end = &batch[len(batch)-1]
	}
	s.answers.reset()
	err := s.exporter.Export(ctx, s.last.records)
	if err == nil {
		return len(batch), attempt{}
	}
	resp := s.answers.get()
	if resp == nil {
		return 0, attempt{err: err, retry: true} // no answer: network, timeout
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		a := httpFailure(resp, nil, true)
		a.err = err
		return 0, a
	}
	return 0, attempt{err: err} // OTLP: any other failure is not retried
}

// encode makes the log records of batch, through the SDK's logger (which
// adds the resource and scope).
func (s *otlpSink) encode(batch []Event) []sdklog.Record {
	s.records.records = make([]sdklog.Record, 0, len(batch))
	ctx := context.Background()
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
			attribute.String(AttrEventID, e.ID),
			attribute.String(AttrCode, e.Code),
			attribute.Bool(AttrOrphan, e.Orphan),
			attribute.Int(AttrRule, e.Rule),
			attribute.Int(AttrStatus, e.Status),
			attribute.Bool(AttrBot, e.Bot),
			attribute.String(AttrDevice, e.Device),
		)
		for _, kv := range [...]struct{ k, v string }{
			{AttrNamespace, e.Namespace}, {AttrName, e.Name}, {AttrUID, e.UID}, {AttrTarget, e.Target},
			{AttrRefererHost, e.RefererHost}, {AttrCountry, e.Country}, {AttrClientAddress, e.ClientAddress},
		} {
			if kv.v != "" {
				r.AddAttributes(attribute.String(kv.k, kv.v))
			}
		}
		s.logger.Emit(ctx, r)
	}
	return s.records.records
}

// collector is the logger provider's processor: it keeps the records the
// sink emits for the sink to export.
type collector struct{ records []sdklog.Record }

func (*collector) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }
func (c *collector) OnEmit(_ context.Context, r *sdklog.Record) error {
	c.records = append(c.records, r.Clone())
	return nil
}
func (*collector) Shutdown(context.Context) error   { return nil }
func (*collector) ForceFlush(context.Context) error { return nil }

// lastAnswer is the exporter's transport: it keeps the last answer's
// status and headers for the retry decision (the exporter's error has the
// body).
type lastAnswer struct {
	base http.RoundTripper
	mu   sync.Mutex
	resp *http.Response
}

func (l *lastAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(req)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.resp = nil
	if err == nil {
		l.resp = &http.Response{Status: resp.Status, StatusCode: resp.StatusCode, Header: resp.Header.Clone(), Request: req}
	}
	return resp, err
}

func (l *lastAnswer) reset() {
	l.mu.Lock()
	l.resp = nil
	l.mu.Unlock()
}

func (l *lastAnswer) get() *http.Response {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.resp
}
