package events

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// Pipeline takes the redirector's Records and delivers their events to the
// sinks: Offer puts a Record in the hand-off ring, the batcher builds events
// from the ring and appends them in batches to each sink's buffer, and each
// sink sends its buffer in order, retrying.
type Pipeline struct {
	cfg    Config
	ring   *ring
	events *builder // the batcher's
	m      *metrics
	sinks  []*sinkRunner
	closed atomic.Bool
	// refused counts the records Offer did not take (the ring full, or
	// the pipeline closed); with the ring's tail, those it did: offered.
	refused atomic.Uint64
	// wakeAt is the ring position whose offer wakes the batcher: a batch
	// is full. Offer rings once, then it is far off until the batcher has
	// drained (armWake).
	wakeAt  atomic.Uint64
	wake    chan struct{} // the batcher's doorbell: a batch is waiting
	free    chan *batch   // batches every sink is done with, for reuse
	stop    chan struct{} // closed by Close: the batcher drains and ends
	batched chan struct{} // closed when the batcher has ended
	// sinkCtx ends the sinks' requests and waits when Close's deadline
	// passes.
	sinkCtx    context.Context
	cancelSink context.CancelFunc
	sinksDone  sync.WaitGroup
	closeOnce  sync.Once
}

// sink sends batches of events to a receiver.
type sink interface {
	// name is the sink label of the metrics.
	name() string
	// send makes one attempt to deliver batch. It returns how many of the
	// leading events the receiver took, and for the rest why not. again
	// says that batch is what is left of the batch of the last call (a
	// retry, or the rest after a part was taken): the sink may send what
	// it made of it then. The events' strings are the pipeline's only
	// until send returns (batch): a sink keeps none of them.
	send(ctx context.Context, batch []Event, again bool) (int, attempt)
	// close releases what the sink holds.
	close(ctx context.Context) error
}

// attempt is the outcome of a send: why the events it did not deliver
// were not, and what to note of those it did.
type attempt struct {
	err error
	// retry: the failure may pass (network, timeout, 408, 429, 5xx).
	retry bool
	// rejected: the receiver took the request but rejected the events
	// not delivered (an OTLP partial success): not retried, counted as
	// failed with reason rejected.
	rejected bool
	// warning is what the receiver said of events it took (an OTLP
	// partial success that rejected none, an answer that is not OTLP's):
	// logged, not counted.
	warning error
	// retryAfter is the wait a 429 or 503 asked for.
	retryAfter time.Duration
}

type sinkRunner struct {
	sink sink
	buf  *buffer
	m    *sinkMetrics
	log  logr.Logger
}

// New starts a Pipeline of cfg's sinks.
func New(cfg Config) (*Pipeline, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("click events: %w", err)
	}
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("click events: %w", err)
	}
	var sinks []sink
	if c.CloudEvents.URL != "" {
		sinks = append(sinks, newCloudEventsSink(&c))
	}
	if c.OTLP.Enabled() {
		s, err := newOTLPSink(&c)
		if err != nil {
			return nil, fmt.Errorf("click events: the OTLP sink: %w", err)
		}
		sinks = append(sinks, s)
	}
	p := newPipeline(c, sinks)
	p.start()
	return p, nil
}

// newPipeline returns a Pipeline of sinks, not started.
func newPipeline(c Config, sinks []sink) *Pipeline {
	p := &Pipeline{
		cfg: c, ring: newRing(c.HandoffBuffer), events: newBuilder(c.KeepClientAddress),
		wake: make(chan struct{}, 1), free: make(chan *batch, freeBatches(&c)), stop: make(chan struct{}), batched: make(chan struct{}),
	}
	p.wakeAt.Store(uint64(c.MaxBatch))
	names := make([]string, len(sinks))
	depths := make([]func() float64, len(sinks))
	for i, s := range sinks {
		r := &sinkRunner{sink: s, buf: newBuffer(c.Buffer), log: c.Log.WithValues("sink", s.name())}
		p.sinks = append(p.sinks, r)
		names[i], depths[i] = s.name(), func() float64 { return float64(r.buf.len()) }
	}
	p.m = newMetrics(c.Registerer, names, p.offered, func() float64 { return float64(p.ring.depth()) }, depths)
	for _, r := range p.sinks {
		r.m = p.m.sinks[r.sink.name()]
	}
	p.sinkCtx, p.cancelSink = context.WithCancel(context.Background())
	return p
}

