// Package controllers holds the linkforge manager's controllers: the
// ShortLink reconciler, which assigns codes and tracks expiry in status, and
// the reaper, which deletes finished links.
package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/claim"
	"github.com/linkforge/linkforge/internal/compactlink"
	"github.com/linkforge/linkforge/internal/explain"
	"github.com/linkforge/linkforge/internal/rules"
	"github.com/linkforge/linkforge/internal/shortcode"
)

// pendingRetry is a fallback for a link waiting for a younger holder to let go
// of its code; the holder's status change normally re-queues it sooner.
const pendingRetry = 5 * time.Second

// namespaceRetry is how soon a link is judged again whose namespace the
// manager's cache has not seen yet.
const namespaceRetry = time.Second

// conflictRetry is how soon a link whose status patch lost a race (another
// manager or a redirector wrote first) is decided again, on fresh data.
const conflictRetry = 200 * time.Millisecond

// DefaultIdleGrace is the manager's --idle-grace: twice the redirectors'
// default --uses-flush-interval (10s; a use waits up to one interval for
// its round, and a round's writes, paced by the write budget, take up to
// another), with room to spare. lastUsedAt needs no more: it is rounded up.
const DefaultIdleGrace = 30 * time.Second

// ShortLinkReconciler writes each ShortLink's code, canonical URL, expiry and
// conditions into its status.
type ShortLinkReconciler struct {
	client.Client
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	// RedirectBaseURL is the public base of short URLs (status.shortURL); empty leaves shortURL unset.
	RedirectBaseURL string
	// MaxConcurrentReconciles bounds parallel reconciles (default 1).
	MaxConcurrentReconciles int
	// Codes gives a hashed link's candidate codes in salt order. Nil means
	// shortcode.Codes; tests inject short codes to force collisions.
	Codes func(canonical, namespace string) []string
	// Index is the code index of the manager's cache (required): the same
	// as given to ManagerCacheOptions.
	Index *CodeIndex
	// IdleGrace is added to every idle deadline (spec.idleTimeout; the
	// manager's --idle-grace): the redirectors write status.lastUsedAt with
	// their batched uses, up to a flush interval or two after the use, so a
	// link is finished only once a use it may have served has had the time
	// to arrive.
	IdleGrace time.Duration
	// DisableDedup gives every link without a spec.dedupPolicy a code of its
	// own (the manager's --dedup=false); by default links of one target share one.
	DisableDedup bool
	// Metrics receives the code metrics (code_metrics.go); nil means
	// controller-runtime's registry, which the manager serves.
	Metrics prometheus.Registerer
	// MetricsNamespaceLimit is how many namespaces get series of their own
	// in the per-namespace code gauges (the rest are summed); 0 means
	// DefaultMetricsNamespaceLimit, negative none.
	MetricsNamespaceLimit int

	expectations codeExpectations
	denyLists    parsedDenyLists
	metrics      *codeMetrics
}

// +kubebuilder:rbac:groups=linkforge.io,resources=shortlinks,verbs=get;list;watch
// +kubebuilder:rbac:groups=linkforge.io,resources=shortlinks/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile fetches the link, decides its code and expiry, and patches status once.
func (r *ShortLinkReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	link := &linkv1.ShortLink{}
	if err := r.Get(ctx, req.NamespacedName, link); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !link.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}

	before := link.DeepCopy()
	var decided claim.Decision
	defer func() {
		// A reconcile that failed half-way has not handled this generation:
		// keep the last complete status and the first error.
		if retErr != nil || equality.Semantic.DeepEqual(before.Status, link.Status) {
			return
		}
		// The optimistic lock makes a decision taken on a stale copy fail
		// instead of overwriting a newer status (two managers, or a redirector
		// writing uses); the retry decides again on fresh data.
		patch := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
		if err := r.Status().Patch(ctx, link, patch); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				result, retErr = ctrl.Result{RequeueAfter: conflictRetry}, nil
				return
			}
			retErr = fmt.Errorf("patching status: %w", err)
			return
		}
		r.expectations.written(req.NamespacedName, link.Status.Code, before.ResourceVersion)
		r.emitEvents(before, link)
		r.metrics.observe(before, link, decided)
	}()

	return r.reconcile(ctx, link, &decided)
}

