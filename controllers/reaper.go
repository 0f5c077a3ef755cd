package controllers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
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
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// Defaults of ReaperOptions (the manager's flags have the same defaults).
const (
	DefaultReapInterval  = 15 * time.Minute
	DefaultReapBatchSize = 1000
	DefaultReapRate      = 50.0
	DefaultReapWorkers   = 4
)

// ReasonReapSkipped is the reason of the Warning event on a finished link
// that the reaper keeps because a GitOps tool manages it.
const ReasonReapSkipped = "ReapSkipped"

const (
	reaperEventAction  = "Reap"
	reaperChangedRetry = 500 * time.Millisecond
	reaperBusyRetry    = time.Second

	reaperPathDeadline      = "deadline"
	reaperPathSweep         = "sweep"
	reaperSweepResultOK     = "success"
	reaperSweepResultFailed = "failure"
)

// ReaperOptions configure the reaper. The manager fills them from its flags.
type ReaperOptions struct {
	// DefaultTTLAfterFinished is how long a finished link is kept when it sets
	// no spec.ttlSecondsAfterFinished (--default-ttl-after-finished, 1h). Zero
	// deletes finished links at once.
	DefaultTTLAfterFinished time.Duration
	// SweepInterval is the period of the sweep that catches what the
	// per-link deadlines missed (--reap-interval; zero means 15m).
	SweepInterval time.Duration
	// BatchSize is the most links one sweep deletes (--reap-batch-size; zero
	// means 1000).
	BatchSize int
	// DeletesPerSecond is the rate of a token bucket shared by the deadline
	// path and the sweeps: each delete attempt (a live read and a delete)
	// takes a token (--reap-rate; zero or less means 50). The bucket holds one
	// second of tokens.
	DeletesPerSecond float64
	// MaxConcurrentReconciles is the number of workers of the deadline
	// controller, and of a sweep (zero means 4).
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
	// SweepOnly turns the per-link deadline controller off: only the periodic
	// sweep deletes. For tests, and for clusters where a slower, batched
	// cleanup is preferred.
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
// and resourceVersion preconditions, so a link that was
// extended or re-created in the meantime survives. A periodic sweep catches
// whatever the deadlines missed, at most BatchSize deletes a sweep, oldest
// deadline first. Both paths share one token bucket.
type Reaper struct {
	// Client reads from the manager's cache and sends deletes.
	Client client.Client
	// APIReader reads from the API server, for the check just before a delete.
	APIReader client.Reader
	// Recorder records the Warning events of links kept because a GitOps tool manages them.
	Recorder events.EventRecorder
	// Clock decides what is due; tests replace it. The sweep's timer runs on it too.
	Clock clock.Clock

	opts    ReaperOptions
	limiter *rate.Limiter

	// inflight holds the links a worker or the sweep is deleting right now.
	inflight sync.Map
	// warned dedupes the GitOps warning: one per link and deadline.
	warnedMu sync.Mutex
	warned   map[types.NamespacedName]reapWarning

	totalReaped atomic.Int64
	statsMu     sync.Mutex
	stats       sweepStats
}

type reapWarning struct {
	uid      types.UID
	deadline time.Time
}

type sweepStats struct {
	lastRun       *time.Time
	lastBatch     int
	runsSucceeded int64
	runsFailed    int64
	totalDuration time.Duration
}

// +kubebuilder:rbac:groups=linkforge.io,resources=shortlinks,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// NewReaper returns a reaper that uses the manager's cached client, its API
// reader and an event recorder named linkforge-reaper.
func NewReaper(mgr ctrl.Manager, o ReaperOptions) *Reaper {
	registerReaperMetrics()
	o = o.withDefaults()
	return &Reaper{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("linkforge-reaper"),
		Clock:     clock.RealClock{},
		opts:      o,
		limiter:   rate.NewLimiter(rate.Limit(o.DeletesPerSecond), max(1, int(math.Ceil(o.DeletesPerSecond)))),
		warned:    make(map[types.NamespacedName]reapWarning),
	}
}

// Options returns the options in effect, defaults applied.
func (r *Reaper) Options() ReaperOptions { return r.opts }

// SetupWithManager registers the deadline controller ("reaper") and the sweep.
// Both run only on the leader.
func (r *Reaper) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if err := mgr.Add(&reaperSweeper{r: r}); err != nil {
		return fmt.Errorf("adding the reaper's sweep: %w", err)
	}
	if r.opts.SweepOnly {
		return nil
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&linkv1.ShortLink{}, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				return reapInputsChanged(e.ObjectOld.(*linkv1.ShortLink), e.ObjectNew.(*linkv1.ShortLink))
			},
			// A deleted link needs no reconcile (the reaper deletes links by the
			// thousand), only its warning forgotten.
			DeleteFunc: func(e event.DeleteEvent) bool {
				r.forgetWarning(client.ObjectKeyFromObject(e.Object))
				return false
			},
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.opts.MaxConcurrentReconciles}).
		Named("reaper").
		Complete(r)
}