// start starts the batcher and the sinks' senders.
func (p *Pipeline) start() {
	for _, r := range p.sinks {
		p.sinksDone.Add(1)
		go p.deliver(r)
	}
	go p.batch()
}

// Offer hands rec over and returns at once: false when the hand-off ring is
// full (the record is dropped and counted) or the pipeline is closed. It
// does not allocate; rec is copied and may be reused. A nil Pipeline takes
// nothing.
func (p *Pipeline) Offer(rec *Record) bool {
	if p == nil {
		return false
	}
	if p.closed.Load() {
		p.refused.Add(1)
		dropAll(p.m.closedDropped)
		return false
	}
	if rec.Time == 0 {
		rec.Time = time.Now().UnixNano()
	}
	pos, ok := p.ring.offer(rec)
	if !ok {
		p.refused.Add(1)
		dropAll(p.m.handoffDropped)
		return false
	}
	if pos+1 >= p.wakeAt.Load() {
		// A batch is full: wake the batcher early, once.
		p.wakeAt.Store(math.MaxUint64)
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// offered is linkforge_events_offered_total: the records the ring took
// and those Offer refused, counted where Offer writes anyway.
func (p *Pipeline) offered() float64 {
	return float64(p.ring.taken() + p.refused.Load())
}

// armWake makes the offer that fills the next batch wake the batcher.
func (p *Pipeline) armWake() {
	p.wakeAt.Store(p.ring.head.Load() + uint64(p.cfg.MaxBatch))
}

// batch moves records from the ring to the sinks' buffers, as events in
// batches of up to MaxBatch: when a batch fills, and every FlushInterval.
func (p *Pipeline) batch() {
	defer close(p.batched)
	t := time.NewTicker(p.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-p.wake:
			p.drain(false) // full batches; the rest waits for the tick
			p.armWake()
		case <-t.C:
			p.drain(true)
			p.armWake()
		case <-p.stop:
			p.drain(true)
			return
		}
	}
}

// drain moves the records in the ring to the sinks' buffers: all of them,
// or only full batches.
func (p *Pipeline) drain(all bool) {
	for {
		n := min(p.ring.depth(), p.cfg.MaxBatch)
		if n <= 0 || !all && n < p.cfg.MaxBatch {
			return
		}
		b := p.newBatch(n)
		for len(b.events) < n {
			rec := p.ring.peek()
			if rec == nil {
				break // its producer is still writing it: take it next time
			}
			b.events = b.events[:len(b.events)+1]
			b.text = p.events.build(&b.events[len(b.events)-1], rec, b.text)
			p.ring.release()
		}
		got := len(b.events)
		if got == 0 {
			p.recycle(b)
			return
		}
		b.holders.Store(int32(len(p.sinks)))
		for _, s := range p.sinks {
			kept := s.buf.add(b)
			if lost := got - kept; lost > 0 {
				s.m.dropped[DropBufferFull].Add(float64(lost))
			}
			if kept == 0 {
				p.release(b)
			}
		}
		if got < n {
			return
		}
	}
}

// batch is a batch of events, the same for every sink. Its events and the
// bytes of their strings are reused for a later batch once every sink is
// done with it (release): the batcher and the sinks allocate nothing per
// event, so that click events add no garbage collection, whose every cycle
// marks the whole index.
type batch struct {
	events []Event
	// text holds the bytes of the strings the builder made (ids, codes,
	// Referer hosts, countries, client addresses); the events' point
	// into it.
	text []byte
	// holders are the sinks that have not yet released it.
	holders atomic.Int32
}

// freeBatches is how many released batches wait for reuse: as many full
// batches as a sink's buffer holds, the memory its bound allows anyway.
// The batcher mostly fills one while the sinks send another; more pile up
// while a sink is slower than the clicks, and are reused after.
func freeBatches(c *Config) int {
	return max(c.Buffer/c.MaxBatch, 2)
}

// textPerEvent is the room for an event's strings a new batch starts with:
// an id, a code, a Referer's host and an IPv4 address. Longer ones grow
// it.
const textPerEvent = 96

// newBatch returns an empty batch for n events: a released one, or else
// a new one of room for n.
func (p *Pipeline) newBatch(n int) *batch {
	select {
	case b := <-p.free:
		return b
	default:
	}
	// Reused only at the size of a full batch: a sink down under few
	// clicks buffers batches of a few events each.
	return &batch{events: make([]Event, 0, n), text: make([]byte, 0, n*textPerEvent)}
}

// release is a sink's end of b: it has sent, failed or dropped its events.
func (p *Pipeline) release(b *batch) {
	if b.holders.Add(-1) == 0 {
		p.recycle(b)
	}
}

func (p *Pipeline) recycle(b *batch) {
	if cap(b.events) != p.cfg.MaxBatch {
		return
	}
	b.events, b.text = b.events[:0], b.text[:0]
	select {
	case p.free <- b:
	default:
	}
}

// deliver sends a sink's buffer, batch after batch, until the pipeline
// closes and the buffer is empty, or Close's deadline passes.
func (p *Pipeline) deliver(s *sinkRunner) {
	defer p.sinksDone.Done()
	for {
		q, ok := s.buf.next(p.sinkCtx)
		if !ok {
			if n := s.buf.discard(p.release); n > 0 {
				s.m.dropped[DropShutdown].Add(float64(n))
			}
			return
		}
		p.sendWithRetry(s, q.b.events[:q.n])
		p.release(q.b)
	}
}

// sendWithRetry delivers batch, retrying what may pass, and accounts for
// every event of it: sent, failed, or (when Close's deadline passes)
// dropped.
func (p *Pipeline) sendWithRetry(s *sinkRunner, batch []Event) {
	ctx := p.sinkCtx
	for retry, again := 0, false; len(batch) > 0; retry, again = retry+1, true {
		n, a := s.sink.send(ctx, batch, again)
		// Logged before the events are counted, as every outcome below is:
		// once the counts say a batch is done, its log lines are written.
		if a.warning != nil {
			s.log.V(1).Info("the receiver took click events with a warning", "warning", a.warning.Error(), "events", n)
		}
		if n > 0 {
			s.m.sent.Add(float64(n))
			s.buf.done(n)
			batch, retry = batch[n:], 0
		}
		if len(batch) == 0 {
			return
		}
		switch {
		case a.rejected:
			s.log.Error(a.err, "the receiver rejected click events of a batch it took; not retried", "events", len(batch), "delivered", n)
			s.m.rejected.Add(float64(len(batch)))
			s.buf.done(len(batch))
			return
		case ctx.Err() != nil:
			s.m.dropped[DropShutdown].Add(float64(len(batch)))
			s.buf.done(len(batch))
			return
		case !a.retry:
			s.log.Error(a.err, "the receiver refused click events; not retried", "events", len(batch), "firstID", strings.Clone(batch[0].ID))
			s.m.failed.Add(float64(len(batch)))
			s.buf.done(len(batch))
			return
		}
		wait := backoff(&p.cfg.Retry, retry, a.retryAfter)
		s.log.V(1).Info("click events not delivered; retrying", "error", a.err.Error(), "in", wait, "events", len(batch))
		s.m.retries.Inc()
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
}

// backoff is the wait before retry number retry (0 the first): what a
// Retry-After asked for (capped at MaxRetryAfter), else InitialBackoff
// doubled at each retry up to MaxBackoff; both with a random part, so that
// replicas that failed together do not retry together.
func backoff(c *RetryConfig, retry int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, c.MaxRetryAfter) + rand.N(c.InitialBackoff)
	}
	d := c.MaxBackoff
	if retry < 32 {
		d = min(c.InitialBackoff<<retry, c.MaxBackoff)
	}
	return d/2 + rand.N(d/2+1)
}

