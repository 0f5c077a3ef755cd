package controllers

import (
	"context"
	"fmt"
	"maps"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// writeCounter counts what a client reads and writes.
type writeCounter struct{ gets, writes atomic.Int64 }

func (w *writeCounter) wrap(c client.Client) client.Client { return &countingClient{Client: c, n: w} }

// countingClient counts the calls of the embedded client that a reconcile
// makes: reads, and every kind of write.
type countingClient struct {
	client.Client
	n *writeCounter
}

func (c *countingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.n.gets.Add(1)
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.n.writes.Add(1)
	return c.Client.Create(ctx, obj, opts...)
}

func (c *countingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.n.writes.Add(1)
	return c.Client.Update(ctx, obj, opts...)
}

func (c *countingClient) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	c.n.writes.Add(1)
	return c.Client.Patch(ctx, obj, p, opts...)
}

func (c *countingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	c.n.writes.Add(1)
	return c.Client.Apply(ctx, obj, opts...)
}

func (c *countingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.n.writes.Add(1)
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *countingClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	c.n.writes.Add(1)
	return c.Client.DeleteAllOf(ctx, obj, opts...)
}

func (c *countingClient) Status() client.SubResourceWriter { return c.SubResource("status") }

func (c *countingClient) SubResource(sub string) client.SubResourceClient {
	return &countingSubResource{SubResourceClient: c.Client.SubResource(sub), n: c.n}
}

type countingSubResource struct {
	client.SubResourceClient
	n *writeCounter
}

func (c *countingSubResource) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	c.n.writes.Add(1)
	return c.SubResourceClient.Create(ctx, obj, sub, opts...)
}

func (c *countingSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	c.n.writes.Add(1)
	return c.SubResourceClient.Update(ctx, obj, opts...)
}

func (c *countingSubResource) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
	c.n.writes.Add(1)
	if data, err := p.Data(obj); err == nil {
		GinkgoWriter.Printf("status patch of %s: %s\n", obj.GetName(), data)
	}
	return c.SubResourceClient.Patch(ctx, obj, p, opts...)
}

func (c *countingSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	c.n.writes.Add(1)
	return c.SubResourceClient.Apply(ctx, obj, opts...)
}

// runShard starts what bin/manager runs (the ShortLink controller and the
// reaper, on ManagerCacheOptions) for namespaces, with leader election on the
// shard's own Lease. Its clients count their calls into links and reaps.
// The returned stop ends it and waits.
func runShard(namespaces []string, links, reaps *writeCounter) (stop func()) {
	GinkgoHelper()
	index := NewCodeIndex()
	opts := ctrl.Options{
		Cache:                         ManagerCacheOptions(namespaces, index),
		LeaderElection:                true,
		LeaderElectionID:              LeaderElectionID(namespaces),
		LeaderElectionNamespace:       "default",
		LeaderElectionReleaseOnCancel: true,
	}
	return startManagerWith(opts, func(ctx context.Context, mgr ctrl.Manager) error {
		cached := mgr.GetClient()
		r := &ShortLinkReconciler{
			Client: links.wrap(cached), Recorder: mgr.GetEventRecorder("linkforge-manager"),
			Clock: clock.RealClock{}, MaxConcurrentReconciles: Defaults.MaxConcurrentReconciles, Index: index,
		}
		if err := r.SetupWithManager(ctx, mgr); err != nil {
			return err
		}
		reaper := NewReaper(mgr, ReaperOptions{DefaultTTLAfterFinished: time.Hour, OptimisticDelete: true})
		reaper.Client, reaper.Links = reaps.wrap(cached), index
		return reaper.SetupWithManager(mgr)
	})
}

// scaleLinks creates n links of every kind the controller settles on in ns:
// hashed and custom codes, a lost code conflict, a URL to canonicalize, a link that
// expired (kept an hour), one that expires later, one with maxUses; some
// carry kubectl's last-applied annotation, other labels and a Flux label.
func scaleLinks(ns string, n int) {
	GinkgoHelper()
	for i := range n {
		l := newLink(ns, fmt.Sprintf("l%03d", i), fmt.Sprintf("https://example.com/p/%d", i))
		switch i % 7 {
		case 1:
			l.Spec.Code = fmt.Sprintf("c%d", i)
		case 2:
			l.Spec.Code = "taken" // all but the oldest are in CodeConflict
		case 3:
			l.Spec.URL = fmt.Sprintf("https://Example.COM/a/../p/%d?utm_source=x&b=2&a=1", i) // canonicalized
		case 4:
			l.Spec.ExpiresAt = ptr.To(metav1.NewTime(time.Now().Add(-time.Minute)))
		case 5:
			l.Spec.ExpiresAt = ptr.To(metav1.NewTime(time.Now().Add(time.Hour)))
		case 6:
			l.Spec.MaxUses = ptr.To[int64](10)
		}
		if i%2 == 0 {
			l.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: fmt.Sprintf(`{"spec":{"url":%q}}`, l.Spec.URL)}
			l.Labels = map[string]string{"app.kubernetes.io/name": "bench", "kustomize.toolkit.fluxcd.io/name": "apps"}
		}
		Expect(k8sClient.Create(suiteCtx, l)).To(Succeed())
	}
}

