package controllers

import (
	"reflect"
	"testing"
	"time"

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
	if l.Spec != wantSpec || l.Status.Code != wantStatus.Code || l.Status.Uses != wantStatus.Uses || l.Status.CanonicalURL != wantStatus.CanonicalURL {
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
// policy reads, and nothing else.
func TestManagerCacheTransformNamespace(t *testing.T) {
	ns := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "u2", ResourceVersion: "7", Labels: map[string]string{"a": "b"},
			Annotations:   map[string]string{"linkforge.io/allowed-hosts": "*.example.com", corev1.LastAppliedConfigAnnotation: "{}"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}},
		Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}},
	}
	o, _ := ManagerCacheTransform()(ns)
	want := metav1.ObjectMeta{Name: "n", UID: "u2", ResourceVersion: "7", Annotations: map[string]string{"linkforge.io/allowed-hosts": "*.example.com"}}
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
