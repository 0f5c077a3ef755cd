package main

import (
	"testing"
	"time"
)

// TestPlanShutdown: the click events' delivery ends within --shutdown-timeout
// of the manager's stop; then /metrics serves the final counts for a tenth
// of the timeout, at most a second, and nothing without events.
func TestPlanShutdown(t *testing.T) {
	began := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return began.Add(d) }
	for _, tc := range []struct {
		timeout          time.Duration
		events           bool
		done             time.Duration // when the work ended
		work, lastScrape time.Duration
	}{
		{30 * time.Second, true, 2 * time.Second, 30 * time.Second, 3 * time.Second},
		{30 * time.Second, true, 30 * time.Second, 30 * time.Second, 31 * time.Second},
		{4 * time.Second, true, time.Second, 4 * time.Second, 1400 * time.Millisecond},
		{4 * time.Second, true, 4 * time.Second, 4 * time.Second, 4400 * time.Millisecond},
		{30 * time.Second, false, 2 * time.Second, 30 * time.Second, 2 * time.Second},
		{0, true, 0, 0, 0},
	} {
		p := planShutdown(began, tc.timeout, tc.events)
		if !p.work.Equal(at(tc.work)) || !p.lastScrape(at(tc.done)).Equal(at(tc.lastScrape)) {
			t.Errorf("timeout %s, events %v, done at %s: work until %s, last scrape until %s; want %s, %s", tc.timeout, tc.events, tc.done,
				p.work.Sub(began), p.lastScrape(at(tc.done)).Sub(began), tc.work, tc.lastScrape)
		}
	}
}
