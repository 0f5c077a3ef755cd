package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/shortcode"
)

// runFeatureManager starts one manager with the ShortLink controller on ns,
// its code metrics in a registry of its own, which it returns; mutate
// changes the reconciler before it starts.
func runFeatureManager(ns string, mutate func(*ShortLinkReconciler)) *prometheus.Registry {
	GinkgoHelper()
	reg := prometheus.NewRegistry()
	opts, index := inNamespace(ns)
	startManagerWith(opts, func(ctx context.Context, mgr ctrl.Manager) error {
		r := &ShortLinkReconciler{
			Client:                  mgr.GetClient(),
			Recorder:                mgr.GetEventRecorder("linkforge-manager"),
			Clock:                   clock.RealClock{},
			RedirectBaseURL:         "http://go.example.com/",
			MaxConcurrentReconciles: 4,
			Index:                   index,
			Metrics:                 reg,
		}
		if mutate != nil {
			mutate(r)
		}
		return r.SetupWithManager(ctx, mgr)
	})
	return reg
}

// gathered returns the value of the sample of family name whose labels
// include labels (name=value pairs), or -1 if there is none.
func gathered(g Gomega, reg prometheus.Gatherer, name string, labels ...string) float64 {
	families, err := reg.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m, labels) {
				if c := m.GetCounter(); c != nil {
					return c.GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, p := range m.GetLabel() {
			if p.GetName() == labels[i] && p.GetValue() == labels[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func withDedup(p linkv1.DedupPolicy) func(*linkv1.ShortLink) {
	return func(l *linkv1.ShortLink) { l.Spec.DedupPolicy = p }
}

func createLink(ns, name, url string, mutate ...func(*linkv1.ShortLink)) {
	GinkgoHelper()
	l := newLink(ns, name, url)
	for _, m := range mutate {
		m(l)
	}
	Expect(k8sClient.Create(suiteCtx, l)).To(Succeed())
}

// setDedup changes a link's dedupPolicy.
func setDedup(ns, name string, p linkv1.DedupPolicy) {
	GinkgoHelper()
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := getLink(Default, ns, name)
		cur.Spec.DedupPolicy = p
		return k8sClient.Update(suiteCtx, cur)
	})).To(Succeed())
}

// codeAt is the code the link holds once its current spec is handled.
func codeAt(ns, name string) string {
	GinkgoHelper()
	return eventuallyReady(ns, name).Status.Code
}

var _ = Describe("Dedup control", func() {
	const url = "https://example.com/dedup"
	var ns string
	salt := func(s int) string { return shortcode.Code("https://example.com/dedup", ns, s) }

	It("gives a link with dedupPolicy Never the next free salt and leaves the oldest on salt 0", func() {
		ns = newNamespace("dedup")
		runFeatureManager(ns, nil)
		createLink(ns, "first", url)
		Expect(codeAt(ns, "first")).To(Equal(salt(0)))
		createLink(ns, "own", url, withDedup(linkv1.DedupNever))
		createLink(ns, "copy", url)
		createLink(ns, "explicit-copy", url, withDedup(linkv1.DedupIfSameTarget))
		Expect(codeAt(ns, "own")).To(Equal(salt(1)))
		Expect(eventuallyReady(ns, "own").Status.Salt).To(Equal(int32(1)))
		Expect(codeAt(ns, "copy")).To(Equal(salt(0)), "dedup on: shares the oldest link's code")
		Expect(codeAt(ns, "explicit-copy")).To(Equal(salt(0)))
		createLink(ns, "own-too", url, withDedup(linkv1.DedupNever))
		Expect(codeAt(ns, "own-too")).To(Equal(salt(2)), "salt 1 is held by a link with dedup off")
	})

	It("moves only the link whose dedup is turned off, and nothing when it is turned on again", func() {
		ns = newNamespace("dedup")
		runFeatureManager(ns, nil)
		createLink(ns, "old", url)
		Expect(codeAt(ns, "old")).To(Equal(salt(0)))
		createLink(ns, "young", url)
		Expect(codeAt(ns, "young")).To(Equal(salt(0)))

		By("turning dedup off on the older link: it moves, the younger keeps the code")
		setDedup(ns, "old", linkv1.DedupNever)
		Eventually(func() string { return codeAt(ns, "old") }).Should(Equal(salt(1)))
		Consistently(func(g Gomega) string { return getLink(g, ns, "young").Status.Code }).
			WithTimeout(2 * time.Second).Should(Equal(salt(0)))
		Expect(getLink(Default, ns, "young").Status.State).To(Equal(linkv1.StateActive), "never Pending meanwhile")

		By("turning it on again: the link keeps its own code (published codes do not move)")
		setDedup(ns, "old", linkv1.DedupIfSameTarget)
		Consistently(func() string { return codeAt(ns, "old") }).WithTimeout(2 * time.Second).Should(Equal(salt(1)))
		Expect(getLink(Default, ns, "young").Status.Code).To(Equal(salt(0)))
	})

	It("keeps a custom code shared when dedup is turned off, and says so", func() {
		ns = newNamespace("dedup")
		runFeatureManager(ns, nil)
		createLink(ns, "a", url, func(l *linkv1.ShortLink) { l.Spec.Code = "shared" })
		Expect(codeAt(ns, "a")).To(Equal("shared"))
		createLink(ns, "b", url, func(l *linkv1.ShortLink) { l.Spec.Code = "shared" })
		Expect(codeAt(ns, "b")).To(Equal("shared"))
		setDedup(ns, "b", linkv1.DedupNever)
		Eventually(func(g Gomega) string {
			_, _, l := readyReason(g, ns, "b")
			return meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionReady).Message
		}).Should(ContainSubstring(`shared with ShortLink "a" although dedupPolicy is Never`))
		Expect(getLink(Default, ns, "a").Status.Code).To(Equal("shared"))
	})

	It("gives every link a code of its own with the manager's --dedup=false, unless its spec asks to share", func() {
		ns = newNamespace("dedup")
		runFeatureManager(ns, func(r *ShortLinkReconciler) { r.DisableDedup = true })
		createLink(ns, "a", url)
		Expect(codeAt(ns, "a")).To(Equal(salt(0)))
		createLink(ns, "b", url)
		Expect(codeAt(ns, "b")).To(Equal(salt(1)))
		createLink(ns, "c", url, withDedup(linkv1.DedupIfSameTarget))
		Expect(codeAt(ns, "c")).To(Equal(salt(2)), "a and b do not share: c shares with neither")
		createLink(ns, "d", url, withDedup(linkv1.DedupIfSameTarget))
		Expect(codeAt(ns, "d")).To(Equal(salt(2)), "d shares with c, the other link that asks to")
	})
})

