package events

import (
	"errors"
	"flag"
	"fmt"
	"time"
)

// Flags are the redirector's --events-* flags (docs/events.md): Bind them,
// parse, then Config reads the credential files and returns the Config.
type Flags struct {
	CloudEventsURL      string
	CloudEventsSingle   bool
	SigningKeyFile      string
	BearerTokenFile     string
	OTLPEndpoint        string
	OTLPLogsEndpoint    string
	OTLPBearerTokenFile string
	OTLPGzip            bool
	Buffer, MaxBatch    int
	FlushInterval       time.Duration
	KeepClientAddress   bool
}

// Bind defines the flags on fs, with the package's defaults.
func (f *Flags) Bind(fs *flag.FlagSet) {
	fs.StringVar(&f.CloudEventsURL, "events-cloudevents-url", "",
		"POST a CloudEvent per answered request of a link to this URL, in batches (application/cloudevents-batch+json). Empty: no CloudEvents sink. See docs/events.md.")
	fs.BoolVar(&f.CloudEventsSingle, "events-cloudevents-single", false,
		"Send one CloudEvent per request (structured mode) instead of batches, for receivers that take no batches (a Knative broker).")
	fs.StringVar(&f.SigningKeyFile, "events-signing-key-file", "",
		"File (a Secret's key) with the HMAC-SHA256 key that signs CloudEvents requests (Standard Webhooks headers), as the scheme's libraries read it: base64 of 16 bytes at least (32 are best), with or without whsec_ before it. A key that is not base64 stops the start.")
	fs.StringVar(&f.BearerTokenFile, "events-bearer-token-file", "",
		"File (a Secret's key) with a bearer token for the CloudEvents receiver.")
	fs.StringVar(&f.OTLPEndpoint, "events-otlp-endpoint", "",
		"Send each click event as an OpenTelemetry log record to this OTLP/HTTP receiver's base URL, to which /v1/logs is appended as to OTEL_EXPORTER_OTLP_ENDPOINT (http://otel-collector:4318 posts to http://otel-collector:4318/v1/logs, https://gw.example.com/otlp to https://gw.example.com/otlp/v1/logs). Empty: no OTLP sink, unless --events-otlp-logs-endpoint. OTEL_EXPORTER_OTLP_LOGS_HEADERS adds headers.")
	fs.StringVar(&f.OTLPLogsEndpoint, "events-otlp-logs-endpoint", "",
		"The whole URL to post the OTLP log records to, used as it is, as OTEL_EXPORTER_OTLP_LOGS_ENDPOINT (such as https://ingest.example.com/api/v2/otlp/logs): instead of --events-otlp-endpoint, for receivers whose logs path is not <base>/v1/logs.")
	fs.StringVar(&f.OTLPBearerTokenFile, "events-otlp-bearer-token-file", "",
		"File (a Secret's key) with a bearer token for the OTLP receiver.")
	fs.BoolVar(&f.OTLPGzip, "events-otlp-gzip", false, "Gzip the OTLP requests.")
	fs.IntVar(&f.Buffer, "events-buffer", DefaultBuffer,
		"Click events each sink holds while its receiver is down or slow; beyond it new events are dropped (linkforge_events_dropped_total{reason=\"buffer_full\"}).")
	fs.IntVar(&f.MaxBatch, "events-max-batch", DefaultMaxBatch, "Most click events in one request.")
	fs.DurationVar(&f.FlushInterval, "events-flush-interval", DefaultFlushInterval, "Longest a click event waits for its batch to fill.")
	fs.BoolVar(&f.KeepClientAddress, "events-keep-client-address", false,
		"Send the client's address whole; by default it is cut to its network: IPv4 /24, IPv6 /32, and an IPv6 address that carries an IPv4 one (IPv4-mapped, 6to4, Teredo) to that IPv4 address's /24.")
}

// Config returns the Config of the flags, the credentials read from their
// files. Its Enabled is false when no sink is set; Registerer, Log and
// Instance are the caller's to set.
func (f *Flags) Config() (Config, error) {
	c := Config{
		CloudEvents:       CloudEventsConfig{URL: f.CloudEventsURL, Single: f.CloudEventsSingle},
		OTLP:              OTLPConfig{Endpoint: f.OTLPEndpoint, LogsEndpoint: f.OTLPLogsEndpoint, Gzip: f.OTLPGzip},
		Buffer:            f.Buffer,
		MaxBatch:          f.MaxBatch,
		FlushInterval:     f.FlushInterval,
		KeepClientAddress: f.KeepClientAddress,
	}
	var errs []error
	read := func(name, path string, into func(string) error) {
		if path == "" {
			return
		}
		s, err := ReadSecretFile(path)
		if err == nil {
			err = into(s)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", name, err))
		}
	}
	read("events-signing-key-file", f.SigningKeyFile, func(s string) (err error) {
		c.CloudEvents.SigningKey, err = ParseSigningKey(s)
		return err
	})
	read("events-bearer-token-file", f.BearerTokenFile, func(s string) error { c.CloudEvents.BearerToken = s; return nil })
	read("events-otlp-bearer-token-file", f.OTLPBearerTokenFile, func(s string) error { c.OTLP.BearerToken = s; return nil })
	if c.CloudEvents.URL == "" && (f.SigningKeyFile != "" || f.BearerTokenFile != "" || f.CloudEventsSingle) {
		errs = append(errs, errors.New("--events-signing-key-file, --events-bearer-token-file and --events-cloudevents-single need --events-cloudevents-url"))
	}
	if !c.OTLP.Enabled() && (f.OTLPBearerTokenFile != "" || f.OTLPGzip) {
		errs = append(errs, errors.New("--events-otlp-bearer-token-file and --events-otlp-gzip need --events-otlp-endpoint or --events-otlp-logs-endpoint"))
	}
	if f.Buffer < 1 || f.MaxBatch < 1 || f.FlushInterval <= 0 {
		errs = append(errs, fmt.Errorf("--events-buffer (%d), --events-max-batch (%d) and --events-flush-interval (%s) must be positive", f.Buffer, f.MaxBatch, f.FlushInterval))
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	if c.Enabled() {
		if err := c.validate(); err != nil {
			return Config{}, err
		}
	}
	return c, nil
}
