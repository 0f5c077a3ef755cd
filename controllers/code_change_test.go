package controllers

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/redirect"
)

// startRedirector runs a redirector serving ns, as cmd/redirector wires it
// (its own manager and informers, the fasthttp redirect port on a free
// local port), until the test ends, and returns the base URL of its
// redirect port once it is ready.
func startRedirector(ns string) string {
	GinkgoHelper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  redirect.CacheOptions(),
	})
	Expect(err).NotTo(HaveOccurred())
	red := redirect.New(redirect.Options{Namespaces: []string{ns}, Registry: prometheus.NewRegistry(), Log: ctrl.Log.WithName("redirector")})
	Expect(red.SetupWithManager(mgr)).To(Succeed())
	srv := redirect.NewServer("127.0.0.1:0", red, redirect.DefaultServerOptions())
	Expect(srv.Listen()).To(Succeed())
	Expect(mgr.Add(srv)).To(Succeed())
	ctx, cancel := context.WithCancel(suiteCtx)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	DeferCleanup(func() {
		cancel()
		Eventually(done).WithTimeout(30 * time.Second).Should(BeClosed())
	})
	Eventually(red.Ready).WithTimeout(30 * time.Second).Should(BeTrue())
	return "http://" + srv.Addr().String()
}

// click is the status and Location a GET of base+path gets.
type click struct {
	status   int
	location string
}

var noFollow = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func get(base, path string) (click, error) {
	resp, err := noFollow.Get(base + path)
	if err != nil {
		return click{}, err
	}
	_ = resp.Body.Close()
	return click{resp.StatusCode, resp.Header.Get("Location")}, nil
}

// clicker clicks a link's old and new short URL, one after the other,
// until stopped, and keeps every round in which the link answered under
// neither: the old code must answer until the new one does (the index
// adds a link's new code before it drops the old).
type clicker struct {
	rounds   atomic.Int64
	mu       sync.Mutex
	failures []string
	stop     chan struct{}
	done     chan struct{}
}

func startClicker(base, oldPath, newPath, location string) *clicker {
	c := &clicker{stop: make(chan struct{}), done: make(chan struct{})}
	want := click{http.StatusFound, location}
	go func() {
		defer close(c.done)
		tick := time.NewTicker(5 * time.Millisecond) // pace, not a wait: about 200 rounds a second
		defer tick.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-tick.C:
			}
			old, err := get(base, oldPath)
			if err == nil && old != want {
				var now click
				if now, err = get(base, newPath); err == nil && now != want {
					err = fmt.Errorf("%s answered %d %q, then %s answered %d %q", oldPath, old.status, old.location, newPath, now.status, now.location)
				}
			}
			if err != nil {
				c.mu.Lock()
				c.failures = append(c.failures, err.Error())
				c.mu.Unlock()
			}
			c.rounds.Add(1)
		}
	}()
	DeferCleanup(c.halt)
	return c
}

// waitRounds waits until the clicker has clicked n more rounds.
func (c *clicker) waitRounds(n int64) {
	GinkgoHelper()
	target := c.rounds.Load() + n
	Eventually(c.rounds.Load).WithTimeout(30 * time.Second).Should(BeNumerically(">=", target))
}

func (c *clicker) halt() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	<-c.done
}

func (c *clicker) failed() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failures
}

