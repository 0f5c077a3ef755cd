package importapply

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/linkforge/linkforge/internal/importer"
)

// link is a live ShortLink: spec, annotations, and managed fields as
// manager -> fieldsV1 (the import's manager applies, the others update).
func link(spec map[string]any, annotations map[string]string, statusCode string, managers map[string]string) *live {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetName("promo")
	u.SetAnnotations(annotations)
	if statusCode != "" {
		_ = unstructured.SetNestedField(u.Object, statusCode, "status", "code")
	}
	entries := make([]metav1.ManagedFieldsEntry, 0, len(managers))
	for manager, fields := range managers {
		op := metav1.ManagedFieldsOperationUpdate
		if manager == FieldManager {
			op = metav1.ManagedFieldsOperationApply
		}
		entries = append(entries, metav1.ManagedFieldsEntry{Manager: manager, Operation: op, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)})
	}
	u.SetManagedFields(entries)
	return liveFrom(u)
}

func manifest(url, code, source string, maxUses *int64, annotations map[string]string) importer.Manifest {
	m := importer.Manifest{Metadata: importer.ManifestMeta{Name: "promo", Namespace: "ns", Annotations: map[string]string{importer.SourceAnnotation: source}}}
	for k, v := range annotations {
		m.Metadata.Annotations[k] = v
	}
	m.Spec.URL, m.Spec.Code, m.Spec.MaxUses = url, code, maxUses
	return m
}

func ptr(n int64) *int64 { return &n }

const (
	importFields = `{"f:metadata":{"f:annotations":{"f:linkforge.io/title":{},"f:linkforge.io/import-source":{}}},"f:spec":{"f:url":{},"f:code":{},"f:maxUses":{}}}`
	statusFields = `{"f:status":{"f:code":{}}}`
)

func TestJudge(t *testing.T) {
	imported := func(source string) *live {
		return link(map[string]any{"url": "https://a.example/", "code": "promo", "maxUses": int64(100)},
			map[string]string{importer.TitleAnnotation: "Spring", importer.SourceAnnotation: source}, "promo",
			map[string]string{FieldManager: importFields, "linkforge-manager": statusFields})
	}
	same := manifest("https://a.example/", "promo", "a.csv@sha256:1", ptr(100), map[string]string{importer.TitleAnnotation: "Spring"})
	tests := []struct {
		name      string
		m         importer.Manifest
		l         *live
		holder    string
		overwrite bool
		want      verdict
		conflict  string // substring of the Conflict, "" for none
	}{
		{name: "new", m: same, want: toCreate},
		{name: "the same file again", m: same, l: imported("a.csv@sha256:1"), want: toLeave},
		{name: "the source changed a row", m: manifest("https://a.example/v2", "promo", "a.csv@sha256:1", ptr(100), map[string]string{importer.TitleAnnotation: "Spring"}), l: imported("a.csv@sha256:1"), want: toUpdate},
		{
			name: "another file reuses the code", m: manifest("https://b.example/", "promo", "b.csv@sha256:2", nil, nil), l: imported("a.csv@sha256:1"), want: toConflict,
			conflict: `ShortLink ns/promo exists and was not created by this import (imported from "a.csv@sha256:1"): left as it is; --overwrite would change url "https://a.example/" -> "https://b.example/", maxUses "100" -> (removed), title "Spring" -> (removed)`,
		},
		{
			name: "--overwrite", m: manifest("https://b.example/", "promo", "b.csv@sha256:2", nil, nil), l: imported("a.csv@sha256:1"), overwrite: true, want: toOverwrite,
			conflict: `--overwrite changed url "https://a.example/" -> "https://b.example/", maxUses "100" -> (removed), title "Spring" -> (removed)`,
		},
		{name: "another file, the same link", m: manifest("https://a.example/", "promo", "b.csv@sha256:2", ptr(100), map[string]string{importer.TitleAnnotation: "Spring"}), l: imported("a.csv@sha256:1"), want: toMatch},
		{
			name: "made by hand", m: manifest("https://a.example/", "docs", "c.csv@sha256:3", ptr(1), nil),
			l:    link(map[string]any{"url": "https://a.example/"}, nil, "LUMLV6n3To", map[string]string{"kubectl-client-side-apply": `{"f:spec":{"f:url":{}}}`, "linkforge-manager": statusFields}),
			want: toConflict, conflict: `(made by kubectl-client-side-apply): left as it is; --overwrite would change code (computed "LUMLV6n3To") -> "docs" (its short URL changes), maxUses (unset) -> "1"`,
		},
		{
			name: "imported before sources were recorded", m: same,
			l:    link(map[string]any{"url": "https://a.example/", "code": "promo", "maxUses": int64(100)}, map[string]string{importer.TitleAnnotation: "Spring"}, "", map[string]string{FieldManager: importFields}),
			want: toMatch,
		},
		{
			name: "imported before sources were recorded, changed", m: manifest("https://a.example/v2", "promo", "a.csv@sha256:1", nil, nil),
			l:    link(map[string]any{"url": "https://a.example/", "code": "promo"}, nil, "", map[string]string{FieldManager: importFields}),
			want: toConflict, conflict: "(imported by a linkforge import that did not record its source)",
		},
		{
			// Someone else holds the title too: applying keeps it, so it is
			// no change.
			name: "a field another manager holds too stays", m: manifest("https://b.example/", "promo", "b.csv@sha256:2", ptr(100), nil),
			l: link(map[string]any{"url": "https://a.example/", "code": "promo", "maxUses": int64(100)}, map[string]string{importer.TitleAnnotation: "Spring", importer.SourceAnnotation: "a"}, "promo",
				map[string]string{FieldManager: importFields, "kubectl-annotate": `{"f:metadata":{"f:annotations":{"f:linkforge.io/title":{}}}}`}),
			want: toConflict, conflict: `would change url "https://a.example/" -> "https://b.example/"` + "\x00",
		},
		{name: "a code another link holds", m: same, holder: "ns/spring", overwrite: true, want: toConflict, conflict: `ShortLink ns/promo: code "promo" is held by ShortLink ns/spring in the namespace`},
		{name: "a code the link already has", m: same, l: imported("a.csv@sha256:1"), holder: "ns/other", want: toLeave},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var f *found
			if tc.l != nil {
				f = assess(tc.m, tc.l)
			}
			v, c := judge(tc.m, f, tc.holder, tc.overwrite)
			if v != tc.want {
				t.Errorf("verdict %d, want %d (conflict %+v)", v, tc.want, c)
			}
			switch {
			case tc.conflict == "" && c != nil:
				t.Errorf("conflict %s, want none", c)
			case tc.conflict != "" && c == nil:
				t.Errorf("no conflict, want %q", tc.conflict)
			case c != nil:
				// A trailing NUL asks for the end of the message.
				want, whole := strings.CutSuffix(tc.conflict, "\x00")
				if got := c.String(); !strings.Contains(got, want) || whole && !strings.HasSuffix(got, want) {
					t.Errorf("conflict\n %s\nwant it to contain\n %s", got, want)
				}
			}
		})
	}
}
