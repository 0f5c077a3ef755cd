package controllers

import (
	"context"
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/compactlink"
)

// Defaults of ReaperOptions (the manager's flags have the same defaults).
const (
	DefaultReapInterval  = 15 * time.Minute
	DefaultReapBatchSize = 1000
	// DefaultReapRate 0 is no client-side limit: DefaultReapWorkers bounds
	// the deletes in flight, and the API server's Priority and Fairness
	// shares its capacity among clients, as for the manager's other
	// requests (see Defaults). A fixed rate made a mass expiry of 10,000
	// links take 200 s at 50/s however idle the API server was.
	DefaultReapRate    = 0.0
	DefaultReapWorkers = 16
)

// reaperChangedRetry is how soon a link that changed under a delete is looked at again.
const reaperChangedRetry = 500 * time.Millisecond

// ReaperOptions configure the reaper. The manager fills them from its flags.
type ReaperOptions struct {
	// DefaultTTLAfterFinished is how long a finished link is kept when it sets
	// no spec.ttlSecondsAfterFinished (--default-ttl-after-finished, 1h). Zero
	// deletes finished links at once.
	DefaultTTLAfterFinished time.Duration
	// SweepInterval is the period of the sweep that catches what the
	// per-link deadlines missed (--reap-interval; zero means 15m).
	SweepInterval time.Duration
	// BatchSize is the most links one sweep hands to the reaper, so the most
	// it deletes (--reap-batch-size; zero means 1000).
	BatchSize int
	// DeletesPerSecond, when positive, is the rate of a token bucket on the
	// one delete path, whether a link's deadline or a sweep queued it: each
	// delete attempt (a live read and a delete) takes a token (--reap-rate).
	// The bucket holds one second of tokens. Zero or less: no limit but the
	// workers.
	DeletesPerSecond float64
	// MaxConcurrentReconciles is the number of workers of the reaper
	// controller, so the most deletes in flight (--reap-workers; zero
	// means 16).
	MaxConcurrentReconciles int
	// OptimisticDelete skips the read from the API server before a delete:
	// the link is deleted with the UID and resourceVersion of the cached copy
	// that was judged due, and read from the API server (then re-checked and
	// deleted with fresh preconditions) only when the API server rejects that
	// delete. As safe, since the API server deletes only that exact version,
	// and one request per link instead of two. The zero value keeps the
	// read-then-delete of Kubernetes' TTL-after-finished controller; the
	// manager turns this on unless --reap-read-before-delete is given.
	OptimisticDelete bool
	// SweepOnly turns the per-link deadlines off: the reaper watches no
	// links and deletes only what the periodic sweep finds due. For tests,
	// and for clusters where a slower, batched cleanup is preferred.
	SweepOnly bool
}

func (o ReaperOptions) withDefaults() ReaperOptions {
	o.DefaultTTLAfterFinished = max(0, o.DefaultTTLAfterFinished)
	if o.SweepInterval <= 0 {
		o.SweepInterval = DefaultReapInterval
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultReapBatchSize
	}
	if o.DeletesPerSecond <= 0 || math.IsNaN(o.DeletesPerSecond) {
		o.DeletesPerSecond = DefaultReapRate
	}
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = DefaultReapWorkers
	}
	return o
}