// settled waits until every link of ns has a status for its generation.
func settled(ns string, n int) map[string]string {
	GinkgoHelper()
	rvs := map[string]string{}
	Eventually(func(g Gomega) {
		var list linkv1.ShortLinkList
		g.Expect(k8sClient.List(suiteCtx, &list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(n))
		clear(rvs)
		for _, l := range list.Items {
			ready := meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionReady)
			g.Expect(ready).NotTo(BeNil(), l.Name)
			g.Expect(l.Status.ObservedGeneration).To(Equal(l.Generation), l.Name)
			g.Expect(l.Status.State).NotTo(Equal(linkv1.StatePending), l.Name)
			rvs[l.Name] = l.ResourceVersion
		}
	}).WithTimeout(60 * time.Second).Should(Succeed())
	return rvs
}

var _ = Describe("The manager at scale", func() {
	It("writes nothing when it restarts with unchanged links", func() {
		const n = 70
		ns := newNamespace("restart")
		scaleLinks(ns, n)
		var first writeCounter
		stop := runShard([]string{ns}, &first, &first)
		before := settled(ns, n)
		Expect(first.writes.Load()).To(BeNumerically(">=", n), "the first manager wrote every status")
		// Losers of a code conflict may be rewritten as the winner settles:
		// wait until no link changes between two polls 2s apart.
		Eventually(func() bool {
			now := settled(ns, n)
			same := maps.Equal(now, before)
			before = now
			return same
		}).WithPolling(2*time.Second).WithTimeout(60*time.Second).Should(BeTrue(), "the links never settled")
		stop()

		var links, reaps writeCounter
		runShard([]string{ns}, &links, &reaps)
		// Every link is reconciled again (and looked at by the reaper) ...
		Eventually(func() int64 { return links.gets.Load() }).WithTimeout(60 * time.Second).Should(BeNumerically(">=", n))
		Eventually(func() int64 { return reaps.gets.Load() }).WithTimeout(60 * time.Second).Should(BeNumerically(">=", n))
		// ... and nothing is written: no status patch, no delete, no new version.
		Consistently(func() int64 { return links.writes.Load() + reaps.writes.Load() }).WithTimeout(3 * time.Second).Should(BeZero())
		Expect(settled(ns, n)).To(Equal(before))
	})

	It("runs shards on disjoint namespaces, each reconciling its own links only", func() {
		a, b1, b2, other := newNamespace("shard-a"), newNamespace("shard-b1"), newNamespace("shard-b2"), newNamespace("shard-none")
		var ca, cb writeCounter
		// Both shards elect a leader at once: their Leases differ. Shard b
		// has an informer per namespace, and one code index over both.
		runShard([]string{a}, &ca, &ca)
		runShard([]string{b1, b2}, &cb, &cb)
		for _, ns := range []string{a, b1, b2, other} {
			for i := range 5 {
				Expect(k8sClient.Create(suiteCtx, newLink(ns, fmt.Sprintf("l%d", i), fmt.Sprintf("https://example.com/%s/%d", ns, i)))).To(Succeed())
			}
		}
		// Codes are owned per namespace: one code declared in both of shard
		// b's namespaces is held in each, and taken only within one.
		for _, ns := range []string{b1, b2} {
			custom := newLink(ns, "custom", "https://example.com/custom/"+ns)
			custom.Spec.Code = "shared"
			Expect(k8sClient.Create(suiteCtx, custom)).To(Succeed())
			eventuallyState(ns, "custom", metav1.ConditionTrue, linkv1.ReasonCodeAssigned, linkv1.StateActive)
		}
		late := newLink(b1, "custom-late", "https://example.com/custom/late")
		late.Spec.Code = "shared"
		Expect(k8sClient.Create(suiteCtx, late)).To(Succeed())
		eventuallyState(b1, "custom-late", metav1.ConditionFalse, linkv1.ReasonCodeConflict, linkv1.StateConflict)
		settled(a, 5)
		settled(b1, 7)
		settled(b2, 6)
		Consistently(func(g Gomega) {
			var list linkv1.ShortLinkList
			g.Expect(k8sClient.List(suiteCtx, &list, client.InNamespace(other))).To(Succeed())
			for _, l := range list.Items {
				g.Expect(l.Status.Conditions).To(BeEmpty(), "a link outside both shards was reconciled")
			}
		}).WithTimeout(2 * time.Second).Should(Succeed())
		// Each shard wrote its own statuses (and no other): shard b 5 + 5
		// plain links, two holders of "shared" and the conflict.
		Expect(ca.writes.Load()).To(BeNumerically("==", 5))
		Expect(cb.writes.Load()).To(BeNumerically("==", 13))
	})
})
