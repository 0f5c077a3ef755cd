package controllers

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/shortcode"
)

// useAt writes status.lastUsedAt as a redirector's flush does.
func useAt(ns, name string, at time.Time) {
	GinkgoHelper()
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l := getLink(Default, ns, name)
		l.Status.Uses++
		l.Status.LastUsedAt = &metav1.Time{Time: at}
		return k8sClient.Status().Update(suiteCtx, l)
	})).To(Succeed())
}

var _ = Describe("Idle expiry", func() {
	const grace = time.Second
	var ns string
	BeforeEach(func() {
		ns = newNamespace("idle")
		runFeatureManager(ns, func(r *ShortLinkReconciler) { r.IdleGrace = grace })
	})

	idleFor := func(d time.Duration) func(*linkv1.ShortLink) {
		return func(l *linkv1.ShortLink) { l.Spec.IdleTimeout = &metav1.Duration{Duration: d} }
	}

	It("finishes an unused link at creation + idleTimeout + grace, as Expired, with an event", func() {
		createLink(ns, "quiet", "https://example.com/quiet", idleFor(3*time.Second))
		l := eventuallyReady(ns, "quiet")
		c := meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionExpired)
		Expect(c).NotTo(BeNil(), "a link that can expire has the condition")
		Expect(c.Status).To(Equal(metav1.ConditionFalse))
		Expect(c.Message).To(ContainSubstring("finishes once not used for 3s"))
		deadline := l.CreationTimestamp.Add(3*time.Second + grace)

		l = eventuallyState(ns, "quiet", metav1.ConditionTrue, linkv1.ReasonExpired, linkv1.StateExpired)
		Expect(time.Now()).To(BeTemporally(">=", deadline), "not before its deadline")
		Expect(l.Status.FinishedAt).NotTo(BeNil(), "the redirectors answer 410 and the reaper counts from it")
		Expect(l.Status.FinishedAt.Time).To(BeTemporally(">=", deadline.Truncate(time.Second)))
		c = meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionExpired)
		Expect(c.Status).To(Equal(metav1.ConditionTrue))
		Expect(c.Reason).To(Equal(linkv1.ReasonIdleExpired))
		Expect(meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionReady).Message).
			To(ContainSubstring("was not used for its idleTimeout of 3s and answers 410 Gone"))
		Eventually(func(g Gomega) []string { return eventsFor(g, ns, "quiet") }).
			Should(ContainElement(ContainSubstring("Normal Expired")))

		By("a use written late, after the finish, does not revive it; a longer idleTimeout does")
		useAt(ns, "quiet", time.Now())
		Consistently(func(g Gomega) linkv1.LinkState {
			return getLink(g, ns, "quiet").Status.State
		}, 2*time.Second, 200*time.Millisecond).Should(Equal(linkv1.StateExpired))
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := getLink(Default, ns, "quiet")
			cur.Spec.IdleTimeout = &metav1.Duration{Duration: time.Hour}
			return k8sClient.Update(suiteCtx, cur)
		})).To(Succeed())
		l = eventuallyReady(ns, "quiet")
		Expect(l.Status.FinishedAt).To(BeNil())
	})

	It("moves the deadline with each newer lastUsedAt", func() {
		createLink(ns, "busy", "https://example.com/busy", idleFor(4*time.Second))
		eventuallyReady(ns, "busy")
		// Uses written every second keep it Active well past creation +
		// idleTimeout: four times the pace for a loaded machine's writes.
		start := time.Now()
		for time.Since(start) < 7*time.Second {
			useAt(ns, "busy", time.Now())
			Consistently(func(g Gomega) linkv1.LinkState {
				return getLink(g, ns, "busy").Status.State
			}, time.Second, 250*time.Millisecond).Should(Equal(linkv1.StateActive))
		}
		lastUse := getLink(Default, ns, "busy").Status.LastUsedAt.Time
		l := eventuallyState(ns, "busy", metav1.ConditionTrue, linkv1.ReasonExpired, linkv1.StateExpired)
		Expect(time.Now()).To(BeTemporally(">=", lastUse.Add(4*time.Second+grace)), "idle for idleTimeout + grace after the last use")
		Expect(l.Status.FinishedAt).NotTo(BeNil())
	})

	It("never finishes a link without idleTimeout, however long unused", func() {
		createLink(ns, "kept", "https://example.com/kept")
		l := eventuallyReady(ns, "kept")
		Expect(meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionExpired)).To(BeNil())
		useAt(ns, "kept", time.Now().Add(-time.Hour))
		Consistently(func(g Gomega) *metav1.Time {
			l := getLink(g, ns, "kept")
			g.Expect(l.Status.State).To(Equal(linkv1.StateActive))
			return l.Status.FinishedAt
		}, 3*time.Second, 250*time.Millisecond).Should(BeNil())
	})

	It("gives two links of one URL with different idleTimeouts different codes", func() {
		createLink(ns, "a-hour", "https://example.com/same", idleFor(time.Hour))
		createLink(ns, "b-two-hours", "https://example.com/same", idleFor(2*time.Hour))
		Expect(codeAt(ns, "a-hour")).To(Equal(shortcode.Code("https://example.com/same", ns, 0)))
		Eventually(func(g Gomega) int32 {
			return getLink(g, ns, "b-two-hours").Status.Salt
		}).WithTimeout(20*time.Second).Should(Equal(int32(1)), "another target: the next salt")
		eventuallyReady(ns, "b-two-hours")
	})

	It("refuses an idleTimeout under a second", func() {
		l := newLink(ns, "tiny", "https://example.com/tiny")
		l.Spec.IdleTimeout = &metav1.Duration{Duration: 500 * time.Millisecond}
		err := k8sClient.Create(suiteCtx, l)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("idleTimeout must be a duration of at least 1s"))
	})
})