// Reaper deletes finished ShortLinks (expired, or exhausted) once their
// ttlSecondsAfterFinished has passed, modelled on Kubernetes'
// TTL-after-finished controller: each link is requeued for its deletion
// deadline; at the deadline it is re-checked (on a fresh read from the API
// server, or with OptimisticDelete on the cached copy) and deleted with UID
// and resourceVersion preconditions, so a link that was extended or
// re-created in the meantime survives. A periodic sweep (reaper_sweep.go)
// catches whatever the deadlines missed by adding due links to the same
// workqueue, which hands a link to one worker at a time: Reconcile is the one
// delete path.
type Reaper struct {
	// Client reads from the manager's cache and sends deletes.
	Client client.Client
	// APIReader reads from the API server, for the check just before a delete.
	APIReader client.Reader
	// Recorder records the Warning events of links kept because a GitOps tool manages them.
	Recorder events.EventRecorder
	// Clock decides what is due; tests replace it. The sweep's timer runs on it too.
	Clock clock.Clock
	// Links is the manager's record of its ShortLink informers (the index
	// given to ManagerCacheOptions): the sweep reads the cached links from
	// it one at a time. Without it the sweep lists copies of them all
	// through Client, at once.
	Links *CodeIndex

	opts    ReaperOptions
	limiter *rate.Limiter
	warned  gitOpsWarnings
	metrics *reaperMetrics
}

// +kubebuilder:rbac:groups=linkforge.io,resources=shortlinks,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// NewReaper returns a reaper that uses the manager's cached client, its API
// reader and an event recorder named linkforge-reaper.
func NewReaper(mgr ctrl.Manager, o ReaperOptions) *Reaper {
	o = o.withDefaults()
	m := newReaperMetrics()
	m.register(metrics.Registry)
	return &Reaper{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("linkforge-reaper"),
		Clock:     clock.RealClock{},
		opts:      o,
		limiter:   deleteLimiter(o.DeletesPerSecond),
		metrics:   m,
	}
}

// deleteLimiter is the token bucket of --reap-rate: none (an infinite
// rate) unless perSecond is positive.
func deleteLimiter(perSecond float64) *rate.Limiter {
	if perSecond <= 0 {
		return rate.NewLimiter(rate.Inf, 1)
	}
	return rate.NewLimiter(rate.Limit(perSecond), max(1, int(math.Ceil(perSecond))))
}

// Options returns the options in effect, defaults applied.
func (r *Reaper) Options() ReaperOptions { return r.opts }

// SetupWithManager registers the reaper controller ("reaper"), fed by the
// links' watch (unless SweepOnly) and by the sweep. It runs on the leader only.
func (r *Reaper) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("reaper").
		WithLogConstructor(reconcileLogger(mgr.GetLogger(), "reaper")).
		WatchesRawSource(r.sweepSource()).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.opts.MaxConcurrentReconciles})
	if !r.opts.SweepOnly {
		b = b.For(&linkv1.ShortLink{}, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool { return cachedReapInputsChanged(e.ObjectOld, e.ObjectNew) },
			// A deleted link needs no reconcile (the reaper deletes links by the
			// thousand), only its warning forgotten.
			DeleteFunc: func(e event.DeleteEvent) bool {
				r.forgetWarning(client.ObjectKeyFromObject(e.Object))
				return false
			},
		}))
	}
	return b.Complete(r)
}

// reapInputsChanged reports whether an update changed anything plan reads:
// the spec, the GitOps markers, deletion, or status.finishedAt. Other updates
// (the code, Ready, uses counted by the redirectors...) do not move a deadline.
// cachedReapInputsChanged is reapInputsChanged of two cached links (compact
// links, or ShortLinks): a new generation says it without unpacking them.
func cachedReapInputsChanged(old, cur client.Object) bool {
	if old.GetGeneration() != cur.GetGeneration() {
		return true
	}
	oldLink, ok := compactlink.Of(old)
	curLink, ok2 := compactlink.Of(cur)
	return !ok || !ok2 || reapInputsChanged(oldLink, curLink)
}

func reapInputsChanged(old, cur *linkv1.ShortLink) bool {
	return old.Generation != cur.Generation || old.UID != cur.UID ||
		(old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil) ||
		!finishedAtEqual(old.Status.FinishedAt, cur.Status.FinishedAt) ||
		!maps.Equal(old.Labels, cur.Labels) ||
		old.Annotations[argoTrackingAnnotation] != cur.Annotations[argoTrackingAnnotation]
}

func finishedAtEqual(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(b)
}

