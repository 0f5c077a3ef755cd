// Package progress waits for work that a busy machine slows but only a
// defect stops. A benchmark that waits for its links to be deleted, Ready
// or written back does not bound the wait by a total time, which a slow
// machine exceeds; it waits for as long as the count it watches keeps
// moving, and fails when the count has stood still for a stated time (a
// stall): the work stopped, or the machine did.
package progress

import (
	"context"
	"fmt"
	"time"
)

// Watch tells a stall from slow progress: Observe is given the count at
// each look, and reports a stall once the count has not changed for Stall.
// The first look starts the clock.
type Watch struct {
	// Stall is how long the count may stand still.
	Stall time.Duration
	last  int64
	since time.Time // when the count last changed (the first look)
	seen  bool
}

// Observe records count as seen at now and reports whether it has stood
// still for Stall or longer, and for how long it has.
func (w *Watch) Observe(now time.Time, count int64) (stalled bool, still time.Duration) {
	if !w.seen || count != w.last {
		w.last, w.since, w.seen = count, now, true
		return false, 0
	}
	still = now.Sub(w.since)
	return still >= w.Stall, still
}

// StalledError is Wait's error when the count stood still.
type StalledError struct {
	What  string
	Count int64
	Still time.Duration
	// Err is the last error read returned, if any.
	Err error
}

func (e *StalledError) Error() string {
	s := fmt.Sprintf("%s: stalled at %d for %s", e.What, e.Count, e.Still.Round(time.Second))
	if e.Err != nil {
		s += fmt.Sprintf(" (last error: %v)", e.Err)
	}
	return s
}

func (e *StalledError) Unwrap() error { return e.Err }

// Wait calls read every poll until it reports done, and fails with a
// *StalledError when the count it returns has not changed for stall. An
// error from read is a look that saw no progress (an API server that a busy
// machine makes time out now and then): it is kept for the message. What
// names the work in the error.
func Wait(ctx context.Context, what string, poll, stall time.Duration, read func(context.Context) (count int64, done bool, err error)) error {
	w := Watch{Stall: stall}
	var lastErr error
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		count, done, err := read(ctx)
		if err == nil && done {
			return nil
		}
		if err != nil {
			lastErr, count = err, w.last
		}
		if stalled, still := w.Observe(time.Now(), count); stalled {
			return &StalledError{What: what, Count: count, Still: still, Err: lastErr}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, context.Cause(ctx))
		case <-t.C:
		}
	}
}