// reapInputsChanged reports whether an update changed anything plan reads:
// the spec, the GitOps markers, deletion, or status.finishedAt. Other updates
// (the code, Ready, uses counted by the redirectors...) do not move a deadline.
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
	if !link.Expired(now) && !link.Exhausted() {
		// finishedAt is from an older spec (say maxUses was raised) that the
		// controller has not handled yet: not finished by the current one.
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

// GitOps ownership markers: a link that carries one would be re-created from
// its source after a deletion.
var fluxLabelPrefixes = []string{"kustomize.toolkit.fluxcd.io/", "helm.toolkit.fluxcd.io/"}

const (
	argoInstanceLabel      = "argocd.argoproj.io/instance"
	argoTrackingAnnotation = "argocd.argoproj.io/tracking-id"
)

// gitOpsManager describes the GitOps tool that manages link and the marker
// that says so, or returns "".
func gitOpsManager(link *linkv1.ShortLink) string {
	labels := link.GetLabels()
	var flux []string
	for k := range labels {
		for _, p := range fluxLabelPrefixes {
			if strings.HasPrefix(k, p) {
				flux = append(flux, k)
			}
		}
	}
	if len(flux) > 0 {
		slices.Sort(flux)
		return fmt.Sprintf("Flux (label %s=%s)", flux[0], labels[flux[0]])
	}
	if v, ok := labels[argoInstanceLabel]; ok {
		return fmt.Sprintf("Argo CD (label %s=%s)", argoInstanceLabel, v)
	}
	if _, ok := link.GetAnnotations()[argoTrackingAnnotation]; ok {
		return fmt.Sprintf("Argo CD (annotation %s)", argoTrackingAnnotation)
	}
	return ""
}

// Reconcile is the deadline path: it requeues a link for its deadline and, at
// the deadline, deletes it through reap.
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
		return ctrl.Result{RequeueAfter: p.deadline.Sub(now)}, nil
	case holdLink:
		r.warnOnce(ctx, link, p)
		return ctrl.Result{}, nil
	case keepLink:
		r.forgetWarning(req.NamespacedName)
		return ctrl.Result{}, nil
	}

	if !r.acquire(req.NamespacedName) {
		// The sweep is deleting it; look again shortly.
		return ctrl.Result{RequeueAfter: reaperBusyRetry}, nil
	}
	defer r.release(req.NamespacedName)
	res, err := r.reap(ctx, req.NamespacedName, reaperPathDeadline, link)
	switch {
	case err != nil:
		return ctrl.Result{}, err
	case res.outcome == reapChanged:
		return ctrl.Result{RequeueAfter: reaperChangedRetry}, nil
	case res.outcome == reapNotDue:
		return ctrl.Result{RequeueAfter: res.requeueAfter}, nil
	}
	return ctrl.Result{}, nil
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

