package hitpath

import (
	"context"
	"testing"
	"time"
)

// scriptedWaker answers wake in turn with the wake-ups of its script: a
// zero time is a wait that saw none. It does not wait.
type scriptedWaker struct {
	script []time.Time
	calls  int
}

func (s *scriptedWaker) wake(_ context.Context, deadline time.Time) (bool, time.Time, error) {
	s.calls++
	if len(s.script) == 0 {
		return false, time.Time{}, nil
	}
	at := s.script[0]
	s.script = s.script[1:]
	return !at.IsZero(), at, nil
}

// TestTicksFindALostTickAgain: a timer seen often enough whose predicted
// tick does not come is found again while the server is idle, by the next
// wake-up that is no other timer's tick, instead of being guessed a period
// on (where, its tick having moved, it would fire in the next segments).
func TestTicksFindALostTickAgain(t *testing.T) {
	now := time.Now()
	ms := func(n int) time.Time { return now.Add(time.Duration(n) * time.Millisecond) }
	var none time.Time
	for _, tc := range []struct {
		name string
		// a is due 5 ms from now; b, if seen, 600 ms from now.
		aSeen, bSeen int
		dumpEnd      time.Time
		script       []time.Time
		// wantA and wantB are the next ticks predicted (from now, ms); 0:
		// no such timer.
		wantA, wantB int
		wantMissed   int
		wantRefound  int
		wantCalls    int
	}{
		{"found again", confirmed, 0, time.Time{}, []time.Time{none, ms(330)},
			1330, 0, 0, 1, 2},
		{"another timer's tick first, then its own", confirmed, confirmed, time.Time{}, []time.Time{none, ms(600), ms(800)},
			1800, 1600, 0, 1, 3},
		{"not found again: a period on, a miss", confirmed, 0, time.Time{}, []time.Time{none, none},
			1005, 0, 1, 0, 2},
		// Not yet a timer for sure: guessed a period on, as before.
		{"seen once: no search", 1, 0, time.Time{}, []time.Time{none},
			1005, 0, 1, 0, 1},
		// Due while the last dump's vgdb ran: it may have fired unseen.
		{"due during a dump", confirmed, 0, ms(0), []time.Time{none},
			1005, 0, 0, 0, 1},
		{"on time", confirmed, 0, time.Time{}, []time.Time{ms(6)},
			1006, 0, 0, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &scriptedWaker{script: tc.script}
			a := &timer{next: ms(5), period: time.Second, seen: tc.aSeen}
			tk := &ticks{w: w, timers: []*timer{a}, dumpEnd: tc.dumpEnd, log: t.Logf, debug: t.Logf}
			var b *timer
			if tc.bSeen > 0 {
				b = &timer{next: ms(600), period: time.Second, seen: tc.bSeen}
				tk.timers = append(tk.timers, b)
			}
			if err := tk.wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := a.next.Sub(now); got != time.Duration(tc.wantA)*time.Millisecond {
				t.Errorf("a's next tick in %s, want %dms", got, tc.wantA)
			}
			if b != nil && b.next.Sub(now) != time.Duration(tc.wantB)*time.Millisecond {
				t.Errorf("b's next tick in %s, want %dms", b.next.Sub(now), tc.wantB)
			}
			if a.missed != tc.wantMissed || tk.refound != tc.wantRefound || w.calls != tc.wantCalls {
				t.Errorf("missed %d, found again %d, %d looks; want %d, %d, %d", a.missed, tk.refound, w.calls, tc.wantMissed, tc.wantRefound, tc.wantCalls)
			}
			if len(tk.timers) != 1+min(tc.bSeen, 1) && tc.wantMissed < maxMisses {
				t.Errorf("%d timers, want no new one", len(tk.timers))
			}
		})
	}
}

