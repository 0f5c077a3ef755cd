package controllers

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/shortcode"
	"github.com/linkforge/linkforge/internal/shortcode/conformance"
)

// runLinkManagers starts n managers running the ShortLink controller, each
// watching only ns, with leader election off: n > 1 proves the ownership rule
// holds without a single writer.
func runLinkManagers(ns string, n int) {
	for i := 0; i < n; i++ {
		opts, index := inNamespace(ns)
		startManagerWith(opts,
			func(ctx context.Context, mgr ctrl.Manager) error {
				r := &ShortLinkReconciler{
					Client:                  mgr.GetClient(),
					Recorder:                mgr.GetEventRecorder("linkforge-manager"),
					Clock:                   clock.RealClock{},
					RedirectBaseURL:         "http://go.example.com/",
					MaxConcurrentReconciles: 4,
					Index:                   index,
				}
				return r.SetupWithManager(ctx, mgr)
			})
	}
}

func newLink(ns, name, url string) *linkv1.ShortLink {
	return &linkv1.ShortLink{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       linkv1.ShortLinkSpec{URL: url},
	}
}

func getLink(g Gomega, ns, name string) *linkv1.ShortLink {
	l := &linkv1.ShortLink{}
	g.Expect(k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: name}, l)).To(Succeed())
	return l
}

// readyReason returns the Ready condition's status and reason once the
// controller has handled the link's current generation.
func readyReason(g Gomega, ns, name string) (metav1.ConditionStatus, string, *linkv1.ShortLink) {
	l := getLink(g, ns, name)
	g.Expect(l.Status.ObservedGeneration).To(Equal(l.Generation), "status describes the current spec")
	c := meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionReady)
	g.Expect(c).NotTo(BeNil(), "Ready is always present")
	return c.Status, c.Reason, l
}

// eventuallyReady waits until the link is Ready and redirecting (Active) and returns it.
func eventuallyReady(ns, name string) *linkv1.ShortLink {
	var out *linkv1.ShortLink
	EventuallyWithOffset(1, func(g Gomega) {
		status, reason, l := readyReason(g, ns, name)
		g.Expect(reason).To(Equal(linkv1.ReasonCodeAssigned))
		g.Expect(status).To(Equal(metav1.ConditionTrue))
		g.Expect(l.Status.State).To(Equal(linkv1.StateActive))
		out = l
	}).WithTimeout(20 * time.Second).Should(Succeed())
	return out
}

// eventuallyState waits until the controller has handled the link's current
// generation with the given Ready status and reason and status.state.
func eventuallyState(ns, name string, ready metav1.ConditionStatus, reason string, state linkv1.LinkState) *linkv1.ShortLink {
	var out *linkv1.ShortLink
	EventuallyWithOffset(1, func(g Gomega) {
		status, got, l := readyReason(g, ns, name)
		g.Expect(got).To(Equal(reason))
		g.Expect(status).To(Equal(ready))
		g.Expect(l.Status.State).To(Equal(state))
		out = l
	}).WithTimeout(20 * time.Second).Should(Succeed())
	return out
}

// eventsFor lists the events.k8s.io events about one link as "Type Reason: note".
func eventsFor(g Gomega, ns, name string) []string {
	var list eventsv1.EventList
	g.Expect(k8sClient.List(suiteCtx, &list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Note))
		}
	}
	return out
}

