package events

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// processCPU is the CPU time (user and system) the process has used.
func processCPU(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// idleSink is a sink that is never started: for measuring Offer alone.
type idleSink struct{}

func (idleSink) name() string                                       { return SinkCloudEvents }
func (idleSink) send(context.Context, []Event, bool) (int, attempt) { return 0, attempt{} }
func (idleSink) close(context.Context) error                        { return nil }

// handoffOnly is a Pipeline with no goroutine: the caller drains its ring.
func handoffOnly() *Pipeline {
	c := testConfig("http://127.0.0.1:1/")
	c.HandoffBuffer = 4096
	return newPipeline(c.withDefaults(), []sink{idleSink{}})
}

// hitPathRecord fills rec as the redirector does for a request.
func hitPathRecord(rec *Record, ip net.IP) {
	*rec = Record{Namespace: "team-a", Name: "docs", UID: "3f1c2a4e-8b9d-4c7e-a1f2-0e9d8c7b6a55", Target: "https://example.com/docs", Status: 302, Rule: NoRule, Variant: NoVariant, Time: 1,
		LinkPlain: true, TargetPlain: true} // the redirector checks a link's strings once (events.Plain)
	rec.SetCode([]byte("abc123"))
	rec.SetReferer([]byte("https://news.example.org/item?id=1"))
	rec.SetUserAgent([]byte("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1"))
	rec.SetCountry([]byte("DE"))
	rec.SetClientIP(ip)
}

// TestOfferDoesNotAllocate: building a Record from request bytes and
// offering it, taken or dropped (the ring full), allocates nothing.
func TestOfferDoesNotAllocate(t *testing.T) {
	p := handoffOnly()
	ip := net.ParseIP("198.51.100.23")
	var rec Record
	for _, phase := range []string{"taken", "dropped"} {
		allocs := testing.AllocsPerRun(1000, func() {
			hitPathRecord(&rec, ip)
			p.Offer(&rec)
		})
		if allocs != 0 {
			t.Errorf("Offer (%s) allocates %.1f times", phase, allocs)
		}
		if phase == "taken" {
			for p.ring.depth() < p.ring.capacity() { // fill it: the next phase drops
				p.Offer(&rec)
			}
		}
	}
	if c := countsOf(p, SinkCloudEvents); c.handoffFull == 0 {
		t.Error("no drop counted with the ring full")
	}
}

// checkingSink takes every event and checks, without allocating, that
// each is the event of hitPathRecord with an id after the last one's: a
// batch reused with strings of an earlier one would not be.
type checkingSink struct {
	events, wrong int
	lastID        [uuidLen]byte
}

func (*checkingSink) name() string                { return SinkCloudEvents }
func (*checkingSink) close(context.Context) error { return nil }

func (s *checkingSink) send(_ context.Context, batch []Event, _ bool) (int, attempt) {
	for i := range batch {
		e := &batch[i]
		if e.Code != "abc123" || e.RefererHost != "news.example.org" || e.Country != "DE" ||
			e.ClientAddress != "198.51.100.0" || e.ID <= string(s.lastID[:]) {
			s.wrong++
		}
		copy(s.lastID[:], e.ID)
	}
	s.events += len(batch)
	return len(batch), attempt{}
}

// TestBatchingDoesNotAllocate: once a batch has been sent, the batcher
// and a sink allocate nothing per event (no garbage to collect, whose
// every cycle marks the whole index): the next batch reuses it, its events
// and their strings, and reads right.
func TestBatchingDoesNotAllocate(t *testing.T) {
	c := testConfig("http://127.0.0.1:1/")
	c.MaxBatch = 64
	checking := &checkingSink{}
	p := newPipeline(c.withDefaults(), []sink{checking})
	s := p.sinks[0]
	ip := net.ParseIP("198.51.100.23")
	var rec Record
	cycle := func() { // what the batcher and the sink's sender do
		for range c.MaxBatch {
			hitPathRecord(&rec, ip)
			p.Offer(&rec)
		}
		p.drain(false)
		p.armWake()
		q, ok := s.buf.next(context.Background())
		if !ok {
			t.Fatal("no batch")
		}
		p.sendWithRetry(s, q.b.events[:q.n])
		p.release(q.b)
	}
	cycle() // the first batch is new
	if allocs := testing.AllocsPerRun(100, cycle); allocs != 0 {
		t.Errorf("a batch of %d events allocates %.1f times", c.MaxBatch, allocs)
	}
	if want := 102 * c.MaxBatch; checking.events != want || checking.wrong != 0 {
		t.Errorf("the sink got %d events, %d of them wrong; want %d, all right", checking.events, checking.wrong, want)
	}
	if c := countsOf(p, SinkCloudEvents); c.offered != checking.events || c.sent != checking.events {
		t.Errorf("counts %+v: want %d offered and sent", c, checking.events)
	}
}

// BenchmarkOffer: the hit path's cost: a Record filled from request bytes
// and offered (the benchmark empties the ring every 4096, as the batcher
// would, its cost amortized in).
func BenchmarkOffer(b *testing.B) {
	p := handoffOnly()
	ip := net.ParseIP("198.51.100.23")
	var rec Record
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		hitPathRecord(&rec, ip)
		if !p.Offer(&rec) {
			for p.ring.peek() != nil {
				p.ring.release()
			}
		}
	}
}

