package controllers

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/shortcode"
)

// withRouting gives a link rules, variants, an expiredURL or forwardPath.
func withRouting(rules []linkv1.RedirectRule, variants []linkv1.Variant, expiredURL linkv1.TargetURL, forwardPath bool) func(*linkv1.ShortLink) {
	return func(l *linkv1.ShortLink) {
		l.Spec.Rules, l.Spec.Variants, l.Spec.ExpiredURL, l.Spec.ForwardPath = rules, variants, expiredURL, forwardPath
	}
}

func iosRule(url string) linkv1.RedirectRule {
	return linkv1.RedirectRule{URL: linkv1.TargetURL(url), Devices: []linkv1.DeviceClass{linkv1.DeviceIOS}}
}

// appRules are the example: iOS, Android, German and ?beta=1 each to their own target.
func appRules() []linkv1.RedirectRule {
	return []linkv1.RedirectRule{
		iosRule("https://apps.apple.com/app/id1"),
		{URL: "https://play.google.com/store/apps/details?id=x", Devices: []linkv1.DeviceClass{linkv1.DeviceAndroid}},
		{URL: "https://example.de/", Languages: []string{"de"}},
		{URL: "https://example.com/beta", QueryParams: []linkv1.QueryParamMatch{{Name: "beta", Value: ptr.To("1")}}},
	}
}

