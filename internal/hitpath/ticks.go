package hitpath

import (
	"context"
	"strings"
	"time"
)

// Timers that fire on their own: fasthttp's Date refresher (every second)
// and worker-pool cleaner (every 10 seconds) in both Go servers, the
// redirector's connection watchdog (every second). How many ticks a phase
// spans depends on how fast the machine ran callgrind, and what a tick
// costs varies by a thousand instructions or so (the netpoller's wait for
// it is cut to whole milliseconds and may return early, find the timer not
// due and wait again). So no tick is counted: the client learns when they
// fire (a tick wakes the idle server, which /proc shows), and a phase is
// measured in segments, each from a zero of the counters to a dump, with
// the ticks between them. A segment in which a timer ran anyway (a tick
// late, or one the client did not know) is found in its profile, and the
// phase is measured again.
const (
	// minGuard and maxGuard bound the guard: a segment ends that long
	// before a tick is due, since the dump must take effect before the
	// tick fires. The guard is twice the longest that a dump took to take
	// effect (its files written) of the last guardWindow (10-50 ms on a
	// quiet machine, more on a loaded one), and 50 ms.
	minGuard    = 100 * time.Millisecond
	maxGuard    = 400 * time.Millisecond
	guardWindow = 8
	// maxMisses: a timer seen fewer than confirmed times whose predicted
	// tick did not come this many times in a row is forgotten (it was not
	// a timer of that period). A confirmed one is looked for (refind), and
	// forgotten when it was not found this many times in a row: its tick
	// may come in the same wake-up as another timer's, which is then all
	// that is seen, until it comes on its own and is learnt again.
	maxMisses = 3
	confirmed = 3
	// learnJitter is how far from a second after a wake-up the next one
	// may come and be the same timer's, while learning (a timer that
	// sleeps a second after its work comes later and later, by up to a
	// hundred milliseconds on a loaded machine).
	learnJitter = 150 * time.Millisecond
	// tickLate is how late a tick may come and still be the one expected
	// (a tick is a goroutine that sleeps after its work).
	tickLate = 400 * time.Millisecond
	// shortPeriod and longPeriod are the periods a timer may have: one
	// seen twice while learning has the short one.
	shortPeriod = time.Second
	longPeriod  = 10 * time.Second
	// LearnAll is how long the client must watch the idle server to learn
	// all its timers: longer than the longest period.
	LearnAll = longPeriod + 500*time.Millisecond
)

// waker waits until the idle server wakes, at most until deadline, and
// reports whether it did and when (watcher.wake).
type waker interface {
	wake(ctx context.Context, deadline time.Time) (bool, time.Time, error)
}

// ticks predicts the ticks of the timers of one server.
type ticks struct {
	w      waker
	timers []*timer
	// took are how long the last dumps took to take effect.
	took []time.Duration
	// dumpEnd is when the last dump's vgdb returned: a tick due before
	// then may have fired while vgdb ran, unseen.
	dumpEnd time.Time
	// requests are how long the last requests took (sent, answered and
	// settled): a segment ends before a tick with room for one more.
	requests []time.Duration
	// zeros are how long the last zeros took (vgdb's call): a segment
	// begins once the ticks due before its zero and first request are
	// over.
	zeros []time.Duration
	// refound counts the ticks found again (refind).
	refound int
	log     func(format string, args ...any)
	// debug, if set, receives every tick.
	debug func(format string, args ...any)
}

func (t *ticks) debugf(format string, args ...any) {
	if t.debug != nil {
		t.debug(format, args...)
	}
}

type timer struct {
	next   time.Time
	period time.Duration
	seen   int // ticks seen while learning
	missed int // predicted ticks in a row that did not come
	// poke, if set, is the work the server does on its first event of a
	// second, due at each whole second: it is triggered, not waited for.
	poke func(context.Context) error
}

// seconds adds a tick at each whole second, at which poke has the server
// do its work of a new second (Server.Seconds).
func (t *ticks) seconds(poke func(context.Context) error) {
	t.timers = append(t.timers, &timer{next: nextSecond(time.Now()), period: time.Second, poke: poke})
}

