package uses

import (
	"context"
)

// budgetMode says how a write draws on the replica's write budget.
type budgetMode int

const (
	// budgetWait waits for the budget until the context ends: a request
	// waiting for quota.
	budgetWait budgetMode = iota
	// budgetRound waits until the round's end (a flush round may spend one
	// interval's budget).
	budgetRound
	// budgetNone ignores it (the final flush at shutdown, bounded by its
	// timeout instead).
	budgetNone
	// budgetAhead takes a token of the budget if one is free, without
	// waiting: a reservation ahead (see Ahead), which waited for aheadPace
	// before it took the link's lock.
	budgetAhead
)

// spend takes one write, and the read before it, from the budget as mode
// says. In any t seconds a replica writes at most ReserveBurst +
// WritesPerSecond*t times and reads at most as often, however many
// distinct limited links are clicked (the bound an attacker can put on the
// API server per replica; the final flush at shutdown aside).
func (u *Uses) spend(ctx context.Context, mode budgetMode) bool {
	switch mode {
	case budgetNone:
		return true
	case budgetRound:
		ctx, cancel := context.WithDeadline(ctx, u.roundEnd)
		defer cancel()
		return u.pace.Wait(ctx) == nil && u.budget.Wait(ctx) == nil
	case budgetAhead:
		// Its pace was waited for before the link's lock: a click on the
		// link never waits behind a reservation ahead that waits for tokens.
		return u.budget.Allow()
	}
	return u.budget.Allow() || u.budget.Wait(ctx) == nil
}