// reconcile decides the link's status; decided receives the code decision
// (none for an invalid URL or a destination the policy refuses).
func (r *ShortLinkReconciler) reconcile(ctx context.Context, link *linkv1.ShortLink, decided *claim.Decision) (ctrl.Result, error) {
	now := r.Clock.Now()
	st := &link.Status
	gen := link.Generation
	// A link finished for this spec stays finished until the spec changes:
	// a late lastUsedAt (a use written after the idle deadline) does not
	// make a link that answered 410 redirect again.
	wasFinished := st.FinishedAt != nil && st.ObservedGeneration == gen

	st.RuleCount, st.VariantCount = int32(len(link.Spec.Rules)), int32(len(link.Spec.Variants))
	canonical, err := shortcode.Canonicalize(link.Spec.URL)
	var targets []routedTarget
	var bad *invalidTarget
	switch {
	case err != nil:
		bad = &invalidTarget{field: "spec.url", err: err}
	default:
		targets, bad = canonicalTargets(link)
	}
	if bad != nil {
		// Terminal until the spec changes: the spec update re-queues the link.
		fix := bad.field
		if fix == "" {
			fix = "spec.rules and spec.variants"
		}
		r.setHold(link, "", 0)
		st.ConfirmedGeneration = 0
		st.CanonicalURL, st.ExpiresAt = "", nil
		st.State = linkv1.StateInvalid
		r.setReady(link, metav1.ConditionFalse, linkv1.ReasonInvalidURL, bad.Error())
		r.setCondition(link, linkv1.ConditionStalled, metav1.ConditionTrue, linkv1.ReasonInvalidURL, "fix "+fix+"; the link is not retried until its spec changes")
		r.removeCondition(link, linkv1.ConditionReconciling)
		r.clearFinished(link)
		st.ObservedGeneration = gen
		return ctrl.Result{}, nil
	}

	st.CanonicalURL = canonical
	expiry, expires := link.Expiry()
	st.ExpiresAt = nil
	if expires {
		t := metav1.NewTime(expiry)
		st.ExpiresAt = &t
	}

	policy, known, err := r.destinationPolicy(ctx, link.Namespace)
	switch {
	case err != nil:
		return ctrl.Result{}, err
	case !known:
		// The cache has not seen the namespace yet; its watch handler
		// re-queues the link if it has allowed hosts.
		return ctrl.Result{RequeueAfter: namespaceRetry}, nil
	}
	if verdict := judgeTargets(policy, canonical, targets); !verdict.Allowed {
		// Terminal until the URL or the policy changes (the watches of
		// Namespaces and DestinationDenyLists re-queue the link). The link
		// holds no code, so the redirectors stop serving it; it is kept.
		r.setHold(link, "", 0)
		st.ConfirmedGeneration = 0
		st.State = linkv1.StateBlocked
		r.setReady(link, metav1.ConditionFalse, linkv1.ReasonDestinationNotAllowed, verdict.Message)
		r.setCondition(link, linkv1.ConditionStalled, metav1.ConditionTrue, linkv1.ReasonDestinationNotAllowed,
			"the link does not redirect while a destination is not allowed: point every target (spec.url, rules, variants, expiredURL, card.image) at an allowed host, or ask a cluster administrator to change the list; the link is kept")
		r.removeCondition(link, linkv1.ConditionReconciling)
		r.clearFinished(link)
		st.ObservedGeneration = gen
		return ctrl.Result{}, nil
	}

	decision, err := r.decide(link, canonical, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	*decided = decision

	st.ObservedGeneration = gen
	switch decision.Outcome {
	case claim.Conflict:
		r.setHold(link, "", 0)
		st.ConfirmedGeneration = 0
		st.State = linkv1.StateConflict
		r.setReady(link, metav1.ConditionFalse, linkv1.ReasonCodeConflict, r.conflictMessage(ctx, link, decision))
		r.setCondition(link, linkv1.ConditionStalled, metav1.ConditionTrue, linkv1.ReasonCodeConflict, stalledConflictMessage(link))
		r.removeCondition(link, linkv1.ConditionReconciling)
		r.clearFinished(link)
		return ctrl.Result{}, nil
	case claim.Pending:
		r.setHold(link, decision.Code, decision.Salt)
		st.ConfirmedGeneration = 0
		msg := fmt.Sprintf("code %s is still held by younger ShortLink %q, which is moving to another code", decision.Code, decision.Rival)
		st.State = linkv1.StatePending
		r.setReady(link, metav1.ConditionFalse, linkv1.ReasonProgressing, msg)
		r.setCondition(link, linkv1.ConditionReconciling, metav1.ConditionTrue, linkv1.ReasonProgressing, msg)
		r.removeCondition(link, linkv1.ConditionStalled)
		return ctrl.Result{RequeueAfter: pendingRetry}, nil
	}

	return r.serve(ctx, link, decision, now, wasFinished), nil
}

// serve records a link that holds a confirmed code (Assigned, or Kept):
// its hold, whether it has finished, and what it answers.
func (r *ShortLinkReconciler) serve(ctx context.Context, link *linkv1.ShortLink, decision claim.Decision, now time.Time, wasFinished bool) ctrl.Result {
	st := &link.Status
	expiry, expires := link.Expiry()
	var result ctrl.Result
	salt := decision.Salt
	if decision.Outcome == claim.Kept {
		salt = int(st.Salt) // the code of an earlier spec, at its salt
	}
	r.setHold(link, decision.Code, salt)
	// Confirmed for this spec, also for a kept code: the redirectors serve
	// the current spec under it (and never a spec they have not checked).
	st.ConfirmedGeneration = link.Generation
	// The split's buckets for this spec, moved as little as the weights
	// allow from those of the spec confirmed before: the redirectors
	// serve this spec with them, from this status write on.
	st.SplitBuckets = rules.Assign(&link.Spec, st.SplitBuckets)
	r.removeCondition(link, linkv1.ConditionReconciling)
	r.removeCondition(link, linkv1.ConditionStalled)

	expired := link.Expired(now)
	exhausted := link.Exhausted()
	idleAt, idles := r.idleDeadline(ctx, link, decision.Twin)
	idled := idles && !expired && !exhausted && (!now.Before(idleAt) || wasFinished)
	recordFinish(st, expired, exhausted || idled, expiry, now)
	r.setExpiredFlag(link, expiry, expires, expired, idled)
	if link.Spec.MaxUses != nil {
		r.setFlag(link, linkv1.ConditionExhausted, exhausted, linkv1.ReasonExhausted, "%d of %d uses served", link.Status.Uses, *link.Spec.MaxUses)
	} else {
		r.removeCondition(link, linkv1.ConditionExhausted)
	}
	// What the redirectors answer for the link, in the words the CLI and
	// the preview page use too (internal/explain): the fallbacks of its
	// namespace matter only to a link that does not redirect now.
	var fallbacks explain.Fallbacks
	scheduled := link.Scheduled(now)
	if expired || exhausted || idled || scheduled {
		fallbacks = r.fallbacks(ctx, link.Namespace)
	}
	answer := explain.Describe(explain.FromShortLink(link), now, fallbacks)
	// A finished link is Ready: answering 410 Gone (or redirecting to its
	// expiredURL) is the state its spec asks for, and Ready=False would read
	// as "not reconciled yet" to kstatus (Flux health checks, wait: true)
	// for as long as the link exists. The reason, the message and
	// status.state say that it has finished.
	switch {
	case expired:
		st.State = linkv1.StateExpired
		r.setReady(link, metav1.ConditionTrue, linkv1.ReasonExpired, answer.Sentence(decision.Code))
	case exhausted:
		st.State = linkv1.StateExhausted
		r.setReady(link, metav1.ConditionTrue, linkv1.ReasonExhausted, answer.Sentence(decision.Code))
	case idled:
		st.State = linkv1.StateExpired
		r.setReady(link, metav1.ConditionTrue, linkv1.ReasonExpired, answer.Sentence(decision.Code))
	case scheduled:
		result.RequeueAfter = r.setScheduled(link, decision, answer, now)
	default:
		st.State = linkv1.StateActive
		r.setReady(link, metav1.ConditionTrue, linkv1.ReasonCodeAssigned, r.activeMessage(link, decision, answer))
		// Back at the first deadline; a use moves the idle one later, and
		// the write that says so starts another reconcile.
		switch {
		case expires && (!idles || expiry.Before(idleAt)):
			result.RequeueAfter = expiry.Sub(now)
		case idles:
			result.RequeueAfter = idleAt.Sub(now)
		}
	}
	if decision.Outcome == claim.Kept {
		r.setKept(ctx, link, decision, answer)
		if decision.Moving && (result.RequeueAfter == 0 || result.RequeueAfter > pendingRetry) {
			result.RequeueAfter = pendingRetry
		}
	}
	return result
}

// decide applies the ownership rule to the link, one decision at a time,
// seeing the cache and the decisions the cache may not show yet.
func (r *ShortLinkReconciler) decide(link *linkv1.ShortLink, canonical string, now time.Time) (claim.Decision, error) {
	candidates := r.candidates(link, canonical)
	self := r.claimLink(link, canonical)
	// The rivals of the code the link holds too: it may keep that code
	// while its spec asks for another (claim.Kept).
	codes := candidates
	if self.Confirmed && self.Held != "" && !slices.Contains(candidates, self.Held) {
		codes = append(slices.Clip(candidates), self.Held)
	}
	r.expectations.mu.Lock()
	defer r.expectations.mu.Unlock()
	rivals, err := r.rivals(link.Namespace, codes)
	if err != nil {
		return claim.Decision{}, err
	}
	rivals = r.expectations.lockedExpectedHolders(link.Namespace, codes, rivals, now)
	d := claim.Decide(self, candidates, rivals)
	cached := self
	self.Held, self.Confirmed = "", false
	if d.Outcome != claim.Conflict {
		// A copy: the code is a substring of all ten candidates, which the
		// expectation would otherwise keep alive.
		self.Held, self.Confirmed = strings.Clone(d.Code), d.Outcome == claim.Assigned || d.Outcome == claim.Kept
	}
	r.expectations.lockedExpect(client.ObjectKeyFromObject(link), self, cached, link.ResourceVersion, now)
	return d, nil
}

func (r *ShortLinkReconciler) conflictMessage(ctx context.Context, link *linkv1.ShortLink, d claim.Decision) string {
	if !link.Dedup(!r.DisableDedup) {
		return dedupOffConflictMessage(link, d)
	}
	if link.Spec.Code != "" {
		return fmt.Sprintf("code %q is %s by ShortLink %q, which takes precedence (older, or same age and smaller name): %s",
			link.Spec.Code, r.heldOrClaimed(ctx, link.Namespace, d.Rival, link.Spec.Code), d.Rival, servesNothingCustom)
	}
	return fmt.Sprintf("all %d salted codes are held by other links (salt 0 by ShortLink %q): this link serves nothing until one is free; set spec.code to give it a code of your choice",
		shortcode.MaxSalt+1, d.Rival)
}

// servesNothingCustom ends the conflict message of a link whose custom
// code is taken: what it does, and how to pick another code.
const servesNothingCustom = "this link serves nothing until that code is free; choose another spec.code, or remove spec.code for a code computed from spec.url"

// heldOrClaimed says whether the rival that blocks code holds it or only
// claims it (its spec.code, while it waits for it itself), as the cache
// shows it.
func (r *ShortLinkReconciler) heldOrClaimed(ctx context.Context, namespace, rival, code string) string {
	other := &linkv1.ShortLink{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: rival}, other); err == nil && other.Status.Code != code {
		return "claimed"
	}
	return "held"
}