var _ = Describe("The ShortLink controller", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace("links")
		runLinkManagers(ns, 1)
	})

	It("writes code, canonical URL, short URL and observedGeneration", func() {
		Expect(k8sClient.Create(suiteCtx, newLink(ns, "docs", "HTTP://Example.COM/path"))).To(Succeed())
		l := eventuallyReady(ns, "docs")
		want := shortcode.Code("http://example.com/path", ns, 0)
		Expect(l.Status.Code).To(Equal(want))
		Expect(l.Status.Salt).To(BeZero())
		Expect(l.Status.CanonicalURL).To(Equal("http://example.com/path"))
		Expect(l.Status.ShortURL).To(Equal("http://go.example.com/" + ns + "/" + want))
		Expect(meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionReconciling)).To(BeNil())
		Expect(meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionStalled)).To(BeNil())
	})

	It("reproduces every conformance vector's salt-0 code end to end", func() {
		v, err := conformance.Load()
		Expect(err).NotTo(HaveOccurred())
		// Only the vectors' namespaces that Kubernetes accepts as namespace
		// names; this control plane is new for every test run, so they are free.
		Expect(k8sClient.Create(suiteCtx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}})).To(Succeed())
		for _, ns := range []string{"default", "team-a"} {
			runLinkManagers(ns, 1)
		}
		checked := 0
		for i, vec := range v.Valid {
			for _, c := range vec.Codes {
				if c.Salt != 0 || (c.Namespace != "default" && c.Namespace != "team-a") {
					continue
				}
				name := fmt.Sprintf("vector-%02d", i)
				Expect(k8sClient.Create(suiteCtx, newLink(c.Namespace, name, vec.URL))).To(Succeed())
				l := eventuallyReady(c.Namespace, name)
				Expect(l.Status.CanonicalURL).To(Equal(vec.Canonical), "vector %q", vec.URL)
				Expect(l.Status.Code).To(Equal(c.Code), "vector %q in %s", vec.URL, c.Namespace)
				checked++
			}
		}
		Expect(checked).To(Equal(2 * len(v.Valid)))
	})

	It("gives one code to the same URL in any spelling and different codes across namespaces", func() {
		other := newNamespace("links-other")
		runLinkManagers(other, 1)
		Expect(k8sClient.Create(suiteCtx, newLink(ns, "a", "https://example.com/docs?b=2&a=1"))).To(Succeed())
		Expect(k8sClient.Create(suiteCtx, newLink(ns, "b", "  HTTPS://EXAMPLE.com:443/docs/?a=1&b=2#top "))).To(Succeed())
		Expect(k8sClient.Create(suiteCtx, newLink(other, "a", "https://example.com/docs?b=2&a=1"))).To(Succeed())
		a, b, c := eventuallyReady(ns, "a"), eventuallyReady(ns, "b"), eventuallyReady(other, "a")
		Expect(b.Status.Code).To(Equal(a.Status.Code))
		Expect(c.Status.Code).NotTo(Equal(a.Status.Code))
		Expect(a.Status.Code).To(Equal(shortcode.Code("https://example.com/docs?a=1&b=2", ns, 0)))
		Expect(c.Status.Code).To(Equal(shortcode.Code("https://example.com/docs?a=1&b=2", other, 0)))
	})

	It("takes salt 2 when salt 0 and 1 are held by custom codes", func() {
		const url = "https://example.com/collide"
		codes := shortcode.Codes(url, ns)
		for i := 0; i < 2; i++ {
			l := newLink(ns, fmt.Sprintf("squat%d", i), fmt.Sprintf("https://squatter.example/%d", i))
			l.Spec.Code = codes[i]
			Expect(k8sClient.Create(suiteCtx, l)).To(Succeed())
			eventuallyReady(ns, l.Name)
		}
		Expect(k8sClient.Create(suiteCtx, newLink(ns, "victim", url))).To(Succeed())
		l := eventuallyReady(ns, "victim")
		Expect(l.Status.Code).To(Equal(codes[2]))
		Expect(l.Status.Salt).To(Equal(int32(2)))
		Eventually(func(g Gomega) []string { return eventsFor(g, ns, "victim") }).
			Should(ContainElement(ContainSubstring("CodeCollision: codes at salts 0-1 are held by other links; took salt 2")))
	})

	It("shares a code between duplicates and gives a different expiry the next salt", func() {
		const url = "https://example.com/sale"
		exp := metav1.NewTime(time.Now().Add(48 * time.Hour).Truncate(time.Second))
		first, dup, later := newLink(ns, "first", url), newLink(ns, "dup", url), newLink(ns, "later", url)
		first.Spec.ExpiresAt, dup.Spec.ExpiresAt = &exp, &exp
		other := metav1.NewTime(exp.Add(time.Hour))
		later.Spec.ExpiresAt = &other
		Expect(k8sClient.Create(suiteCtx, first)).To(Succeed())
		Expect(eventuallyReady(ns, "first").Status.Salt).To(BeZero())
		Expect(k8sClient.Create(suiteCtx, dup)).To(Succeed())
		Expect(k8sClient.Create(suiteCtx, later)).To(Succeed())
		codes := shortcode.Codes(url, ns)
		Expect(eventuallyReady(ns, "dup").Status.Code).To(Equal(codes[0]))
		l := eventuallyReady(ns, "later")
		Expect(l.Status.Code).To(Equal(codes[1]))
		Expect(l.Status.ExpiresAt.Time.Equal(other.Time)).To(BeTrue())
	})

	It("reports a custom code conflict and takes the code over once the holder is deleted", func() {
		holder := newLink(ns, "holder", "https://example.com/a")
		holder.Spec.Code = "docs"
		Expect(k8sClient.Create(suiteCtx, holder)).To(Succeed())
		eventuallyReady(ns, "holder")
		wanter := newLink(ns, "wanter", "https://example.com/b")
		wanter.Spec.Code = "docs"
		Expect(k8sClient.Create(suiteCtx, wanter)).To(Succeed())
		l := eventuallyState(ns, "wanter", metav1.ConditionFalse, linkv1.ReasonCodeConflict, linkv1.StateConflict)
		Expect(l.Status.Code).To(BeEmpty())
		Expect(meta.IsStatusConditionTrue(l.Status.Conditions, linkv1.ConditionStalled)).To(BeTrue())
		Expect(meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionReady).Message).To(ContainSubstring(`held by ShortLink "holder"`))
		Eventually(func(g Gomega) []string { return eventsFor(g, ns, "wanter") }).
			Should(ContainElement(ContainSubstring("Warning CodeConflict")))

		Expect(k8sClient.Delete(suiteCtx, holder)).To(Succeed())
		l = eventuallyReady(ns, "wanter")
		Expect(l.Status.Code).To(Equal("docs"))
		Eventually(func(g Gomega) []string { return eventsFor(g, ns, "wanter") }).
			Should(ContainElement("Normal CodeAssigned: assigned code docs (was CodeConflict)"))
		Expect(meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionStalled)).To(BeNil())
	})

	It("moves a hashed code when the URL changes and keeps a custom code", func() {
		Expect(k8sClient.Create(suiteCtx, newLink(ns, "hashed", "https://example.com/v1"))).To(Succeed())
		custom := newLink(ns, "custom", "https://example.com/v1")
		custom.Spec.Code = "mine"
		Expect(k8sClient.Create(suiteCtx, custom)).To(Succeed())
		Expect(eventuallyReady(ns, "hashed").Status.Code).To(Equal(shortcode.Code("https://example.com/v1", ns, 0)))
		eventuallyReady(ns, "custom")

		for _, name := range []string{"hashed", "custom"} {
			l := getLink(Default, ns, name)
			l.Spec.URL = "https://example.com/v2"
			Expect(k8sClient.Update(suiteCtx, l)).To(Succeed())
		}
		Eventually(func(g Gomega) string {
			_, _, l := readyReason(g, ns, "hashed")
			return l.Status.Code
		}).Should(Equal(shortcode.Code("https://example.com/v2", ns, 0)))
		Eventually(func(g Gomega) string {
			_, _, l := readyReason(g, ns, "custom")
			return l.Status.CanonicalURL
		}).Should(Equal("https://example.com/v2"))
		Expect(getLink(Default, ns, "custom").Status.Code).To(Equal("mine"))

		// A first code makes no event (status says it); a short URL that
		// changed does, once. The custom code did not change: no event.
		moved := fmt.Sprintf("Normal CodeAssigned: assigned code %s (was %s)",
			shortcode.Code("https://example.com/v2", ns, 0), shortcode.Code("https://example.com/v1", ns, 0))
		Eventually(func(g Gomega) []string { return eventsFor(g, ns, "hashed") }).Should(ContainElement(moved))
		Consistently(func(g Gomega) []string { return eventsFor(g, ns, "hashed") }, time.Second).Should(Equal([]string{moved}))
		Expect(eventsFor(Default, ns, "custom")).To(BeEmpty())
	})

	It("marks a link Expired at its expiry instant, with an event", func() {
		l := newLink(ns, "brief", "https://example.com/brief")
		l.Spec.TTL = &metav1.Duration{Duration: 3 * time.Second}
		Expect(k8sClient.Create(suiteCtx, l)).To(Succeed())
		ready := eventuallyReady(ns, "brief")
		Expect(ready.Status.ExpiresAt).NotTo(BeNil())
		Expect(ready.Status.ExpiresAt.Time).To(BeTemporally("==", ready.CreationTimestamp.Add(3*time.Second)))
		Expect(meta.IsStatusConditionFalse(ready.Status.Conditions, linkv1.ConditionExpired)).To(BeTrue())
		Expect(ready.Status.ConfirmedGeneration).To(Equal(ready.Generation), "the typed contract: code confirmed for this spec")
		Expect(ready.Status.FinishedAt).To(BeNil())

		// Ready stays True: expiry is the state the spec asks for (see the
		// GitOps health tests); state and the message say it no longer redirects.
		expired := eventuallyState(ns, "brief", metav1.ConditionTrue, linkv1.ReasonExpired, linkv1.StateExpired)
		Expect(meta.FindStatusCondition(expired.Status.Conditions, linkv1.ConditionReady).Message).To(ContainSubstring("answers 410 Gone"))
		Expect(time.Now()).To(BeTemporally(">=", ready.Status.ExpiresAt.Time))
		Expect(expired.Status.Code).To(Equal(ready.Status.Code), "an expired link keeps its code: it answers 410")
		Expect(expired.Status.ConfirmedGeneration).To(Equal(expired.Generation))
		Expect(expired.Status.FinishedAt).NotTo(BeNil())
		Expect(expired.Status.FinishedAt.Time).To(BeTemporally("==", ready.Status.ExpiresAt.Time), "finished at its expiry instant")
		Expect(meta.IsStatusConditionTrue(expired.Status.Conditions, linkv1.ConditionExpired)).To(BeTrue())
		Eventually(func(g Gomega) []string { return eventsFor(g, ns, "brief") }).
			Should(ContainElement(ContainSubstring("Normal Expired")))
	})

	It("marks a link Exhausted once its uses reach maxUses", func() {
		l := newLink(ns, "counted", "https://example.com/counted")
		l.Spec.MaxUses = ptrInt64(2)
		Expect(k8sClient.Create(suiteCtx, l)).To(Succeed())
		l = eventuallyReady(ns, "counted")
		l.Status.Uses = 2
		Expect(k8sClient.Status().Update(suiteCtx, l)).To(Succeed())
		l = eventuallyState(ns, "counted", metav1.ConditionTrue, linkv1.ReasonExhausted, linkv1.StateExhausted)
		Expect(meta.IsStatusConditionTrue(l.Status.Conditions, linkv1.ConditionExhausted)).To(BeTrue())
		Expect(meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionReady).Message).To(ContainSubstring("answers 410 Gone"))
		Eventually(func(g Gomega) []string { return eventsFor(g, ns, "counted") }).
			Should(ContainElement(ContainSubstring("Normal Exhausted")))
		Expect(l.Status.FinishedAt).NotTo(BeNil(), "the finish is recorded for the redirectors and the reaper")

		By("raising maxUses revives it and clears finishedAt")
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := getLink(Default, ns, "counted")
			cur.Spec.MaxUses = ptrInt64(5)
			return k8sClient.Update(suiteCtx, cur)
		})).To(Succeed())
		l = eventuallyReady(ns, "counted")
		Expect(l.Status.FinishedAt).To(BeNil())
		Expect(l.Status.Uses).To(Equal(int64(2)), "uses survive spec edits")
	})

	It("stalls on a URL the CRD admits but the canonicalizer refuses, until the spec changes", func() {
		// A host of bad characters: the CRD leaves hosts to the canonicalizer
		// (userinfo, say, is refused at admission now).
		Expect(k8sClient.Create(suiteCtx, newLink(ns, "phish", "https://bank example.com/"))).To(Succeed())
		l := eventuallyState(ns, "phish", metav1.ConditionFalse, linkv1.ReasonInvalidURL, linkv1.StateInvalid)
		Expect(l.Status.Code).To(BeEmpty())
		Expect(meta.IsStatusConditionTrue(l.Status.Conditions, linkv1.ConditionStalled)).To(BeTrue())
		Expect(meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionReady).Message).To(ContainSubstring("host"))
		Eventually(func(g Gomega) []string { return eventsFor(g, ns, "phish") }).
			Should(ContainElement(ContainSubstring("Warning InvalidURL")))
		rv := l.ResourceVersion
		Consistently(func(g Gomega) string { return getLink(g, ns, "phish").ResourceVersion }).
			WithTimeout(2*time.Second).Should(Equal(rv), "not retried: no status writes")

		l.Spec.URL = "https://evil.example/"
		Expect(k8sClient.Update(suiteCtx, l)).To(Succeed())
		eventuallyReady(ns, "phish")
	})
})