var _ = Describe("Activation time", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace("activation")
		runFeatureManager(ns, nil)
	})

	It("holds the code of a link that activates later, reports it Scheduled, and makes it Active at activatesAt", func() {
		// The test must see the link Scheduled before it activates, and
		// nothing bounds how soon it can (a create, a reconcile, a read): a
		// machine too slow for the lead tries again with a new link and
		// twice the lead. A controller that never reports Scheduled still
		// fails, after four tries.
		missIsSlowness := NewGomega(func(string, ...int) {})
		var name, url string
		var at time.Time
		var l *linkv1.ShortLink
		for try, lead := 0, 4*time.Second; ; try, lead = try+1, 2*lead {
			name, url = fmt.Sprintf("later-%d", try), fmt.Sprintf("https://example.com/later-%d", try)
			at = time.Now().Add(lead).Truncate(time.Second).Add(time.Second)
			createLink(ns, name, url, func(l *linkv1.ShortLink) {
				l.Spec.ActivatesAt = &metav1.Time{Time: at}
			})
			seen := missIsSlowness.Eventually(func(g Gomega) {
				status, reason, got := readyReason(g, ns, name)
				g.Expect(reason).To(Equal(linkv1.ReasonScheduled))
				g.Expect(status).To(Equal(metav1.ConditionTrue))
				g.Expect(got.Status.State).To(Equal(linkv1.StateScheduled))
				l = got
			}).WithTimeout(time.Until(at)).Should(Succeed())
			if seen && time.Now().Before(at) {
				break
			}
			Expect(try).To(BeNumerically("<", 3), "%s was not seen Scheduled before its activatesAt, %s after its create", name, lead)
		}
		Expect(l.Status.Code).To(Equal(shortcode.Code(url, ns, 0)))
		Expect(l.Status.ConfirmedGeneration).To(Equal(l.Generation), "confirmed: the redirectors have it and start on their own clock")
		Expect(meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionReady).Message).
			To(ContainSubstring("redirects from " + at.UTC().Format(time.RFC3339)))

		By("at activatesAt the controller is back, without any other event")
		l = eventuallyReady(ns, name)
		Expect(time.Now()).To(BeTemporally(">=", at))
		Expect(l.Status.Code).To(Equal(shortcode.Code(url, ns, 0)), "the same code")
		Eventually(func(g Gomega) []string { return eventsFor(g, ns, name) }).
			Should(ContainElement(ContainSubstring("Normal Activated")))
	})

	It("makes a link with a past activatesAt Active at once", func() {
		createLink(ns, "past", "https://example.com/past", func(l *linkv1.ShortLink) {
			l.Spec.ActivatesAt = &metav1.Time{Time: time.Now().Add(-time.Hour)}
		})
		eventuallyReady(ns, "past")
	})

	It("reports a link whose ttl ends before its activation Expired", func() {
		createLink(ns, "never", "https://example.com/never", func(l *linkv1.ShortLink) {
			l.Spec.ActivatesAt = &metav1.Time{Time: time.Now().Add(time.Hour)}
			l.Spec.TTL = &metav1.Duration{Duration: time.Second}
		})
		eventuallyState(ns, "never", metav1.ConditionTrue, linkv1.ReasonExpired, linkv1.StateExpired)
	})

	It("gives two links of one URL with different activation times different codes", func() {
		at := &metav1.Time{Time: time.Now().Add(time.Hour).Truncate(time.Second)}
		createLink(ns, "now", "https://example.com/both")
		createLink(ns, "soon", "https://example.com/both", func(l *linkv1.ShortLink) { l.Spec.ActivatesAt = at })
		Expect(codeAt(ns, "now")).To(Equal(shortcode.Code("https://example.com/both", ns, 0)))
		l := eventuallyState(ns, "soon", metav1.ConditionTrue, linkv1.ReasonScheduled, linkv1.StateScheduled)
		Expect(l.Status.Code).To(Equal(shortcode.Code("https://example.com/both", ns, 1)))
	})

	It("refuses an activatesAt that is not before expiresAt", func() {
		at := metav1.NewTime(time.Now().Add(time.Hour).Truncate(time.Second))
		l := newLink(ns, "backwards", "https://example.com/backwards")
		l.Spec.ActivatesAt, l.Spec.ExpiresAt = &at, &at
		err := k8sClient.Create(suiteCtx, l)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("activatesAt must be before expiresAt"))
	})
})