func stalledConflictMessage(link *linkv1.ShortLink) string {
	if link.Spec.Code != "" {
		return "waiting for the code to be released; choose another spec.code to resolve it now"
	}
	return "waiting for one of the ten codes to be released; change spec.url (or set spec.code) to resolve it now"
}

// setKept records a link that keeps the code of an earlier spec while the
// code its spec asks for is held by another link (claim.Kept): state Kept,
// Ready=False naming that link and the code still served, and Stalled
// while the holder takes precedence (the link waits for it to let go:
// kstatus reads Failed, so a GitOps apply of a taken code fails instead of
// passing while the short URL silently stays the old one) or Reconciling
// while it is a younger link moving away (InProgress, as Pending). The
// kept code answers as the rest of the status says (expiry, uses, ...).
func (r *ShortLinkReconciler) setKept(ctx context.Context, link *linkv1.ShortLink, d claim.Decision, answer explain.Answer) {
	st := &link.Status
	st.State = linkv1.StateKept
	serves := fmt.Sprintf("until then code %s, which it held before, still %s", d.Code, answer.Words)
	if d.Moving {
		msg := fmt.Sprintf("code %s is still held by younger ShortLink %q, which is moving to another code; %s", d.Wanted, d.Rival, serves)
		r.setReady(link, metav1.ConditionFalse, linkv1.ReasonProgressing, msg)
		r.setCondition(link, linkv1.ConditionReconciling, metav1.ConditionTrue, linkv1.ReasonProgressing, msg)
		return
	}
	var msg, fix string
	if link.Spec.Code != "" {
		msg = fmt.Sprintf("code %q is %s by ShortLink %q, which takes precedence (older, or same age and smaller name); %s",
			d.Wanted, r.heldOrClaimed(ctx, link.Namespace, d.Rival, d.Wanted), d.Rival, serves)
		fix = fmt.Sprintf("waiting for code %s to be released; choose another spec.code, or set it back to %s, to resolve it now", d.Wanted, d.Code)
	} else {
		msg = fmt.Sprintf("all %d salted codes of spec.url are held by other links (salt 0 by ShortLink %q); %s", shortcode.MaxSalt+1, d.Rival, serves)
		fix = "waiting for one of the ten codes to be released; change spec.url (or set spec.code) to resolve it now"
	}
	r.setReady(link, metav1.ConditionFalse, linkv1.ReasonCodeConflict, msg)
	r.setCondition(link, linkv1.ConditionStalled, metav1.ConditionTrue, linkv1.ReasonCodeConflict, fix)
}

