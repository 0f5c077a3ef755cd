package uses

import (
	"time"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// Observation is when this replica first saw another replica's
// reservation with a given expiresAt. A reservation is taken back only
// after it has been seen unchanged for a lease plus a grace period on this
// replica's own clock: its holder stops serving it a lease after it sent
// the write, which was before anyone could see it, so no clock needs to
// agree with another.
type Observation struct {
	ExpiresAt time.Time
	Since     time.Time
}

// PlanInput is what a reservation write starts from.
type PlanInput struct {
	// Status is the link's live status (read only).
	Status *linkv1.ShortLinkStatus
	// MaxUses is the live spec's limit (nil: unlimited).
	MaxUses *int64
	// Holder names this replica.
	Holder string
	// Held is this replica's reservation quota as it last wrote it.
	Held int64
	// Served is what this replica served since that write.
	Served int64
	// Now is this replica's clock; only differences of it are used.
	Now time.Time
	// Lease is how long a reservation lasts; Grace how long past that its
	// holder may still renew it (a flush interval).
	Lease, Grace time.Duration
	// Seen are the other replicas' reservations as this replica saw them.
	Seen map[string]Observation
}

// Plan is the status a reservation write leads to.
type Plan struct {
	Uses      int64                   // status.uses with our report and taken-back reservations added
	Others    []linkv1.UseReservation // other replicas' live reservations
	Mine      int64                   // our reservation's quota after the report
	Free      int64                   // quota nobody holds (limited links)
	Forfeited int64                   // quota of taken-back reservations, counted as used
	Shrunk    int64                   // quota taken off ours because the limit is lower than it was
	Lost      bool                    // our own reservation was taken back
	BusyUntil time.Time               // when the first other reservation may be taken back
	Seen      map[string]Observation  // observations to keep for the next write
}

// PlanReservation is the pure part of a reservation write. It adds the
// uses this replica served since its last write, counts as used the
// reservations of other replicas that have been seen unchanged for a lease
// plus the grace period (their holders may have served them), shrinks our
// reservation if the limit was lowered under it, and finds the quota left.
//
// The invariant it keeps: uses + every reservation's quota <= maxUses, and
// a replica serves only from its reservation, so the redirects of all
// replicas never exceed maxUses.
func PlanReservation(in PlanInput) Plan {
	p := Plan{Uses: in.Status.Uses, Seen: map[string]Observation{}}
	inAPI := int64(0)
	for _, res := range in.Status.UseReservations {
		if res.Holder == in.Holder {
			inAPI = res.Quota
			continue
		}
		seen, ok := in.Seen[res.Holder]
		if !ok || !seen.ExpiresAt.Equal(res.ExpiresAt.Time) {
			seen = Observation{ExpiresAt: res.ExpiresAt.Time, Since: in.Now}
		}
		until := seen.Since.Add(in.Lease + in.Grace)
		if !in.Now.Before(until) {
			p.Uses += res.Quota
			p.Forfeited += res.Quota
			continue
		}
		p.Seen[res.Holder] = seen
		if p.BusyUntil.IsZero() || until.Before(p.BusyUntil) {
			p.BusyUntil = until
		}
		p.Others = append(p.Others, res)
	}
	if in.Held > 0 && inAPI == 0 {
		// Taken back while we could not renew it: its whole quota, our
		// unreported uses included, is already counted.
		p.Lost = true
	} else {
		p.Uses += in.Served
		p.Mine = max(min(in.Held, inAPI)-in.Served, 0)
	}
	if in.MaxUses != nil {
		room := *in.MaxUses - p.Uses
		for _, res := range p.Others {
			room -= res.Quota
		}
		room = max(room, 0)
		if p.Mine > room {
			p.Shrunk = p.Mine - room
			p.Mine = room
		}
		p.Free = room - p.Mine
	}
	return p
}

// Grant is the block granted to a replica that asks for more quota: at
// most half of what is free split among the holders (single uses at the
// limit's edge, whatever the demand), and at most block.
func Grant(p Plan, block int64) int64 {
	return max(min(block, max(p.Free/int64(2*(len(p.Others)+1)), 1), p.Free), 0)
}
