package v1alpha1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
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

// HoldsConfirmedCode reports whether the controller has confirmed that the link
// answers under status.code: it is Ready, or finished (expired or exhausted)
// while still holding its code. A pending or conflicting link is not served.
func (l *ShortLink) HoldsConfirmedCode() bool {
	if l.Status.Code == "" {
		return false
	}
	ready := meta.FindStatusCondition(l.Status.Conditions, ConditionReady)
	if ready == nil {
		return false
	}
	switch ready.Reason {
	case ReasonCodeAssigned, ReasonExpired, ReasonExhausted:
		return true
	}
	return false
}