func (r *ShortLinkReconciler) candidates(link *linkv1.ShortLink, canonical string) []string {
	if link.Spec.Code != "" {
		return []string{link.Spec.Code}
	}
	return r.hashedCodes(canonical, link.Namespace)
}

func (r *ShortLinkReconciler) hashedCodes(canonical, namespace string) []string {
	if r.Codes != nil {
		return r.Codes(canonical, namespace)
	}
	codes := shortcode.Codes(canonical, namespace)
	return codes[:]
}

// claimLink is the view of a link the ownership rule reads. canonical is
// passed for the link being reconciled; rivals use their status, which is
// what the redirectors serve.
func (r *ShortLinkReconciler) claimLink(link *linkv1.ShortLink, canonical string) claim.Link {
	return claim.Link{
		Name:      link.Name,
		Created:   link.CreationTimestamp.Time,
		Target:    rules.Identity(link, canonical),
		Custom:    link.Spec.Code,
		Held:      link.Status.Code,
		Confirmed: link.HoldsConfirmedCode(),
		Exclusive: !link.Dedup(!r.DisableDedup),
	}
}

// rivals returns the links of the namespace that hold or declare any of codes.
func (r *ShortLinkReconciler) rivals(namespace string, codes []string) ([]claim.Link, error) {
	var out []claim.Link
	seen := make(map[string]struct{})
	for _, code := range codes {
		holders, err := r.cachedWithCode(namespace, code)
		if err != nil {
			return nil, err
		}
		for _, obj := range holders {
			s, _ := compactlink.SummaryOf(obj)
			if _, dup := seen[s.Name]; dup {
				continue
			}
			seen[s.Name] = struct{}{}
			// A rival's target is its status view: what the redirectors serve.
			l, _ := compactlink.Of(obj)
			out = append(out, r.claimLink(l, l.Status.CanonicalURL))
		}
	}
	return out, nil
}