var _ = Describe("Code metrics", func() {
	It("count dedup hits, salted codes, conflicts and invalid URLs, and gauge codes held and shared links per namespace", func() {
		ns := newNamespace("metrics")
		reg := runFeatureManager(ns, func(r *ShortLinkReconciler) {
			// Links whose URL says "collide" have two candidate codes, so that
			// a third one is in conflict.
			r.Codes = func(canonical, namespace string) []string {
				if strings.Contains(canonical, "collide") {
					return []string{"collideA", "collideB"}
				}
				codes := shortcode.Codes(canonical, namespace)
				return codes[:]
			}
		})
		value := func(name string, labels ...string) func(Gomega) float64 {
			return func(g Gomega) float64 { return gathered(g, reg, name, labels...) }
		}
		const (
			hits      = "linkforge_codes_dedup_hits_total"
			salted    = "linkforge_codes_salted_total"
			conflicts = "linkforge_codes_conflicts_total"
			invalid   = "linkforge_codes_invalid_urls_total"
			held      = "linkforge_codes_held"
			shared    = "linkforge_codes_shared_links"
		)
		for _, c := range []struct {
			name   string
			labels []string
		}{{hits, nil}, {salted, []string{"salt", "1"}}, {salted, []string{"salt", "9"}}, {conflicts, []string{"kind", "custom"}},
			{conflicts, []string{"kind", "hashed"}}, {invalid, nil}} {
			Expect(value(c.name, c.labels...)(Default)).To(BeZero(), "%s %v exists from the start, at 0", c.name, c.labels)
		}
		Expect(value(held, "namespace", ns)(Default)).To(Equal(-1.0), "no series for a namespace without codes")

		By("a link: one code held, shared by nobody")
		createLink(ns, "a", "https://example.com/m")
		codeAt(ns, "a")
		Eventually(value(held, "namespace", ns)).Should(Equal(1.0))
		Expect(value(shared, "namespace", ns)(Default)).To(BeZero())

		By("a copy: a dedup hit, two links sharing one code")
		createLink(ns, "b", "https://example.com/m")
		codeAt(ns, "b")
		Eventually(value(hits)).Should(Equal(1.0))
		Eventually(value(shared, "namespace", ns)).Should(Equal(2.0))
		Expect(value(held, "namespace", ns)(Default)).To(Equal(1.0))
		Expect(value(salted, "salt", "1")(Default)).To(BeZero(), "sharing is no salted retry")

		By("a copy with dedup off: salt 1, a code of its own")
		createLink(ns, "c", "https://example.com/m", withDedup(linkv1.DedupNever))
		Expect(eventuallyReady(ns, "c").Status.Salt).To(Equal(int32(1)))
		Eventually(value(salted, "salt", "1")).Should(Equal(1.0))
		Eventually(value(hits)).Should(Equal(1.0))
		Eventually(value(held, "namespace", ns)).Should(Equal(2.0))

		By("a custom code held by an older link")
		createLink(ns, "custom-a", "https://example.com/one", func(l *linkv1.ShortLink) { l.Spec.Code = "taken" })
		codeAt(ns, "custom-a")
		createLink(ns, "custom-b", "https://example.com/two", func(l *linkv1.ShortLink) { l.Spec.Code = "taken" })
		eventuallyState(ns, "custom-b", metav1.ConditionFalse, linkv1.ReasonCodeConflict, linkv1.StateConflict)
		Eventually(value(conflicts, "kind", "custom")).Should(Equal(1.0))

		By("a hashed link whose candidates are all held, after one salted retry")
		createLink(ns, "collide-1", "https://example.com/collide/1")
		codeAt(ns, "collide-1")
		createLink(ns, "collide-2", "https://example.com/collide/2")
		Expect(codeAt(ns, "collide-2")).To(Equal("collideB"))
		Eventually(value(salted, "salt", "1")).Should(Equal(2.0))
		createLink(ns, "collide-3", "https://example.com/collide/3")
		eventuallyState(ns, "collide-3", metav1.ConditionFalse, linkv1.ReasonCodeConflict, linkv1.StateConflict)
		Eventually(value(conflicts, "kind", "hashed")).Should(Equal(1.0))

		By("a URL the canonicalizer refuses")
		createLink(ns, "bad", "https://bad host.example/")
		eventuallyState(ns, "bad", metav1.ConditionFalse, linkv1.ReasonInvalidURL, linkv1.StateInvalid)
		Eventually(value(invalid)).Should(Equal(1.0))

		By("nothing counts twice: edits that change no code, and a second reconcile of every link")
		for _, name := range []string{"a", "b", "c", "custom-b", "collide-3", "bad"} {
			Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur := getLink(Default, ns, name)
				cur.Spec.ReapPolicy = linkv1.ReapPolicyRetain // a new generation, the same target
				return k8sClient.Update(suiteCtx, cur)
			})).To(Succeed())
		}
		Eventually(func(g Gomega) {
			for _, name := range []string{"a", "b", "c", "custom-b", "collide-3", "bad"} {
				l := getLink(g, ns, name)
				g.Expect(l.Status.ObservedGeneration).To(Equal(l.Generation))
			}
		}).Should(Succeed())
		Consistently(func(g Gomega) []float64 {
			return []float64{value(hits)(g), value(salted, "salt", "1")(g), value(conflicts, "kind", "custom")(g),
				value(conflicts, "kind", "hashed")(g), value(invalid)(g)}
		}).WithTimeout(2 * time.Second).Should(Equal([]float64{1, 2, 1, 1, 1}))

		By("deleting the links: the namespace's series go away")
		for _, name := range []string{"a", "b", "c", "custom-a", "custom-b", "collide-1", "collide-2", "collide-3", "bad"} {
			Expect(k8sClient.Delete(suiteCtx, getLink(Default, ns, name))).To(Succeed())
		}
		Eventually(value(held, "namespace", ns)).Should(Equal(-1.0))
	})
})

var _ = Describe("limitNamespaces", func() {
	It("keeps the namespaces with the most codes and sums the others", func() {
		counts := map[string]*nsCodeCount{
			"a": {namespace: "a", held: 1, shared: 1},
			"b": {namespace: "b", held: 5},
			"c": {namespace: "c", held: 5, shared: 2},
			"d": {namespace: "d", held: 2, shared: 1},
		}
		Expect(limitNamespaces(counts, 2)).To(Equal([]nsCodeCount{
			{namespace: "b", held: 5}, {namespace: "c", held: 5, shared: 2}, {namespace: OtherNamespaces, held: 3, shared: 2},
		}))
		Expect(limitNamespaces(counts, 4)).To(HaveLen(4), "no _other series when every namespace fits")
		Expect(limitNamespaces(counts, 0)).To(Equal([]nsCodeCount{{namespace: OtherNamespaces, held: 13, shared: 4}}))
	})
})
