package controllers

import (
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// TestManagerCacheTransform checks that the cache keeps what the reconciler
// and the reaper read, and drops the rest.
func TestManagerCacheTransform(t *testing.T) {
	now := metav1.NewTime(time.Unix(1_700_000_000, 0))
	grace := int64(0)
	in := &linkv1.ShortLink{
		ObjectMeta: metav1.ObjectMeta{
			Name: "docs", Namespace: "team", UID: types.UID("u1"), ResourceVersion: "42", Generation: 3,
			CreationTimestamp: now, DeletionTimestamp: &now, DeletionGracePeriodSeconds: &grace,
			GenerateName: "do", Finalizers: []string{"example.com/keep"},
			OwnerReferences: []metav1.OwnerReference{{Name: "owner"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
			Labels: map[string]string{
				"app.kubernetes.io/name":           "docs",
				"kustomize.toolkit.fluxcd.io/name": "apps",
				"helm.toolkit.fluxcd.io/namespace": "flux-system",
				argoInstanceLabel:                  "links",
			},
			Annotations: map[string]string{
				corev1.LastAppliedConfigAnnotation: `{"spec":{"url":"https://example.com"}}`,
				argoTrackingAnnotation:             "links:linkforge.io/ShortLink:team/docs",
				"note":                             "x",
			},
		},
		Spec:   linkv1.ShortLinkSpec{URL: "https://example.com", Code: "docs"},
		Status: linkv1.ShortLinkStatus{Code: "docs", CanonicalURL: "https://example.com/", Uses: 7},
	}
	wantSpec, wantStatus := in.Spec, *in.Status.DeepCopy()

	out, err := ManagerCacheTransform()(in)
	if err != nil {
		t.Fatal(err)
	}
	l := out.(*linkv1.ShortLink)
	m := l.ObjectMeta
	if m.Name != "docs" || m.Namespace != "team" || m.UID != "u1" || m.ResourceVersion != "42" || m.Generation != 3 ||
		!m.CreationTimestamp.Equal(&now) || m.DeletionTimestamp == nil || m.DeletionGracePeriodSeconds == nil {
		t.Errorf("identity, version or timestamps lost: %+v", m)
	}
	if m.ManagedFields != nil || m.Finalizers != nil || m.OwnerReferences != nil || m.GenerateName != "" {
		t.Errorf("kept metadata nothing reads: %+v", m)
	}
	if len(m.Labels) != 3 || m.Labels["app.kubernetes.io/name"] != "" || m.Labels[argoInstanceLabel] != "links" {
		t.Errorf("labels = %v, want the three GitOps labels only", m.Labels)
	}
	if len(m.Annotations) != 1 || m.Annotations[argoTrackingAnnotation] == "" {
		t.Errorf("annotations = %v, want the Argo CD tracking id only", m.Annotations)
	}
	if !reflect.DeepEqual(l.Spec, wantSpec) || l.Status.Code != wantStatus.Code || l.Status.Uses != wantStatus.Uses || l.Status.CanonicalURL != wantStatus.CanonicalURL {
		t.Errorf("spec or status changed: %+v %+v", l.Spec, l.Status)
	}
	if gitOpsManager(l) != gitOpsManager(in) || gitOpsManager(l) == "" {
		t.Errorf("the reaper's GitOps verdict changed: %q", gitOpsManager(l))
	}

	// Idempotent, and plain links stay plain.
	again, _ := ManagerCacheTransform()(l.DeepCopy())
	if len(again.(*linkv1.ShortLink).Labels) != 3 {
		t.Error("not idempotent")
	}
	bare, _ := ManagerCacheTransform()(&linkv1.ShortLink{ObjectMeta: metav1.ObjectMeta{Name: "b", Annotations: map[string]string{"a": "b"}}})
	if bl := bare.(*linkv1.ShortLink); bl.Labels != nil || bl.Annotations != nil {
		t.Errorf("want nil maps, got %v %v", bl.Labels, bl.Annotations)
	}

	// Other objects only lose their managedFields.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}}}
	o, _ := ManagerCacheTransform()(cm)
	if got := o.(*corev1.ConfigMap); got.ManagedFields != nil || got.Labels["a"] != "b" {
		t.Errorf("configmap: %+v", got.ObjectMeta)
	}
}

// TestManagerCacheTransformNamespace: a Namespace keeps what the destination
// policy, the Ready messages (its fallbacks) and the Gateway's hosts (its
// domain and creation time) read, and nothing else.
func TestManagerCacheTransformNamespace(t *testing.T) {
	ns := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "u2", ResourceVersion: "7", Labels: map[string]string{"a": "b"},
			CreationTimestamp: metav1.Unix(1700000000, 0),
			Annotations: map[string]string{"linkforge.io/allowed-hosts": "*.example.com", corev1.LastAppliedConfigAnnotation: "{}",
				"linkforge.io/gone-redirect": "https://example.com/gone", "linkforge.io/root-redirect": "https://example.com/",
				"linkforge.io/domain": "go.example.com"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}},
		Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}},
	}
	o, _ := ManagerCacheTransform()(ns)
	want := metav1.ObjectMeta{Name: "n", UID: "u2", ResourceVersion: "7", CreationTimestamp: metav1.Unix(1700000000, 0),
		Annotations: map[string]string{"linkforge.io/allowed-hosts": "*.example.com", "linkforge.io/gone-redirect": "https://example.com/gone",
			"linkforge.io/domain": "go.example.com"}}
	if got := o.(*corev1.Namespace); !reflect.DeepEqual(got.ObjectMeta, want) || len(got.Spec.Finalizers) != 0 {
		t.Errorf("namespace: %+v", got)
	}
}