func setCode(ns, name, code string) {
	GinkgoHelper()
	// As kubectl patch sl NAME --type merge -p '{"spec":{"code":"..."}}'.
	patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"code":%q}}`, code))
	Expect(k8sClient.Patch(suiteCtx, newLink(ns, name, ""), patch)).To(Succeed())
}

func readyMessage(l *linkv1.ShortLink) string {
	return meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionReady).Message
}

var _ = Describe("A change of code (issue 54)", func() {
	var ns, base string
	BeforeEach(func() {
		ns = newNamespace("move")
		runLinkManagers(ns, 1)
		base = startRedirector(ns)
	})

	// The URL as the redirect sends it: written, not canonical.
	const landingURL = "https://example.com/landing/?utm_source=linkforge&lang=en"

	It("keeps serving the old code while the new one is held by an older link, says who holds it, and moves once it is free", func() {
		createLink(ns, "guide", "https://example.com/guide", func(l *linkv1.ShortLink) { l.Spec.Code = "handbook" })
		createLink(ns, "landing", landingURL, func(l *linkv1.ShortLink) { l.Spec.Code = "landing" })
		eventuallyReady(ns, "guide")
		eventuallyReady(ns, "landing")
		Eventually(func() (click, error) { return get(base, "/"+ns+"/landing") }).
			Should(Equal(click{http.StatusFound, landingURL}))

		clicks := startClicker(base, "/"+ns+"/landing", "/"+ns+"/handbook", landingURL)
		clicks.waitRounds(10)
		By("a typo: spec.code moves to a code an older link holds")
		setCode(ns, "landing", "handbook")
		l := eventuallyState(ns, "landing", metav1.ConditionFalse, linkv1.ReasonCodeConflict, linkv1.StateKept)
		Expect(l.Status.Code).To(Equal("landing"), "it keeps the code it held")
		Expect(l.Status.ConfirmedGeneration).To(Equal(l.Generation), "confirmed for its current spec: the redirectors serve it")
		Expect(readyMessage(l)).To(And(ContainSubstring(`code "handbook" is held by ShortLink "guide"`), ContainSubstring("code landing")))
		Expect(meta.IsStatusConditionTrue(l.Status.Conditions, linkv1.ConditionStalled)).To(BeTrue(),
			"Stalled: it waits for guide, which takes precedence, to let go")
		Eventually(func(g Gomega) []string { return eventsFor(g, ns, "landing") }).
			Should(ContainElement(ContainSubstring(`Warning CodeConflict: code "handbook" is held by ShortLink "guide"`)))
		clicks.waitRounds(50)
		Expect(clicks.failed()).To(BeEmpty(), "the old short URL answered at every click")
		Expect(get(base, "/"+ns+"/handbook")).To(Equal(click{http.StatusFound, "https://example.com/guide"}), "the new code stays guide's")

		By("the wanted code is freed: the link moves to it")
		Expect(k8sClient.Delete(suiteCtx, newLink(ns, "guide", ""))).To(Succeed())
		l = eventuallyReady(ns, "landing")
		Expect(l.Status.Code).To(Equal("handbook"))
		Expect(meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionStalled)).To(BeNil())
		Eventually(func() (click, error) { return get(base, "/"+ns+"/handbook") }).
			Should(Equal(click{http.StatusFound, landingURL}))
		clicks.waitRounds(10)
		clicks.halt()
		By(fmt.Sprintf("%d rounds of clicks from before the edit to after the move", clicks.rounds.Load()))
		Expect(clicks.failed()).To(BeEmpty(), "the link answered under its old code until it answered under its new one")
		Eventually(func(g Gomega) []string { return eventsFor(g, ns, "landing") }).
			Should(ContainElement("Normal CodeAssigned: assigned code handbook (was landing)"))
	})

	It("keeps serving the old code while a younger holder of the new one moves away", func() {
		createLink(ns, "landing", landingURL, func(l *linkv1.ShortLink) { l.Spec.Code = "landing" })
		eventuallyReady(ns, "landing")
		createLink(ns, "young", "https://example.com/young", func(l *linkv1.ShortLink) { l.Spec.Code = "promo" })
		eventuallyReady(ns, "young")
		Eventually(func() (click, error) { return get(base, "/"+ns+"/landing") }).
			Should(Equal(click{http.StatusFound, landingURL}))

		clicks := startClicker(base, "/"+ns+"/landing", "/"+ns+"/promo", landingURL)
		clicks.waitRounds(10)
		setCode(ns, "landing", "promo")
		l := eventuallyReady(ns, "landing")
		Expect(l.Status.Code).To(Equal("promo"), "it takes the code by precedence")
		eventuallyState(ns, "young", metav1.ConditionFalse, linkv1.ReasonCodeConflict, linkv1.StateConflict)
		clicks.waitRounds(10)
		clicks.halt()
		By(fmt.Sprintf("%d rounds of clicks from before the edit to after the move", clicks.rounds.Load()))
		Expect(clicks.failed()).To(BeEmpty(), "the link answered under its old code until it answered under its new one")
	})

	It("gives a new link whose custom code is taken nothing to serve, and says who holds the code and how to pick another", func() {
		createLink(ns, "guide", "https://example.com/guide", func(l *linkv1.ShortLink) { l.Spec.Code = "handbook" })
		eventuallyReady(ns, "guide")
		createLink(ns, "promo", "https://example.com/sale", func(l *linkv1.ShortLink) { l.Spec.Code = "handbook" })
		l := eventuallyState(ns, "promo", metav1.ConditionFalse, linkv1.ReasonCodeConflict, linkv1.StateConflict)
		Expect(l.Status.Code).To(BeEmpty())
		Expect(l.Status.ConfirmedGeneration).To(BeZero())
		Expect(readyMessage(l)).To(And(ContainSubstring(`code "handbook" is held by ShortLink "guide"`), ContainSubstring("serves nothing"),
			ContainSubstring("choose another spec.code")))
		Consistently(func() (click, error) { return get(base, "/"+ns+"/handbook") }, time.Second).
			Should(Equal(click{http.StatusFound, "https://example.com/guide"}), "the code stays the holder's")
	})
})

// clickWords is how a message names the answer a click got: "302 Found"
// and its Location, or "410 Gone".
func clickWords(c click) []string {
	words := []string{fmt.Sprintf("%d %s", c.status, http.StatusText(c.status))}
	if c.location != "" {
		words = append(words, c.location)
	}
	return words
}

var _ = Describe("Ready messages (issue 54)", func() {
	It("say what a click on the redirector gets: the Location as the redirect sends it, expiredURL, the namespace's fallback, activation", func() {
		ns := newNamespace("words")
		runLinkManagers(ns, 1)
		base := startRedirector(ns)
		past := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
		later := metav1.NewTime(time.Now().Add(time.Hour).Truncate(time.Second))
		createLink(ns, "overview", "https://example.com/overview/?utm_source=linkforge&lang=en")
		createLink(ns, "sale", "https://example.com/sale", func(l *linkv1.ShortLink) {
			l.Spec.ExpiresAt, l.Spec.ExpiredURL = &past, "https://example.com/sale-is-over"
		})
		createLink(ns, "ended", "https://example.com/ended", func(l *linkv1.ShortLink) { l.Spec.ExpiresAt = &past })
		createLink(ns, "later", "https://example.com/later", func(l *linkv1.ShortLink) { l.Spec.ActivatesAt = &later })

		for _, c := range []struct {
			name   string
			reason string
			state  linkv1.LinkState
		}{
			{"overview", linkv1.ReasonCodeAssigned, linkv1.StateActive},
			{"sale", linkv1.ReasonExpired, linkv1.StateExpired},
			{"ended", linkv1.ReasonExpired, linkv1.StateExpired},
			{"later", linkv1.ReasonScheduled, linkv1.StateScheduled},
		} {
			l := eventuallyState(ns, c.name, metav1.ConditionTrue, c.reason, c.state)
			msg := readyMessage(l)
			var got click
			Eventually(func(g Gomega) {
				var err error
				got, err = get(base, "/"+ns+"/"+l.Status.Code)
				g.Expect(err).NotTo(HaveOccurred())
				for _, w := range clickWords(got) {
					g.Expect(msg).To(ContainSubstring(w), "%s: the redirector answers %d %q", c.name, got.status, got.location)
				}
			}).Should(Succeed())
			By(fmt.Sprintf("%s: %d %s; Ready: %s", c.name, got.status, got.location, msg))
		}
		Expect(readyMessage(getLink(Default, ns, "overview"))).To(ContainSubstring("redirects to https://example.com/overview/?utm_source=linkforge&lang=en with 302 Found"),
			"spec.url as the redirect sends it, not its canonical form")
		Expect(readyMessage(getLink(Default, ns, "sale"))).NotTo(ContainSubstring("410"), "it redirects to its expiredURL")
		Eventually(func(g Gomega) []string { return eventsFor(g, ns, "sale") }).
			Should(ContainElement(ContainSubstring("redirects to https://example.com/sale-is-over with 302 Found")))

		By("a gone fallback set on the namespace: the messages of finished links follow")
		nsObj := &corev1.Namespace{}
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Name: ns}, nsObj)).To(Succeed())
		nsObj.Annotations = map[string]string{"linkforge.io/gone-redirect": "https://example.com/this-link-has-ended"}
		Expect(k8sClient.Update(suiteCtx, nsObj)).To(Succeed())
		Eventually(func() (click, error) { return get(base, "/"+ns+"/"+getLink(Default, ns, "ended").Status.Code) }).
			Should(Equal(click{http.StatusFound, "https://example.com/this-link-has-ended"}))
		Eventually(func(g Gomega) string { return readyMessage(getLink(g, ns, "ended")) }).
			Should(ContainSubstring("redirects to https://example.com/this-link-has-ended with 302 Found"))
		Expect(readyMessage(getLink(Default, ns, "sale"))).To(ContainSubstring("https://example.com/sale-is-over"), "expiredURL comes before the fallback")
	})
})