// verdict is what the reaper does with a link at a given instant.
type verdict int

const (
	// keepLink: nothing to do now, and no known deadline (not finishing on
	// its own, Retain, being deleted, or exhausted but not yet marked so).
	keepLink verdict = iota
	// waitLink: it has a deadline in the future.
	waitLink
	// holdLink: due, but a GitOps tool manages it and no policy is set.
	holdLink
	// reapLink: due; delete it.
	reapLink
)

type reapPlan struct {
	verdict    verdict
	finishedAt time.Time
	deadline   time.Time
	// managedBy names the GitOps tool and its marker, for holdLink.
	managedBy string
}

// plan decides what to do with link at now.
func (r *Reaper) plan(link *linkv1.ShortLink, now time.Time) reapPlan {
	if link.DeletionTimestamp != nil || link.Spec.ReapPolicy == linkv1.ReapPolicyRetain {
		return reapPlan{verdict: keepLink}
	}
	finishedAt, ok := finishTime(link)
	if !ok {
		return reapPlan{verdict: keepLink}
	}
	p := reapPlan{finishedAt: finishedAt, deadline: finishedAt.Add(r.ttlAfterFinished(link))}
	if now.Before(p.deadline) {
		p.verdict = waitLink
		return p
	}
	if !link.Expired(now) && !link.Exhausted() && !link.IdleFinished() {
		// finishedAt outlived the finish: a spec edit revived the link (a
		// higher maxUses, a later expiry, a longer idleTimeout) and the
		// controller, which decides with the same helpers, has not cleared
		// it yet. Its status update wakes the reaper.
		p.verdict = keepLink
		return p
	}
	if link.Spec.ReapPolicy == "" {
		if by := gitOpsManager(link); by != "" {
			p.verdict, p.managedBy = holdLink, by
			return p
		}
	}
	p.verdict = reapLink
	return p
}

// finishTime is when the link finished (status.finishedAt, written by the
// controller), or will finish if it expires in the future. An exhausted link
// whose finish the controller has not recorded yet has no known finish time;
// the status update that records it wakes the reaper.
func finishTime(link *linkv1.ShortLink) (time.Time, bool) {
	if link.Status.FinishedAt != nil {
		return link.Status.FinishedAt.Time, true
	}
	return link.Expiry()
}

func (r *Reaper) ttlAfterFinished(link *linkv1.ShortLink) time.Duration {
	if s := link.Spec.TTLSecondsAfterFinished; s != nil {
		return time.Duration(max(0, *s)) * time.Second
	}
	return r.opts.DefaultTTLAfterFinished
}

// Reconcile requeues a link for its deadline and, at the deadline, deletes
// it through reap. Links the sweep finds due arrive here too.
func (r *Reaper) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	link := &linkv1.ShortLink{}
	if err := r.Client.Get(ctx, req.NamespacedName, link); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetWarning(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	now := r.Clock.Now()
	p := r.plan(link, now)
	switch p.verdict {
	case waitLink:
		return r.lookAgainAfter(p.deadline.Sub(now)), nil
	case holdLink:
		r.warnOnce(ctx, link, p)
		return ctrl.Result{}, nil
	case keepLink:
		r.forgetWarning(req.NamespacedName)
		return ctrl.Result{}, nil
	}

	res, err := r.reap(ctx, req.NamespacedName, link)
	switch {
	case err != nil:
		return ctrl.Result{}, err
	case res.outcome == reapChanged:
		return r.lookAgainAfter(reaperChangedRetry), nil
	case res.outcome == reapNotDue:
		return r.lookAgainAfter(res.requeueAfter), nil
	}
	return ctrl.Result{}, nil
}

// lookAgainAfter requeues the link after d (zero: not at all). With
// SweepOnly there are no per-link deadlines: the next sweep looks again.
func (r *Reaper) lookAgainAfter(d time.Duration) ctrl.Result {
	if r.opts.SweepOnly {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: d}
}

