package pages

import (
	"container/list"
	"runtime"
	"sync"
	"time"
)

// Answers that cost more than a redirect (drawing a QR code, rendering a
// preview page) share one budget, so that no client can starve the
// redirects on the same port by asking for them: a redirect takes about
// 200 ns and allocates nothing, a QR code is drawn in 0.2-1 ms. The budget
// bounds them twice:
//
//   - at once: at most RenderConcurrency renders run; another is refused;
//   - over time: renders may use RenderCPUShare of the CPUs (GOMAXPROCS)
//     on average, with a burst of renderBurst. Each render's CPU time is
//     charged (its goroutine is locked to its thread for the render, and
//     the thread's CPU time read before and after; on other systems than
//     Linux its wall time, which errs on the side of the redirects) and
//     paid back at the share's rate; while the debt exceeds the burst,
//     renders are refused. CPU time, not wall time: on a machine busy with
//     other work a draw takes longer without costing the redirects more.
//
// A refused render is answered 503 with Retry-After, at once: nothing
// queues. Drawings are cached and identical misses merged (qr.go), so
// the budget is spent only on what has not been drawn.

// Defaults of NewBudget's slots and share (the redirector's
// Options.RenderConcurrency and Options.RenderCPUShare).
const (
	// DefaultCPUShare is the share of the CPUs renders may use over time.
	DefaultCPUShare = 0.15
	// renderBurst is the render time the budget lends before the share
	// applies: a page of QR codes drawn at once is not refused.
	renderBurst = 250 * time.Millisecond
)

// DefaultConcurrency is half the CPUs Go uses, at least one.
func DefaultConcurrency() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// Budget admits renders; see above.
type Budget struct {
	slots int
	rate  float64 // seconds of render time paid back per second
	burst time.Duration
	now   func() time.Time
	// cpu is the calling thread's CPU time (threadCPU); ok false: charge
	// the wall time of now.
	cpu func() (time.Duration, bool)

	mu      sync.Mutex
	running int
	debt    time.Duration
	paidAt  time.Time
}

// NewBudget is a budget of slots renders at once (0 or less:
// DefaultConcurrency) and share of the CPUs over time (outside (0, 1]:
// DefaultCPUShare), read on the clock now.
func NewBudget(slots int, share float64, now func() time.Time) *Budget {
	if slots <= 0 {
		slots = DefaultConcurrency()
	}
	if share <= 0 || share > 1 {
		share = DefaultCPUShare
	}
	return &Budget{slots: slots, rate: share * float64(runtime.GOMAXPROCS(0)), burst: renderBurst, now: now, cpu: threadCPU}
}

// Acquire admits one render; ok false refuses it, and retryAfter is when
// the budget has room again (at least a second, as Retry-After counts).
// An admitted render calls release when it is done, on the goroutine
// that acquired it (which is locked to its thread until then).
func (b *Budget) Acquire() (release func(), retryAfter time.Duration, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	b.payBackLocked(now)
	switch {
	case b.running >= b.slots:
		return nil, time.Second, false
	case b.debt > b.burst:
		return nil, max(time.Second, time.Duration(float64(b.debt-b.burst)/b.rate)), false
	}
	b.running++
	runtime.LockOSThread()
	cpuStart, byCPU := b.cpu()
	start := now
	return func() {
		var cost time.Duration
		if cpuEnd, ok := b.cpu(); byCPU && ok {
			cost = cpuEnd - cpuStart
		} else {
			cost = b.now().Sub(start)
		}
		runtime.UnlockOSThread()
		b.mu.Lock()
		defer b.mu.Unlock()
		b.running--
		b.debt += max(cost, 0)
	}, 0, true
}

func (b *Budget) payBackLocked(now time.Time) {
	if elapsed := now.Sub(b.paidAt); elapsed > 0 {
		b.debt = max(0, b.debt-time.Duration(float64(elapsed)*b.rate))
	}
	b.paidAt = now
}

// BusyError refuses a render for want of budget: the budget has room again
// after RetryAfter.
type BusyError struct{ RetryAfter time.Duration }

func (e BusyError) Error() string { return "the render budget is spent" }

// render runs fn within b, and is fn's result; a BusyError when b refuses it.
func (b *Budget) render(fn func() ([]byte, error)) ([]byte, error) {
	release, retryAfter, ok := b.Acquire()
	if !ok {
		return nil, BusyError{retryAfter}
	}
	defer release()
	return fn()
}

// flights merges identical concurrent misses: the first caller of a key
// runs the work, the others wait for its result.
type flights[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]*flight[V]
}

type flight[V any] struct {
	done    chan struct{}
	v       V
	err     error
	waiters int
}

// do runs fn for k, or waits for the run in flight for k; merged says the
// result is another caller's.
func (f *flights[K, V]) do(k K, fn func() (V, error)) (v V, err error, merged bool) {
	f.mu.Lock()
	if c, ok := f.m[k]; ok {
		c.waiters++
		f.mu.Unlock()
		<-c.done
		return c.v, c.err, true
	}
	if f.m == nil {
		f.m = map[K]*flight[V]{}
	}
	c := &flight[V]{done: make(chan struct{})}
	f.m[k] = c
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.m, k)
		f.mu.Unlock()
		close(c.done)
	}()
	c.v, c.err = fn()
	return c.v, c.err, false
}

// waiting is how many callers wait for the run in flight for k (tests).
func (f *flights[K, V]) waiting(k K) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.m[k]; ok {
		return c.waiters
	}
	return -1
}

// lru keeps values within a budget of bytes (cost), least recently used
// first out. A value that costs more than the budget is not kept.
type lru[K comparable, V any] struct {
	mu     sync.Mutex
	budget int
	used   int
	cost   func(K, V) int
	order  *list.List // of *lruEntry, most recent first
	byKey  map[K]*list.Element
}

type lruEntry[K comparable, V any] struct {
	key K
	v   V
}

func newLRU[K comparable, V any](budget int, cost func(K, V) int) *lru[K, V] {
	return &lru[K, V]{budget: budget, cost: cost, order: list.New(), byKey: map[K]*list.Element{}}
}

func (c *lru[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[k]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*lruEntry[K, V]).v, true
	}
	var zero V
	return zero, false
}

func (c *lru[K, V]) add(k K, v V) {
	cost := c.cost(k, v)
	if cost > c.budget {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[k]; ok {
		return
	}
	c.byKey[k] = c.order.PushFront(&lruEntry[K, V]{key: k, v: v})
	c.used += cost
	for c.used > c.budget {
		last := c.order.Back()
		e := last.Value.(*lruEntry[K, V])
		c.order.Remove(last)
		delete(c.byKey, e.key)
		c.used -= c.cost(e.key, e.v)
	}
}

// len is the number of values kept.
func (c *lru[K, V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byKey)
}
