package events

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of Config.
const (
	DefaultBuffer         = 10000
	DefaultHandoffBuffer  = 4096
	DefaultMaxBatch       = 500
	DefaultFlushInterval  = time.Second
	DefaultTimeout        = 10 * time.Second
	DefaultInitialBackoff = 200 * time.Millisecond
	DefaultMaxBackoff     = 30 * time.Second
	DefaultMaxRetryAfter  = 5 * time.Minute
	DefaultSource         = "/linkforge/redirector"
)

// Config of a Pipeline: what the redirector's --events-* flags fill. A
// Pipeline needs one sink at least: CloudEvents.URL, or OTLP.Endpoint or
// OTLP.LogsEndpoint.
type Config struct {
	CloudEvents CloudEventsConfig
	OTLP        OTLPConfig

	// Instance names this replica (the pod's name): the CloudEvents source
	// ends with it and the OTLP resource's service.instance.id is it.
	Instance string
	// Source is the CloudEvents source; default DefaultSource, followed by
	// "/" and Instance when that is set.
	Source string

	// Buffer is how many events each sink holds while it is down or slow
	// (default DefaultBuffer): the bound of the delivery guarantee.
	Buffer int
	// HandoffBuffer is how many records wait between Offer and the batcher
	// (default DefaultHandoffBuffer, rounded up to a power of two).
	HandoffBuffer int
	// MaxBatch is the most events in one request (default DefaultMaxBatch).
	MaxBatch int
	// FlushInterval is the longest an event waits for its batch to fill
	// (default DefaultFlushInterval).
	FlushInterval time.Duration
	// KeepClientAddress sends the client's address whole; by default it is
	// reduced to its network (ReduceClientAddress: IPv4 /24, IPv6 /32).
	KeepClientAddress bool

	Retry RetryConfig

	// Registerer takes the metrics (linkforge_events_*); nil registers none.
	Registerer prometheus.Registerer
	Log        logr.Logger
}

// CloudEventsConfig is the CloudEvents 1.0 HTTP sink.
type CloudEventsConfig struct {
	// URL receives the events (POST); empty: no CloudEvents sink.
	URL string
	// Single sends one event per request in structured mode
	// (application/cloudevents+json), for receivers that take no batches
	// (a Knative broker); by default a request carries a batch
	// (application/cloudevents-batch+json).
	Single bool
	// SigningKey, when set, signs every request with HMAC-SHA256 (the
	// webhook-id, webhook-timestamp and webhook-signature headers of the
	// Standard Webhooks scheme; see Sign): the key's bytes, as
	// ParseSigningKey decodes a secret's text.
	SigningKey []byte
	// BearerToken, when set, is sent as "Authorization: Bearer <token>".
	BearerToken string
	// Timeout of one request (default DefaultTimeout).
	Timeout time.Duration
	// HTTPClient replaces the default client (tests); its redirects are not
	// followed.
	HTTPClient *http.Client
}

// OTLPConfig is the OpenTelemetry logs over OTLP/HTTP sink. Its URL is
// Endpoint or LogsEndpoint (not both), read as the OTLP exporter
// specification reads OTEL_EXPORTER_OTLP_ENDPOINT and
// OTEL_EXPORTER_OTLP_LOGS_ENDPOINT (LogsURL).
type OTLPConfig struct {
	// Endpoint is the base URL of an OTLP/HTTP receiver, such as
	// http://collector:4318 or https://gateway.example.com/otlp: the
	// logs are posted to its path followed by /v1/logs. Empty, with
	// LogsEndpoint empty: no OTLP sink.
	Endpoint string
	// LogsEndpoint is the whole URL logs are posted to, used as it is
	// (a URL with no path gets "/"), such as
	// https://ingest.example.com/api/v2/otlp/logs.
	LogsEndpoint string
	// Headers are sent with every request (an API key of a vendor).
	Headers map[string]string
	// BearerToken, when set, is sent as "Authorization: Bearer <token>".
	BearerToken string
	// Gzip compresses the requests.
	Gzip bool
	// Timeout of one request (default DefaultTimeout).
	Timeout time.Duration
	// HTTPClient replaces the default client (tests).
	HTTPClient *http.Client
}

// RetryConfig is how a sink retries a request that failed for a reason
// that may pass: a network error, a timeout, 408, 429, or 5xx (the OTLP sink
// retries 502, 503 and 504 only, as OTLP says). A sink retries until the
// request succeeds, the receiver refuses it for good, or the pipeline
// closes.
type RetryConfig struct {
	// InitialBackoff is the first wait (default DefaultInitialBackoff); it
	// doubles at each retry up to MaxBackoff (default DefaultMaxBackoff),
	// each wait drawn from its upper half (jitter).
	InitialBackoff, MaxBackoff time.Duration
	// MaxRetryAfter caps the wait a Retry-After header asks for on 429 and
	// 503 (default DefaultMaxRetryAfter).
	MaxRetryAfter time.Duration
}