// pokeAfter is how long after a second begins the poke is sent.
const pokeAfter = 5 * time.Millisecond

func nextSecond(t time.Time) time.Time { return t.Truncate(time.Second).Add(time.Second) }

// learn watches the idle server for d and predicts its ticks: a wake-up
// within learnJitter of a second after another is the next tick of that
// one's timer (of the closest, if two); a timer seen once has the long
// period.
func (t *ticks) learn(ctx context.Context, d time.Duration) error {
	end := time.Now().Add(d)
	for {
		woke, at, err := t.w.wake(ctx, end)
		if err != nil {
			return err
		}
		if !woke {
			break
		}
		t.debugf("learning: a tick at %s", at.Format("05.000"))
		var best *timer
		for _, tm := range t.timers {
			if dist := at.Sub(tm.next).Abs(); dist < learnJitter && (best == nil || dist < at.Sub(best.next).Abs()) {
				best = tm
			}
		}
		if best != nil {
			best.next, best.seen = at.Add(best.period), best.seen+1
			continue
		}
		t.timers = append(t.timers, &timer{next: at.Add(shortPeriod), period: shortPeriod, seen: 1})
	}
	var learnt []string
	for _, tm := range t.timers {
		if tm.seen == 1 && d > shortPeriod+tickLate {
			tm.period = longPeriod
			tm.next = tm.next.Add(longPeriod - shortPeriod)
		}
		learnt = append(learnt, tm.period.String())
	}
	if len(learnt) == 0 {
		learnt = []string{"none"}
	}
	t.log("timers learnt in %s: %s", d, strings.Join(learnt, ", "))
	return nil
}

// dumped records how long a dump took to take effect, and when it ended.
func (t *ticks) dumped(d time.Duration, end time.Time) {
	t.dumpEnd = end
	t.took = append(t.took, d)
	if len(t.took) > guardWindow {
		t.took = t.took[1:]
	}
}

// requested records how long a request took, sent to settled.
func (t *ticks) requested(d time.Duration) { t.requests = window(t.requests, d) }

// zeroed records how long a zero took.
func (t *ticks) zeroed(d time.Duration) { t.zeros = window(t.zeros, d) }

// window appends d to the last guardWindow durations ds.
func window(ds []time.Duration, d time.Duration) []time.Duration {
	ds = append(ds, d)
	if len(ds) > guardWindow {
		ds = ds[1:]
	}
	return ds
}

// longest is the longest of ds, at most maxGuard.
func longest(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return min(m, maxGuard)
}

// lookahead is how far ahead wait, before a segment begins, waits out the
// ticks: the zero, then the guard of the first request.
func (t *ticks) lookahead() time.Duration { return longest(t.zeros) + t.guard() }

// guard is how long before a tick a segment ends: time for the dump to
// take effect (see minGuard), and for the request before it, as long as
// the longest of the last guardWindow took (a few milliseconds on a quiet
// machine, a hundred or more on a busy one).
func (t *ticks) guard() time.Duration {
	g := minGuard
	for _, d := range t.took {
		g = max(g, 2*d+50*time.Millisecond)
	}
	return min(g, maxGuard) + longest(t.requests)
}

// match is the timer whose tick a wake-up at at is, if any: the one
// predicted closest to at, within minGuard before and tickLate after.
func (t *ticks) match(at time.Time) *timer {
	var best *timer
	var dist time.Duration
	for _, tm := range t.timers {
		if tm.poke != nil {
			continue
		}
		if at.After(tm.next.Add(-minGuard)) && at.Before(tm.next.Add(tickLate)) {
			if d := at.Sub(tm.next).Abs(); best == nil || d < dist {
				best, dist = tm, d
			}
		}
	}
	return best
}

// due is the timer whose tick comes first.
func (t *ticks) due() *timer {
	var first *timer
	for _, tm := range t.timers {
		if first == nil || tm.next.Before(first.next) {
			first = tm
		}
	}
	return first
}

