package progress

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestWatch(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	type look struct {
		at    time.Duration // after t0
		count int64
		want  bool
	}
	for _, tc := range []struct {
		name  string
		looks []look
	}{
		{"the first look starts the clock", []look{{0, 0, false}, {59 * time.Second, 0, false}, {time.Minute, 0, true}}},
		{"a change restarts it", []look{{0, 0, false}, {50 * time.Second, 1, false}, {100 * time.Second, 1, false}, {110 * time.Second, 1, true}}},
		{"slow but moving never stalls", []look{{0, 0, false}, {55 * time.Second, 1, false}, {110 * time.Second, 2, false}, {165 * time.Second, 3, false}}},
		{"a count that falls is a change", []look{{0, 5, false}, {50 * time.Second, 4, false}, {100 * time.Second, 4, false}}},
		{"the first look at a count other than zero", []look{{0, 7, false}, {time.Minute, 7, true}}},
		{"still stalled on later looks", []look{{0, 3, false}, {time.Minute, 3, true}, {2 * time.Minute, 3, true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := Watch{Stall: time.Minute}
			for i, l := range tc.looks {
				if got, still := w.Observe(t0.Add(l.at), l.count); got != l.want {
					t.Fatalf("look %d (%s, count %d): stalled %v after %s, want %v", i, l.at, l.count, got, still, l.want)
				}
			}
		})
	}
}

// FuzzWatch checks Observe against its definition on any sequence of
// looks: stalled exactly when the count has been the same at every look
// for Stall or longer.
func FuzzWatch(f *testing.F) {
	f.Add([]byte{0, 1, 0, 1, 200, 1, 3, 2})
	f.Add([]byte{10, 0, 10, 0, 10, 0, 10, 0, 10, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		const stall = 30 * time.Second
		w := Watch{Stall: stall}
		now := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
		var changed time.Time
		var last int64
		for i := 0; i+1 < len(data); i += 2 {
			now = now.Add(time.Duration(data[i]) * time.Second) // 0-255 s between looks
			count := int64(data[i+1] % 4)
			if i == 0 || count != last {
				changed, last = now, count
			}
			want := now.Sub(changed) >= stall
			if got, still := w.Observe(now, count); got != want || still != now.Sub(changed) {
				t.Fatalf("look %d: stalled %v still %s, want %v %s", i/2, got, still, want, now.Sub(changed))
			}
		}
	})
}

func TestWait(t *testing.T) {
	errBusy := errors.New("the server is busy")
	for _, tc := range []struct {
		name    string
		read    func(n int64) (int64, bool, error) // n: the look, from 0
		stalled bool
		err     error
	}{
		{"done at the first look", func(int64) (int64, bool, error) { return 10, true, nil }, false, nil},
		// Each look sees one more: however slow the looks, no stall.
		{"moving until done", func(n int64) (int64, bool, error) { return n, n == 50, nil }, false, nil},
		{"stands still", func(int64) (int64, bool, error) { return 3, false, nil }, true, nil},
		{"errors are no progress", func(int64) (int64, bool, error) { return 0, false, errBusy }, true, errBusy},
		{"an error between moves is not a stall", func(n int64) (int64, bool, error) {
			if n%2 == 1 {
				return 0, false, errBusy
			}
			return n, n == 40, nil
		}, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n int64
			err := Wait(context.Background(), "links", time.Millisecond, 20*time.Millisecond, func(context.Context) (int64, bool, error) {
				defer func() { n++ }()
				return tc.read(n)
			})
			var se *StalledError
			if got := errors.As(err, &se); got != tc.stalled {
				t.Fatalf("error %v, want a stall: %v", err, tc.stalled)
			}
			if tc.err != nil && !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want it to wrap %v", err, tc.err)
			}
			if !tc.stalled && err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestWaitEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var n int64
	err := Wait(ctx, "links", time.Millisecond, time.Hour, func(context.Context) (int64, bool, error) {
		if n++; n == 3 {
			cancel()
		}
		return n, false, nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want the context's", err)
	}
}