// Close stops taking records, hands what the ring holds to the sinks and
// waits until they have delivered their buffers or ctx ends; then it drops
// what is left (counted as shutdown) and ends the sinks' requests. Offers
// after Close are dropped (counted as shutdown).
func (p *Pipeline) Close(ctx context.Context) error {
	if p == nil {
		return nil
	}
	var err error
	p.closeOnce.Do(func() {
		p.closed.Store(true)
		close(p.stop)
		<-p.batched
		// A record offered while Close began is past the batcher's last
		// drain: counted as lost to shutdown.
		for p.ring.peek() != nil {
			p.ring.release()
			dropAll(p.m.closedDropped)
		}
		for _, s := range p.sinks {
			s.buf.close()
		}
		done := make(chan struct{})
		go func() { p.sinksDone.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			p.cancelSink()
			<-done
			err = fmt.Errorf("click events: not all delivered before the deadline: %w", ctx.Err())
		}
		p.cancelSink()
		for _, s := range p.sinks {
			err = errors.Join(err, s.sink.close(context.WithoutCancel(ctx)))
		}
	})
	return err
}

// buffer is a sink's queue of batches, bounded in events. The batch being
// sent stays counted until done.
type buffer struct {
	mu sync.Mutex
	// queue[head:] wait; the slice is reused, not grown, batch after
	// batch.
	queue    []queued
	head     int
	n, limit int
	closing  bool
	ready    chan struct{} // a batch was added, or the buffer closed
}