// Enabled reports whether c names a sink.
func (c *Config) Enabled() bool { return c.CloudEvents.URL != "" || c.OTLP.Enabled() }

// Enabled reports whether c names an OTLP receiver.
func (c *OTLPConfig) Enabled() bool { return c.Endpoint != "" || c.LogsEndpoint != "" }

// otlpLogsPath is the path the OTLP exporter specification appends to a
// base endpoint (OTEL_EXPORTER_OTLP_ENDPOINT) for logs.
const otlpLogsPath = "/v1/logs"

// LogsURL is the URL the OTLP sink posts logs to, as the OTLP exporter
// specification says of its two variables: LogsEndpoint
// (OTEL_EXPORTER_OTLP_LOGS_ENDPOINT) as it is, but for "/" when it has no
// path; else Endpoint (OTEL_EXPORTER_OTLP_ENDPOINT) with /v1/logs
// appended to its path, so that http://collector:4318 posts to
// http://collector:4318/v1/logs and https://gw.example.com/otlp to
// https://gw.example.com/otlp/v1/logs. An Endpoint whose path already ends
// with /v1/logs is refused: its logs would go to .../v1/logs/v1/logs.
func (c *OTLPConfig) LogsURL() (string, error) {
	if c.Endpoint != "" && c.LogsEndpoint != "" {
		return "", errors.New("--events-otlp-endpoint (a base URL, /v1/logs appended) and --events-otlp-logs-endpoint (the whole URL) are both set: set one")
	}
	if c.LogsEndpoint != "" {
		u, err := parseHTTPURL(c.LogsEndpoint)
		if err != nil {
			return "", fmt.Errorf("--events-otlp-logs-endpoint: %w", err)
		}
		if u.Path == "" {
			u.Path = "/"
		}
		return u.String(), nil
	}
	u, err := parseHTTPURL(c.Endpoint)
	if err != nil {
		return "", fmt.Errorf("--events-otlp-endpoint: %w", err)
	}
	if strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), otlpLogsPath) {
		return "", fmt.Errorf("--events-otlp-endpoint: %q is a base URL, to which %s is appended (as to OTEL_EXPORTER_OTLP_ENDPOINT): give it without %s, or give the whole URL to --events-otlp-logs-endpoint", u.Redacted(), otlpLogsPath, otlpLogsPath)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + otlpLogsPath
	if u.RawPath != "" {
		u.RawPath = strings.TrimSuffix(u.RawPath, "/") + otlpLogsPath
	}
	return u.String(), nil
}

func (c *Config) withDefaults() Config {
	d := *c
	setDefault(&d.Buffer, DefaultBuffer)
	setDefault(&d.HandoffBuffer, DefaultHandoffBuffer)
	setDefault(&d.MaxBatch, DefaultMaxBatch)
	setDefault(&d.FlushInterval, DefaultFlushInterval)
	setDefault(&d.CloudEvents.Timeout, DefaultTimeout)
	setDefault(&d.OTLP.Timeout, DefaultTimeout)
	setDefault(&d.Retry.InitialBackoff, DefaultInitialBackoff)
	setDefault(&d.Retry.MaxBackoff, DefaultMaxBackoff)
	setDefault(&d.Retry.MaxRetryAfter, DefaultMaxRetryAfter)
	if d.Source == "" {
		d.Source = DefaultSource
		if d.Instance != "" {
			d.Source += "/" + d.Instance
		}
	}
	if d.Log.GetSink() == nil {
		d.Log = logr.Discard()
	}
	return d
}

func setDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// validate says what is wrong with c, every problem in one error.
func (c *Config) validate() error {
	var errs []error
	if !c.Enabled() {
		errs = append(errs, errors.New("no sink: set --events-cloudevents-url, --events-otlp-endpoint or --events-otlp-logs-endpoint"))
	}
	if c.CloudEvents.URL != "" {
		if err := checkURL(c.CloudEvents.URL); err != nil {
			errs = append(errs, fmt.Errorf("--events-cloudevents-url: %w", err))
		}
	}
	if c.OTLP.Enabled() {
		if _, err := c.OTLP.LogsURL(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.MaxBatch > c.Buffer && c.Buffer > 0 {
		errs = append(errs, fmt.Errorf("a batch of %d events is larger than the buffer of %d (--events-buffer)", c.MaxBatch, c.Buffer))
	}
	return errors.Join(errs...)
}

func checkURL(raw string) error {
	_, err := parseHTTPURL(raw)
	return err
}

// parseHTTPURL parses a receiver's URL: http or https, a host, and no
// credentials.
func parseHTTPURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%q is not a URL: %w", raw, err)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%q holds a user or password: give credentials in a Secret's file (--events-*-file)", u.Redacted())
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%q: want an http or https URL", raw)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%q has no host", raw)
	}
	return u, nil
}

// ReadSecretFile reads a credential (a signing key, a bearer token) from a
// mounted Secret's file, without the line break an editor leaves at its end.
func ReadSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the events credential: %w", err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("the events credential file %s is empty", path)
	}
	return s, nil
}
