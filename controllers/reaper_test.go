package controllers

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

var _ = Describe("Reaper", func() {
	var ns string

	BeforeEach(func() {
		ns = newNamespace("reaper")
		// The first list and create of a ShortLink take a second or two (REST
		// mapping, the API server's first write to the CRD); timed specs must
		// not pay for them.
		warm := reaperLink(ns, "warm-up")
		Expect(k8sClient.Delete(suiteCtx, warm)).To(Succeed())
		Expect(reaperNames(k8sClient, ns)).To(BeEmpty())
	})

	It("deletes an expired link ttlSecondsAfterFinished after it expired, not before", func() {
		reaperStart(ns, ReaperOptions{DefaultTTLAfterFinished: time.Hour}, nil)
		expired := time.Now().Truncate(time.Second) // the API keeps whole seconds
		link := reaperLink(ns, "ttl", reaperExpiredAt(expired), reaperTTL(2))
		deadline := expired.Add(2 * time.Second)

		Consistently(reaperExists(link)).WithTimeout(time.Until(deadline) - 250*time.Millisecond).
			WithPolling(50 * time.Millisecond).Should(BeTrue())
		Eventually(reaperExists(link)).WithTimeout(time.Until(deadline) + 3*time.Second).
			WithPolling(50 * time.Millisecond).Should(BeFalse())
	})

	It("uses the manager's default TTL when the link sets none", func() {
		reaperStart(ns, ReaperOptions{DefaultTTLAfterFinished: 2 * time.Second}, nil)
		expired := time.Now().Truncate(time.Second)
		byDefault := reaperLink(ns, "default", reaperExpiredAt(expired))
		explicit := reaperLink(ns, "explicit", reaperExpiredAt(expired), reaperTTL(3600))
		deadline := expired.Add(2 * time.Second)

		Consistently(reaperExists(byDefault)).WithTimeout(time.Until(deadline) - 250*time.Millisecond).
			WithPolling(50 * time.Millisecond).Should(BeTrue())
		Eventually(reaperExists(byDefault)).WithTimeout(time.Until(deadline) + 3*time.Second).
			WithPolling(50 * time.Millisecond).Should(BeFalse())
		Expect(reaperExists(explicit)()).To(BeTrue(), "its own ttlSecondsAfterFinished wins over the default")
	})

	It("deletes an exhausted link counting from its finishedAt, and keeps one whose maxUses was raised", func() {
		reaper := reaperStart(ns, ReaperOptions{DefaultTTLAfterFinished: time.Hour}, nil)
		longAgo := time.Now().Add(-time.Minute)
		exhausted := reaperLink(ns, "exhausted", reaperMaxUses(3), reaperTTL(10))
		reaperSetUses(exhausted, 3, longAgo)
		// finishedAt still set, but maxUses went up since: it is not finished.
		raised := reaperLink(ns, "raised", reaperMaxUses(10), reaperTTL(10))
		reaperSetUses(raised, 3, longAgo)
		// Exhausted just now: its deadline is ten seconds away.
		fresh := reaperLink(ns, "fresh", reaperMaxUses(3), reaperTTL(10))
		reaperSetUses(fresh, 3, time.Now())

		Eventually(reaperExists(exhausted)).WithTimeout(5 * time.Second).Should(BeFalse())
		Consistently(func() bool { return reaperExists(raised)() && reaperExists(fresh)() }).
			WithTimeout(2 * time.Second).Should(BeTrue())
		Expect(reaper.Stats().TotalReaped).To(Equal(int64(1)))
	})

	It("keeps a link whose reapPolicy is Retain", func() {
		reaper := reaperStart(ns, ReaperOptions{}, nil)
		longAgo := time.Now().Add(-time.Hour)
		retained := reaperLink(ns, "retained", reaperExpiredAt(longAgo), reaperTTL(0), reaperPolicy(linkv1.ReapPolicyRetain))
		control := reaperLink(ns, "control", reaperExpiredAt(longAgo), reaperTTL(0), reaperPolicy(linkv1.ReapPolicyDelete))

		// The control proves the reaper has looked at this namespace.
		Eventually(reaperExists(control)).WithTimeout(5 * time.Second).Should(BeFalse())
		Consistently(reaperExists(retained)).WithTimeout(time.Second).Should(BeTrue())
		Expect(reaperEvents(ns, retained.Name)).To(BeEmpty())
		Expect(reaper.Stats().TotalReaped).To(Equal(int64(1)))
	})

	It("keeps a GitOps-managed link without a policy and warns once", func() {
		recorder := &reaperCountingRecorder{}
		reaperStart(ns, ReaperOptions{SweepInterval: 200 * time.Millisecond}, func(r *Reaper) {
			recorder.EventRecorder = r.Recorder
			r.Recorder = recorder
		})
		longAgo := time.Now().Add(-time.Hour)
		finished := func(l *linkv1.ShortLink) {
			l.Spec.ExpiresAt = &metav1.Time{Time: longAgo}
			l.Spec.TTLSecondsAfterFinished = ptr.To[int32](0)
		}
		managed := []*linkv1.ShortLink{
			reaperLink(ns, "flux-kustomize", finished, reaperLabel("kustomize.toolkit.fluxcd.io/name", "apps")),
			reaperLink(ns, "flux-helm", finished, reaperLabel("helm.toolkit.fluxcd.io/name", "links")),
			reaperLink(ns, "argo-instance", finished, reaperLabel("argocd.argoproj.io/instance", "links")),
			reaperLink(ns, "argo-tracking", finished, func(l *linkv1.ShortLink) {
				l.Annotations = map[string]string{"argocd.argoproj.io/tracking-id": "links:linkforge.io/ShortLink:" + ns + "/argo-tracking"}
			}),
		}
		// An explicit policy wins over GitOps ownership.
		explicit := reaperLink(ns, "flux-explicit", finished, reaperLabel("kustomize.toolkit.fluxcd.io/name", "apps"),
			reaperPolicy(linkv1.ReapPolicyDelete))
		Eventually(reaperExists(explicit)).WithTimeout(5 * time.Second).Should(BeFalse())

		for _, l := range managed {
			Eventually(func(g Gomega) {
				evs := reaperEvents(ns, l.Name)
				g.Expect(evs).To(HaveLen(1))
				g.Expect(evs[0].Type).To(Equal("Warning"))
				g.Expect(evs[0].Reason).To(Equal(ReasonReapSkipped))
				g.Expect(evs[0].ReportingController).To(Equal("linkforge-reaper"))
				g.Expect(evs[0].Note).To(ContainSubstring("Remove it from its source"))
				g.Expect(evs[0].Note).To(ContainSubstring("spec.reapPolicy"))
			}).WithTimeout(10*time.Second).Should(Succeed(), l.Name)
		}
		Expect(reaperEvents(ns, "flux-kustomize")[0].Note).To(ContainSubstring("Flux (label kustomize.toolkit.fluxcd.io/name=apps)"))
		Expect(reaperEvents(ns, "argo-tracking")[0].Note).To(ContainSubstring("Argo CD (annotation argocd.argoproj.io/tracking-id)"))

		// Updates re-run the deadline path, and sweeps run every 200ms: still one warning each.
		for _, l := range managed {
			Expect(k8sClient.Patch(suiteCtx, l, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"touched":"yes"}}}`)))).To(Succeed())
		}
		Consistently(func(g Gomega) {
			for _, l := range managed {
				g.Expect(reaperExists(l)()).To(BeTrue(), l.Name)
				g.Expect(recorder.count(l.Name)).To(Equal(1), l.Name)
			}
		}).WithTimeout(2 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	})

	It("keeps a link extended just before its deadline (the live read sees the extension)", func() {
		var extendErr error
		var intercepted atomic.Int32
		hooked := make(chan struct{})
		reaper := reaperStart(ns, ReaperOptions{}, func(r *Reaper) {
			r.APIReader = &reaperInterceptReader{Reader: r.APIReader, before: func(ctx context.Context, key client.ObjectKey) {
				if key.Name != "extended" || intercepted.Add(1) != 1 {
					return
				}
				defer close(hooked)
				// The cache said "due"; the user extends the link before the reaper's fresh read.
				extendErr = reaperExtend(ctx, key, time.Hour)
			}}
		})
		link := reaperLink(ns, "extended", reaperExpiredAt(time.Now().Add(-time.Minute)), reaperTTL(0))

		Eventually(hooked).WithTimeout(5 * time.Second).Should(BeClosed())
		Consistently(reaperExists(link)).WithTimeout(2 * time.Second).Should(BeTrue())
		Expect(extendErr).NotTo(HaveOccurred())
		Expect(reaper.Stats().TotalReaped).To(BeZero())
	})

	It("keeps a link changed between the live read and the delete (resourceVersion precondition)", func() {
		var extendErr, deleteErr error
		var intercepted atomic.Int32
		hooked := make(chan struct{})
		reaper := reaperStart(ns, ReaperOptions{}, func(r *Reaper) {
			r.Client = &reaperInterceptDelete{Client: r.Client, around: func(ctx context.Context, obj client.Object, del func() error) error {
				if obj.GetName() != "raced" || intercepted.Add(1) != 1 {
					return del()
				}
				defer close(hooked)
				extendErr = reaperExtend(ctx, client.ObjectKeyFromObject(obj), time.Hour)
				deleteErr = del()
				return deleteErr
			}}
		})
		link := reaperLink(ns, "raced", reaperExpiredAt(time.Now().Add(-time.Minute)), reaperTTL(0))

		Eventually(hooked).WithTimeout(5 * time.Second).Should(BeClosed())
		Consistently(reaperExists(link)).WithTimeout(2 * time.Second).Should(BeTrue())
		Expect(extendErr).NotTo(HaveOccurred())
		Expect(apierrors.IsConflict(deleteErr)).To(BeTrue(), "the delete fails its precondition: %v", deleteErr)
		Expect(intercepted.Load()).To(Equal(int32(1)), "the fresh read shows the extension: no second delete")
		Expect(reaper.Stats().TotalReaped).To(BeZero())
	})

	It("keeps a link re-created under the same name (UID precondition)", func() {
		var recreateErr, deleteErr error
		var intercepted atomic.Int32
		hooked := make(chan struct{})
		var newUID atomic.Value
		reaperStart(ns, ReaperOptions{}, func(r *Reaper) {
			r.Client = &reaperInterceptDelete{Client: r.Client, around: func(ctx context.Context, obj client.Object, del func() error) error {
				if obj.GetName() != "recreated" || intercepted.Add(1) != 1 {
					return del()
				}
				defer close(hooked)
				// Someone deletes the link and applies a new one, not finished, under the same name.
				old := &linkv1.ShortLink{ObjectMeta: metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: obj.GetName()}}
				if recreateErr = k8sClient.Delete(ctx, old); recreateErr != nil {
					return del()
				}
				repl := &linkv1.ShortLink{
					ObjectMeta: metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: obj.GetName()},
					Spec:       linkv1.ShortLinkSpec{URL: "https://example.com/recreated"},
				}
				if recreateErr = k8sClient.Create(ctx, repl); recreateErr == nil {
					newUID.Store(repl.UID)
				}
				deleteErr = del()
				return deleteErr
			}}
		})
		link := reaperLink(ns, "recreated", reaperExpiredAt(time.Now().Add(-time.Minute)), reaperTTL(0))
		oldUID := link.UID

		Eventually(hooked).WithTimeout(5 * time.Second).Should(BeClosed())
		Expect(recreateErr).NotTo(HaveOccurred())
		Expect(apierrors.IsConflict(deleteErr)).To(BeTrue(), "the delete fails its UID precondition: %v", deleteErr)
		Consistently(func(g Gomega) {
			got := &linkv1.ShortLink{}
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(link), got)).To(Succeed())
			g.Expect(got.UID).NotTo(Equal(oldUID))
			g.Expect(got.UID).To(Equal(newUID.Load()))
		}).WithTimeout(2 * time.Second).Should(Succeed())
	})

	It("with OptimisticDelete, deletes without a read, and reads only when the link changed", func() {
		var extendErr, deleteErr error
		var reads sync.Map // name -> *atomic.Int32
		readsOf := func(name string) int32 {
			n, _ := reads.LoadOrStore(name, &atomic.Int32{})
			return n.(*atomic.Int32).Load()
		}
		var intercepted atomic.Int32
		hooked := make(chan struct{})
		reaper := reaperStart(ns, ReaperOptions{OptimisticDelete: true}, func(r *Reaper) {
			r.APIReader = &reaperInterceptReader{Reader: r.APIReader, before: func(_ context.Context, key client.ObjectKey) {
				n, _ := reads.LoadOrStore(key.Name, &atomic.Int32{})
				n.(*atomic.Int32).Add(1)
			}}
			r.Client = &reaperInterceptDelete{Client: r.Client, around: func(ctx context.Context, obj client.Object, del func() error) error {
				if obj.GetName() != "changed" || intercepted.Add(1) != 1 {
					return del()
				}
				defer close(hooked)
				extendErr = reaperExtend(ctx, client.ObjectKeyFromObject(obj), time.Hour)
				deleteErr = del()
				return deleteErr
			}}
		})
		longAgo := time.Now().Add(-time.Minute)
		plain := reaperLink(ns, "plain", reaperExpiredAt(longAgo), reaperTTL(0))
		changed := reaperLink(ns, "changed", reaperExpiredAt(longAgo), reaperTTL(0))

		Eventually(reaperExists(plain)).WithTimeout(5 * time.Second).Should(BeFalse())
		Expect(readsOf("plain")).To(BeZero(), "deleted with the cached copy's preconditions, no read")
		Eventually(hooked).WithTimeout(5 * time.Second).Should(BeClosed())
		Consistently(reaperExists(changed)).WithTimeout(2 * time.Second).Should(BeTrue())
		Expect(extendErr).NotTo(HaveOccurred())
		Expect(apierrors.IsConflict(deleteErr)).To(BeTrue(), "the cached copy's preconditions fail: %v", deleteErr)
		Expect(readsOf("changed")).To(BeNumerically(">=", 1), "the rejected delete is followed by a fresh read")
		Expect(intercepted.Load()).To(Equal(int32(1)), "the fresh read shows the extension: no second delete")
		Expect(reaper.Stats().TotalReaped).To(Equal(int64(1)))
	})

	It("sweeps at most the batch size, oldest deadline first", func() {
		fake := clocktesting.NewFakeClock(time.Now())
		var cached client.Client
		reaper := reaperStartWith(ns, ReaperOptions{SweepOnly: true, BatchSize: 4, SweepInterval: time.Minute},
			func(r *Reaper, mgr ctrl.Manager) {
				r.Clock = fake
				cached = mgr.GetClient()
			})
		base := fake.Now().Add(-time.Hour).Truncate(time.Second)
		var names []string
		// Created youngest first, so creation order is not deadline order.
		for i := 9; i >= 0; i-- {
			name := "due-" + string(rune('a'+i))
			reaperLink(ns, name, reaperExpiredAt(base.Add(time.Duration(i)*time.Minute)), reaperTTL(0))
			names = append([]string{name}, names...)
		}
		remaining := func() []string { return reaperNames(k8sClient, ns) }
		// What the next sweep sees: the reaper's cache, which follows the
		// deletes a moment after the API server.
		cachedRemaining := func() []string { return reaperNames(cached, ns) }
		// The reaper's cache has them all; without the deadline path nothing happens before a sweep.
		Eventually(func() []string { return reaperNames(cached, ns) }).Should(HaveLen(10))
		Consistently(remaining).WithTimeout(time.Second).Should(HaveLen(10))
		Expect(reaper.Stats().LastRun).To(BeNil())

		sweepOnce := func(runs int64) {
			Eventually(fake.HasWaiters).Should(BeTrue(), "the sweep waits for its interval")
			fake.Step(time.Minute)
			Eventually(func() int64 { return reaper.Stats().RunsSucceeded }).Should(Equal(runs))
		}
		// A sweep only queues the due links; the reaper's workers delete them.
		sweepOnce(1)
		Expect(reaper.Stats().LastBatch).To(Equal(4))
		Eventually(remaining).Should(Equal(names[4:]))
		// No further deletes until the next interval.
		Consistently(remaining).WithTimeout(time.Second).Should(Equal(names[4:]))
		Eventually(cachedRemaining).Should(Equal(names[4:]))

		sweepOnce(2)
		Expect(reaper.Stats().LastBatch).To(Equal(4))
		Eventually(remaining).Should(Equal(names[8:]))
		Eventually(cachedRemaining).Should(Equal(names[8:]))

		sweepOnce(3)
		Expect(reaper.Stats().LastBatch).To(Equal(2))
		Eventually(remaining).Should(BeEmpty())
		Eventually(func() int64 { return reaper.Stats().TotalReaped }).Should(Equal(int64(10)))
		stats := reaper.Stats()
		Expect(stats.RunsFailed).To(BeZero())
		Expect(*stats.LastRun).To(BeTemporally("==", fake.Now().UTC().Truncate(time.Second)))

		rec := httptest.NewRecorder()
		reaper.StatsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/reaper", nil))
		Expect(rec.Code).To(Equal(http.StatusOK))
		Expect(rec.Header().Get("Content-Type")).To(Equal("application/json"))
		var body map[string]any
		Expect(json.Unmarshal(rec.Body.Bytes(), &body)).To(Succeed())
		Expect(body).To(HaveKeyWithValue("lastRun", fake.Now().UTC().Truncate(time.Second).Format(time.RFC3339)))
		Expect(body).To(HaveKeyWithValue("totalReaped", BeNumerically("==", 10)))
		Expect(body).To(HaveKeyWithValue("lastBatch", BeNumerically("==", 2)))
		Expect(body).To(HaveKeyWithValue("runsSucceeded", BeNumerically("==", 3)))
		Expect(body).To(HaveKeyWithValue("runsFailed", BeNumerically("==", 0)))
		Expect(body).To(HaveKeyWithValue("meanDurationSeconds", BeNumerically(">", 0)))
	})
})

// reaperStart runs a manager with only a reaper until the spec ends.
// configure, if set, may replace the reaper's collaborators before it starts.
func reaperStart(ns string, o ReaperOptions, configure func(r *Reaper)) *Reaper {
	GinkgoHelper()
	return reaperStartWith(ns, o, func(r *Reaper, _ ctrl.Manager) {
		if configure != nil {
			configure(r)
		}
	})
}

// reaperStartWith runs a manager with only a reaper, its cache limited to
// the spec's namespace: links that other specs leave behind (envtest never
// removes a namespace) are not this reaper's business. It returns once the
// cache has synced.
func reaperStartWith(ns string, o ReaperOptions, configure func(r *Reaper, mgr ctrl.Manager)) *Reaper {
	GinkgoHelper()
	var reaper *Reaper
	opts, index := inNamespace(ns)
	startManagerWith(opts, func(ctx context.Context, mgr ctrl.Manager) error {
		reaper = NewReaper(mgr, o)
		reaper.Links = index
		configure(reaper, mgr)
		if err := reaper.SetupWithManager(mgr); err != nil {
			return err
		}
		// Registered now, so that the sync waits for it.
		_, err := mgr.GetCache().GetInformer(ctx, &linkv1.ShortLink{})
		return err
	})
	return reaper
}

func reaperLink(ns, name string, mutate ...func(*linkv1.ShortLink)) *linkv1.ShortLink {
	GinkgoHelper()
	l := &linkv1.ShortLink{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       linkv1.ShortLinkSpec{URL: "https://example.com/" + name},
	}
	for _, m := range mutate {
		m(l)
	}
	Expect(k8sClient.Create(suiteCtx, l)).To(Succeed())
	return l
}

func reaperExpiredAt(t time.Time) func(*linkv1.ShortLink) {
	return func(l *linkv1.ShortLink) { l.Spec.ExpiresAt = &metav1.Time{Time: t} }
}

func reaperTTL(seconds int32) func(*linkv1.ShortLink) {
	return func(l *linkv1.ShortLink) { l.Spec.TTLSecondsAfterFinished = ptr.To(seconds) }
}

func reaperPolicy(p linkv1.ReapPolicy) func(*linkv1.ShortLink) {
	return func(l *linkv1.ShortLink) { l.Spec.ReapPolicy = p }
}

func reaperMaxUses(n int64) func(*linkv1.ShortLink) {
	return func(l *linkv1.ShortLink) { l.Spec.MaxUses = ptr.To(n) }
}

func reaperLabel(k, v string) func(*linkv1.ShortLink) {
	return func(l *linkv1.ShortLink) {
		if l.Labels == nil {
			l.Labels = map[string]string{}
		}
		l.Labels[k] = v
	}
}

// reaperSetUses writes status.uses, and status.finishedAt = since, as the
// controller would record the link's exhaustion.
func reaperSetUses(l *linkv1.ShortLink, uses int64, since time.Time) {
	GinkgoHelper()
	l.Status.Uses = uses
	l.Status.FinishedAt = &metav1.Time{Time: since}
	Expect(k8sClient.Status().Update(suiteCtx, l)).To(Succeed())
}

// reaperExtend moves the link's expiry to now+by.
func reaperExtend(ctx context.Context, key client.ObjectKey, by time.Duration) error {
	l := &linkv1.ShortLink{}
	if err := k8sClient.Get(ctx, key, l); err != nil {
		return err
	}
	l.Spec.ExpiresAt = &metav1.Time{Time: time.Now().Add(by)}
	return k8sClient.Update(ctx, l)
}

func reaperExists(l *linkv1.ShortLink) func() bool {
	return func() bool {
		err := k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(l), &linkv1.ShortLink{})
		if err != nil && !apierrors.IsNotFound(err) {
			Fail(err.Error())
		}
		return err == nil
	}
}

func reaperNames(c client.Reader, ns string) []string {
	var list linkv1.ShortLinkList
	Expect(c.List(suiteCtx, &list, client.InNamespace(ns))).To(Succeed())
	names := make([]string, 0, len(list.Items))
	for _, l := range list.Items {
		names = append(names, l.Name)
	}
	sort.Strings(names)
	return names
}

// reaperEvents returns the reaper's events.k8s.io/v1 Events about a link.
func reaperEvents(ns, name string) []eventsv1.Event {
	var list eventsv1.EventList
	Expect(k8sClient.List(suiteCtx, &list, client.InNamespace(ns))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name && strings.HasPrefix(e.ReportingController, "linkforge-reaper") {
			out = append(out, e)
		}
	}
	return out
}

// reaperCountingRecorder counts the events recorded per object name.
type reaperCountingRecorder struct {
	events.EventRecorder
	mu     sync.Mutex
	counts map[string]int
}

func (c *reaperCountingRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if o, ok := regarding.(client.Object); ok {
		c.mu.Lock()
		if c.counts == nil {
			c.counts = map[string]int{}
		}
		c.counts[o.GetName()]++
		c.mu.Unlock()
	}
	c.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

func (c *reaperCountingRecorder) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[name]
}

// reaperInterceptReader runs before ahead of each live read.
type reaperInterceptReader struct {
	client.Reader
	before func(ctx context.Context, key client.ObjectKey)
}

func (r *reaperInterceptReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.before(ctx, key)
	return r.Reader.Get(ctx, key, obj, opts...)
}

// reaperInterceptDelete wraps each delete in around.
type reaperInterceptDelete struct {
	client.Client
	around func(ctx context.Context, obj client.Object, del func() error) error
}

func (c *reaperInterceptDelete) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return c.around(ctx, obj, func() error { return c.Client.Delete(ctx, obj, opts...) })
}
