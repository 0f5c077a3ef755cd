package importer

import (
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/shortcode"
)

func link(code, url string) Link {
	canonical, err := shortcode.Canonicalize(url)
	if err != nil {
		panic(err)
	}
	return Link{URL: url, CanonicalURL: canonical, Code: code}
}

func TestManifestNames(t *testing.T) {
	tests := []struct {
		name   string
		links  []Link
		prefix string
		want   []string
	}{
		{name: "a lower-case code is the name", links: []Link{link("docs", "https://example.com/")}, want: []string{"docs"}},
		{name: "dashes kept", links: []Link{link("old-api", "https://example.com/")}, want: []string{"old-api"}},
		{
			name:  "codes that differ only by case get different names",
			links: []Link{link("launch", "https://example.com/1"), link("Launch", "https://example.com/2"), link("LAUNCH", "https://example.com/3")},
			want:  []string{"launch", "launch-" + shortHash("Launch"), "launch-" + shortHash("LAUNCH")},
		},
		{name: "underscore", links: []Link{link("quoted_Code", "https://example.com/")}, want: []string{"quoted-code-" + shortHash("quoted_Code")}},
		{name: "edge dashes", links: []Link{link("-a-", "https://example.com/")}, want: []string{"a-" + shortHash("-a-")}},
		{name: "nothing left of the code", links: []Link{link("___", "https://example.com/")}, want: []string{"code-" + shortHash("___")}},
		{
			name:  "no code: the canonical URL's hash",
			links: []Link{link("", "HTTPS://Example.com/x?b=2&a=1")},
			want:  []string{"link-" + shortHash("https://example.com/x?a=1&b=2")},
		},
		{
			name:  "same URL twice without a code",
			links: []Link{link("", "https://example.com/x"), link("", "https://EXAMPLE.com/x")},
			want:  []string{"link-" + shortHash("https://example.com/x"), "link-" + shortHash("https://example.com/x") + "-2"},
		},
		{
			name:  "a code that looks like a derived name",
			links: []Link{link("Promo", "https://example.com/1"), link("promo-"+shortHash("Promo"), "https://example.com/2")},
			want:  []string{"promo-" + shortHash("Promo"), "promo-" + shortHash("Promo") + "-2"},
		},
		{name: "prefix", links: []Link{link("docs", "https://example.com/")}, prefix: "yourls-", want: []string{"yourls-docs"}},
		{name: "64-character code", links: []Link{link(strings.Repeat("A", 64), "https://example.com/")}, prefix: "imported.from-yourls.", want: []string{"imported.from-yourls." + strings.Repeat("a", 64) + "-" + shortHash(strings.Repeat("A", 64))}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			manifests, err := Manifests(tc.links, "", tc.prefix)
			if err != nil {
				t.Fatal(err)
			}
			for i, m := range manifests {
				if m.Metadata.Name != tc.want[i] {
					t.Errorf("name %d = %q, want %q", i, m.Metadata.Name, tc.want[i])
				}
			}
		})
	}
}

func TestManifestsRejectBadNames(t *testing.T) {
	links := []Link{link("docs", "https://example.com/")}
	for _, tc := range []struct{ namespace, prefix, wantErr string }{
		{prefix: "Yourls_", wantErr: `invalid name prefix "Yourls_"`},
		{prefix: "-x", wantErr: `invalid name prefix "-x"`},
		{prefix: strings.Repeat("p", 250), wantErr: `the name "ppp`},
		{namespace: "Team A", wantErr: `invalid namespace "Team A"`},
	} {
		if _, err := Manifests(links, tc.namespace, tc.prefix); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("Manifests(namespace %q, prefix %.10q...) error %v, want %q", tc.namespace, tc.prefix, err, tc.wantErr)
		}
	}
}