// soon reports whether a tick is due within the guard.
func (t *ticks) soon() bool {
	tm := t.due()
	return tm != nil && time.Until(tm.next) < t.guard()
}

// wait waits for the ticks due within the lookahead (as it is when wait
// is called). A tick that does not come (it fired while the server was
// busy, or while a dump was written: the profile tells which, or it moved)
// is looked for again if its timer is confirmed (refind), else expected a
// period later; a timer not confirmed whose ticks keep not coming is
// forgotten.
func (t *ticks) wait(ctx context.Context) error {
	until := time.Now().Add(t.lookahead())
	for {
		tm := t.due()
		if tm == nil || tm.next.After(until) {
			return nil
		}
		if tm.poke != nil {
			if err := sleep(ctx, time.Until(tm.next.Add(pokeAfter))); err != nil {
				return err
			}
			if err := tm.poke(ctx); err != nil {
				return err
			}
			tm.next = nextSecond(time.Now())
			continue
		}
		woke, at, err := t.w.wake(ctx, tm.next.Add(tickLate))
		if err != nil {
			return err
		}
		if !woke {
			t.debugf("tick due %s (period %s) did not come", tm.next.Format("05.000"), tm.period)
			due := tm.next
			tm.next = tm.next.Add(tm.period)
			if due.Before(t.dumpEnd.Add(minGuard)) {
				continue // it may have fired while vgdb ran
			}
			if tm.seen >= confirmed {
				// A timer seen often enough to be one, whose tick did not
				// come: its tick moved (one that sleeps a second after its
				// work comes later after work that a busy machine slowed,
				// or that a dump stopped), and a tick guessed a period on
				// would land in the next segments. Find it again.
				if err := t.refind(ctx, tm); err != nil {
					return err
				}
				continue
			}
			if tm.missed++; tm.missed >= maxMisses {
				t.forget(tm)
			}
			continue
		}
		t.woke(at)
	}
}

// woke gives a wake-up of the idle server at at to the timer whose tick
// it is, or to a new timer.
func (t *ticks) woke(at time.Time) {
	if m := t.match(at); m != nil {
		t.debugf("tick due %s (period %s) came at %s", m.next.Format("05.000"), m.period, at.Format("05.000"))
		m.next, m.missed, m.seen = at.Add(m.period), 0, m.seen+1
		return
	}
	t.debugf("a tick no timer predicted came at %s", at.Format("05.000"))
	// A timer not learnt: expected a short period later.
	t.timers = append(t.timers, &timer{next: at.Add(shortPeriod), period: shortPeriod})
}

// refind watches the idle server for up to a period (and tickLate) for
// the tick of tm, which did not come when predicted: the first wake-up
// that is no other timer's predicted tick is tm's, and sets its next one.
// If none comes, tm keeps the guess of a period on, and counts a miss.
func (t *ticks) refind(ctx context.Context, tm *timer) error {
	until := time.Now().Add(tm.period + tickLate)
	for {
		woke, at, err := t.w.wake(ctx, until)
		if err != nil {
			return err
		}
		if !woke {
			// Not a timer after all (a wake-up learnt as one), or one whose
			// ticks now come with another's: after maxMisses in a row it is
			// forgotten, and learnt again if it ticks on its own (a tick
			// no timer predicted).
			t.debugf("the tick of the timer of period %s was not found again", tm.period)
			if tm.missed++; tm.missed >= maxMisses {
				t.forget(tm)
			}
			return nil
		}
		if m := t.match(at); m != nil && m != tm {
			t.woke(at)
			continue
		}
		t.debugf("the tick of the timer of period %s found again at %s", tm.period, at.Format("05.000"))
		tm.next, tm.missed, tm.seen = at.Add(tm.period), 0, tm.seen+1
		t.refound++
		return nil
	}
}

func (t *ticks) forget(tm *timer) {
	t.debugf("forgetting the timer of period %s: its ticks did not come %d times", tm.period, tm.missed)
	for i, x := range t.timers {
		if x == tm {
			t.timers = append(t.timers[:i], t.timers[i+1:]...)
			return
		}
	}
}