// fallbacks are the fallback redirects that the annotations of namespace
// set, as the redirectors read them, for the messages (internal/explain).
// The redirectors' own --gone-redirect and --not-found-redirect are
// theirs: the manager does not know them.
func (r *ShortLinkReconciler) fallbacks(ctx context.Context, namespace string) explain.Fallbacks {
	var ns corev1.Namespace
	if err := r.Get(ctx, types.NamespacedName{Name: namespace}, &ns); err != nil {
		return explain.Fallbacks{}
	}
	return explain.NamespaceFallbacks(ns.Annotations)
}

// setHold records the code the link holds (empty: none), its salt and its short URL.
func (r *ShortLinkReconciler) setHold(link *linkv1.ShortLink, code string, salt int) {
	link.Status.Code, link.Status.Salt, link.Status.ShortURL = code, int32(salt), r.shortURL(link.Namespace, code)
}

func (r *ShortLinkReconciler) shortURL(namespace, code string) string {
	if r.RedirectBaseURL == "" || code == "" {
		return ""
	}
	return strings.TrimRight(r.RedirectBaseURL, "/") + "/" + namespace + "/" + code
}

func (r *ShortLinkReconciler) setReady(link *linkv1.ShortLink, status metav1.ConditionStatus, reason, msg string) {
	r.setCondition(link, linkv1.ConditionReady, status, reason, msg)
}

