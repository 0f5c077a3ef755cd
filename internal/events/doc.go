// Package events delivers click events: one per request the redirector
// answers for a link (redirects, 410s, and "orphan" requests for codes no
// link holds) to the pipelines a team already runs, as CloudEvents 1.0 over
// HTTP and as OpenTelemetry log records over OTLP/HTTP (docs/events.md).
//
// The redirector hands over a Record, a value of a fixed size, with Offer:
// no allocation, no lock, no wait (one compare-and-swap and a copy into a
// ring). A batcher goroutine builds the events (ids, User-Agent class,
// the client's network) and appends them in batches to each sink's
// buffer; each sink sends its buffer in order and retries what may pass
// (network errors, timeouts, 429 and 5xx) with exponential backoff and
// jitter, honouring Retry-After.
//
// Nothing is allocated per event: a batch's events, and the bytes their
// strings point into, are reused once every sink has released the batch,
// so that events make no garbage for collections that would mark the
// whole index. The sinks write the formats' bytes themselves, into
// buffers they reuse: the CloudEvents JSON format as a
// binding.Message the CloudEvents SDK's HTTP binding writes into the
// request (ceEncoder), and OTLP protobuf by the generated protos'
// field numbers (otlpEncoder). Tests check both against the SDKs: the
// CloudEvents SDK reads every field as from its own encoding, and the
// OpenTelemetry log SDK's exporter sends the same OTLP messages.
//
// # Delivery guarantee
//
// At least once, within a bound. An event reaches a sink's receiver unless
// one of these loses it, and each loss is counted in
// linkforge_events_dropped_total{sink,reason} or
// linkforge_events_failed_total{sink}:
//
//   - handoff_full: the ring between Offer and the batcher held
//     HandoffBuffer records (the batcher starved of CPU). Offer returns
//     false; serving goes on.
//   - buffer_full: the sink's buffer held Buffer events (the receiver down,
//     or slower than the clicks). The events that do not fit are dropped,
//     the oldest are kept: a receiver down for a while gets, once back,
//     the first Buffer events of the outage (less the batch being sent),
//     and the rest of the outage is lost and counted.
//   - failed: the receiver refused a request with a status that is not
//     retried (4xx other than 408 and 429; for OTLP all but 429, 502, 503
//     and 504), reason refused; or an OTLP receiver answered 2xx with a
//     partial_success that rejected some of its records, reason rejected
//     (OTLP says not to retry them). Any other 2xx is a delivery, whatever
//     its body.
//   - shutdown: events still buffered when Close's deadline passed, and
//     records offered after Close.
//
// For each sink, offered = sent + failed + dropped + the two depth gauges.
// An event is sent again (same id) when a receiver took it but its answer
// was lost (a timeout, a connection cut): receivers deduplicate on the
// event id (CloudEvents id, OTLP attribute linkforge.event.id). Nothing is
// kept across a restart of the redirector: what its buffers held when it
// was killed without Close is lost without a count.
package events