// queued is a batch in a buffer: its first n events (those that fit).
type queued struct {
	b *batch
	n int
}

func newBuffer(limit int) *buffer {
	return &buffer{limit: limit, ready: make(chan struct{}, 1)}
}

// add appends the events of b that fit and returns how many did.
func (b *buffer) add(bt *batch) int {
	b.mu.Lock()
	kept := min(len(bt.events), b.limit-b.n)
	if kept > 0 {
		if b.head > 0 && len(b.queue) == cap(b.queue) {
			n := copy(b.queue, b.queue[b.head:])
			clear(b.queue[n:])
			b.queue, b.head = b.queue[:n], 0
		}
		b.queue = append(b.queue, queued{b: bt, n: kept})
		b.n += kept
	}
	b.mu.Unlock()
	if kept > 0 {
		b.signal()
	}
	return max(kept, 0)
}

func (b *buffer) signal() {
	select {
	case b.ready <- struct{}{}:
	default:
	}
}

// next waits for the next batch; false when the buffer is closed and
// empty, or ctx ended.
func (b *buffer) next(ctx context.Context) (queued, bool) {
	for {
		b.mu.Lock()
		if b.head < len(b.queue) {
			q := b.queue[b.head]
			b.queue[b.head] = queued{}
			if b.head++; b.head == len(b.queue) {
				b.queue, b.head = b.queue[:0], 0
			}
			b.mu.Unlock()
			return q, true
		}
		closing := b.closing
		b.mu.Unlock()
		if closing {
			return queued{}, false
		}
		select {
		case <-b.ready:
		case <-ctx.Done():
			return queued{}, false
		}
	}
}

// done frees n events of the batch being sent.
func (b *buffer) done(n int) {
	b.mu.Lock()
	b.n -= n
	b.mu.Unlock()
}

// len is how many events the buffer holds, the batch being sent included.
func (b *buffer) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

// close lets next end once the buffer is empty.
func (b *buffer) close() {
	b.mu.Lock()
	b.closing = true
	b.mu.Unlock()
	b.signal()
}

// discard empties the buffer, releases its batches and returns how many
// events it held.
func (b *buffer) discard(release func(*batch)) int {
	b.mu.Lock()
	queue := b.queue[b.head:]
	n := 0
	for _, q := range queue {
		n += q.n
	}
	b.queue, b.head, b.n = nil, 0, b.n-n
	b.mu.Unlock()
	for _, q := range queue {
		release(q.b)
	}
	return n
}
