package redirect_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/redirect"
)

const (
	eventually = 30 * time.Second
	// The reflector backs off up to 30s between attempts to reach an
	// unreachable API server.
	catchUp = 90 * time.Second
)

var ctx = context.Background()

// newNamespace creates a namespace named prefix + a random suffix.
func newNamespace(prefix, domain string) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if domain != "" {
		ns.Annotations = map[string]string{redirect.DomainAnnotation: domain}
	}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	return ns
}

func setDomain(ns *corev1.Namespace, domain string) {
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(ns), ns); err != nil {
			return err
		}
		if domain == "" {
			delete(ns.Annotations, redirect.DomainAnnotation)
		} else {
			if ns.Annotations == nil {
				ns.Annotations = map[string]string{}
			}
			ns.Annotations[redirect.DomainAnnotation] = domain
		}
		return k8sClient.Update(ctx, ns)
	})).To(Succeed())
}

// createLink creates a ShortLink and writes the status a controller would:
// status.code and a Ready condition with the given reason.
func createLink(ns, name, url, code, reason string, mut ...func(*linkv1.ShortLink)) *linkv1.ShortLink {
	l := &linkv1.ShortLink{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"test": "envtest"}},
		Spec:       linkv1.ShortLinkSpec{URL: url},
	}
	for _, m := range mut {
		m(l)
	}
	Expect(k8sClient.Create(ctx, l)).To(Succeed())
	setStatus(l, code, reason)
	return l
}

func setStatus(l *linkv1.ShortLink, code, reason string) {
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(l), l); err != nil {
			return err
		}
		l.Status.Code = code
		l.Status.ObservedGeneration = l.Generation
		redirect.Decided(reason)(l)
		return k8sClient.Status().Update(ctx, l)
	})).To(Succeed())
}

func updateLink(l *linkv1.ShortLink, mut func(*linkv1.ShortLink)) {
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(l), l); err != nil {
			return err
		}
		mut(l)
		return k8sClient.Update(ctx, l)
	})).To(Succeed())
}

type answer struct {
	status   int
	location string
}

func ask(host, path string) answer { return askOf(red, host, path) }

func askOf(r *redirect.Redirector, host, path string) answer {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if host != "" {
		req.Host = host
	}
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, req)
	_, _ = io.Copy(io.Discard, rec.Result().Body)
	return answer{rec.Code, rec.Header().Get("Location")}
}

func redirectTo(loc string) answer { return answer{http.StatusFound, loc} }

var (
	notFound = answer{http.StatusNotFound, ""}
	gone     = answer{http.StatusGone, ""}
)

// expectAnswer waits until path on host answers want.
func expectAnswer(host, path string, want answer) {
	GinkgoHelper()
	Eventually(func() answer { return ask(host, path) }).WithTimeout(eventually).Should(Equal(want))
}

// afterNextSecond waits until the wall clock is a second past t, so that an
// object created next has a later creationTimestamp (second precision).
func afterNextSecond(t metav1.Time) {
	Eventually(func() bool { return time.Now().After(t.Add(time.Second)) }).
		WithTimeout(3 * time.Second).WithPolling(20 * time.Millisecond).Should(BeTrue())
}

func domainConflictEvents(nsName string) int {
	var list eventsv1.EventList
	Expect(k8sClient.List(ctx, &list, client.InNamespace(metav1.NamespaceDefault))).To(Succeed())
	n := 0
	for _, e := range list.Items {
		if e.Regarding.Kind == "Namespace" && e.Regarding.Name == nsName &&
			e.Reason == redirect.ReasonDomainConflict && e.Type == corev1.EventTypeWarning {
			n++
		}
	}
	return n
}

