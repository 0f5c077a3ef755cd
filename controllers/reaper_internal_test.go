package controllers

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/compactlink"
)

func TestReaperPlan(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	created := now.Add(-48 * time.Hour)
	r := &Reaper{opts: ReaperOptions{DefaultTTLAfterFinished: time.Hour}.withDefaults()}

	type mut func(*linkv1.ShortLink)
	expiresAt := func(t time.Time) mut { return func(l *linkv1.ShortLink) { l.Spec.ExpiresAt = &metav1.Time{Time: t} } }
	ttlAfter := func(s int32) mut { return func(l *linkv1.ShortLink) { l.Spec.TTLSecondsAfterFinished = ptr.To(s) } }
	policy := func(p linkv1.ReapPolicy) mut { return func(l *linkv1.ShortLink) { l.Spec.ReapPolicy = p } }
	label := func(k, v string) mut {
		return func(l *linkv1.ShortLink) {
			if l.Labels == nil {
				l.Labels = map[string]string{}
			}
			l.Labels[k] = v
		}
	}
	exhausted := func(maxUses, uses int64, since *time.Time) mut {
		return func(l *linkv1.ShortLink) {
			l.Spec.MaxUses = ptr.To(maxUses)
			l.Status.Uses = uses
			if since != nil {
				l.Status.FinishedAt = &metav1.Time{Time: *since}
			}
		}
	}
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	idleFinished := func(generation, observed int64, since *time.Time) mut {
		return func(l *linkv1.ShortLink) {
			l.Spec.IdleTimeout = &metav1.Duration{Duration: time.Hour}
			l.Generation, l.Status.ObservedGeneration = generation, observed
			if since != nil {
				l.Status.FinishedAt = &metav1.Time{Time: *since}
			}
		}
	}

	tests := []struct {
		name     string
		link     []mut
		verdict  verdict
		deadline time.Time
		by       string
	}{
		{name: "never finishes", verdict: keepLink},
		{name: "expires later: wait for expiry plus default TTL",
			link: []mut{expiresAt(now.Add(time.Minute))}, verdict: waitLink, deadline: now.Add(time.Minute + time.Hour)},
		{name: "expired, own TTL not reached",
			link: []mut{expiresAt(now.Add(-time.Minute)), ttlAfter(120)}, verdict: waitLink, deadline: now.Add(time.Minute)},
		{name: "expired, own TTL reached exactly",
			link: []mut{expiresAt(now.Add(-time.Minute)), ttlAfter(60)}, verdict: reapLink, deadline: now},
		{name: "ttl counted from creation",
			link: []mut{func(l *linkv1.ShortLink) { l.Spec.TTL = &metav1.Duration{Duration: 47 * time.Hour} }}, verdict: reapLink, deadline: created.Add(48 * time.Hour)},
		{name: "expired, default TTL not reached",
			link: []mut{expiresAt(now.Add(-time.Minute))}, verdict: waitLink, deadline: now.Add(59 * time.Minute)},
		{name: "retain never deletes",
			link: []mut{expiresAt(now.Add(-48 * time.Hour)), ttlAfter(0), policy(linkv1.ReapPolicyRetain)}, verdict: keepLink},
		{name: "being deleted",
			link: []mut{expiresAt(now.Add(-time.Hour)), ttlAfter(0), func(l *linkv1.ShortLink) { l.DeletionTimestamp = &metav1.Time{Time: now} }}, verdict: keepLink},
		{name: "exhausted: counted from the condition",
			link: []mut{exhausted(5, 5, at(-time.Minute)), ttlAfter(30)}, verdict: reapLink, deadline: now.Add(-30 * time.Second)},
		{name: "exhausted, condition not written yet",
			link: []mut{exhausted(5, 5, nil), ttlAfter(0)}, verdict: keepLink},
		{name: "stale Exhausted condition after maxUses was raised",
			link: []mut{exhausted(10, 5, at(-time.Hour)), ttlAfter(0)}, verdict: keepLink},
		{name: "exhausted before it expired: the earlier finish counts",
			link: []mut{exhausted(5, 5, at(-10*time.Minute)), expiresAt(now.Add(-time.Minute)), ttlAfter(300)}, verdict: reapLink, deadline: now.Add(-5 * time.Minute)},
		{name: "finished for want of use (idleTimeout), for this spec",
			link: []mut{idleFinished(1, 1, at(-time.Hour)), ttlAfter(60)}, verdict: reapLink, deadline: now.Add(-59 * time.Minute)},
		{name: "finished for want of use, then the spec changed: revived",
			link: []mut{idleFinished(2, 1, at(-time.Hour)), ttlAfter(60)}, verdict: keepLink},
		{name: "idleTimeout, not finished",
			link: []mut{idleFinished(1, 1, nil), ttlAfter(0)}, verdict: keepLink},
		{name: "Flux Kustomization, no policy: hold",
			link:    []mut{expiresAt(now.Add(-time.Hour)), ttlAfter(0), label("kustomize.toolkit.fluxcd.io/name", "apps"), label("kustomize.toolkit.fluxcd.io/namespace", "flux-system")},
			verdict: holdLink, deadline: now.Add(-time.Hour), by: "Flux (label kustomize.toolkit.fluxcd.io/name=apps)"},
		{name: "Flux HelmRelease, no policy: hold",
			link:    []mut{expiresAt(now.Add(-time.Hour)), ttlAfter(0), label("helm.toolkit.fluxcd.io/name", "links")},
			verdict: holdLink, deadline: now.Add(-time.Hour), by: "Flux (label helm.toolkit.fluxcd.io/name=links)"},
		{name: "Argo CD instance label, no policy: hold",
			link:    []mut{expiresAt(now.Add(-time.Hour)), ttlAfter(0), label("argocd.argoproj.io/instance", "links")},
			verdict: holdLink, deadline: now.Add(-time.Hour), by: "Argo CD (label argocd.argoproj.io/instance=links)"},
		{name: "Argo CD tracking annotation, no policy: hold",
			link: []mut{expiresAt(now.Add(-time.Hour)), ttlAfter(0), func(l *linkv1.ShortLink) {
				l.Annotations = map[string]string{"argocd.argoproj.io/tracking-id": "links:linkforge.io/ShortLink:ns/x"}
			}},
			verdict: holdLink, deadline: now.Add(-time.Hour), by: "Argo CD (annotation argocd.argoproj.io/tracking-id)"},
		{name: "GitOps-managed but not due yet: wait, no warning yet",
			link:    []mut{expiresAt(now.Add(-time.Minute)), ttlAfter(3600), label("argocd.argoproj.io/instance", "links")},
			verdict: waitLink, deadline: now.Add(59 * time.Minute)},
		{name: "GitOps-managed with policy Delete: reap",
			link:    []mut{expiresAt(now.Add(-time.Hour)), ttlAfter(0), label("argocd.argoproj.io/instance", "links"), policy(linkv1.ReapPolicyDelete)},
			verdict: reapLink, deadline: now.Add(-time.Hour)},
		{name: "unrelated fluxcd-looking label is not ownership",
			link:    []mut{expiresAt(now.Add(-time.Hour)), ttlAfter(0), label("toolkit.fluxcd.io/tenant", "a")},
			verdict: reapLink, deadline: now.Add(-time.Hour)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := &linkv1.ShortLink{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "ns", CreationTimestamp: metav1.NewTime(created)}}
			for _, m := range tc.link {
				m(l)
			}
			p := r.plan(l, now)
			if p.verdict != tc.verdict {
				t.Fatalf("verdict = %d, want %d (plan %+v)", p.verdict, tc.verdict, p)
			}
			if !tc.deadline.IsZero() && !p.deadline.Equal(tc.deadline) {
				t.Errorf("deadline = %s, want %s", p.deadline, tc.deadline)
			}
			if p.managedBy != tc.by {
				t.Errorf("managedBy = %q, want %q", p.managedBy, tc.by)
			}
		})
	}
}

