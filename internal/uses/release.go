package uses

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// releaseWorkers is how many links a stopping replica writes at once: with
// a read and a write each, 1,500 links on an API server 25 ms away take
// about 1,500 x 50 ms / 64 = 1.2 s, well inside the shutdown timeout (30s),
// where one at a time took 75 s and lost the rest as a kill would.
const releaseWorkers = 64

// Stop writes what is pending and returns unused quota, until ctx ends.
// Call it after the redirect port has stopped serving.
func (u *Uses) Stop(ctx context.Context) int64 {
	return u.Flush(ctx, true)
}

// releaseAll writes every link of todo, returning every reservation,
// releaseWorkers at a time, without the budget (the replica is stopping;
// the shutdown timeout in ctx bounds it). Each link's writes are still one
// at a time (its lock).
func (u *Uses) releaseAll(ctx context.Context, todo []*Counter) {
	eachAtOnce(ctx, todo, releaseWorkers, func(c *Counter) bool {
		// A rollout has the other replicas writing the link too: its
		// writes are retried until the shutdown timeout.
		err := untilWon(ctx, func() error { return u.flushWithin(ctx, c, true, budgetNone) })
		if err != nil {
			u.opts.Log.Info("cannot write uses before stopping", "link", c.name(), "error", err.Error())
		}
		return false
	})
}

// untilWon runs write, and again while it loses every race, until ctx
// ends. Lost races mean an API server that answers and other replicas
// writing the link (a rollout, a link clicked on every replica): each try
// comes after a pause that grows and is jittered, so that the writers fall
// out of step. What fails otherwise (an API server that does not answer)
// is not retried: it would only spend the time left.
func untilWon(ctx context.Context, write func() error) error {
	err := write()
	for pause := minRacePause; errors.Is(err, errLostRaces) && pauseJittered(ctx, pause); pause = min(2*pause, maxRacePause) {
		err = write()
	}
	return err
}

// The pauses between the writes of untilWon: from 10 ms, doubling, at most
// a second.
const (
	minRacePause = 10 * time.Millisecond
	maxRacePause = time.Second
)

// pauseJittered waits between half of d and d, and reports whether ctx
// still allows another attempt.
func pauseJittered(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d/2 + rand.N(d/2))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
