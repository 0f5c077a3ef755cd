package pages

import (
	"errors"
	"runtime"
	"testing"
	"time"
)

var epoch = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func TestRenderBudget(t *testing.T) {
	now := epoch
	b := NewBudget(2, 0.5, func() time.Time { return now })
	// Half of one CPU, whatever GOMAXPROCS is here; renders burn the CPU
	// time they take on the fake clock.
	b.rate = 0.5
	b.cpu = func() (time.Duration, bool) { return now.Sub(epoch), true }
	r1, _, ok1 := b.Acquire()
	r2, _, ok2 := b.Acquire()
	_, retry, ok3 := b.Acquire()
	if !ok1 || !ok2 || ok3 || retry != time.Second {
		t.Fatalf("two slots: %v %v, third %v (retry %v); want two admitted, the third refused for 1s", ok1, ok2, ok3, retry)
	}
	now = now.Add(200 * time.Millisecond)
	r1()
	r2() // 400 ms of CPU charged against a burst of 250 ms
	_, retry, ok := b.Acquire()
	if ok || retry != time.Second {
		t.Fatalf("over the burst: admitted %v, retry %v", ok, retry)
	}
	now = now.Add(time.Second) // 0.5 s of render time paid back
	if release, _, ok := b.Acquire(); !ok {
		t.Fatal("paid back: still refused")
	} else {
		release()
	}
	// A long render: the debt says how long until the next is admitted.
	release, _, _ := b.Acquire()
	now = now.Add(5 * time.Second)
	release()
	// 5 s of CPU charged, 2.5 s of it paid back while it ran: (2.5 s - the 250 ms
	// burst) / 0.5 is 4.5 s.
	if _, retry, ok := b.Acquire(); ok || retry != 4500*time.Millisecond {
		t.Errorf("after a 5 s render at half a CPU: admitted %v, retry after %v, want 4.5 s", ok, retry)
	}
	// The thread's CPU time, where the kernel gives it, not the wall time.
	b.cpu = threadCPU
	now = now.Add(time.Hour) // all paid back
	release, _, ok = b.Acquire()
	if !ok {
		t.Fatal("paid back: refused")
	}
	now = now.Add(10 * time.Second) // a render that waited 10 s for a CPU, burning none
	release()
	release, _, ok = b.Acquire()
	if !ok && runtime.GOOS == "linux" {
		t.Error("a render charged its wall time, not its CPU time")
	}
	if ok {
		release()
	}
}

func TestBudgetDefaults(t *testing.T) {
	b := NewBudget(0, 0, time.Now)
	if b.slots != DefaultConcurrency() || b.rate != DefaultCPUShare*float64(runtime.GOMAXPROCS(0)) || b.burst != renderBurst {
		t.Errorf("slots %d, rate %v, burst %v", b.slots, b.rate, b.burst)
	}
	if b := NewBudget(3, 2, time.Now); b.slots != 3 || b.rate != DefaultCPUShare*float64(runtime.GOMAXPROCS(0)) {
		t.Errorf("a share above 1: slots %d, rate %v", b.slots, b.rate)
	}
}

// A page refused for want of budget is a BusyError that says when to retry.
func TestRenderRefusedIsBusy(t *testing.T) {
	b := NewBudget(1, 1, time.Now)
	release, _, ok := b.Acquire()
	if !ok {
		t.Fatal("refused")
	}
	defer release()
	for name, render := range map[string]func(*Budget) ([]byte, error){
		"card":    (&Card{Title: "t"}).Render,
		"preview": (&Preview{Path: "/ns/code"}).Render,
	} {
		page, err := render(b)
		var busy BusyError
		if !errors.As(err, &busy) || busy.RetryAfter != time.Second || page != nil {
			t.Errorf("%s while the only slot is taken: %q, %v; want a BusyError to retry after 1s", name, page, err)
		}
	}
}

func TestLRU(t *testing.T) {
	c := newLRU(25, func(k string, v []byte) int { return len(k) + len(v) })
	c.add("a", make([]byte, 9))
	c.add("b", make([]byte, 9))
	c.get("a")
	c.add("c", make([]byte, 9)) // over the budget: b, the least recently used, goes
	if _, ok := c.get("b"); ok || c.len() != 2 || c.used > c.budget {
		t.Errorf("kept %d values, %d bytes (budget %d); b kept: %v", c.len(), c.used, c.budget, ok)
	}
	if _, ok := c.get("a"); !ok {
		t.Error("the most recently used value was dropped")
	}
	c.add("big", make([]byte, 40))
	if _, ok := c.get("big"); ok {
		t.Error("a value larger than the budget is kept")
	}
}
