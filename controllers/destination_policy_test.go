package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/hostpolicy"
	"github.com/linkforge/linkforge/internal/shortcode"
	"github.com/linkforge/linkforge/internal/testenv"
)

// Every host in these specs is under policy.example, which no other spec
// uses, so that the lists made here decide nothing elsewhere.

// annotatedNamespace creates a namespace whose linkforge.io/allowed-hosts is allowed.
func annotatedNamespace(prefix, allowed string) string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:        fmt.Sprintf("%s-%d-%d", prefix, GinkgoParallelProcess(), nsCounter.Add(1)),
		Annotations: map[string]string{hostpolicy.AllowedHostsAnnotation: allowed},
	}}
	Expect(k8sClient.Create(suiteCtx, ns)).To(Succeed())
	return ns.Name
}

// setAllowedHosts sets (or with remove, removes) a namespace's allowed hosts.
func setAllowedHosts(ns, allowed string, remove bool) {
	GinkgoHelper()
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var n corev1.Namespace
		if err := k8sClient.Get(suiteCtx, types.NamespacedName{Name: ns}, &n); err != nil {
			return err
		}
		if remove {
			delete(n.Annotations, hostpolicy.AllowedHostsAnnotation)
		} else {
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[hostpolicy.AllowedHostsAnnotation] = allowed
		}
		return k8sClient.Update(suiteCtx, &n)
	})).To(Succeed())
}

// newDenyList creates a DestinationDenyList, deleted when the spec ends.
func newDenyList(name string, hosts ...linkv1.HostPattern) *linkv1.DestinationDenyList {
	GinkgoHelper()
	d := &linkv1.DestinationDenyList{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: linkv1.DestinationDenyListSpec{Hosts: hosts}}
	Expect(k8sClient.Create(suiteCtx, d)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(suiteCtx, d))).To(Succeed()) })
	return d
}

// tryCreateLink creates a ShortLink and returns the API server's answer.
func tryCreateLink(ns, name, url string) error {
	return k8sClient.Create(suiteCtx, newLink(ns, name, url))
}

// refusal is the message of the API server's refusal of a new link, or "" if
// it admitted it (a dry run: nothing is stored).
func refusal(ns, url string, mutate ...func(*linkv1.ShortLink)) string {
	l := newLink(ns, "", url)
	l.GenerateName = "probe-"
	for _, m := range mutate {
		m(l)
	}
	if err := k8sClient.Create(suiteCtx, l, client.DryRunAll); err != nil {
		return err.Error()
	}
	return ""
}