var _ = Describe("Routing: rules, variants, expiredURL and forwardPath", func() {
	Context("in the CRD", func() {
		var ns string
		BeforeEach(func() { ns = newNamespace("routing-crd") })

		create := func(mutate func(*linkv1.ShortLink)) error {
			l := newLink(ns, "", "https://example.com/main")
			l.GenerateName = "r-"
			mutate(l)
			return k8sClient.Create(suiteCtx, l, client.DryRunAll)
		}

		It("accepts every kind of condition, variants, expiredURL and forwardPath", func() {
			rules := append(appRules(),
				linkv1.RedirectRule{URL: "https://example.com/launch", After: &metav1.Time{Time: time.Now()}, Before: &metav1.Time{Time: time.Now().Add(time.Hour)}},
				linkv1.RedirectRule{URL: "https://example.com/canary", Headers: []linkv1.HeaderMatch{{Name: "X-Canary", Value: "yes"}}},
				linkv1.RedirectRule{URL: "https://example.ch/", Countries: []string{"CH", "LI"}},
				linkv1.RedirectRule{URL: "https://example.com/ref", QueryParams: []linkv1.QueryParamMatch{{Name: "ref"}}, Devices: []linkv1.DeviceClass{linkv1.DeviceDesktop, linkv1.DeviceBot}},
			)
			Expect(create(withRouting(rules, []linkv1.Variant{{URL: "https://example.com/b", Weight: 30}, {URL: "https://example.com/c", Weight: 70}},
				"https://example.com/over", true))).To(Succeed())
			Expect(create(func(l *linkv1.ShortLink) {
				l.Spec.Variants = []linkv1.Variant{{URL: "https://example.com/b", Weight: 30}}
				l.Spec.VariantsEnd = &linkv1.VariantsEnd{At: metav1.Now(), URL: "https://example.com/b"}
			})).To(Succeed())
			Expect(create(func(l *linkv1.ShortLink) {
				l.Spec.Variants = []linkv1.Variant{{URL: "https://example.com/b", Weight: 30}}
				l.Spec.VariantsEnd = &linkv1.VariantsEnd{At: metav1.Now(), URL: "https://example.com/main"}
			})).To(Succeed())
		})

		DescribeTable("refuses invalid routing with a clear message",
			func(mutate func(*linkv1.ShortLink), message string) {
				err := create(mutate)
				Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
				Expect(err.Error()).To(ContainSubstring(message))
			},
			Entry("a rule target that is not http(s)", withRouting([]linkv1.RedirectRule{iosRule("ftp://example.com/")}, nil, "", false),
				`spec.rules[0].url: Invalid value: "ftp://example.com/": url must be an absolute URL starting with http:// or https://`),
			Entry("a variant target with a user name", withRouting(nil, []linkv1.Variant{{URL: "https://bank.example@evil.example/", Weight: 10}}, "", false),
				`spec.variants[0].url: Invalid value: "https://bank.example@evil.example/": url must not hold a user name or password before '@'`),
			Entry("an expiredURL without a host", withRouting(nil, nil, "https://:8080/x", false),
				`spec.expiredURL: Invalid value: "https://:8080/x": url must have a host`),
			Entry("an expiredURL with a CR", withRouting(nil, nil, "https://example.com/\rx", false),
				`spec.expiredURL: Invalid value: "https://example.com/\rx": url must not contain control characters`),
			Entry("a rule without a condition", withRouting([]linkv1.RedirectRule{{URL: "https://example.com/x"}}, nil, "", false),
				"a rule needs at least one condition"),
			Entry("an empty window", withRouting([]linkv1.RedirectRule{{URL: "https://example.com/x",
				After: &metav1.Time{Time: time.Unix(2000, 0)}, Before: &metav1.Time{Time: time.Unix(1000, 0)}}}, nil, "", false),
				"a rule's after must be before its before"),
			Entry("an unknown device", withRouting([]linkv1.RedirectRule{{URL: "https://example.com/x", Devices: []linkv1.DeviceClass{"watch"}}}, nil, "", false),
				`spec.rules[0].devices[0]: Unsupported value: "watch"`),
			Entry("a country that is not a code", withRouting([]linkv1.RedirectRule{{URL: "https://example.com/x", Countries: []string{"Germany"}}}, nil, "", false),
				"spec.rules[0].countries[0] in body should match '^[A-Z]{2}$'"),
			Entry("a language that is not a range", withRouting([]linkv1.RedirectRule{{URL: "https://example.com/x", Languages: []string{"de_DE"}}}, nil, "", false),
				"spec.rules[0].languages[0] in body should match"),
			Entry("a header name that is not a token", withRouting([]linkv1.RedirectRule{{URL: "https://example.com/x", Headers: []linkv1.HeaderMatch{{Name: "X Bad", Value: "1"}}}}, nil, "", false),
				"spec.rules[0].headers[0].name in body should match"),
			Entry("weights over 100", withRouting(nil, []linkv1.Variant{{URL: "https://example.com/b", Weight: 60}, {URL: "https://example.com/c", Weight: 41}}, "", false),
				"the weights of variants add up to more than 100"),
			Entry("a weight of 0", withRouting(nil, []linkv1.Variant{{URL: "https://example.com/b"}}, "", false),
				"spec.variants[0].weight in body should be greater than or equal to 1"),
			Entry("a variant to spec.url", withRouting(nil, []linkv1.Variant{{URL: "https://example.com/main", Weight: 10}}, "", false),
				"each variant needs a url of its own, other than spec.url"),
			Entry("two variants to one url", withRouting(nil, []linkv1.Variant{{URL: "https://example.com/b", Weight: 10}, {URL: "https://example.com/b", Weight: 10}}, "", false),
				"each variant needs a url of its own"),
			Entry("17 rules", withRouting(repeat(iosRule("https://example.com/x"), 17), nil, "", false),
				"spec.rules: Too many: 17: must have at most 16 items"),
			Entry("variantsEnd without variants", func(l *linkv1.ShortLink) {
				l.Spec.VariantsEnd = &linkv1.VariantsEnd{At: metav1.Now(), URL: "https://example.com/main"}
			}, "variantsEnd ends the split of spec.variants: set variants, or remove variantsEnd"),
			Entry("variantsEnd to a url the split does not have", func(l *linkv1.ShortLink) {
				l.Spec.Variants = []linkv1.Variant{{URL: "https://example.com/b", Weight: 50}}
				l.Spec.VariantsEnd = &linkv1.VariantsEnd{At: metav1.Now(), URL: "https://example.com/c"}
			}, "variantsEnd.url must be spec.url or the url of one of spec.variants, as written there: the destination that wins the test"),
			Entry("variantsEnd without a time", func(l *linkv1.ShortLink) {
				l.Spec.Variants = []linkv1.Variant{{URL: "https://example.com/b", Weight: 50}}
				l.Spec.VariantsEnd = &linkv1.VariantsEnd{URL: "https://example.com/b"}
			}, "spec.variantsEnd.at: Required value"),
			Entry("11 variants", func(l *linkv1.ShortLink) {
				for i := range 11 {
					l.Spec.Variants = append(l.Spec.Variants, linkv1.Variant{URL: linkv1.TargetURL(fmt.Sprintf("https://example.com/%d", i)), Weight: 1})
				}
			}, "spec.variants: Too many: 11: must have at most 10 items"),
		)
	})

	Context("in the controller", func() {
		var ns string
		BeforeEach(func() {
			ns = newNamespace("routing")
			runLinkManagers(ns, 1)
		})

		It("counts rules and variants in status and says so in Ready", func() {
			createLink(ns, "app", "https://example.com/app", withRouting(appRules(), []linkv1.Variant{{URL: "https://example.com/app-b", Weight: 30}}, "https://example.com/over", true))
			l := eventuallyReady(ns, "app")
			Expect(l.Status.RuleCount).To(Equal(int32(4)))
			Expect(l.Status.VariantCount).To(Equal(int32(1)))
			Expect(meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionReady).Message).To(Equal(
				fmt.Sprintf("code %s redirects to https://example.com/app with 302 Found, or by 4 rule(s) to their targets, split with 1 variant(s), "+
					"adding what follows the code in the short URL to the path", l.Status.Code)))

			Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur := getLink(Default, ns, "app")
				cur.Spec.Rules, cur.Spec.Variants = cur.Spec.Rules[:1], nil
				return k8sClient.Update(suiteCtx, cur)
			})).To(Succeed())
			Eventually(func(g Gomega) {
				_, _, l := readyReason(g, ns, "app")
				g.Expect(l.Status.RuleCount).To(Equal(int32(1)))
				g.Expect(l.Status.VariantCount).To(BeZero())
			}).WithTimeout(20 * time.Second).Should(Succeed())
		})

		It("assigns the split's buckets when it confirms a spec, moving only what a change of the weights must", func() {
			variants := func(b, c int32) []linkv1.Variant {
				return []linkv1.Variant{{URL: "https://example.com/b", Weight: b}, {URL: "https://example.com/c", Weight: c}}
			}
			createLink(ns, "ab", "https://example.com/a", withRouting(nil, variants(30, 20), "", false))
			l := eventuallyReady(ns, "ab")
			Expect(l.Status.SplitBuckets).To(Equal([]linkv1.SplitBuckets{{URL: "https://example.com/b", Buckets: "0-29"}, {URL: "https://example.com/c", Buckets: "30-49"}}))
			Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur := getLink(Default, ns, "ab")
				cur.Spec.Variants = variants(20, 30)
				return k8sClient.Update(suiteCtx, cur)
			})).To(Succeed())
			Eventually(func(g Gomega) {
				l := getLink(g, ns, "ab")
				g.Expect(l.Status.ConfirmedGeneration).To(Equal(l.Generation))
				// b gives up 20-29 to spec.url; c takes 50-59 from spec.url.
				g.Expect(l.Status.SplitBuckets).To(Equal([]linkv1.SplitBuckets{{URL: "https://example.com/b", Buckets: "0-19"}, {URL: "https://example.com/c", Buckets: "30-59"}}))
			}).WithTimeout(20 * time.Second).Should(Succeed())
			Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur := getLink(Default, ns, "ab")
				cur.Spec.Variants = nil
				return k8sClient.Update(suiteCtx, cur)
			})).To(Succeed())
			Eventually(func(g Gomega) {
				l := getLink(g, ns, "ab")
				g.Expect(l.Status.ConfirmedGeneration).To(Equal(l.Generation))
				g.Expect(l.Status.SplitBuckets).To(BeEmpty())
			}).WithTimeout(20 * time.Second).Should(Succeed())
		})

		It("marks a link Invalid when a target other than spec.url does not canonicalize", func() {
			createLink(ns, "bad", "https://example.com/ok", withRouting(nil, []linkv1.Variant{{URL: "https://exa mple.com/", Weight: 10}}, "", false))
			l := eventuallyState(ns, "bad", metav1.ConditionFalse, linkv1.ReasonInvalidURL, linkv1.StateInvalid)
			Expect(meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionReady).Message).To(HavePrefix("spec.variants[0].url is not a valid URL: "))
			Expect(meta.FindStatusCondition(l.Status.Conditions, linkv1.ConditionStalled).Message).To(HavePrefix("fix spec.variants[0].url;"))
			Expect(l.Status.Code).To(BeEmpty())
			Expect(l.Status.VariantCount).To(Equal(int32(1)))
		})

		It("never gives links that differ in rules, variants, expiredURL or forwardPath one code", func() {
			const url = "https://example.com/dedup-routing"
			salt := func(s int) string { return shortcode.Code(url, ns, s) }
			createLink(ns, "plain", url)
			Expect(codeAt(ns, "plain")).To(Equal(salt(0)))
			variants := []linkv1.Variant{{URL: "https://example.com/b", Weight: 50}}
			// Created one at a time, so that each takes the next salt.
			for i, mutate := range []func(*linkv1.ShortLink){
				withRouting(appRules(), nil, "", false),
				withRouting(nil, variants, "", false),
				withRouting(nil, nil, "https://example.com/over", false),
				withRouting(nil, nil, "", true),
				withRouting(appRules()[:3], nil, "", false),
				withRouting(nil, []linkv1.Variant{{URL: "https://example.com/b", Weight: 40}}, "", false),
			} {
				name := fmt.Sprintf("routed-%d", i)
				createLink(ns, name, url, mutate)
				Expect(codeAt(ns, name)).To(Equal(salt(i+1)), name)
			}
			// Identical routing (targets spelled otherwise) shares the code.
			same := appRules()
			same[0].URL = "HTTPS://Apps.Apple.com:443/app/id1"
			createLink(ns, "routed-0-copy", url, withRouting(same, nil, "", false))
			Expect(codeAt(ns, "routed-0-copy")).To(Equal(salt(1)))
		})
	})
})