var _ = Describe("The redirector's index", Ordered, func() {
	It("follows creates, URL changes, code changes and deletes", func() {
		ns := newNamespace("links-", "").Name
		l := createLink(ns, "docs", " https://example.com/docs v1 ", "docs1", linkv1.ReasonCodeAssigned)
		expectAnswer("", "/"+ns+"/docs1", redirectTo("https://example.com/docs%20v1"))

		By("changing the URL: the unchecked spec is not served until the controller confirms it")
		updateLink(l, func(l *linkv1.ShortLink) { l.Spec.URL = "https://bank example.com/" })
		Consistently(func() answer { return ask("", "/"+ns+"/docs1") }).WithTimeout(time.Second).
			Should(Equal(redirectTo("https://example.com/docs%20v1")))
		updateLink(l, func(l *linkv1.ShortLink) { l.Spec.URL = "https://example.com/docs/v2" })
		setStatus(l, "docs1", linkv1.ReasonCodeAssigned)
		expectAnswer("", "/"+ns+"/docs1", redirectTo("https://example.com/docs/v2"))

		By("changing the code")
		setStatus(l, "docs2", linkv1.ReasonCodeAssigned)
		expectAnswer("", "/"+ns+"/docs2", redirectTo("https://example.com/docs/v2"))
		Expect(ask("", "/"+ns+"/docs1")).To(Equal(notFound))

		By("changing the redirect status")
		updateLink(l, func(l *linkv1.ShortLink) { l.Spec.RedirectStatus = 308 })
		setStatus(l, "docs2", linkv1.ReasonCodeAssigned)
		expectAnswer("", "/"+ns+"/docs2", answer{http.StatusPermanentRedirect, "https://example.com/docs/v2"})

		By("deleting the link")
		Expect(k8sClient.Delete(ctx, l)).To(Succeed())
		expectAnswer("", "/"+ns+"/docs2", notFound)
	})

	It("serves a link only once its hold is confirmed", func() {
		ns := newNamespace("pending-", "").Name
		pending := createLink(ns, "pending", "https://example.com/pending", "pend", linkv1.ReasonProgressing)
		// Events of one informer arrive in order: once the sentinel is
		// served, the pending link has been seen too.
		createLink(ns, "sentinel", "https://example.com/sentinel", "sentinel", linkv1.ReasonCodeAssigned)
		expectAnswer("", "/"+ns+"/sentinel", redirectTo("https://example.com/sentinel"))
		Consistently(func() answer { return ask("", "/"+ns+"/pend") }).WithTimeout(time.Second).Should(Equal(notFound))

		setStatus(pending, "pend", linkv1.ReasonCodeAssigned)
		expectAnswer("", "/"+ns+"/pend", redirectTo("https://example.com/pending"))

		By("losing the hold")
		setStatus(pending, "pend", linkv1.ReasonCodeConflict)
		expectAnswer("", "/"+ns+"/pend", notFound)
	})

	It("serves the older of two links that its cache shows holding one code", func() {
		ns := newNamespace("holders-", "").Name
		older := createLink(ns, "zz-older", "https://example.com/older", "same", linkv1.ReasonCodeAssigned)
		expectAnswer("", "/"+ns+"/same", redirectTo("https://example.com/older"))
		afterNextSecond(older.CreationTimestamp)
		// Younger, and first by name: only its age makes it lose.
		younger := createLink(ns, "aa-younger", "https://example.com/younger", "same", linkv1.ReasonCodeAssigned)
		sentinel := createLink(ns, "sentinel", "https://example.com/s", "s", linkv1.ReasonCodeAssigned)
		expectAnswer("", "/"+ns+"/s", redirectTo(sentinel.Spec.URL))
		Expect(ask("", "/"+ns+"/same")).To(Equal(redirectTo("https://example.com/older")))

		By("deleting the winner")
		Expect(k8sClient.Delete(ctx, older)).To(Succeed())
		expectAnswer("", "/"+ns+"/same", redirectTo(younger.Spec.URL))
	})

	It("answers 410 once a link expires by its clock, whatever its status says, and keeps a tombstone after its deletion", func() {
		ns := newNamespace("expiry-", "").Name
		at := metav1.NewTime(fakeClock.Now().Add(time.Hour).Truncate(time.Second))
		l := createLink(ns, "soon", "https://example.com/soon", "soon", linkv1.ReasonCodeAssigned,
			func(l *linkv1.ShortLink) { l.Spec.ExpiresAt = &at })
		expectAnswer("", "/"+ns+"/soon", redirectTo("https://example.com/soon"))

		fakeClock.Step(2 * time.Hour)
		Expect(ask("", "/"+ns+"/soon")).To(Equal(gone), "expired by the clock while status says Ready")

		By("moving expiresAt later")
		later := metav1.NewTime(fakeClock.Now().Add(time.Hour).Truncate(time.Second))
		updateLink(l, func(l *linkv1.ShortLink) { l.Spec.ExpiresAt = &later })
		setStatus(l, "soon", linkv1.ReasonCodeAssigned)
		expectAnswer("", "/"+ns+"/soon", redirectTo("https://example.com/soon"))

		By("exhausting it")
		updateLink(l, func(l *linkv1.ShortLink) { l.Spec.MaxUses = ptr.To[int64](2) })
		setStatus(l, "soon", linkv1.ReasonCodeAssigned)
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(l), l); err != nil {
				return err
			}
			l.Status.Uses = 2
			return k8sClient.Status().Update(ctx, l)
		})).To(Succeed())
		expectAnswer("", "/"+ns+"/soon", gone)

		By("deleting it: a tombstone answers 410 for the tombstone TTL")
		tombs := red.Index().Tombstones()
		Expect(k8sClient.Delete(ctx, l)).To(Succeed())
		Eventually(red.Index().Tombstones).WithTimeout(eventually).Should(Equal(tombs + 1))
		Expect(ask("", "/"+ns+"/soon")).To(Equal(gone))
		fakeClock.Step(tombstoneTTL + time.Second)
		Expect(ask("", "/"+ns+"/soon")).To(Equal(notFound))
		red.Index().SweepTombstones(fakeClock.Now())
		Expect(red.Index().Tombstones()).To(Equal(tombs))
	})

	It("serves a namespace's domain and follows its annotation", func() {
		ns := newNamespace("domain-", "go.one.example.com")
		createLink(ns.Name, "home", "https://example.com/one", "home", linkv1.ReasonCodeAssigned)
		expectAnswer("go.one.example.com", "/home", redirectTo("https://example.com/one"))
		expectAnswer("GO.One.Example.com:80", "/home", redirectTo("https://example.com/one"))

		setDomain(ns, "go.two.example.com")
		expectAnswer("go.two.example.com", "/home", redirectTo("https://example.com/one"))
		Expect(ask("go.one.example.com", "/home")).To(Equal(notFound))

		setDomain(ns, "")
		expectAnswer("go.two.example.com", "/home", notFound)
		Expect(ask("", "/"+ns.Name+"/home")).To(Equal(redirectTo("https://example.com/one")))
	})

	It("gives a domain claimed twice to the older namespace and warns the younger one once", func() {
		const host = "go.shared.example.com"
		older := newNamespace("zz-older-", host)
		createLink(older.Name, "home", "https://example.com/older", "home", linkv1.ReasonCodeAssigned)
		expectAnswer(host, "/home", redirectTo("https://example.com/older"))
		afterNextSecond(older.CreationTimestamp)

		// Younger, and first by name: only its age makes it lose.
		younger := newNamespace("aa-younger-", "")
		createLink(younger.Name, "home", "https://example.com/younger", "home", linkv1.ReasonCodeAssigned)
		expectAnswer("", "/"+younger.Name+"/home", redirectTo("https://example.com/younger"))
		setDomain(younger, host)

		Eventually(func() int { return domainConflictEvents(younger.Name) }).WithTimeout(eventually).Should(Equal(1))
		for range 20 {
			Expect(ask(host, "/home")).To(Equal(redirectTo("https://example.com/older")))
		}
		Consistently(func() int { return domainConflictEvents(younger.Name) }).WithTimeout(2 * time.Second).Should(Equal(1))
		Expect(domainConflictEvents(older.Name)).To(Equal(0))

		By("the older namespace letting go")
		setDomain(older, "")
		expectAnswer(host, "/home", redirectTo("https://example.com/younger"))
	})

	It("keeps serving while the API server is unreachable, and catches up when it returns", func() {
		ns := newNamespace("outage-", "").Name
		createLink(ns, "before", "https://example.com/before", "before", linkv1.ReasonCodeAssigned)
		expectAnswer("", "/"+ns+"/before", redirectTo("https://example.com/before"))

		apiProxy.cut()
		probe := func() int {
			rec := httptest.NewRecorder()
			red.ProbeHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			return rec.Code
		}
		// Changes made meanwhile cannot reach the redirector.
		createLink(ns, "during", "https://example.com/during", "during", linkv1.ReasonCodeAssigned)
		Consistently(func() answer { return ask("", "/"+ns+"/before") }).WithTimeout(3 * time.Second).
			Should(Equal(redirectTo("https://example.com/before")))
		Expect(probe()).To(Equal(http.StatusOK))
		Expect(ask("", "/"+ns+"/during")).To(Equal(notFound))

		apiProxy.restore()
		Eventually(func() answer { return ask("", "/"+ns+"/during") }).WithTimeout(catchUp).
			Should(Equal(redirectTo("https://example.com/during")))
		Expect(probe()).To(Equal(http.StatusOK))
	})

	It("serves only the namespaces it is given, one informer each", func() {
		a, b, c := newNamespace("only-a-", "").Name, newNamespace("only-b-", "").Name, newNamespace("other-", "").Name
		createLink(a, "x", "https://example.com/a", "x", linkv1.ReasonCodeAssigned)
		createLink(b, "x", "https://example.com/b", "x", linkv1.ReasonCodeAssigned)
		createLink(c, "x", "https://example.com/c", "x", linkv1.ReasonCodeAssigned)

		mgr, err := ctrl.NewManager(restCfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0", Cache: redirect.CacheOptions()})
		Expect(err).NotTo(HaveOccurred())
		only := redirect.New(redirect.Options{Namespaces: []string{a, b}, Registry: prometheus.NewRegistry(),
			Recorder: mgr.GetEventRecorder("linkforge-redirector"), Log: ctrl.Log.WithName("redirector-only")})
		Expect(only.SetupWithManager(mgr)).To(Succeed())
		mgrCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			Expect(mgr.Start(mgrCtx)).To(Succeed())
		}()
		DeferCleanup(func() { stop(); Eventually(done).WithTimeout(eventually).Should(BeClosed()) })
		Eventually(only.Ready).WithTimeout(eventually).Should(BeTrue())

		// Listed at the start.
		Expect(askOf(only, "", "/"+a+"/x")).To(Equal(redirectTo("https://example.com/a")))
		Expect(askOf(only, "", "/"+b+"/x")).To(Equal(redirectTo("https://example.com/b")))
		Expect(askOf(only, "", "/"+c+"/x")).To(Equal(notFound))
		// Watched after it.
		createLink(c, "y", "https://example.com/c/y", "y", linkv1.ReasonCodeAssigned)
		createLink(b, "y", "https://example.com/b/y", "y", linkv1.ReasonCodeAssigned)
		Eventually(func() answer { return askOf(only, "", "/"+b+"/y") }).WithTimeout(eventually).
			Should(Equal(redirectTo("https://example.com/b/y")))
		expectAnswer("", "/"+c+"/y", redirectTo("https://example.com/c/y")) // the suite's redirector serves all
		Expect(askOf(only, "", "/"+c+"/y")).To(Equal(notFound))
	})
})