var _ = Describe("Code uniqueness under concurrency", func() {
	It("leaves exactly one of 30 links claiming one custom code Ready, the oldest, with two managers", func() {
		ns := newNamespace("race")
		runLinkManagers(ns, 2)
		const n = 30
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				l := newLink(ns, fmt.Sprintf("claim-%02d", (i*7)%n), fmt.Sprintf("https://example.com/%d", i))
				l.Spec.Code = "launch"
				errs <- k8sClient.Create(suiteCtx, l)
			}(i)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			Expect(err).NotTo(HaveOccurred())
		}

		var list linkv1.ShortLinkList
		Expect(k8sClient.List(suiteCtx, &list, client.InNamespace(ns))).To(Succeed())
		sort.Slice(list.Items, func(i, j int) bool {
			a, b := list.Items[i], list.Items[j]
			if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
				return a.CreationTimestamp.Before(&b.CreationTimestamp)
			}
			return a.Name < b.Name
		})
		oldest := list.Items[0].Name

		settled := func(g Gomega) {
			var list linkv1.ShortLinkList
			g.Expect(k8sClient.List(suiteCtx, &list, client.InNamespace(ns))).To(Succeed())
			g.Expect(list.Items).To(HaveLen(n))
			for _, l := range list.Items {
				g.Expect(l.Status.ObservedGeneration).To(Equal(l.Generation))
				ready := meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionReady)
				g.Expect(ready).NotTo(BeNil())
				if l.Name == oldest {
					g.Expect(ready.Reason).To(Equal(linkv1.ReasonCodeAssigned), l.Name)
					g.Expect(l.Status.State).To(Equal(linkv1.StateActive), l.Name)
					g.Expect(l.Status.Code).To(Equal("launch"))
				} else {
					g.Expect(ready.Reason).To(Equal(linkv1.ReasonCodeConflict), l.Name)
					g.Expect(l.Status.State).To(Equal(linkv1.StateConflict), l.Name)
					g.Expect(l.Status.Code).To(BeEmpty(), l.Name)
				}
			}
		}
		Eventually(settled).WithTimeout(60 * time.Second).Should(Succeed())
		Consistently(settled).WithTimeout(3 * time.Second).Should(Succeed())
	})
})