func (r *ShortLinkReconciler) setCondition(link *linkv1.ShortLink, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&link.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: link.Generation,
	})
}

func (r *ShortLinkReconciler) removeCondition(link *linkv1.ShortLink, typ string) {
	meta.RemoveStatusCondition(&link.Status.Conditions, typ)
}

// setFlag keeps an Expired/Exhausted condition of a link that can finish:
// False while it has not, True once it has. The message keeps its reading
// (expiry instant, uses) so users see how far along it is.
func (r *ShortLinkReconciler) setFlag(link *linkv1.ShortLink, typ string, on bool, reason, format string, args ...any) {
	if on {
		r.setCondition(link, typ, metav1.ConditionTrue, reason, fmt.Sprintf(format, args...))
		return
	}
	r.setCondition(link, typ, metav1.ConditionFalse, linkv1.ReasonActive, fmt.Sprintf(format, args...))
}

func (r *ShortLinkReconciler) clearFinished(link *linkv1.ShortLink) {
	r.removeCondition(link, linkv1.ConditionExpired)
	r.removeCondition(link, linkv1.ConditionExhausted)
	link.Status.FinishedAt = nil
}

// recordFinish keeps status.finishedAt: unset while the link serves, and once
// it has finished, the first finish seen: its expiry instant, or now for a
// link that ran out of uses. A spec edit that revives the link clears it.
func recordFinish(st *linkv1.ShortLinkStatus, expired, exhausted bool, expiry, now time.Time) {
	switch {
	case !expired && !exhausted:
		st.FinishedAt = nil
	case st.FinishedAt == nil:
		at := now
		if expired {
			at = expiry
		}
		t := metav1.NewTime(at.Truncate(time.Second))
		st.FinishedAt = &t
	}
}

// emitEvents records what users must see, once per transition.
func (r *ShortLinkReconciler) emitEvents(before, after *linkv1.ShortLink) {
	if r.Recorder == nil {
		return
	}
	was := meta.FindStatusCondition(before.Status.Conditions, linkv1.ConditionReady)
	now := meta.FindStatusCondition(after.Status.Conditions, linkv1.ConditionReady)
	if now == nil {
		return
	}
	changed := was == nil || was.Reason != now.Reason || was.Message != now.Message
	switch now.Reason {
	case linkv1.ReasonCodeAssigned, linkv1.ReasonScheduled:
		if r.emitScheduleEvents(before, after, was, now) {
			return
		}
		// A link's first code is in its status and Ready condition; an event
		// per new link would double the manager's writes and, held in the
		// event broadcaster's cache for minutes, its memory. Events are for
		// what a user must notice: a short URL that changed, a link that took
		// its code over after a conflict, or a code from a later salt.
		switch {
		case before.Status.Code != "" && before.Status.Code != after.Status.Code:
			r.Recorder.Eventf(after, nil, corev1.EventTypeNormal, linkv1.ReasonCodeAssigned, "Assign",
				"assigned code %s (was %s)", after.Status.Code, before.Status.Code)
		case was != nil && was.Reason != now.Reason:
			r.Recorder.Eventf(after, nil, corev1.EventTypeNormal, linkv1.ReasonCodeAssigned, "Assign",
				"assigned code %s (was %s)", after.Status.Code, was.Reason)
		}
		if after.Status.Salt > 0 && before.Status.Code != after.Status.Code {
			r.Recorder.Eventf(after, nil, corev1.EventTypeNormal, "CodeCollision", "Assign",
				"codes at salts 0-%d are held by other links; took salt %d", after.Status.Salt-1, after.Status.Salt)
		}
	case linkv1.ReasonCodeConflict, linkv1.ReasonInvalidURL, linkv1.ReasonDestinationNotAllowed:
		if changed {
			r.Recorder.Eventf(after, nil, corev1.EventTypeWarning, now.Reason, "Assign", "%s", now.Message)
		}
	case linkv1.ReasonExpired, linkv1.ReasonExhausted:
		if changed {
			r.Recorder.Eventf(after, nil, corev1.EventTypeNormal, now.Reason, "Finish", "%s", now.Message)
		}
	}
}