func repeat[T any](v T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestTargetURLValidatesLikeSpecURL holds every target's validation in the
// generated CRD to spec.url's: the same rules and messages, the same
// bounds, so that a target is admitted exactly when it would be as
// spec.url. It also checks the Rules and Variants columns of -o wide.
func TestTargetURLValidatesLikeSpecURL(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "config", "crd", "bases", "linkforge.io_shortlinks.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(b, &crd); err != nil {
		t.Fatal(err)
	}
	v := crd.Spec.Versions[0]
	spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
	want := spec.Properties["url"]
	for name, got := range map[string]apiextensionsv1.JSONSchemaProps{
		"spec.expiredURL":     spec.Properties["expiredURL"],
		"spec.rules[].url":    spec.Properties["rules"].Items.Schema.Properties["url"],
		"spec.variants[].url": spec.Properties["variants"].Items.Schema.Properties["url"],
	} {
		if !reflect.DeepEqual(got.XValidations, want.XValidations) || !reflect.DeepEqual(got.MaxLength, want.MaxLength) ||
			!reflect.DeepEqual(got.MinLength, want.MinLength) || got.Type != want.Type {
			t.Errorf("%s is validated otherwise than spec.url:\n%+v\n%+v", name, got, want)
		}
	}
	if got := spec.Properties["rules"].MaxItems; got == nil || *got != linkv1.MaxRules {
		t.Errorf("spec.rules maxItems %v, want %d", got, linkv1.MaxRules)
	}
	if got := spec.Properties["variants"].MaxItems; got == nil || *got != linkv1.MaxVariants {
		t.Errorf("spec.variants maxItems %v, want %d", got, linkv1.MaxVariants)
	}
	columns := map[string]string{}
	for _, c := range v.AdditionalPrinterColumns {
		if c.Priority == 1 {
			columns[c.Name] = c.JSONPath
		}
	}
	if columns["Rules"] != ".status.ruleCount" || columns["Variants"] != ".status.variantCount" {
		t.Errorf("-o wide columns: %v", columns)
	}
	if !strings.Contains(string(b), "x-kubernetes-validations") {
		t.Fatal("no validations at all")
	}
}
