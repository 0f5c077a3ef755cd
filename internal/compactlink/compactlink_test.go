package compactlink

import (
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/randfill"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// plainLink is a link as the manager's cache holds most of them: active,
// its Ready message spelling out its code and URL.
func plainLink(i int) *linkv1.ShortLink {
	l := sampleLink("Active", "code 7Hq2Kp9xZm redirects to https://example.com/articles/12345?utm_source=bench&b=2&a=1 with 302 Found", nil)
	l.Namespace, l.Name, l.ResourceVersion, l.Generation = "bench-3", "l0012345", "1234567", 1
	l.UID = "9a8b7c6d-1f2e-4d3c-8b5a-69788796a5b4"
	l.Spec.URL = "https://example.com/articles/12345?utm_source=bench&b=2&a=1"
	l.Status.Code = "7Hq2Kp9xZm"
	l.Status.CanonicalURL = "https://example.com/articles/12345?a=1&b=2&utm_source=bench"
	l.Status.ShortURL = "http://127.0.0.1:8080/bench-3/7Hq2Kp9xZm"
	l.CreationTimestamp = metav1.NewTime(time.Date(2026, 11, 30, 1, 2, 3, 0, time.Local).Add(time.Duration(i) * time.Second))
	l.Status.Conditions[0].LastTransitionTime = l.CreationTimestamp
	return l
}

func roundTrip(t *testing.T, l *linkv1.ShortLink) *Link {
	t.Helper()
	c, err := Pack(l.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	back, err := c.Unpack()
	if err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(back, l) {
		t.Fatalf("unpacked link differs from the packed one:\n got %+v\nwant %+v", back, l)
	}
	if c.Summary != SummaryOfLink(l) {
		t.Errorf("summary %+v, want %+v", c.Summary, SummaryOfLink(l))
	}
	return c
}

// TestPackRoundTrip: what Unpack returns is what was packed, for a plain
// link, a link with every field of spec and status set, and links with
// labels, annotations and deletion metadata.
func TestPackRoundTrip(t *testing.T) {
	every := plainLink(0)
	fill(reflect.ValueOf(&every.Spec).Elem())
	fill(reflect.ValueOf(&every.Status).Elem())
	every.Labels = map[string]string{"kustomize.toolkit.fluxcd.io/name": "links"}
	every.Annotations = map[string]string{"argocd.argoproj.io/tracking-id": "app:linkforge.io/ShortLink:team-a/docs"}
	now := metav1.Now().Rfc3339Copy()
	every.DeletionTimestamp, every.DeletionGracePeriodSeconds = &now, ptr(int64(0))
	for name, l := range map[string]*linkv1.ShortLink{"plain": plainLink(1), "every field": every, "empty": {}} {
		t.Run(name, func(t *testing.T) { roundTrip(t, l) })
	}
}

// TestPackKeepsInexactLinksExact: the API server keeps a custom resource's
// JSON as it was sent, so a time may have a fraction of a second, or be a
// set zero time; metav1.Time writes neither back (whole seconds; null), so
// such a link is kept as it is, and reads back exactly. Empty lists read
// back as nil (omitempty), which every reader takes as empty.
func TestPackKeepsInexactLinksExact(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		exact      bool // kept as it is rather than packed
	}{
		{"whole seconds", `{"spec":{"url":"https://example.com/","expiresAt":"2026-11-29T10:00:00Z"}}`, false},
		{"a fraction of a second in spec.expiresAt", `{"spec":{"url":"https://example.com/","expiresAt":"2026-11-29T10:00:00.5Z"}}`, true},
		{"a rule's after with a fraction", `{"spec":{"url":"https://example.com/","rules":[{"url":"https://example.com/b","after":"2026-11-29T10:00:00.25+01:00"}]}}`, true},
		{"a set zero spec.activatesAt", `{"spec":{"url":"https://example.com/","activatesAt":"0001-01-01T00:00:00Z"}}`, true},
		{"a reservation's expiry in microseconds", `{"spec":{"url":"https://example.com/"},"status":{"useReservations":[{"holder":"r","quota":1,"expiresAt":"2026-11-29T10:00:00.123456Z"}]}}`, false},
		{"empty lists", `{"spec":{"url":"https://example.com/","rules":[],"variants":[]}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l linkv1.ShortLink
			if err := sigsjson.UnmarshalCaseSensitivePreserveInts([]byte(tc.json), &l); err != nil {
				t.Fatal(err)
			}
			c := roundTrip(t, &l)
			if exact := c.rare != nil && c.rare.exact != nil; exact != tc.exact {
				t.Fatalf("kept as it is: %v, want %v", exact, tc.exact)
			}
			if back, _ := c.Unpack(); tc.exact && !reflect.DeepEqual(back, &l) {
				t.Errorf("a link kept as it is reads back as %+v, want %+v", back, &l)
			}
		})
	}
}

// FuzzPackRoundTrip: any spec and status survive the round trip (times at
// the API's precision: seconds, and microseconds for MicroTime).
func FuzzPackRoundTrip(f *testing.F) {
	f.Add([]byte("seed"))
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Fuzz(func(t *testing.T, seed []byte) {
		l := plainLink(len(seed))
		filler := randfill.NewFromGoFuzz(seed).NilChance(0.3).NumElements(0, 2).Funcs(
			// Mostly what JSON keeps (seconds, microseconds); sometimes a
			// fraction or a zero time, which Pack keeps exact.
			func(tm *metav1.Time, c randfill.Continue) {
				switch c.Intn(8) {
				case 0:
					*tm = metav1.Unix(c.Int63n(1<<33), c.Int63n(1e9))
				case 1:
					*tm = metav1.Time{}
				default:
					*tm = metav1.Unix(c.Int63n(1<<33), 0).Rfc3339Copy()
				}
			},
			func(tm *metav1.MicroTime, c randfill.Continue) {
				switch c.Intn(8) {
				case 0:
					*tm = metav1.NewMicroTime(time.Unix(0, c.Int63n(1<<60)))
					return
				case 1:
					*tm = metav1.MicroTime{}
					return
				}
				*tm = metav1.NewMicroTime(time.UnixMicro(c.Int63n(1 << 50)).Local())
			},
		)
		filler.Fill(&l.Spec)
		filler.Fill(&l.Status)
		roundTrip(t, l)
	})
}

// TestPackedPlainLinkSize keeps a plain link's cached size: the Link (its
// size class) and its packed bytes. A new field in the Link, or a
// dictionary that no longer fits the links it packs, is a decision.
func TestPackedPlainLinkSize(t *testing.T) {
	if got := unsafe.Sizeof(Link{}); got != 144 {
		t.Errorf("a Link is %d bytes, was 144 (the 144-byte size class)", got)
	}
	c := roundTrip(t, plainLink(2))
	if n := c.PackedSize(); n > 160 {
		t.Errorf("a plain link packs into %d bytes, want at most 160 (it was 156)", n)
	}
	t.Logf("a plain link packs into %d bytes (JSON of the rest of it: the dictionary's job)", c.PackedSize())
}

// TestLinkIsTheCachedShortLink: DeepCopyObject hands out the ShortLink (what
// controller-runtime's cache reader returns), Of and SummaryOf read either
// form, and a setter says the Link is read only.
func TestLinkIsTheCachedShortLink(t *testing.T) {
	l := plainLink(3)
	l.Labels = map[string]string{"app.kubernetes.io/instance": "links"}
	c := roundTrip(t, l)
	copied, ok := c.DeepCopyObject().(*linkv1.ShortLink)
	if !ok || !apiequality.Semantic.DeepEqual(copied, l) {
		t.Fatalf("DeepCopyObject = %T %+v, want the ShortLink", c.DeepCopyObject(), copied)
	}
	copied.Labels["x"] = "y" // the copy is the caller's own
	if _, found := c.GetLabels()["x"]; found {
		t.Error("a change to the copy's labels changed the cached link's")
	}
	if got, ok := Of(c); !ok || !apiequality.Semantic.DeepEqual(got, l) {
		t.Errorf("Of(Link) = %+v, %v", got, ok)
	}
	if got, ok := Of(l); !ok || got != l {
		t.Errorf("Of(ShortLink) = %p, %v; want the same object", got, ok)
	}
	if s, ok := SummaryOf(l); !ok || s != c.Summary || !s.HoldsConfirmedCode() {
		t.Errorf("SummaryOf(ShortLink) = %+v, %v", s, ok)
	}
	if _, ok := Of("not a link"); ok {
		t.Error("Of accepted a string")
	}
	if c.GetUID() != l.UID || !l.CreationTimestamp.Equal(ptr(c.GetCreationTimestamp())) || c.GetResourceVersion() != l.ResourceVersion {
		t.Error("the metadata getters disagree with the link")
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "read only") {
			t.Errorf("SetName: recovered %v, want a read-only panic", r)
		}
	}()
	c.SetName("other")
}

// The cost of a compact cache, against what a cache of ShortLinks spends on
// the same reads: a deep copy of the cached object.
func BenchmarkPack(b *testing.B) {
	l := plainLink(4)
	for b.Loop() {
		if _, err := Pack(l); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnpack(b *testing.B) {
	c, err := Pack(plainLink(5))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := c.Unpack(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDeepCopyBaseline(b *testing.B) {
	l := plainLink(6)
	for b.Loop() {
		_ = l.DeepCopy()
	}
}
