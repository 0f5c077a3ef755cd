// Package claim is the code-ownership rule of linkforge: given a ShortLink and
// the other links of its namespace that hold or declare the codes it could
// take, which code it holds. The controller uses it to assign codes and the
// redirector to choose between two holders its cache briefly shows, so both
// read one rule. It is pure: no Kubernetes imports, no I/O.
package claim

import (
	"slices"
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
	// Exclusive says the link never shares its code (dedup off): links of its
	// own target compete with it for codes as links of other targets do.
	Exclusive bool
}

// shares reports whether a and b may hold one code together: they have the
// same target and dedup on.
func shares(a, b *Link) bool {
	return a.Target == b.Target && !a.Exclusive && !b.Exclusive
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
// (sharing a code would make the younger one expire with the older); so is
// the activation instant (sharing a code would make one of them start
// redirecting at the other's time), and the idle timeout (the links would
// finish at different times). A link without an activation time or an idle
// timeout has the key it had before they existed.
func TargetKey(canonical string, expiresAt, activatesAt *time.Time, idleTimeout *time.Duration, maxUses *int64, redirectStatus int32, forwardQuery bool) string {
	var b strings.Builder
	b.Grow(len(canonical) + 64)
	b.WriteString(canonical)
	b.WriteByte(0)
	if expiresAt != nil {
		b.WriteString(strconv.FormatInt(expiresAt.Unix(), 10))
	}
	if activatesAt != nil {
		b.WriteString("@")
		b.WriteString(strconv.FormatInt(activatesAt.Unix(), 10))
	}
	if idleTimeout != nil {
		b.WriteString("~")
		b.WriteString(strconv.FormatInt(int64(*idleTimeout), 10))
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
	// Kept: no candidate is the link's yet (each is held or declared by a
	// link with precedence, or its custom code is still held by a younger
	// link that is moving), but it holds a confirmed code that is not among
	// them, left from an earlier spec (another custom code, or a URL with
	// other hashed codes), and no other link wants that code: it keeps it,
	// as a Deployment keeps its old ReplicaSet until the new one is ready,
	// and moves once a candidate is free. Code is the kept code.
	Kept
)

// String names the outcome, for messages and test failures.
func (o Outcome) String() string {
	switch o {
	case Assigned:
		return "Assigned"
	case Pending:
		return "Pending"
	case Conflict:
		return "Conflict"
	case Kept:
		return "Kept"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// Decision is the rule's answer for one link.
type Decision struct {
	Outcome Outcome
	// Code and Salt are set for Assigned and Pending. Salt is the index of
	// Code in the candidates. For Kept, Code is the code the link keeps
	// (not a candidate: Salt is 0, the caller knows the salt it took it at).
	Code string
	Salt int
	// Rival names the link that blocks the first candidate (Conflict), that
	// still holds Code (Pending), or that holds or declares Wanted (Kept).
	Rival string
	// Wanted is, for Kept, the candidate the link waits for: the first,
	// or the one a younger Rival holds (Moving).
	Wanted string
	// Moving is set for Kept when Rival is younger and is moving off
	// Wanted: the link takes it at once then. Otherwise Rival takes
	// precedence, and the link waits for it to let go.
	Moving bool
	// Twin names a link with the same target that holds Code, confirmed,
	// beside self (the one that precedes the others): one it shares Code
	// with (dedup), or, with dedup off for either, one it held Code with
	// before, until the link with dedup off has left (see Decide). Empty
	// when self holds Code alone.
	Twin string
}

// Decide returns the code self takes among candidates (its custom code alone,
// or its hashed codes in salt order). rivals are the other links of the
// namespace that hold or declare any of the candidates or the code self
// holds; self may be among them and is ignored.
//
// A candidate is blocked when a competitor that precedes self holds or
// declares it. Competitors are the links with another target and, when
// either link has dedup off (Exclusive), the links with the same target.
// The link keeps the code it holds while that code is unblocked (stability:
// published codes do not move because a lower salt became free); otherwise it
// joins a code a link of its target holds (dedup), or takes the first
// unblocked candidate.
//
// Dedup off: two links of one target that both hold one code, confirmed,
// shared it before dedup was turned off for one of them (or for both). The
// one with dedup off leaves the code (of two with dedup off, the younger),
// and a link that leaves takes the first candidate no other link holds,
// so turning dedup off for a link never moves another link's code. If
// every other candidate is held (a custom code has none), it keeps sharing:
// Twin names the link it shares with.
//
// A changed spec: a link whose confirmed code is no longer among its
// candidates (spec.code changed, or the URL of a hashed link) takes a
// candidate as any link does. While it cannot (Conflict, or Pending on a
// custom code, which its declaration claims from the younger holder), it
// keeps the code it holds (Kept) if no competitor that precedes it holds
// or declares that code and no link of another target holds it: so the
// code never serves two targets, and a link that wants it by precedence
// gets it. A hashed link Pending on a new code does not keep its old one:
// only its hold on the new code tells the younger holder to move. A link
// that shared its code with a twin and whose target changed cannot keep
// it (the twin holds it with the old target): the code stays the twin's,
// which serves it as before, and the link is in Conflict.
func Decide(self Link, candidates []string, rivals []Link) Decision {
	d := &decider{self: self, rivals: rivals}
	out := d.decide(candidates)
	if out.Outcome == Conflict || out.Outcome == Pending && self.Custom != "" {
		if kept, ok := d.keepEarlier(candidates, out); ok {
			return kept
		}
	}
	return out
}

// keepEarlier is Kept, when self may keep the code of an earlier spec
// instead of out (Conflict, or Pending on its custom code).
func (d *decider) keepEarlier(candidates []string, out Decision) (Decision, bool) {
	s := &d.self
	if !s.Confirmed || s.Held == "" || slices.Contains(candidates, s.Held) {
		return Decision{}, false
	}
	if _, blocked := d.blockedBy(s.Held); blocked || d.waitFor(s.Held) != "" {
		return Decision{}, false
	}
	kept := Decision{Outcome: Kept, Code: s.Held, Rival: out.Rival, Wanted: out.Code, Moving: out.Outcome == Pending}
	if out.Outcome == Conflict && len(candidates) > 0 {
		kept.Wanted = candidates[0]
	}
	kept.Twin = d.twinOf(s.Held)
	return kept, true
}

// decide is the rule for the candidates alone.
func (d *decider) decide(candidates []string) Decision {
	self := d.self
	d.leaving = d.mustLeave()
	// The code to keep: the one self holds, else the one a link with the
	// same target holds (duplicates share one code even when a lower salt
	// has freed up since that link took it), else the first unblocked.
	pick := d.keep(candidates)
	if pick < 0 {
		pick = d.joinTwin(candidates)
	}
	firstBlocker := ""
	if pick < 0 {
		pick, firstBlocker = d.firstFree(candidates)
	}
	if pick < 0 && d.leaving {
		// Every other code is held: it keeps sharing, which serves the same
		// redirect, rather than release its code and then win one back by
		// age from a link that holds it (moving that link).
		pick = slices.Index(candidates, self.Held)
	}
	if pick < 0 {
		return Decision{Outcome: Conflict, Rival: firstBlocker}
	}
	code := candidates[pick]
	if rival := d.waitFor(code); rival != "" {
		return Decision{Outcome: Pending, Code: code, Salt: pick, Rival: rival}
	}
	return Decision{Outcome: Assigned, Code: code, Salt: pick, Twin: d.twinOf(code)}
}

// twinOf names the link of self's target that holds code beside self (see
// Decision.Twin), or "".
func (d *decider) twinOf(code string) string {
	if twin := twinHolding(d.self, code, d.rivals); twin != nil {
		return twin.Name
	}
	if twin := firstOf(d.rivals, func(o *Link) bool { return o.Name != d.self.Name && d.heldTogether(o, code) }); twin != nil {
		// Dedup is off for self or for twin, and self stays (see leaving).
		return twin.Name
	}
	return ""
}

// decider is one Decide: self among its rivals.
type decider struct {
	self   Link
	rivals []Link
	// leaving: self, with dedup off, leaves a code it held with a link of
	// its target, and takes only a code no other link holds.
	leaving bool
}

// heldTogether: o and self both hold code, confirmed, with one target.
func (d *decider) heldTogether(o *Link, code string) bool {
	s := &d.self
	return o.Target == s.Target && o.Held == code && o.Confirmed && s.Held == code && s.Confirmed
}

// mustLeave reports whether self, with dedup off, holds its code together
// with a link of its target that stays.
func (d *decider) mustLeave() bool {
	s := &d.self
	if !s.Exclusive || !s.Confirmed || s.Held == "" {
		return false
	}
	for i := range d.rivals {
		if o := &d.rivals[i]; d.heldTogether(o, s.Held) && d.blocks(o, s.Held) {
			return true
		}
	}
	return false
}

// blocks reports whether o keeps self off code.
func (d *decider) blocks(o *Link, code string) bool {
	s := &d.self
	if o.Name == s.Name || shares(o, s) {
		return false
	}
	holds := o.Held == code
	if !holds && o.Custom != code {
		return false
	}
	switch {
	case holds && d.heldTogether(o, code):
		// Dedup was turned off for one of them (or both): the one with
		// dedup off leaves; of two, the younger.
		return s.Exclusive && (!o.Exclusive || Precedes(*o, *s))
	case holds && d.leaving:
		return true
	}
	return Precedes(*o, *s)
}

// blockedBy names the blocker of code that precedes the others, not the
// first found: rivals come in cache order, and a name that changed with it
// would rewrite the Conflict message (a status write) on every pass.
func (d *decider) blockedBy(code string) (string, bool) {
	if b := firstOf(d.rivals, func(o *Link) bool { return d.blocks(o, code) }); b != nil {
		return b.Name, true
	}
	return "", false
}

// keep returns the index of the code self holds if it may keep it, or -1.
func (d *decider) keep(candidates []string) int {
	i := slices.Index(candidates, d.self.Held)
	if i < 0 {
		return -1
	}
	if _, blocked := d.blockedBy(candidates[i]); blocked {
		return -1
	}
	return i
}

// joinTwin returns the index of the first unblocked code that a link
// sharing with self holds, or -1.
func (d *decider) joinTwin(candidates []string) int {
	for i, c := range candidates {
		if twinHolding(d.self, c, d.rivals) == nil {
			continue
		}
		if _, blocked := d.blockedBy(c); !blocked {
			return i
		}
	}
	return -1
}

// firstFree returns the index of the first unblocked candidate, or -1 and
// the blocker of the first candidate.
func (d *decider) firstFree(candidates []string) (int, string) {
	first := ""
	for i, c := range candidates {
		rival, blocked := d.blockedBy(c)
		if !blocked {
			return i, ""
		}
		if i == 0 {
			first = rival
		}
	}
	return -1, first
}

// waitFor names a competitor that still holds code, which must move first,
// so that two targets (or a link with dedup off and another) never serve
// under one code; "" if none. Links of one target that held it together
// are not waited for: the one that leaves is self (not here) or o, and
// both redirect alike.
func (d *decider) waitFor(code string) string {
	for i := range d.rivals {
		o := &d.rivals[i]
		if o.Name != d.self.Name && !shares(o, &d.self) && o.Held == code && !d.heldTogether(o, code) {
			return o.Name
		}
	}
	return ""
}

// twinHolding returns the link that shares code with self (same target,
// dedup on for both, code confirmed) and precedes the others, or nil.
func twinHolding(self Link, code string, rivals []Link) *Link {
	return firstOf(rivals, func(o *Link) bool {
		return o.Name != self.Name && shares(o, &self) && o.Held == code && o.Confirmed
	})
}

// firstOf returns the link of links that precedes the others among those
// that match, or nil.
func firstOf(links []Link, match func(*Link) bool) *Link {
	var best *Link
	for i := range links {
		if o := &links[i]; match(o) && (best == nil || Precedes(*o, *best)) {
			best = o
		}
	}
	return best
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
