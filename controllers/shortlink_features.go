package controllers

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/claim"
)

// This file holds the parts of the ShortLink reconciler for activation
// times (spec.activatesAt) and dedup control (spec.dedupPolicy, --dedup).

// setScheduled records a link that holds its code but has not activated
// yet: Ready=True with reason Scheduled (it is in the state its spec asks
// for, so kstatus and GitOps tools read it as healthy), state Scheduled.
// The code is confirmed, so every redirector has the link and starts
// redirecting at activatesAt by its own clock; the controller is back at
// that instant (the returned requeue), or at the expiry if it comes first,
// only to write the state.
func (r *ShortLinkReconciler) setScheduled(link *linkv1.ShortLink, d claim.Decision, now time.Time) time.Duration {
	at, _ := link.Activation()
	link.Status.State = linkv1.StateScheduled
	r.setReady(link, metav1.ConditionTrue, linkv1.ReasonScheduled, fmt.Sprintf(
		"code %s redirects from %s; until then it answers like an unknown code (404 Not Found)",
		d.Code, at.UTC().Format(time.RFC3339)))
	next := at
	if expiry, ok := link.Expiry(); ok && expiry.Before(next) {
		next = expiry // a ttl can end before the activation
	}
	return next.Sub(now)
}

// activeMessage is the Ready message of a link that redirects.
func (r *ShortLinkReconciler) activeMessage(link *linkv1.ShortLink, d claim.Decision, canonical string) string {
	msg := fmt.Sprintf("code %s redirects to %s", d.Code, canonical)
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
		return fmt.Sprintf("code %q is held by ShortLink %q, which takes precedence (older, or same age and smaller name); dedup is off for this link, so it does not share the code even with a link of the same target", link.Spec.Code, d.Rival)
	}
	return fmt.Sprintf("all ten salted codes are held by other links (salt 0 by ShortLink %q); dedup is off for this link, so it shares none of them", d.Rival)
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