func TestLeaderElectionID(t *testing.T) {
	if got := LeaderElectionID(nil); got != DefaultLeaderElectionID {
		t.Errorf("no shard: %q", got)
	}
	a, b := LeaderElectionID([]string{"a", "b"}), LeaderElectionID([]string{"b", "a", "b"})
	if a != b {
		t.Errorf("the same set in another order gave %q and %q", a, b)
	}
	if c := LeaderElectionID([]string{"c"}); c == a || c == DefaultLeaderElectionID {
		t.Errorf("disjoint shards share a Lease: %q", c)
	}
	if len(a) > 63 {
		t.Errorf("%q is too long for a Lease name", a)
	}
}

func TestParseNamespaces(t *testing.T) {
	if got := ParseNamespaces(""); got != nil {
		t.Errorf("empty: %q", got)
	}
	if got := ParseNamespaces(" a,b ,,a"); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("got %q", got)
	}
}

// TestManagerCacheTransformSharesStrings: the cached link keeps its code and
// spec.url as substrings of the Ready message that spells them out, and
// status.canonicalURL and spec.code as the strings they equal; the values
// are unchanged.
func TestManagerCacheTransformSharesStrings(t *testing.T) {
	const url, code = "https://example.com/a", "abc123"
	ready := func(msg string) []metav1.Condition {
		return []metav1.Condition{{Type: linkv1.ConditionReady, Status: metav1.ConditionTrue, Reason: linkv1.ReasonCodeAssigned, Message: msg}}
	}
	for _, tc := range []struct {
		name string
		in   linkv1.ShortLink
		// shared: which strings share the bytes of which.
		urlInMessage, codeInMessage, canonicalIsURL, specCodeIsCode bool
	}{{
		name:         "active link: code and spec.url from the message, the canonical URL from spec.url",
		in:           linkv1.ShortLink{Spec: linkv1.ShortLinkSpec{URL: url}, Status: linkv1.ShortLinkStatus{Code: code, CanonicalURL: url, Conditions: ready("code " + code + " redirects to " + url + " with 302 Found")}},
		urlInMessage: true, codeInMessage: true, canonicalIsURL: true,
	}, {
		name:         "custom code: spec.code shares status.code; the canonical URL differs",
		in:           linkv1.ShortLink{Spec: linkv1.ShortLinkSpec{URL: url + "?b=1&a=2", Code: code}, Status: linkv1.ShortLinkStatus{Code: code, CanonicalURL: url + "?a=2&b=1", Conditions: ready("code " + code + " redirects to " + url + "?b=1&a=2 with 302 Found")}},
		urlInMessage: true, codeInMessage: true, specCodeIsCode: true,
	}, {
		name:           "no condition yet: the canonical URL shares spec.url only",
		in:             linkv1.ShortLink{Spec: linkv1.ShortLinkSpec{URL: url}, Status: linkv1.ShortLinkStatus{CanonicalURL: url}},
		canonicalIsURL: true,
	}, {
		name: "a message that does not spell them out: nothing shared",
		in:   linkv1.ShortLink{Spec: linkv1.ShortLinkSpec{URL: url}, Status: linkv1.ShortLinkStatus{Code: code, CanonicalURL: url + "/", Conditions: ready("waiting")}},
	}, {
		name: "empty link",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			// Strings of their own, as decoded, so that sharing shows.
			in := tc.in.DeepCopy()
			in.Spec.URL, in.Spec.Code = strings.Clone(in.Spec.URL), strings.Clone(in.Spec.Code)
			in.Status.Code, in.Status.CanonicalURL = strings.Clone(in.Status.Code), strings.Clone(in.Status.CanonicalURL)
			want := in.DeepCopy()
			out, err := ManagerCacheTransform()(in)
			if err != nil {
				t.Fatal(err)
			}
			l := out.(*linkv1.ShortLink)
			if !reflect.DeepEqual(l.Spec, want.Spec) || !reflect.DeepEqual(l.Status, want.Status) {
				t.Fatalf("values changed:\n%+v\n%+v\nwant\n%+v\n%+v", l.Spec, l.Status, want.Spec, want.Status)
			}
			msg := ""
			if len(l.Status.Conditions) > 0 {
				msg = l.Status.Conditions[0].Message
			}
			for _, c := range []struct {
				what       string
				s, in      string
				wantShared bool
			}{
				{"spec.url in the message", l.Spec.URL, msg, tc.urlInMessage},
				{"status.code in the message", l.Status.Code, msg, tc.codeInMessage},
				{"status.canonicalURL as spec.url", l.Status.CanonicalURL, l.Spec.URL, tc.canonicalIsURL},
				{"spec.code as status.code", l.Spec.Code, l.Status.Code, tc.specCodeIsCode},
			} {
				if got := sharesBytes(c.s, c.in); got != c.wantShared {
					t.Errorf("%s: shared %v, want %v", c.what, got, c.wantShared)
				}
			}
		})
	}
}

// sharesBytes says whether s is non-empty and lies within the bytes of in.
func sharesBytes(s, in string) bool {
	if s == "" || in == "" {
		return false
	}
	p, start := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(in)))
	return p >= start && p+uintptr(len(s)) <= start+uintptr(len(in))
}
