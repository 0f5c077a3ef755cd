// Package claim is the code-ownership rule of linkforge: given a ShortLink and
// the other links of its namespace that hold or declare the codes it could
// take, which code it holds. The controller uses it to assign codes and the
// redirector to choose between two holders its cache briefly shows, so both
// read one rule. It is pure: no Kubernetes imports, no I/O.
package claim

import (
	"strconv"
	"strings"
	"time"
)

// Link is the part of a ShortLink the rule reads.
type Link struct {
	// Name of the link; unique in its namespace.
	Name string
	// Created is the creation timestamp (second precision in the API).
	Created time.Time
	// Target identifies what a redirect does (see TargetKey). Links with equal
	// targets share a code instead of competing for it.
	Target string
	// Custom is spec.code: a code the link declares for itself.
	Custom string
	// Held is status.code: the code the link holds now, confirmed or pending.
	Held string
	// Confirmed says the controller has confirmed Held: the link redirects (or
	// answers 410) under it. A pending hold waits for a younger holder to let go.
	Confirmed bool
}

// Precedes reports whether a wins over b when both want one code: the older
// link wins, then the smaller name (the rule Gateway API uses for route
// conflicts). It is a strict total order on links of one namespace.
func Precedes(a, b Link) bool {
	if !a.Created.Equal(b.Created) {
		return a.Created.Before(b.Created)
	}
	return a.Name < b.Name
}

// TargetKey builds the identity of what a redirect does: the canonical URL and
// every field that changes a redirect. Expiry is the resolved instant, so two
// links with the same ttl but different creation times are different targets
// (sharing a code would make the younger one expire with the older).
func TargetKey(canonical string, expiresAt *time.Time, maxUses *int64, redirectStatus int32, forwardQuery bool) string {
	var b strings.Builder
	b.Grow(len(canonical) + 48)
	b.WriteString(canonical)
	b.WriteByte(0)
	if expiresAt != nil {
		b.WriteString(strconv.FormatInt(expiresAt.Unix(), 10))
	}
	b.WriteByte(0)
	if maxUses != nil {
		b.WriteString(strconv.FormatInt(*maxUses, 10))
	}
	b.WriteByte(0)
	b.WriteString(strconv.FormatInt(int64(redirectStatus), 10))
	if forwardQuery {
		b.WriteString("\x00q")
	}
	return b.String()
}

// Outcome is what a link gets.
type Outcome int

const (
	// Assigned: the link holds Code and nobody else with another target does.
	Assigned Outcome = iota
	// Pending: Code is the link's by precedence, but a younger link with
	// another target still holds it; that link must move first, so that two
	// targets are never served under one code.
	Pending
	// Conflict: every candidate is held or declared by a link with precedence.
	Conflict
)

// Decision is the rule's answer for one link.
type Decision struct {
	Outcome Outcome
	// Code and Salt are set for Assigned and Pending. Salt is the index of
	// Code in the candidates.
	Code string
	Salt int
	// Rival names the link that blocks the first candidate (Conflict) or that
	// still holds Code (Pending).
	Rival string
}

// Decide returns the code self takes among candidates (its custom code alone,
// or its hashed codes in salt order). rivals are the other links of the
// namespace that hold or declare any of the candidates; self may be among
// them and is ignored.
//
// A candidate is blocked when a link with another target that precedes self
// holds or declares it. The link keeps the code it holds while that code is
// unblocked (stability: published codes do not move because a lower salt
// became free); otherwise it takes the first unblocked candidate.
func Decide(self Link, candidates []string, rivals []Link) Decision {
	// blockedBy names the blocker that precedes the others, not the first
	// found: rivals come in cache order, and a name that changed with it
	// would rewrite the Conflict message (a status write) on every pass.
	blockedBy := func(code string) (string, bool) {
		var best *Link
		for i := range rivals {
			o := &rivals[i]
			if o.Name == self.Name || o.Target == self.Target {
				continue
			}
			if (o.Held == code || o.Custom == code) && Precedes(*o, self) && (best == nil || Precedes(*o, *best)) {
				best = o
			}
		}
		if best == nil {
			return "", false
		}
		return best.Name, true
	}
	// The code to keep: the one self holds, else the one a link with the
	// same target holds (duplicates share one code even when a lower salt
	// has freed up since that link took it).
	pick := -1
	for i, c := range candidates {
		if c == self.Held {
			if _, blocked := blockedBy(c); !blocked {
				pick = i
			}
			break
		}
	}
	if pick < 0 {
		for i, c := range candidates {
			if twinHolds(self, c, rivals) {
				if _, blocked := blockedBy(c); !blocked {
					pick = i
					break
				}
			}
		}
	}
	firstBlocker := ""
	if pick < 0 {
		for i, c := range candidates {
			rival, blocked := blockedBy(c)
			if !blocked {
				pick = i
				break
			}
			if i == 0 {
				firstBlocker = rival
			}
		}
	}
	if pick < 0 {
		return Decision{Outcome: Conflict, Rival: firstBlocker}
	}
	code := candidates[pick]
	for i := range rivals {
		o := &rivals[i]
		if o.Name != self.Name && o.Target != self.Target && o.Held == code {
			return Decision{Outcome: Pending, Code: code, Salt: pick, Rival: o.Name}
		}
	}
	return Decision{Outcome: Assigned, Code: code, Salt: pick}
}

func twinHolds(self Link, code string, rivals []Link) bool {
	for i := range rivals {
		o := &rivals[i]
		if o.Name != self.Name && o.Target == self.Target && o.Held == code && o.Confirmed {
			return true
		}
	}
	return false
}

// Winner returns the index of the link to serve among links whose confirmed
// hold is one code, or -1 if none is confirmed. Normally there is one; during
// a hand-over a cache can briefly show two, and then the rule's winner is
// served, never the loser.
func Winner(holders []Link) int {
	best := -1
	for i := range holders {
		if !holders[i].Confirmed {
			continue
		}
		if best < 0 || Precedes(holders[i], holders[best]) {
			best = i
		}
	}
	return best
}
