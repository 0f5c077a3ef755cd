package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/claim"
	"github.com/linkforge/linkforge/internal/explain"
)

// This file holds the parts of the ShortLink reconciler for activation
// times (spec.activatesAt) and dedup control (spec.dedupPolicy, --dedup).

// setScheduled records a link that holds its code but has not activated
// yet: Ready=True with reason Scheduled (it is in the state its spec asks
// for, so kstatus and GitOps tools read it as healthy), state Scheduled,
// and what it answers until then and after (answer). The code is
// confirmed, so every redirector has the link and starts redirecting at
// activatesAt by its own clock; the controller is back at that instant
// (the returned requeue), or at the expiry if it comes first, only to
// write the state.
func (r *ShortLinkReconciler) setScheduled(link *linkv1.ShortLink, d claim.Decision, answer explain.Answer, now time.Time) time.Duration {
	at, _ := link.Activation()
	link.Status.State = linkv1.StateScheduled
	r.setReady(link, metav1.ConditionTrue, linkv1.ReasonScheduled, answer.Sentence(d.Code))
	next := at
	if expiry, ok := link.Expiry(); ok && expiry.Before(next) {
		next = expiry // a ttl can end before the activation
	}
	return next.Sub(now)
}

// activeMessage is the Ready message of a link that redirects: what it
// answers (internal/explain), with the Location the redirect sends.
func (r *ShortLinkReconciler) activeMessage(link *linkv1.ShortLink, d claim.Decision, answer explain.Answer) string {
	msg := answer.Sentence(d.Code)
	if d.Twin != "" && !link.Dedup(!r.DisableDedup) {
		// claim.Decide keeps a link with dedup off on the code it shared when
		// every other code it may take is held (a custom code has none).
		return msg + fmt.Sprintf("; it is shared with ShortLink %q although dedupPolicy is Never: every other code this link may take is held (give it another spec.code to have one of its own)", d.Twin)
	}
	return msg
}

// dedupOffConflictMessage is the CodeConflict message of a link with dedup off.
func dedupOffConflictMessage(link *linkv1.ShortLink, d claim.Decision) string {
	if link.Spec.Code != "" {
		return fmt.Sprintf("code %q is held by ShortLink %q, which takes precedence (older, or same age and smaller name); dedup is off for this link, so it does not share the code even with a link of the same target: %s", link.Spec.Code, d.Rival, servesNothingCustom)
	}
	return fmt.Sprintf("all ten salted codes are held by other links (salt 0 by ShortLink %q); dedup is off for this link, so it shares none of them: this link serves nothing until one is free", d.Rival)
}

// emitScheduleEvents records the events of activation: a link that
// activated (Scheduled, then Active), or that stopped redirecting until a
// new activatesAt (Active, then Scheduled). It reports whether it handled
// the transition; a link's first Scheduled state makes no event, as a
// link's first code makes none.
func (r *ShortLinkReconciler) emitScheduleEvents(before, after *linkv1.ShortLink, was, now *metav1.Condition) bool {
	if was == nil || was.Reason == now.Reason || before.Status.Code != after.Status.Code {
		return false
	}
	switch {
	case was.Reason == linkv1.ReasonScheduled && now.Reason == linkv1.ReasonCodeAssigned:
		r.Recorder.Eventf(after, nil, corev1.EventTypeNormal, "Activated", "Activate",
			"code %s redirects from now on (spec.activatesAt)", after.Status.Code)
		return true
	case was.Reason == linkv1.ReasonCodeAssigned && now.Reason == linkv1.ReasonScheduled:
		r.Recorder.Eventf(after, nil, corev1.EventTypeNormal, linkv1.ReasonScheduled, "Activate",
			"%s", now.Message)
		return true
	}
	return false
}

// idleDeadline is when the link finishes for want of use (spec.idleTimeout),
// grace included; ok is false without an idleTimeout. A link that shares
// its code with twin (dedup) counts from twin's last use too: the
// redirectors serve one link of a shared code and write the uses to it.
func (r *ShortLinkReconciler) idleDeadline(ctx context.Context, link *linkv1.ShortLink, twin string) (time.Time, bool) {
	at, ok := link.IdleDeadline(r.IdleGrace)
	if !ok || twin == "" {
		return at, ok
	}
	other := &linkv1.ShortLink{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: link.Namespace, Name: twin}, other); err != nil || other.Status.LastUsedAt == nil {
		return at, ok
	}
	if shared := other.Status.LastUsedAt.Add(link.Spec.IdleTimeout.Duration + max(r.IdleGrace, 0)); shared.After(at) {
		at = shared
	}
	return at, ok
}

// setExpiredFlag keeps the Expired condition of a link that can expire
// (ttl, expiresAt or idleTimeout): False while it has not, True once it
// has, with reason IdleExpired when it finished for want of use. Its
// messages hold nothing that a use changes, so the writes of lastUsedAt
// cause no write of the controller.
func (r *ShortLinkReconciler) setExpiredFlag(link *linkv1.ShortLink, expiry time.Time, expires, expired, idled bool) {
	idle := link.Spec.IdleTimeout
	var parts []string
	if expires {
		parts = append(parts, "expires at "+expiry.UTC().Format(time.RFC3339))
	}
	if idle != nil {
		parts = append(parts, fmt.Sprintf("finishes once not used for %s (status.lastUsedAt + spec.idleTimeout + %s grace)", idle.Duration, max(r.IdleGrace, 0)))
	}
	switch {
	case len(parts) == 0:
		r.removeCondition(link, linkv1.ConditionExpired)
	case expired:
		r.setFlag(link, linkv1.ConditionExpired, true, linkv1.ReasonExpired, "%s", strings.Join(parts, "; "))
	case idled:
		r.setCondition(link, linkv1.ConditionExpired, metav1.ConditionTrue, linkv1.ReasonIdleExpired,
			fmt.Sprintf("not used for %s: last used at %s", idle.Duration, lastUsed(link)))
	default:
		r.setFlag(link, linkv1.ConditionExpired, false, linkv1.ReasonExpired, "%s", strings.Join(parts, "; "))
	}
}

// lastUsed is status.lastUsedAt for a message.
func lastUsed(link *linkv1.ShortLink) string {
	if link.Status.LastUsedAt == nil {
		return "never (idle since " + link.IdleSince().UTC().Format(time.RFC3339) + ")"
	}
	return link.Status.LastUsedAt.UTC().Format(time.RFC3339)
}