// BenchmarkOfferParallel: Offer from every P at once (the ring's tail is
// contended), taken or dropped.
func BenchmarkOfferParallel(b *testing.B) {
	p := handoffOnly()
	stop := make(chan struct{})
	drained := make(chan struct{})
	go func() { // one consumer, as the batcher
		defer close(drained)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if p.ring.peek() != nil {
				p.ring.release()
			} else {
				runtime.Gosched()
			}
		}
	}()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ip := net.ParseIP("198.51.100.23")
		var rec Record
		for pb.Next() {
			hitPathRecord(&rec, ip)
			p.Offer(&rec)
		}
	})
	close(stop)
	<-drained
}

// BenchmarkThroughput: events per second through the batcher and a sink to
// a loopback receiver in the same process (which reads each body and
// answers 200); run with -cpu 1 for what one core sustains, receiver
// included: events/s by the wall clock, events/cpu-s by the process's CPU
// time (the offers' loop included). Every event offered is sent: offers
// wait for room in the ring and for the sink to keep up.
func BenchmarkThroughput(b *testing.B) {
	discard := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	defer discard.Close()
	for _, tc := range []struct {
		name string
		cfg  func(*Config)
	}{
		{"cloudevents-batch", func(c *Config) { c.CloudEvents.URL = discard.URL }},
		{"cloudevents-single", func(c *Config) { c.CloudEvents.URL, c.CloudEvents.Single = discard.URL, true }},
		{"cloudevents-batch-signed", func(c *Config) {
			c.CloudEvents.URL, c.CloudEvents.SigningKey = discard.URL, []byte("0123456789abcdef0123456789abcdef")
		}},
		{"otlp", func(c *Config) { c.OTLP.Endpoint = discard.URL }},
		{"otlp-gzip", func(c *Config) { c.OTLP.Endpoint, c.OTLP.Gzip = discard.URL, true }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := Config{Registerer: prometheus.NewRegistry(), Buffer: 1 << 20}
			tc.cfg(&cfg)
			p, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			ip := net.ParseIP("198.51.100.23")
			var rec Record
			hitPathRecord(&rec, ip)
			// ns/op is the time from the first offer until Close has
			// delivered the last event, over the events.
			b.ResetTimer()
			start, cpuStart := time.Now(), processCPU(b)
			for range b.N {
				for p.ring.depth() >= p.ring.capacity() {
					runtime.Gosched()
				}
				// The sink keeping up: at most two batches wait for
				// it, as in a redirector whose receiver takes what it
				// sends. Asleep (not yielding), so that the scheduler
				// polls the network for the sink's answers.
				for p.sinks[0].buf.len() >= 2*p.cfg.MaxBatch {
					time.Sleep(20 * time.Microsecond)
				}
				rec.Time = 0
				p.Offer(&rec)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			if err := p.Close(ctx); err != nil {
				b.Fatal(err)
			}
			elapsed, cpu := time.Since(start), processCPU(b)-cpuStart
			b.StopTimer()
			c := countsOf(p, p.sinks[0].sink.name())
			if c.sent != b.N {
				b.Fatalf("sent %d of %d: %+v", c.sent, b.N, c)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
			// The same by the process's CPU time: what a core sustains,
			// whatever else the machine runs.
			b.ReportMetric(float64(b.N)/cpu.Seconds(), "events/cpu-s")
		})
	}
}
