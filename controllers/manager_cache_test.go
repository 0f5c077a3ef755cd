package controllers

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/compactlink"
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
	// The cache keeps a compact link, whose copies are the ShortLink.
	packed, ok := out.(*compactlink.Link)
	if !ok {
		t.Fatalf("the cache keeps a %T, want a *compactlink.Link", out)
	}
	if want := (compactlink.Summary{Namespace: "team", Name: "docs", ResourceVersion: "42", Generation: 3, SpecCode: "docs", StatusCode: "docs"}); packed.Summary != want {
		t.Errorf("summary %+v, want %+v", packed.Summary, want)
	}
	l := packed.DeepCopyObject().(*linkv1.ShortLink)
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

	// Other objects only lose their managedFields.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}}}
	o, _ := ManagerCacheTransform()(cm)
	if got := o.(*corev1.ConfigMap); got.ManagedFields != nil || got.Labels["a"] != "b" {
		t.Errorf("configmap: %+v", got.ObjectMeta)
	}
}

// TestManagerCacheTransformIdempotent: client-go may pass a cached object to
// the transform again; and plain links stay plain.
func TestManagerCacheTransformIdempotent(t *testing.T) {
	out, err := ManagerCacheTransform()(&linkv1.ShortLink{
		ObjectMeta: metav1.ObjectMeta{Name: "docs", Namespace: "team", Labels: map[string]string{argoInstanceLabel: "links"}},
		Spec:       linkv1.ShortLinkSpec{URL: "https://example.com"},
	})
	if err != nil {
		t.Fatal(err)
	}
	packed := out.(*compactlink.Link)
	l, _ := compactlink.Of(packed)
	if again, _ := ManagerCacheTransform()(packed); again != any(packed) {
		t.Errorf("a compact link transformed again became %T", again)
	}
	again, _ := ManagerCacheTransform()(l.DeepCopy())
	if back, _ := compactlink.Of(again); !reflect.DeepEqual(back, l) {
		t.Errorf("not idempotent: %+v", back)
	}
	bare, _ := ManagerCacheTransform()(&linkv1.ShortLink{ObjectMeta: metav1.ObjectMeta{Name: "b", Annotations: map[string]string{"a": "b"}}})
	if bl, _ := compactlink.Of(bare); bl.Labels != nil || bl.Annotations != nil {
		t.Errorf("want nil maps, got %v %v", bl.Labels, bl.Annotations)
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