type reapOutcome int

const (
	// reapGone: the link no longer exists; nothing to do.
	reapGone reapOutcome = iota
	// reapNotDue: the live copy is not due (extended, retained, held...).
	reapNotDue
	// reapChanged: the delete's preconditions failed, or someone deleted it
	// first: the link changed under us. Not a failure; look again.
	reapChanged
	// reapDeleted: the reaper deleted it.
	reapDeleted
)

type reapResult struct {
	outcome reapOutcome
	// requeueAfter is when the live copy is due, for reapNotDue (0: no deadline).
	requeueAfter time.Duration
}

// reap is the one way the reaper deletes: wait for a token, re-read the link
// from the API server, re-check that it is due, and delete it with UID and
// resourceVersion preconditions. With OptimisticDelete, cached (the copy
// Reconcile judged due) is deleted with its own preconditions first, and the
// API server is read only when that delete is rejected.
func (r *Reaper) reap(ctx context.Context, key types.NamespacedName, cached *linkv1.ShortLink) (reapResult, error) {
	log := logf.FromContext(ctx).WithValues("shortlink", key)
	if err := r.limiter.Wait(ctx); err != nil {
		return reapResult{}, err
	}
	if r.opts.OptimisticDelete {
		if p := r.plan(cached, r.Clock.Now()); p.verdict == reapLink {
			switch deleted, err := r.deleteExactly(ctx, log, cached, p); {
			case err != nil:
				return reapResult{}, err
			case deleted:
				return reapResult{outcome: reapDeleted}, nil
			}
			// It changed since the cache saw it: decide again on a fresh read.
		}
	}

	fresh := &linkv1.ShortLink{}
	if err := r.APIReader.Get(ctx, key, fresh); err != nil {
		if apierrors.IsNotFound(err) {
			return reapResult{outcome: reapGone}, nil
		}
		r.metrics.failures.Inc()
		return reapResult{}, fmt.Errorf("reading ShortLink %s from the API server: %w", key, err)
	}
	now := r.Clock.Now()
	p := r.plan(fresh, now)
	switch p.verdict {
	case waitLink:
		log.V(1).Info("not due any more on a fresh read", "deadline", p.deadline)
		return reapResult{outcome: reapNotDue, requeueAfter: p.deadline.Sub(now)}, nil
	case holdLink:
		r.warnOnce(ctx, fresh, p)
		return reapResult{outcome: reapNotDue}, nil
	case keepLink:
		return reapResult{outcome: reapNotDue}, nil
	}
	switch deleted, err := r.deleteExactly(ctx, log, fresh, p); {
	case err != nil:
		return reapResult{}, err
	case !deleted:
		return reapResult{outcome: reapChanged}, nil
	}
	return reapResult{outcome: reapDeleted}, nil
}

// deleteExactly deletes link if the API server still holds this very version
// of it (same UID and resourceVersion). It reports false, without an error,
// when the link changed or is gone: someone else changed it, not a failure.
func (r *Reaper) deleteExactly(ctx context.Context, log logr.Logger, link *linkv1.ShortLink, p reapPlan) (bool, error) {
	uid, rv := link.UID, link.ResourceVersion
	err := r.Client.Delete(ctx, link, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	switch {
	case err == nil:
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		log.V(1).Info("changed before it could be deleted", "reason", err.Error())
		return false, nil
	default:
		r.metrics.failures.Inc()
		return false, fmt.Errorf("deleting ShortLink %s/%s: %w", link.Namespace, link.Name, err)
	}
	lag := r.Clock.Since(p.deadline)
	r.metrics.recordReaped(lag)
	log.Info("reaped finished ShortLink", "uid", uid, "finishedAt", p.finishedAt.UTC().Format(time.RFC3339),
		"deadline", p.deadline.UTC().Format(time.RFC3339), "lag", lag.Round(time.Millisecond).String())
	return true, nil
}