func TestManifestYAML(t *testing.T) {
	maxUses := int64(60)
	expires := time.Date(2027, 1, 1, 1, 0, 0, 500, time.FixedZone("CET", 3600))
	l := link("12C18", "https://store.example.com/product/123?a=1")
	l.ExpiresAt, l.MaxUses, l.ForwardQuery = &expires, &maxUses, true
	manifests, err := Manifests([]Link{l, link("", "https://example.com/")}, "team-a", "shlink-")
	if err != nil {
		t.Fatal(err)
	}
	got, err := manifests[0].YAML()
	if err != nil {
		t.Fatal(err)
	}
	// The fraction of a second is rounded up: the link must not expire early.
	want := `apiVersion: linkforge.io/v1alpha1
kind: ShortLink
metadata:
  name: shlink-12c18-` + shortHash("12C18") + `
  namespace: team-a
spec:
  code: 12C18
  expiresAt: "2027-01-01T00:00:01Z"
  forwardQuery: true
  maxUses: 60
  url: https://store.example.com/product/123?a=1
`
	if string(got) != want {
		t.Errorf("YAML:\n%s\nwant:\n%s", got, want)
	}

	// Every manifest must be a ShortLink the API accepts field for field:
	// strict decoding fails on a field the CRD type does not have.
	for _, m := range manifests {
		data, err := m.YAML()
		if err != nil {
			t.Fatal(err)
		}
		var decoded v1alpha1.ShortLink
		if err := yaml.UnmarshalStrict(data, &decoded); err != nil {
			t.Fatalf("%s does not decode into v1alpha1.ShortLink: %v", data, err)
		}
		if decoded.APIVersion != v1alpha1.GroupVersion.String() || decoded.Kind != "ShortLink" {
			t.Errorf("apiVersion/kind %q/%q", decoded.APIVersion, decoded.Kind)
		}
		if decoded.Spec.URL != m.Spec.URL || decoded.Spec.Code != m.Spec.Code || decoded.Namespace != "team-a" {
			t.Errorf("decoded %+v from %s", decoded, data)
		}
	}
	var decoded v1alpha1.ShortLink
	data, _ := manifests[0].YAML()
	_ = yaml.UnmarshalStrict(data, &decoded)
	if decoded.Spec.ExpiresAt == nil || !decoded.Spec.ExpiresAt.Time.Equal(expires.Truncate(time.Second).Add(time.Second)) {
		t.Errorf("expiresAt decoded as %v", decoded.Spec.ExpiresAt)
	}
	if decoded.Spec.MaxUses == nil || *decoded.Spec.MaxUses != 60 || !decoded.Spec.ForwardQuery {
		t.Errorf("maxUses/forwardQuery decoded as %v/%v", decoded.Spec.MaxUses, decoded.Spec.ForwardQuery)
	}
}

func TestManifestsPerNamespaceWithLabelsAndAnnotations(t *testing.T) {
	a := link("abc123", "https://example.com/a")
	a.Namespace = "team-a"
	a.Labels = map[string]string{TagLabelPrefix + "foo": "true"}
	a.Annotations = map[string]string{TitleAnnotation: "Title A", VisitsAnnotation: "12"}
	b := link("abc123", "https://example.com/b")
	b.Namespace = "team-b"
	c := link("abc123", "https://example.com/c") // the default namespace
	manifests, err := Manifests([]Link{a, b, c}, "default-ns", "")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, 0, len(manifests))
	for _, m := range manifests {
		got = append(got, m.Metadata.Namespace+"/"+m.Metadata.Name)
	}
	// One code in three namespaces: the same name in each, no counter.
	if strings.Join(got, " ") != "team-a/abc123 team-b/abc123 default-ns/abc123" {
		t.Errorf("names %q", got)
	}
	data, err := manifests[0].YAML()
	if err != nil {
		t.Fatal(err)
	}
	var decoded v1alpha1.ShortLink
	if err := yaml.UnmarshalStrict(data, &decoded); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	if decoded.Labels[TagLabelPrefix+"foo"] != "true" || decoded.Annotations[TitleAnnotation] != "Title A" || decoded.Annotations[VisitsAnnotation] != "12" {
		t.Errorf("labels %v annotations %v", decoded.Labels, decoded.Annotations)
	}
}