var _ = Describe("The destination policy", Ordered, func() {
	BeforeAll(func() {
		root, err := testenv.ModuleRoot()
		Expect(err).NotTo(HaveOccurred())
		remove, err := testenv.InstallDestinationPolicy(suiteCtx, k8sClient, root, 30*time.Second)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx context.Context) { Expect(remove(ctx)).To(Succeed()) })
	})

	Context("at admission", func() {
		It("admits the hosts of the namespace's list and refuses the others with a message that names the list", func() {
			ns := annotatedNamespace("allow", "*.app.policy.example, Docs.Vendor.policy.example.")
			admitted := []string{
				"https://www.app.policy.example/",                // one label below the wildcard's domain
				"https://a.b.app.policy.example/x",               // deeper
				"HTTPS://WWW.APP.Policy.Example/",                // case
				"https://www.app.policy.example./",               // a trailing dot
				"https://docs.vendor.policy.example:8443/guide",  // an exact host, any port
				"http://docs.vendor.policy.example:80/",          // the default port
				"  https://docs.vendor.policy.example/a?b=1#c  ", // trimmed, query and fragment
				"https://bücher.app.policy.example/",             // non-ASCII below a wildcard: IDNA keeps the tail
			}
			for _, url := range admitted {
				Expect(refusal(ns, url)).To(BeEmpty(), url)
			}
			list := "*.app.policy.example, docs.vendor.policy.example"
			for url, host := range map[string]string{
				"https://app.policy.example/":           "app.policy.example", // the apex is not below itself
				"https://evilapp.policy.example/":       "evilapp.policy.example",
				"https://app.policy.example.evil.io/":   "app.policy.example.evil.io",
				"https://x.docs.vendor.policy.example/": "x.docs.vendor.policy.example", // an exact host has no subdomains
				"https://elsewhere.example:8443/":       "elsewhere.example",
				"https://APP.policy.example.:443/":      "app.policy.example",
			} {
				Expect(refusal(ns, url)).To(HaveSuffix(fmt.Sprintf(`host %q is not allowed in namespace %s: its linkforge.io/allowed-hosts annotation allows only %s`, host, ns, list)), url)
			}
			// The same rule as the controller's, message and all.
			v := hostpolicy.Policy{Namespace: ns, Allow: ptrTo(hostpolicy.Parse("*.app.policy.example, Docs.Vendor.policy.example."))}.
				Judge("https://elsewhere.example/")
			Expect(refusal(ns, "https://elsewhere.example/")).To(HaveSuffix(v.Message))
		})

		It("judges every target of a link: a rule's, a variant's and the expiredURL, on create and on an update that changes one", func() {
			ns := annotatedNamespace("allow-targets", "*.app.policy.example")
			const ok, evil = "https://www.app.policy.example/", "https://evil.policy.example/"
			refused := fmt.Sprintf(`host "evil.policy.example" is not allowed in namespace %s: its linkforge.io/allowed-hosts annotation allows only *.app.policy.example`, ns)
			for name, mutate := range map[string]func(*linkv1.ShortLink){
				"a rule's url":    withRouting([]linkv1.RedirectRule{iosRule(ok), iosRule(evil)}, nil, "", false),
				"a variant's url": withRouting(nil, []linkv1.Variant{{URL: evil, Weight: 30}}, "", false),
				"the expiredURL":  withRouting(nil, nil, evil, false),
			} {
				Expect(refusal(ns, "https://main.app.policy.example/", mutate)).To(HaveSuffix(refused), name)
			}
			Expect(refusal(ns, "https://main.app.policy.example/", withRouting([]linkv1.RedirectRule{iosRule(ok)},
				[]linkv1.Variant{{URL: "https://b.app.policy.example/", Weight: 30}}, "https://over.app.policy.example/", true))).To(BeEmpty())

			l := newLink(ns, "routed", "https://main.app.policy.example/")
			withRouting([]linkv1.RedirectRule{iosRule(ok)}, nil, "", false)(l)
			Expect(k8sClient.Create(suiteCtx, l)).To(Succeed())
			l.Spec.Rules[0].URL = evil
			Expect(k8sClient.Update(suiteCtx, l)).To(MatchError(HaveSuffix(refused)), "an update to a refused target")
		})

		It("admits the largest link the CRD allows within the API server's CEL cost limits", func() {
			ns := annotatedNamespace("allow-largest", "*.app.policy.example")
			target := func(i int) linkv1.TargetURL {
				u := fmt.Sprintf("https://h%d.app.policy.example/", i)
				return linkv1.TargetURL(u + strings.Repeat("p", 2048-len(u)))
			}
			Expect(refusal(ns, string(target(0)), func(l *linkv1.ShortLink) {
				for i := range linkv1.MaxRules {
					l.Spec.Rules = append(l.Spec.Rules, linkv1.RedirectRule{URL: target(1 + i), Devices: []linkv1.DeviceClass{linkv1.DeviceIOS}})
				}
				for i := range linkv1.MaxVariants {
					l.Spec.Variants = append(l.Spec.Variants, linkv1.Variant{URL: target(100 + i), Weight: 10})
				}
				l.Spec.ExpiredURL = target(200)
			})).To(BeEmpty())
		})

		It("lets a namespace without the annotation link anywhere", func() {
			ns := newNamespace("open")
			for _, url := range []string{"https://anything.policy.example/", "http://10.1.2.3/", "https://bücher.policy.example/"} {
				Expect(refusal(ns, url)).To(BeEmpty(), url)
			}
		})

		It("refuses a non-ASCII host that only its ASCII form would match, and admits that form", func() {
			ns := annotatedNamespace("idna", "xn--bcher-kva.policy.example")
			Expect(refusal(ns, "https://BÜCHER.policy.example/")).To(ContainSubstring(
				`host "bÜcher.policy.example" is not allowed in namespace ` + ns + `: its linkforge.io/allowed-hosts annotation allows only xn--bcher-kva.policy.example; ` +
					"this host cannot be compared at admission unless written as listed: write a non-ASCII name in its ASCII (punycode) form"))
			Expect(refusal(ns, "https://xn--bcher-kva.policy.example/café")).To(BeEmpty())
			// Both spellings are one link: the same canonical URL, the same code.
			a, _ := shortcode.Canonicalize("https://BÜCHER.policy.example/")
			b, _ := shortcode.Canonicalize("https://xn--bcher-kva.policy.example/")
			Expect(a).To(Equal(b))
		})

		It("refuses a host of a DestinationDenyList in every namespace, naming the list", func() {
			newDenyList("deny-metadata", "169.254.169.254", "*.corp.policy.example", "[fd00:ec2::254]")
			open := newNamespace("deny")
			allowing := annotatedNamespace("deny-allow", "*.corp.policy.example, 169.254.169.254, [fd00:ec2::254]")
			Eventually(func() string { return refusal(open, "http://169.254.169.254/latest/meta-data/") }).Should(HaveSuffix(
				`host "169.254.169.254" is denied in every namespace by DestinationDenyList "deny-metadata" (entry 169.254.169.254)`))
			for _, ns := range []string{open, allowing} {
				for _, url := range []string{"http://169.254.169.254:8080/", "http://169.254.169.254./", "https://db.corp.policy.example/", "http://[FD00:EC2::254]/"} {
					Expect(refusal(ns, url)).To(ContainSubstring(`is denied in every namespace by DestinationDenyList "deny-metadata"`), "%s in %s", url, ns)
				}
			}
			Expect(refusal(open, "https://corp.policy.example/")).To(BeEmpty(), "the apex of a denied wildcard")
		})

		It("refuses a malformed linkforge.io/allowed-hosts annotation and an invalid DestinationDenyList entry", func() {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bad-annotation",
				Annotations: map[string]string{hostpolicy.AllowedHostsAnnotation: "*.policy.example, https://docs.policy.example/"}}}
			Expect(k8sClient.Create(suiteCtx, ns)).To(MatchError(ContainSubstring(
				`linkforge.io/allowed-hosts: "https://docs.policy.example/" is not a host pattern: list exact hosts`)))

			for _, entry := range []string{"https://x.policy.example", "x.policy.example:443", "*", "bücher.policy.example", "2852039166", "*.*.policy.example", "1.2.3.256"} {
				d := &linkv1.DestinationDenyList{ObjectMeta: metav1.ObjectMeta{Name: "bad-entry"},
					Spec: linkv1.DestinationDenyListSpec{Hosts: []linkv1.HostPattern{linkv1.HostPattern(entry)}}}
				Expect(k8sClient.Create(suiteCtx, d, client.DryRunAll)).To(MatchError(ContainSubstring("must be a host pattern")), entry)
				_, ok := hostpolicy.ParsePattern(entry)
				Expect(ok).To(BeFalse(), "the controller agrees: %s", entry)
			}
			for _, entry := range []string{"X.Policy.Example.", "*.policy.example", "10.0.0.1", "[FD00:EC2::254]", "_srv.policy.example"} {
				d := &linkv1.DestinationDenyList{ObjectMeta: metav1.ObjectMeta{Name: "good-entry"},
					Spec: linkv1.DestinationDenyListSpec{Hosts: []linkv1.HostPattern{linkv1.HostPattern(entry)}}}
				Expect(k8sClient.Create(suiteCtx, d, client.DryRunAll)).To(Succeed(), entry)
				_, ok := hostpolicy.ParsePattern(entry)
				Expect(ok).To(BeTrue(), "the controller agrees: %s", entry)
			}
		})
	})

	Context("in the controller", func() {
		It("blocks what admission could not compare: another IPv4 notation and a non-ASCII name of a denied host", func() {
			newDenyList("deny-forms", "169.254.169.254", "xn--bcher-kva.policy.example")
			ns := newNamespace("forms")
			runLinkManagers(ns, 1)
			Eventually(func() string { return refusal(ns, "http://169.254.169.254/") }).ShouldNot(BeEmpty())

			// Admission compares them only as written: admitted.
			Expect(tryCreateLink(ns, "decimal", "http://2852039166/latest/meta-data/")).To(Succeed())
			Expect(tryCreateLink(ns, "unicode", "https://Bücher.policy.example/")).To(Succeed())

			l := eventuallyState(ns, "decimal", metav1.ConditionFalse, linkv1.ReasonDestinationNotAllowed, linkv1.StateBlocked)
			Expect(meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionReady).Message).To(Equal(
				`host "2852039166" (the address 169.254.169.254) is denied in every namespace by DestinationDenyList "deny-forms" (entry 169.254.169.254)`))
			Expect(l.Status.Code).To(BeEmpty(), "no code: nothing to serve")
			Expect(l.Status.ConfirmedGeneration).To(BeZero())
			Expect(meta.IsStatusConditionTrue(l.Status.Conditions, linkv1.ConditionStalled)).To(BeTrue())

			l = eventuallyState(ns, "unicode", metav1.ConditionFalse, linkv1.ReasonDestinationNotAllowed, linkv1.StateBlocked)
			Expect(meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionReady).Message).To(ContainSubstring(
				`host "xn--bcher-kva.policy.example" is denied in every namespace by DestinationDenyList "deny-forms" (entry xn--bcher-kva.policy.example)`))
			Eventually(func(g Gomega) []string { return eventsFor(g, ns, "unicode") }).Should(ContainElement(HavePrefix(
				`Warning DestinationNotAllowed: host "xn--bcher-kva.policy.example" is denied`)))
		})

		It("reports links a changed allow-list refuses, stops serving them, deletes nothing, and serves them again when it allows them", func() {
			ns := newNamespace("change")
			runLinkManagers(ns, 1)
			Expect(tryCreateLink(ns, "kept", "https://docs.app.policy.example/")).To(Succeed())
			Expect(tryCreateLink(ns, "dropped", "https://other.policy.example/x")).To(Succeed())
			kept := eventuallyReady(ns, "kept")
			was := eventuallyReady(ns, "dropped")

			setAllowedHosts(ns, "*.app.policy.example", false)
			l := eventuallyState(ns, "dropped", metav1.ConditionFalse, linkv1.ReasonDestinationNotAllowed, linkv1.StateBlocked)
			Expect(meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionReady).Message).To(Equal(
				`host "other.policy.example" is not allowed in namespace ` + ns + `: its linkforge.io/allowed-hosts annotation allows only *.app.policy.example`))
			Expect(l.Status.Code).To(BeEmpty())
			Expect(l.Status.ConfirmedGeneration).To(BeZero(), "the redirectors serve only a confirmed code")
			Expect(l.Status.CanonicalURL).To(Equal("https://other.policy.example/x"))
			Eventually(func(g Gomega) []string { return eventsFor(g, ns, "dropped") }).Should(ContainElement(
				"Warning DestinationNotAllowed: " + meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionReady).Message))
			Consistently(func(g Gomega) *linkv1.ShortLink { return getLink(g, ns, "kept") }, time.Second).Should(
				HaveField("Status.Code", kept.Status.Code), "a link the list allows is untouched")

			// The blocked link is kept and stays editable: only a new URL is judged.
			Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur := getLink(Default, ns, "dropped")
				cur.Labels = map[string]string{"team": "a"}
				return k8sClient.Update(suiteCtx, cur)
			})).To(Succeed())
			Eventually(func() string { return refusal(ns, "https://other.policy.example/x") }).Should(ContainSubstring("is not allowed"),
				"a new link to it is refused (once the API server's informer has the annotation)")

			setAllowedHosts(ns, "", true)
			l = eventuallyReady(ns, "dropped")
			Expect(l.Status.Code).To(Equal(was.Status.Code), "the same code again")
			Eventually(func(g Gomega) []string { return eventsFor(g, ns, "dropped") }).Should(ContainElement(
				fmt.Sprintf("Normal CodeAssigned: assigned code %s (was DestinationNotAllowed)", was.Status.Code)))
		})

		It("blocks a link whose card image is on a denied host, naming spec.card.image", func() {
			ns := newNamespace("deny-card")
			runLinkManagers(ns, 1)
			newDenyList("deny-card-images", "*.cards.policy.example")
			createLink(ns, "carded", "https://www.policy.example/a", func(l *linkv1.ShortLink) {
				l.Spec.Card = &linkv1.LinkCard{Title: "A", Image: "https://img.cards.policy.example/i.png"}
			})
			l := eventuallyState(ns, "carded", metav1.ConditionFalse, linkv1.ReasonDestinationNotAllowed, linkv1.StateBlocked)
			Expect(meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionReady).Message).To(HavePrefix(`spec.card.image: host "img.cards.policy.example" is denied`))
		})

		It("blocks a link as a whole when a new DestinationDenyList denies one of its variants, naming it, and serves it again once deleted", func() {
			ns := newNamespace("deny-variant")
			runLinkManagers(ns, 1)
			createLink(ns, "split", "https://www.policy.example/a", withRouting(nil, []linkv1.Variant{
				{URL: "https://www.policy.example/b", Weight: 30}, {URL: "https://tool.variants.policy.example/c", Weight: 30}}, "", false))
			was := eventuallyReady(ns, "split")

			d := newDenyList("deny-variants", "*.variants.policy.example")
			l := eventuallyState(ns, "split", metav1.ConditionFalse, linkv1.ReasonDestinationNotAllowed, linkv1.StateBlocked)
			Expect(meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionReady).Message).To(Equal(
				`spec.variants[1].url: host "tool.variants.policy.example" is denied in every namespace by DestinationDenyList "deny-variants" (entry *.variants.policy.example)`))
			Expect(l.Status.Code).To(BeEmpty(), "no code: no target of the link is served")
			Expect(l.Status.ConfirmedGeneration).To(BeZero())

			Expect(k8sClient.Delete(suiteCtx, d)).To(Succeed())
			Expect(eventuallyReady(ns, "split").Status.Code).To(Equal(was.Status.Code))
		})

		It("blocks a link whose rule target a changed allow-list refuses", func() {
			ns := newNamespace("allow-rule")
			runLinkManagers(ns, 1)
			createLink(ns, "app", "https://www.app.policy.example/", withRouting([]linkv1.RedirectRule{iosRule("https://store.policy.example/app")}, nil, "", false))
			eventuallyReady(ns, "app")
			setAllowedHosts(ns, "*.app.policy.example", false)
			l := eventuallyState(ns, "app", metav1.ConditionFalse, linkv1.ReasonDestinationNotAllowed, linkv1.StateBlocked)
			Expect(meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionReady).Message).To(Equal(
				`spec.rules[0].url: host "store.policy.example" is not allowed in namespace ` + ns + `: its linkforge.io/allowed-hosts annotation allows only *.app.policy.example`))
		})

		It("reports links a new DestinationDenyList denies and serves them again once it is deleted", func() {
			ns := newNamespace("deny-later")
			runLinkManagers(ns, 1)
			Expect(tryCreateLink(ns, "tool", "https://tool.intranet.policy.example/")).To(Succeed())
			Expect(tryCreateLink(ns, "public", "https://www.policy.example/")).To(Succeed())
			was := eventuallyReady(ns, "tool")
			public := eventuallyReady(ns, "public")

			d := newDenyList("deny-intranet", "*.intranet.policy.example")
			l := eventuallyState(ns, "tool", metav1.ConditionFalse, linkv1.ReasonDestinationNotAllowed, linkv1.StateBlocked)
			Expect(meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionReady).Message).To(Equal(
				`host "tool.intranet.policy.example" is denied in every namespace by DestinationDenyList "deny-intranet" (entry *.intranet.policy.example)`))
			Eventually(func(g Gomega) []string { return eventsFor(g, ns, "tool") }).Should(ContainElement(HavePrefix("Warning DestinationNotAllowed: ")))
			Expect(getLink(Default, ns, "public").Status.Code).To(Equal(public.Status.Code))

			Expect(k8sClient.Delete(suiteCtx, d)).To(Succeed())
			Expect(eventuallyReady(ns, "tool").Status.Code).To(Equal(was.Status.Code))
		})
	})
})

func ptrTo[T any](v T) *T { return &v }
