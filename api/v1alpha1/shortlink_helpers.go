package v1alpha1

import (
	"time"
)

// Expiry resolves the link's expiry from its spec alone: spec.expiresAt, or
// creation + spec.ttl. It is what the controller writes into status.expiresAt
// and what the redirector checks on each request, so neither waits for the
// other. ok is false when the link never expires.
func (l *ShortLink) Expiry() (at time.Time, ok bool) {
	switch {
	case l.Spec.ExpiresAt != nil:
		return l.Spec.ExpiresAt.Time, true
	case l.Spec.TTL != nil:
		return l.CreationTimestamp.Add(l.Spec.TTL.Duration), true
	}
	return time.Time{}, false
}

// Expired reports whether the link has expired at now.
func (l *ShortLink) Expired(now time.Time) bool {
	at, ok := l.Expiry()
	return ok && !now.Before(at)
}

// IdleSince is the instant spec.idleTimeout counts from: the latest of
// status.lastUsedAt, spec.activatesAt and the creation timestamp (a link
// that has not activated yet cannot have been used).
func (l *ShortLink) IdleSince() time.Time {
	since := l.CreationTimestamp.Time
	if at, ok := l.Activation(); ok && at.After(since) {
		since = at
	}
	if l.Status.LastUsedAt != nil && l.Status.LastUsedAt.After(since) {
		since = l.Status.LastUsedAt.Time
	}
	return since
}

// IdleDeadline is when the link finishes for want of use: IdleSince plus
// spec.idleTimeout plus grace (the manager's --idle-grace, which covers the
// uses the redirectors have not written yet). ok is false when the link
// sets no idleTimeout.
func (l *ShortLink) IdleDeadline(grace time.Duration) (at time.Time, ok bool) {
	if l.Spec.IdleTimeout == nil {
		return time.Time{}, false
	}
	return l.IdleSince().Add(l.Spec.IdleTimeout.Duration + max(grace, 0)), true
}

// Exhausted reports whether the link has served all of its maxUses.
func (l *ShortLink) Exhausted() bool {
	return l.Spec.MaxUses != nil && l.Status.Uses >= *l.Spec.MaxUses
}

// RedirectStatusCode is the HTTP status of the link's redirects.
func (l *ShortLink) RedirectStatusCode() int {
	if l.Spec.RedirectStatus == 0 {
		return int(DefaultRedirectStatus)
	}
	return int(l.Spec.RedirectStatus)
}

// HoldsConfirmedCode reports whether the controller has confirmed that the
// link holds status.code, for its current spec or an earlier one
// (status.confirmedGeneration). A pending or conflicting link holds none.
func (l *ShortLink) HoldsConfirmedCode() bool {
	return l.Status.Code != "" && l.Status.ConfirmedGeneration > 0
}

// ServesConfirmedCode reports whether the controller confirmed the link's
// code for its current spec: the redirectors serve it under status.code.
func (l *ShortLink) ServesConfirmedCode() bool {
	return l.HoldsConfirmedCode() && l.Status.ConfirmedGeneration == l.Generation
}

// Finished reports whether the link has finished: the controller recorded
// it (status.finishedAt), or it has served all of its maxUses.
func (l *ShortLink) Finished() bool {
	return l.Status.FinishedAt != nil || l.Exhausted()
}

// IdleFinished reports whether the controller finished the link for want
// of use (spec.idleTimeout) under its current spec: a link with an
// idleTimeout whose finish is recorded for this generation. The controller
// keeps such a link finished until its spec changes, so a lastUsedAt
// written late does not bring it back.
func (l *ShortLink) IdleFinished() bool {
	return l.Spec.IdleTimeout != nil && l.Status.FinishedAt != nil && l.Status.ObservedGeneration == l.Generation
}

// Activation is spec.activatesAt: the instant from which the link
// redirects. ok is false when it redirects from the start.
func (l *ShortLink) Activation() (at time.Time, ok bool) {
	if l.Spec.ActivatesAt == nil {
		return time.Time{}, false
	}
	return l.Spec.ActivatesAt.Time, true
}

// Scheduled reports whether the link has not activated yet at now.
func (l *ShortLink) Scheduled(now time.Time) bool {
	at, ok := l.Activation()
	return ok && now.Before(at)
}

// Dedup reports whether the link shares its code with the links of its
// target: its dedupPolicy, or byDefault (the manager's --dedup) when unset.
func (l *ShortLink) Dedup(byDefault bool) bool {
	switch l.Spec.DedupPolicy {
	case DedupNever:
		return false
	case DedupIfSameTarget:
		return true
	}
	return byDefault
}
