package controllers

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

var _ = Describe("The ShortLink CRD", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace("crd") })

	link := func(name string, spec linkv1.ShortLinkSpec) *linkv1.ShortLink {
		return &linkv1.ShortLink{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
	}

	It("accepts a valid ShortLink with every field and defaults redirectStatus", func() {
		in := link("full", linkv1.ShortLinkSpec{
			URL:                     "  HTTPS://Example.com/docs?b=2&a=1  ",
			Code:                    "docs_2026-x",
			TTL:                     &metav1.Duration{Duration: 168 * time.Hour},
			MaxUses:                 ptr.To[int64](100),
			ForwardQuery:            true,
			ReapPolicy:              linkv1.ReapPolicyRetain,
			TTLSecondsAfterFinished: ptr.To[int32](0),
		})
		Expect(k8sClient.Create(suiteCtx, in)).To(Succeed())
		Expect(in.Spec.RedirectStatus).To(Equal(int32(302)))
	})

	DescribeTable("refuses an invalid ShortLink with a clear message",
		func(spec linkv1.ShortLinkSpec, message string) {
			err := k8sClient.Create(suiteCtx, link("bad", spec))
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("bad scheme", linkv1.ShortLinkSpec{URL: "ftp://example.com/x"},
			"url must be an absolute URL starting with http:// or https://"),
		Entry("no scheme", linkv1.ShortLinkSpec{URL: "example.com/x"},
			"url must be an absolute URL starting with http:// or https://"),
		Entry("too long", linkv1.ShortLinkSpec{URL: "https://example.com/" + strings.Repeat("a", 2030)},
			"spec.url: Too long"),
		Entry("both expiresAt and ttl", linkv1.ShortLinkSpec{
			URL: "https://example.com", ExpiresAt: &metav1.Time{Time: time.Now().Add(time.Hour)},
			TTL: &metav1.Duration{Duration: time.Hour},
		}, "set at most one of expiresAt and ttl"),
		Entry("bad code characters", linkv1.ShortLinkSpec{URL: "https://example.com", Code: "no/slash"},
			"spec.code in body should match"),
		Entry("code too long", linkv1.ShortLinkSpec{URL: "https://example.com", Code: strings.Repeat("a", 65)},
			"spec.code: Too long"),
		Entry("bad redirectStatus", linkv1.ShortLinkSpec{URL: "https://example.com", RedirectStatus: 303},
			`spec.redirectStatus: Unsupported value: 303: supported values: "301", "302", "307", "308"`),
		Entry("an empty card", linkv1.ShortLinkSpec{URL: "https://example.com", Card: &linkv1.LinkCard{}},
			"a card needs at least one of title, description and image"),
		Entry("a card title with a line break", linkv1.ShortLinkSpec{URL: "https://example.com", Card: &linkv1.LinkCard{Title: "a\nb"}},
			"title must not contain control characters"),
		Entry("a card title too long", linkv1.ShortLinkSpec{URL: "https://example.com", Card: &linkv1.LinkCard{Title: strings.Repeat("t", 201)}},
			"spec.card.title: Too long"),
		Entry("a card description too long", linkv1.ShortLinkSpec{URL: "https://example.com", Card: &linkv1.LinkCard{Description: strings.Repeat("d", 501)}},
			"spec.card.description: Too long"),
		Entry("a card image that is not http(s)", linkv1.ShortLinkSpec{URL: "https://example.com", Card: &linkv1.LinkCard{Image: "javascript:alert(1)"}},
			"url must be an absolute URL starting with http:// or https://"),
		Entry("maxUses below 1", linkv1.ShortLinkSpec{URL: "https://example.com", MaxUses: ptr.To[int64](0)},
			"spec.maxUses in body should be greater than or equal to 1"),
		Entry("bad reapPolicy", linkv1.ShortLinkSpec{URL: "https://example.com", ReapPolicy: "Sometimes"},
			`spec.reapPolicy: Unsupported value: "Sometimes"`),
		Entry("negative ttlSecondsAfterFinished", linkv1.ShortLinkSpec{URL: "https://example.com", TTLSecondsAfterFinished: ptr.To[int32](-1)},
			"spec.ttlSecondsAfterFinished in body should be greater than or equal to 0"),
		Entry("non-positive ttl", linkv1.ShortLinkSpec{URL: "https://example.com", TTL: &metav1.Duration{}},
			"ttl must be a positive duration"),
	)

	// Issue 54: "ttl: 1w" was refused with the pattern's message and, beside
	// it, CEL's "type conversion error from 'string' to
	// 'google.protobuf.Duration'" of the range rule, which read a string
	// that is no duration. Each bad value gets one message that says how to
	// write it.
	DescribeTable("refuses a duration that is not one with one clear message",
		func(field, value, message string) {
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "linkforge.io/v1alpha1", "kind": "ShortLink",
				"metadata": map[string]any{"name": "raw", "namespace": ns},
				"spec":     map[string]any{"url": "https://example.com", field: value},
			}}
			err := k8sClient.Create(suiteCtx, u)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
			Expect(err.Error()).To(ContainSubstring(message))
			Expect(err.Error()).NotTo(SatisfyAny(ContainSubstring("conversion"), ContainSubstring("protobuf")))
			Expect(err.(apierrors.APIStatus).Status().Details.Causes).To(HaveLen(1), "got %v", err)
		},
		Entry("ttl in weeks", "ttl", "1w", "ttl must be a duration such as 168h, 90m or 1h30m"),
		Entry("ttl in days", "ttl", "7d", "there is no d or w: a day is 24h, a week 168h"),
		Entry("ttl in words", "ttl", "one week", "ttl must be a duration such as 168h"),
		Entry("a negative ttl", "ttl", "-1h", "ttl must be a duration such as 168h"),
		Entry("a zero ttl", "ttl", "0s", "ttl must be a positive duration"),
		Entry("idleTimeout in weeks", "idleTimeout", "2w", "idleTimeout must be a duration such as 720h, 30m or 1h30m"),
		Entry("idleTimeout under a second", "idleTimeout", "500ms", "idleTimeout must be a duration of at least 1s"),
	)

	It("refuses an unknown field", func() {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "linkforge.io/v1alpha1", "kind": "ShortLink",
			"metadata": map[string]any{"name": "raw", "namespace": ns},
			"spec":     map[string]any{"url": "https://example.com", "urll": "typo"},
		}}
		err := k8sClient.Create(suiteCtx, u, &client.CreateOptions{FieldValidation: "Strict"})
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(`unknown field "spec.urll"`))
	})
})