// TestTicksForgetATimerNotFoundAgain: a confirmed timer not found again
// maxMisses times in a row is forgotten.
func TestTicksForgetATimerNotFoundAgain(t *testing.T) {
	now := time.Now()
	a := &timer{next: now.Add(5 * time.Millisecond), period: time.Second, seen: confirmed, missed: maxMisses - 1}
	tk := &ticks{w: &scriptedWaker{}, timers: []*timer{a}, log: t.Logf}
	if err := tk.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(tk.timers) != 0 {
		t.Fatalf("%d timers, want the one not found forgotten", len(tk.timers))
	}
}

// TestGuard: a segment ends before a tick with room for the dump to take
// effect and for one more request as long as the longest of the last ones.
func TestGuard(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, tc := range []struct {
		name           string
		took, requests []time.Duration
		want           time.Duration
	}{
		{"nothing yet", nil, nil, minGuard},
		{"quiet", []time.Duration{ms(10), ms(20)}, []time.Duration{ms(2), ms(3)}, minGuard + ms(3)},
		{"slow dumps", []time.Duration{ms(80)}, []time.Duration{ms(3)}, ms(210) + ms(3)},
		{"slow requests", []time.Duration{ms(20)}, []time.Duration{ms(150), ms(40)}, minGuard + ms(150)},
		{"each capped", []time.Duration{ms(900)}, []time.Duration{ms(2000)}, 2 * maxGuard},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tk := &ticks{}
			for _, d := range tc.took {
				tk.dumped(d, time.Now())
			}
			for _, d := range tc.requests {
				tk.requested(d)
			}
			if got := tk.guard(); got != tc.want {
				t.Fatalf("guard %s, want %s", got, tc.want)
			}
		})
	}
}

// TestGuardForgetsOldRequests: only the last guardWindow requests count.
func TestGuardForgetsOldRequests(t *testing.T) {
	tk := &ticks{}
	tk.requested(300 * time.Millisecond)
	for range guardWindow {
		tk.requested(time.Millisecond)
	}
	if got := tk.guard(); got != minGuard+time.Millisecond {
		t.Fatalf("guard %s, want %s", got, minGuard+time.Millisecond)
	}
}

// TestLookahead: before a segment begins, the ticks due before its zero
// and its first request are over are waited out.
func TestLookahead(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	tk := &ticks{}
	if got := tk.lookahead(); got != minGuard {
		t.Fatalf("lookahead %s with nothing measured, want %s", got, minGuard)
	}
	tk.zeroed(ms(300))
	tk.zeroed(ms(20))
	tk.requested(ms(50))
	if got, want := tk.lookahead(), ms(300)+minGuard+ms(50); got != want {
		t.Fatalf("lookahead %s, want %s", got, want)
	}
	// A tick due within it is waited for; one after it is not.
	now := time.Now()
	w := &scriptedWaker{script: []time.Time{now.Add(ms(420))}}
	a := &timer{next: now.Add(ms(420)), period: time.Second, seen: confirmed}
	b := &timer{next: now.Add(ms(600)), period: time.Second, seen: confirmed}
	tk.w, tk.timers, tk.log = w, []*timer{a, b}, t.Logf
	if err := tk.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w.calls != 1 || a.next != now.Add(ms(1420)) || b.next != now.Add(ms(600)) {
		t.Fatalf("%d looks, a next in %s, b next in %s; want 1, 1.42s, 600ms", w.calls, a.next.Sub(now), b.next.Sub(now))
	}
}

func TestUnitOf(t *testing.T) {
	for _, tc := range []struct{ n, short, long, want int }{
		{1040, 520, 1040, 520},
		{520, 520, 1040, 520},
		{520, 260, 520, 260},
		{1000, 300, 1000, 1000}, // the long phase not whole units: a phase is one
		{300, 300, 1000, 300},   // (the short one is a unit either way)
		{700, 350, 700, 350},
	} {
		if got := unitOf(tc.n, tc.short, tc.long); got != tc.want {
			t.Errorf("unitOf(%d, %d, %d) = %d, want %d", tc.n, tc.short, tc.long, got, tc.want)
		}
	}
}
