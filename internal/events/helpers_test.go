package events

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/linkforge/linkforge/internal/events/eventstest"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// flush is the tests' FlushInterval; waits are stated in multiples of it.
const flush = 10 * time.Millisecond

// eventually is how long a test waits for what the pipeline does within a
// few flush intervals: 500 of them, for a busy machine.
const eventually = 500 * flush

// testConfig is a small pipeline to url: 10-event batches, a 100-event
// buffer, quick retries.
func testConfig(url string) Config {
	return Config{
		CloudEvents:   CloudEventsConfig{URL: url},
		Buffer:        100,
		HandoffBuffer: 64,
		MaxBatch:      10,
		FlushInterval: flush,
		Retry:         RetryConfig{InitialBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, MaxRetryAfter: 5 * time.Second},
		Registerer:    prometheus.NewRegistry(),
		Instance:      "redirector-0",
	}
}

func start(t *testing.T, cfg Config) *Pipeline {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := contextWithTimeout(flush)
		defer cancel()
		_ = p.Close(ctx)
	})
	return p
}

// record i: a redirect of link-i with code c0000i and every field set.
func record(i int) Record {
	r := Record{
		Namespace: "team-a", Name: fmt.Sprintf("link-%d", i), UID: fmt.Sprintf("uid-%d", i),
		Target: "https://example.com/docs", Status: 302, Rule: NoRule, Variant: NoVariant,
		Client: netip.MustParseAddr("198.51.100.23"),
	}
	r.SetCodeString(fmt.Sprintf("c%05d", i))
	r.SetReferer([]byte("https://news.example.org/item?id=1"))
	r.SetUserAgent([]byte("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) Mobile/15E148"))
	r.SetCountry([]byte("DE"))
	return r
}

// offer offers records from..to-1, waiting after each batch until the
// batcher has taken it, so that none is lost at the hand-off.
func offer(t *testing.T, p *Pipeline, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		r := record(i)
		if !p.Offer(&r) {
			t.Fatalf("offer %d refused", i)
		}
		if (i+1-from)%p.cfg.MaxBatch == 0 || i == to-1 {
			waitFor(t, func() bool { return p.ring.depth() == 0 }, "the batcher takes the hand-off ring's records")
		}
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	NewWithT(t).Eventually(cond).WithTimeout(eventually).WithPolling(time.Millisecond).Should(BeTrue(), what)
}

// counts are a sink's metrics.
type counts struct {
	offered, sent, failed, rejected, retries, handoffFull, bufferFull, shutdown, depth int
}

func countsOf(p *Pipeline, sink string) counts {
	m := p.m.sinks[sink]
	var depth int
	for _, s := range p.sinks {
		if s.sink.name() == sink {
			depth = s.buf.len()
		}
	}
	return counts{
		offered: int(p.offered()), sent: int(testutil.ToFloat64(m.sent)),
		failed: int(testutil.ToFloat64(m.failed)), rejected: int(testutil.ToFloat64(m.rejected)), retries: int(testutil.ToFloat64(m.retries)),
		handoffFull: int(testutil.ToFloat64(m.dropped[DropHandoffFull])),
		bufferFull:  int(testutil.ToFloat64(m.dropped[DropBufferFull])),
		shutdown:    int(testutil.ToFloat64(m.dropped[DropShutdown])),
		depth:       depth + p.ring.depth(),
	}
}

// conserved checks the bound's accounting: every offered event is sent,
// failed, dropped (for a reason) or still buffered.
func (c counts) conserved(t *testing.T) {
	t.Helper()
	if c.offered != c.sent+c.failed+c.rejected+c.handoffFull+c.bufferFull+c.shutdown+c.depth {
		t.Errorf("offered %d != sent + failed + dropped + buffered: %+v", c.offered, c)
	}
}

// request is what a receiver got.
type request struct {
	at     time.Time
	header http.Header
	body   []byte
	events []cloudevents.Event
}

// ceReceiver decodes requests with the CloudEvents SDK (a batch, or one
// structured or binary event) and answers with respond's status.
type ceReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	requests []request
	// respond says how to answer request n (0 the first): a status and
	// headers; nil answers 200.
	respond func(n int) (int, http.Header)
	// hold, when set, is waited on before answering (a slow receiver).
	hold chan struct{}
	// down closes the connection without an answer.
	down bool
}

func newCEReceiver(t *testing.T) *ceReceiver {
	r := &ceReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(func() {
		r.mu.Lock()
		if r.hold != nil {
			close(r.hold)
			r.hold = nil
		}
		r.mu.Unlock()
		r.Close()
	})
	return r
}

func (r *ceReceiver) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	down, hold := r.down, r.hold
	r.mu.Unlock()
	if down {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	}
	if hold != nil {
		select {
		case <-hold:
		case <-req.Context().Done():
			return
		}
	}
	body, evs, err := eventstest.ReadCloudEvents(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	n := len(r.requests)
	r.requests = append(r.requests, request{at: time.Now(), header: req.Header.Clone(), body: body, events: evs})
	respond := r.respond
	r.mu.Unlock()
	w.WriteHeader(answerOf(w, respond, n))
}

// answerOf sets the headers respond gives request n and returns its status
// (200 when respond is nil): the test receivers' scripted answers.
func answerOf(w http.ResponseWriter, respond func(n int) (int, http.Header), n int) int {
	if respond == nil {
		return http.StatusOK
	}
	status, h := respond(n)
	for k, v := range h {
		w.Header()[k] = v
	}
	return status
}

func (r *ceReceiver) set(f func(r *ceReceiver)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

func (r *ceReceiver) got() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]request(nil), r.requests...)
}

// accepted are the events of the requests answered 2xx.
func (r *ceReceiver) accepted(statusOf func(n int) int) []cloudevents.Event {
	var evs []cloudevents.Event
	for n, req := range r.got() {
		if s := statusOf(n); s >= 200 && s < 300 {
			evs = append(evs, req.events...)
		}
	}
	return evs
}

func allOK(int) int { return http.StatusOK }