// reap is the one way both paths delete: wait for a token, re-read the link
// from the API server, re-check that it is due, and delete it with UID and
// resourceVersion preconditions. With OptimisticDelete, cached (the copy the
// caller judged due, if any) is deleted with its own preconditions first, and
// the API server is read only when that delete is rejected.
func (r *Reaper) reap(ctx context.Context, key types.NamespacedName, path string, cached *linkv1.ShortLink) (reapResult, error) {
	log := logf.FromContext(ctx).WithValues("shortlink", key, "path", path)
	if err := r.limiter.Wait(ctx); err != nil {
		return reapResult{}, err
	}
	if r.opts.OptimisticDelete && cached != nil {
		if p := r.plan(cached, r.Clock.Now()); p.verdict == reapLink {
			switch deleted, err := r.deleteExactly(ctx, log, cached, p, path); {
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
		reaperFailures.WithLabelValues(path).Inc()
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
	switch deleted, err := r.deleteExactly(ctx, log, fresh, p, path); {
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
func (r *Reaper) deleteExactly(ctx context.Context, log logr.Logger, link *linkv1.ShortLink, p reapPlan, path string) (bool, error) {
	uid, rv := link.UID, link.ResourceVersion
	err := r.Client.Delete(ctx, link, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	switch {
	case err == nil:
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		log.V(1).Info("changed before it could be deleted", "reason", err.Error())
		return false, nil
	default:
		reaperFailures.WithLabelValues(path).Inc()
		return false, fmt.Errorf("deleting ShortLink %s/%s: %w", link.Namespace, link.Name, err)
	}
	lag := r.Clock.Since(p.deadline)
	reaperReaped.WithLabelValues(path).Inc()
	reaperDeletionLag.Observe(max(0, lag.Seconds()))
	r.totalReaped.Add(1)
	log.Info("reaped finished ShortLink", "uid", uid, "finishedAt", p.finishedAt.UTC().Format(time.RFC3339),
		"deadline", p.deadline.UTC().Format(time.RFC3339), "lag", lag.Round(time.Millisecond).String())
	return true, nil
}

func (r *Reaper) acquire(key types.NamespacedName) bool {
	_, busy := r.inflight.LoadOrStore(key, struct{}{})
	return !busy
}

func (r *Reaper) release(key types.NamespacedName) { r.inflight.Delete(key) }

// warnOnce records the Warning event of a GitOps-managed link that is due,
// once per link and deadline (a restart of the manager records it again).
func (r *Reaper) warnOnce(ctx context.Context, link *linkv1.ShortLink, p reapPlan) {
	key := types.NamespacedName{Namespace: link.Namespace, Name: link.Name}
	w := reapWarning{uid: link.UID, deadline: p.deadline}
	r.warnedMu.Lock()
	seen := r.warned[key] == w
	r.warned[key] = w
	r.warnedMu.Unlock()
	if seen {
		return
	}
	logf.FromContext(ctx).Info("keeping finished ShortLink managed by GitOps", "shortlink", key, "managedBy", p.managedBy)
	if r.Recorder == nil {
		return
	}
	r.Recorder.Eventf(link, nil, corev1.EventTypeWarning, ReasonReapSkipped, reaperEventAction,
		"finished at %s and due for deletion, but kept: it is managed by %s, which would re-create it. "+
			"Remove it from its source, or set spec.reapPolicy (Delete or Retain)",
		p.finishedAt.UTC().Format(time.RFC3339), p.managedBy)
}

func (r *Reaper) forgetWarning(key types.NamespacedName) {
	r.warnedMu.Lock()
	delete(r.warned, key)
	r.warnedMu.Unlock()
}

// reaperSweeper runs Sweep every SweepInterval, on the leader only.
type reaperSweeper struct{ r *Reaper }

var (
	_ manager.Runnable               = &reaperSweeper{}
	_ manager.LeaderElectionRunnable = &reaperSweeper{}
)

func (s *reaperSweeper) NeedLeaderElection() bool { return true }

// Start sweeps after each interval until ctx ends. The first sweep comes one
// interval after the start: at the start, the deadline controller sees every
// link anyway.
func (s *reaperSweeper) Start(ctx context.Context) error {
	log := ctrl.Log.WithName("reaper").WithName("sweep")
	ctx = logf.IntoContext(ctx, log)
	for {
		t := s.r.Clock.NewTimer(s.r.opts.SweepInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
		n, err := s.r.Sweep(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			log.Error(err, "sweep failed", "deleted", n)
		default:
			log.Info("sweep done", "deleted", n)
		}
	}
}

type sweepCandidate struct {
	key      types.NamespacedName
	deadline time.Time
	// cached is a copy of the cache's object, for OptimisticDelete only.
	cached *linkv1.ShortLink
}

// Sweep deletes up to BatchSize due links, oldest deadline first, listing
// them from the cache and deleting each through the deadline path's live
// read and preconditions. It returns how many it deleted.
func (r *Reaper) Sweep(ctx context.Context) (int, error) {
	started := time.Now()
	startedAt := r.Clock.Now()
	deleted, err := r.sweep(ctx)
	if ctx.Err() == nil {
		r.recordSweep(startedAt, time.Since(started), deleted, err)
	}
	return deleted, err
}

func (r *Reaper) sweep(ctx context.Context) (int, error) {
	var list linkv1.ShortLinkList
	// Read-only use of the cached objects.
	if err := r.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return 0, fmt.Errorf("listing ShortLinks: %w", err)
	}
	now := r.Clock.Now()
	var due []sweepCandidate
	for i := range list.Items {
		link := &list.Items[i]
		switch p := r.plan(link, now); p.verdict {
		case reapLink:
			c := sweepCandidate{key: client.ObjectKeyFromObject(link), deadline: p.deadline}
			if r.opts.OptimisticDelete {
				c.cached = link.DeepCopy()
			}
			due = append(due, c)
		case holdLink:
			r.warnOnce(ctx, link.DeepCopy(), p)
		}
	}
	slices.SortFunc(due, func(a, b sweepCandidate) int {
		return cmp.Or(a.deadline.Compare(b.deadline), cmp.Compare(a.key.Namespace, b.key.Namespace), cmp.Compare(a.key.Name, b.key.Name))
	})

	// Rounds of at most the remaining budget, so deletes never exceed the
	// batch size, while links that turn out not to be due leave room for the
	// next ones.
	batch := r.opts.BatchSize
	deleted := 0
	var errs []error
	for len(due) > 0 && deleted < batch && ctx.Err() == nil {
		n := min(batch-deleted, len(due))
		round := due[:n]
		due = due[n:]
		d, err := r.sweepRound(ctx, round)
		deleted += d
		if err != nil {
			errs = append(errs, err)
		}
	}
	if ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	return deleted, errors.Join(errs...)
}

// sweepRound reaps the candidates with the configured number of workers.
func (r *Reaper) sweepRound(ctx context.Context, cands []sweepCandidate) (int, error) {
	var (
		next    atomic.Int64
		deleted atomic.Int64
		errMu   sync.Mutex
		errs    []error
		wg      sync.WaitGroup
	)
	for range min(r.opts.MaxConcurrentReconciles, len(cands)) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(cands) {
					return
				}
				key := cands[i].key
				if !r.acquire(key) {
					continue // the deadline path is on it
				}
				res, err := r.reap(ctx, key, reaperPathSweep, cands[i].cached)
				r.release(key)
				if err != nil {
					errMu.Lock()
					errs = append(errs, err)
					errMu.Unlock()
					continue
				}
				if res.outcome == reapDeleted {
					deleted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return int(deleted.Load()), errors.Join(errs...)
}

func (r *Reaper) recordSweep(at time.Time, took time.Duration, deleted int, err error) {
	at = at.UTC().Truncate(time.Second)
	result := reaperSweepResultOK
	if err != nil {
		result = reaperSweepResultFailed
	}
	reaperSweeps.WithLabelValues(result).Inc()
	reaperSweepDuration.Observe(took.Seconds())
	reaperLastSweep.Set(float64(at.Unix()))

	r.statsMu.Lock()
	defer r.statsMu.Unlock()
	r.stats.lastRun = &at
	r.stats.lastBatch = deleted
	r.stats.totalDuration += took
	if err != nil {
		r.stats.runsFailed++
	} else {
		r.stats.runsSucceeded++
	}
}

// ReaperStats is the reaper's JSON summary, after the seed's cleanup stats.
// A run is a sweep; totalReaped counts the deletes of both the deadline path
// and the sweeps since the manager started.
type ReaperStats struct {
	// LastRun is when the last sweep started (RFC 3339, UTC), or null.
	LastRun *time.Time `json:"lastRun"`
	// TotalReaped is how many links this reaper deleted.
	TotalReaped int64 `json:"totalReaped"`
	// LastBatch is how many links the last sweep deleted.
	LastBatch int `json:"lastBatch"`
	// RunsSucceeded and RunsFailed count sweeps.
	RunsSucceeded int64 `json:"runsSucceeded"`
	RunsFailed    int64 `json:"runsFailed"`
	// MeanDurationSeconds is the mean wall time of a sweep.
	MeanDurationSeconds float64 `json:"meanDurationSeconds"`
}

// Stats returns the summary that StatsHandler serves.
func (r *Reaper) Stats() ReaperStats {
	r.statsMu.Lock()
	defer r.statsMu.Unlock()
	s := ReaperStats{
		TotalReaped:   r.totalReaped.Load(),
		LastBatch:     r.stats.lastBatch,
		RunsSucceeded: r.stats.runsSucceeded,
		RunsFailed:    r.stats.runsFailed,
	}
	if r.stats.lastRun != nil {
		t := *r.stats.lastRun
		s.LastRun = &t
	}
	if runs := r.stats.runsSucceeded + r.stats.runsFailed; runs > 0 {
		s.MeanDurationSeconds = r.stats.totalDuration.Seconds() / float64(runs)
	}
	return s
}

// StatsHandler serves Stats as JSON (the manager mounts it at /reaper).
func (r *Reaper) StatsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		body, err := json.Marshal(r.Stats())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if req.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(append(body, '\n'))
	})
}

// The reaper's Prometheus metrics, on controller-runtime's registry. They are
// process-wide: several reapers in one process (tests) share them.
var (
	reaperReaped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "linkforge", Subsystem: "reaper", Name: "reaped_total",
		Help: "Finished ShortLinks the reaper deleted, by path (deadline or sweep).",
	}, []string{"path"})
	reaperFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "linkforge", Subsystem: "reaper", Name: "failures_total",
		Help: "Failed reads or deletes of the reaper, by path (deadline or sweep). Precondition conflicts are not failures.",
	}, []string{"path"})
	reaperDeletionLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "linkforge", Subsystem: "reaper", Name: "deletion_lag_seconds",
		Help:    "Time from a link's deletion deadline (finish + ttlSecondsAfterFinished) to its deletion.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600},
	})
	reaperSweepDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "linkforge", Subsystem: "reaper", Name: "sweep_duration_seconds",
		Help:    "Wall time of a reaper sweep.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
	})
	reaperLastSweep = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "linkforge", Subsystem: "reaper", Name: "last_sweep_timestamp_seconds",
		Help: "Unix time when the last reaper sweep started.",
	})
	reaperSweeps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "linkforge", Subsystem: "reaper", Name: "sweeps_total",
		Help: "Reaper sweeps, by result (success or failure).",
	}, []string{"result"})

	reaperMetricsOnce sync.Once
)

func registerReaperMetrics() {
	reaperMetricsOnce.Do(func() {
		for _, c := range []prometheus.Collector{reaperReaped, reaperFailures, reaperDeletionLag, reaperSweepDuration, reaperLastSweep, reaperSweeps} {
			if err := metrics.Registry.Register(c); err != nil {
				var already prometheus.AlreadyRegisteredError
				if !errors.As(err, &already) {
					panic(fmt.Sprintf("registering reaper metrics: %v", err))
				}
			}
		}
	})
}