var _ = Describe("Hashed codes under concurrency", func() {
	It("never shows two targets Ready under one code while links with one URL and different expiries arrive at once", func() {
		ns := newNamespace("hashrace")
		wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		w, err := wc.Watch(suiteCtx, &linkv1.ShortLinkList{}, client.InNamespace(ns))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(w.Stop)
		runLinkManagers(ns, 1)

		const n = 6
		base := time.Now().Add(24 * time.Hour).Truncate(time.Second)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer GinkgoRecover()
				defer wg.Done()
				l := newLink(ns, fmt.Sprintf("sale-%d", i), "https://example.com/sale")
				exp := metav1.NewTime(base.Add(time.Duration(i) * time.Hour))
				l.Spec.ExpiresAt = &exp
				Expect(k8sClient.Create(suiteCtx, l)).To(Succeed())
			}(i)
		}
		wg.Wait()

		// Replay every state the API server went through.
		readyCode := map[string]string{}
		for len(readyCode) < n || !distinct(readyCode) {
			var ev watch.Event
			Eventually(w.ResultChan()).WithTimeout(30 * time.Second).Should(Receive(&ev))
			l := ev.Object.(*linkv1.ShortLink)
			delete(readyCode, l.Name)
			if meta.IsStatusConditionTrue(l.Status.Conditions, linkv1.ConditionReady) {
				readyCode[l.Name] = l.Status.Code
			}
			Expect(distinct(readyCode)).To(BeTrue(), "two targets Ready under one code: %v", readyCode)
		}
		codes := shortcode.Codes("https://example.com/sale", ns)
		Expect(readyCode).To(HaveLen(n))
		for _, c := range readyCode {
			Expect(codes[:n]).To(ContainElement(c))
		}
	})
})

// distinct reports whether no two links hold one code.
func distinct(codes map[string]string) bool {
	seen := map[string]bool{}
	for _, c := range codes {
		if seen[c] {
			return false
		}
		seen[c] = true
	}
	return true
}

func ptrInt64(v int64) *int64 { return &v }