// SetupWithManager registers the code index and the controller.
func (r *ShortLinkReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if err := r.addCodeIndex(ctx, mgr.GetCache()); err != nil {
		return fmt.Errorf("indexing ShortLinks by code: %w", err)
	}
	r.metrics = newCodeMetrics(r)
	if err := r.metrics.register(r.Metrics); err != nil {
		return err
	}
	// Expectations expire as decisions are taken; this expires the last
	// ones of a burst too, when no decision follows.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		_ = wait.PollUntilContextCancel(ctx, codeExpectationsTimeout, false, func(context.Context) (bool, error) {
			r.expectations.expire(r.Clock.Now())
			return false, nil
		})
		return nil
	})); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&linkv1.ShortLink{}).
		// A change to one link's codes wakes the links that compete for them.
		Watches(&linkv1.ShortLink{}, &rivalsHandler{r: r}).
		// A change of a destination list wakes the links it may decide.
		Watches(&corev1.Namespace{}, &namespaceHandler{r: r}).
		Watches(&linkv1.DestinationDenyList{}, &denyListHandler{r: r}).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.MaxConcurrentReconciles)}).
		Named("shortlink").
		WithLogConstructor(reconcileLogger(mgr.GetLogger(), "shortlink")).
		Complete(r)
}

// stateInConflict reads the typed state the controller wrote, not a condition
// reason: reasons are for people.
// A link that keeps an earlier code waits for its candidates as one in
// conflict does.
func stateInConflict(state linkv1.LinkState) bool {
	return state == linkv1.StateConflict || state == linkv1.StateKept
}

// rivalsHandler enqueues the links that hold, declare or wait for a code that
// a changed link held or declared, before or after the change.
type rivalsHandler struct{ r *ShortLinkReconciler }

var _ handler.TypedEventHandler[client.Object, reconcile.Request] = &rivalsHandler{}

func (h *rivalsHandler) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.enqueue(ctx, q, e.Object)
}

func (h *rivalsHandler) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	// The summaries say it without unpacking the cached links.
	oldLink, _ := compactlink.SummaryOf(e.ObjectOld)
	newLink, _ := compactlink.SummaryOf(e.ObjectNew)
	if oldLink.SpecCode == newLink.SpecCode && oldLink.StatusCode == newLink.StatusCode &&
		oldLink.Generation == newLink.Generation && stateInConflict(oldLink.State) == stateInConflict(newLink.State) &&
		oldLink.HoldsConfirmedCode() == newLink.HoldsConfirmedCode() {
		return
	}
	h.enqueue(ctx, q, e.ObjectOld, e.ObjectNew)
}

func (h *rivalsHandler) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.r.expectations.deleteExpectations(client.ObjectKeyFromObject(e.Object))
	h.enqueue(ctx, q, e.Object)
}

func (h *rivalsHandler) Generic(context.Context, event.GenericEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

func (h *rivalsHandler) enqueue(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], objs ...client.Object) {
	seen := make(map[string]struct{})
	for _, obj := range objs {
		link, ok := compactlink.SummaryOf(obj)
		if !ok {
			continue
		}
		for _, code := range []string{link.SpecCode, link.StatusCode} {
			if code == "" {
				continue
			}
			if _, dup := seen[code]; dup {
				continue
			}
			seen[code] = struct{}{}
			rivals, err := h.r.cachedWithCode(link.Namespace, code)
			if err != nil {
				logf.FromContext(ctx).Error(err, "re-queueing rivals")
				continue
			}
			for _, rival := range rivals {
				if rival, _ := compactlink.SummaryOf(rival); rival.Name != link.Name {
					q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: link.Namespace, Name: rival.Name}})
				}
			}
		}
	}
}