func TestReaperOptionsDefaults(t *testing.T) {
	got := ReaperOptions{DefaultTTLAfterFinished: -time.Second}.withDefaults()
	want := ReaperOptions{
		DefaultTTLAfterFinished: 0, SweepInterval: 15 * time.Minute, BatchSize: 1000,
		DeletesPerSecond: 0, MaxConcurrentReconciles: 16,
	}
	if got != want {
		t.Errorf("withDefaults() = %+v, want %+v", got, want)
	}
	set := ReaperOptions{DefaultTTLAfterFinished: time.Minute, SweepInterval: time.Second, BatchSize: 7, DeletesPerSecond: 3, MaxConcurrentReconciles: 2, SweepOnly: true}
	if got := set.withDefaults(); got != set {
		t.Errorf("withDefaults() changed explicit options: %+v", got)
	}
}

func TestReaperStatsHandler(t *testing.T) {
	r := &Reaper{metrics: newReaperMetrics()}
	get := func(method string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		r.StatsHandler().ServeHTTP(rec, httptest.NewRequest(method, "/reaper", nil))
		return rec
	}

	rec := get(http.MethodGet)
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	if got, want := rec.Body.String(), `{"lastRun":null,"totalReaped":0,"lastBatch":0,"runsSucceeded":0,"runsFailed":0,"meanDurationSeconds":0}`+"\n"; got != want {
		t.Errorf("before any sweep:\n got %s\nwant %s", got, want)
	}

	at := time.Date(2026, 1, 17, 10, 30, 0, 0, time.UTC)
	r.metrics.reaped.Add(3)
	r.metrics.recordSweep(at, 2*time.Second, 2, nil)
	r.metrics.recordSweep(at.Add(time.Minute), 4*time.Second, 1, errors.New("boom"))
	var s map[string]any
	if err := json.Unmarshal(get(http.MethodGet).Body.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"lastRun": "2026-01-17T10:31:00Z", "totalReaped": 3.0, "lastBatch": 1.0,
		"runsSucceeded": 1.0, "runsFailed": 1.0, "meanDurationSeconds": 3.0,
	}
	for k, v := range want {
		if s[k] != v {
			t.Errorf("%s = %v, want %v", k, s[k], v)
		}
	}

	if rec := get(http.MethodPost); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", rec.Code)
	}
	if rec := get(http.MethodHead); rec.Code != http.StatusOK || rec.Body.Len() != 0 {
		t.Errorf("HEAD: %d with %d bytes", rec.Code, rec.Body.Len())
	}
}

func TestReapInputsChanged(t *testing.T) {
	base := &linkv1.ShortLink{ObjectMeta: metav1.ObjectMeta{Name: "l", UID: "u", Generation: 1, Labels: map[string]string{"a": "b"}}}
	since := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	tests := []struct {
		name   string
		change func(*linkv1.ShortLink)
		want   bool
	}{
		{"nothing", func(*linkv1.ShortLink) {}, false},
		{"code and Ready", func(l *linkv1.ShortLink) {
			l.Status.Code = "abc"
			l.Status.Conditions = []metav1.Condition{{Type: linkv1.ConditionReady, Status: metav1.ConditionTrue}}
		}, false},
		{"other annotation", func(l *linkv1.ShortLink) { l.Annotations = map[string]string{"x": "y"} }, false},
		{"spec", func(l *linkv1.ShortLink) { l.Generation = 2 }, true},
		{"label", func(l *linkv1.ShortLink) { l.Labels = map[string]string{"a": "c"} }, true},
		{"tracking annotation", func(l *linkv1.ShortLink) {
			l.Annotations = map[string]string{"argocd.argoproj.io/tracking-id": "x"}
		}, true},
		// Uses are counted by the redirectors every few seconds: only the
		// finish the controller records moves a deadline.
		{"uses", func(l *linkv1.ShortLink) { l.Status.Uses = 3 }, false},
		{"finished", func(l *linkv1.ShortLink) { l.Status.FinishedAt = &since }, true},
		{"deleting", func(l *linkv1.ShortLink) { l.DeletionTimestamp = &since }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cur := base.DeepCopy()
			tc.change(cur)
			if got := reapInputsChanged(base, cur); got != tc.want {
				t.Errorf("reapInputsChanged = %v, want %v", got, tc.want)
			}
			// The update predicate reads the cache's compact links.
			packedBase, err := compactlink.Pack(base.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			packedCur, err := compactlink.Pack(cur.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			if got := cachedReapInputsChanged(packedBase, packedCur); got != tc.want {
				t.Errorf("cachedReapInputsChanged of compact links = %v, want %v", got, tc.want)
			}
		})
	}
}

// The sweep reads the cached links from the informers one at a time
// (Reaper.Links: compact links, as the manager's cache keeps them), or lists
// them through the client without Links: the same links are queued.
func TestReaperSweepQueuesDueLinksOldestFirst(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	link := func(name string, expired time.Duration, labels map[string]string) *linkv1.ShortLink {
		return &linkv1.ShortLink{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels},
			Spec: linkv1.ShortLinkSpec{URL: "https://example.com/" + name, TTLSecondsAfterFinished: ptr.To[int32](0),
				ExpiresAt: &metav1.Time{Time: now.Add(expired)}},
		}
	}
	links := []*linkv1.ShortLink{
		link("newest", -time.Minute, nil),
		link("oldest", -3*time.Hour, nil),
		link("middle", -2*time.Hour, nil),
		link("not-due", time.Hour, nil),
		link("held", -4*time.Hour, map[string]string{argoInstanceLabel: "links"}),
	}
	for _, tc := range []struct {
		name   string
		source func(r *Reaper)
	}{
		{"listed through the client", func(r *Reaper) {
			b := fake.NewClientBuilder().WithScheme(scheme)
			for _, l := range links {
				b = b.WithObjects(l.DeepCopy())
			}
			r.Client = b.Build()
		}},
		{"read from the informers, compact", func(r *Reaper) {
			indexer := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
			for _, l := range links {
				addCached(t, indexer, l)
			}
			r.Links = &CodeIndex{indexers: []toolscache.Indexer{indexer}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reaper{Clock: clocktesting.NewFakeClock(now), opts: ReaperOptions{BatchSize: 2}.withDefaults()}
			tc.source(r)
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()

			n, err := r.sweep(t.Context(), q)
			if err != nil || n != 2 {
				t.Fatalf("sweep() = %d, %v; want 2 queued", n, err)
			}
			var got []string
			for q.Len() > 0 {
				req, _ := q.Get()
				got = append(got, req.Name)
				q.Done(req)
			}
			if want := []string{"oldest", "middle"}; !slices.Equal(got, want) {
				t.Errorf("queued %v, want %v: the batch's oldest deadlines, no held link", got, want)
			}
		})
	}
}
