package release

import (
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"
)

var built = []Image{
	{Name: "manager", Repository: "registry.example.com/lf/manager", Digest: "sha256:" + strings.Repeat("a", 64)},
	{Name: "redirector", Repository: "registry.example.com/lf/redirector", Digest: "sha256:" + strings.Repeat("b", 64)},
}

// TestOverlay checks the overlay replaces each image by the name the base
// gave it, with the built repository and digest.
func TestOverlay(t *testing.T) {
	base := []byte(`images:
- name: manager
  newName: ghcr.io/linkforge/linkforge/manager
  newTag: latest
- name: redirector
  newTag: v1
`)
	out, err := Overlay(base, "../../config/default", built)
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := sigsyaml.Unmarshal(out, &k); err != nil {
		t.Fatal(err)
	}
	want := []kustomizeImage{
		{Name: "ghcr.io/linkforge/linkforge/manager", NewName: built[0].Repository, Digest: built[0].Digest},
		{Name: "redirector", NewName: built[1].Repository, Digest: built[1].Digest},
	}
	if len(k.Resources) != 1 || k.Resources[0] != "../../config/default" {
		t.Errorf("resources %v", k.Resources)
	}
	if len(k.Images) != len(want) {
		t.Fatalf("images %+v, want %+v", k.Images, want)
	}
	for i := range want {
		if k.Images[i] != want[i] {
			t.Errorf("image %d: %+v, want %+v", i, k.Images[i], want[i])
		}
	}
}

// TestOverlayNeedsEveryImage checks a base that does not name an image is
// an error: its Deployment would keep an unpinned image.
func TestOverlayNeedsEveryImage(t *testing.T) {
	if _, err := Overlay([]byte("images:\n- name: manager\n"), "../base", built); err == nil || !strings.Contains(err.Error(), "redirector") {
		t.Errorf("err = %v, want one naming redirector", err)
	}
}

const values = `# Top comment.
# -- The images.
image:
  # -- Where from.
  repository: ghcr.io/linkforge/linkforge
  tag: ""
  digests:
    manager: ""
    redirector: ""
  pullPolicy: "" # kept
manager:
  replicas: 1
`

// TestChartValues checks the repository and digests are set and the
// comments and other values kept.
func TestChartValues(t *testing.T) {
	out, err := ChartValues([]byte(values), "registry.example.com/lf/", built)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Image struct {
			Repository string            `json:"repository"`
			Tag        string            `json:"tag"`
			Digests    map[string]string `json:"digests"`
		} `json:"image"`
		Manager struct {
			Replicas int `json:"replicas"`
		} `json:"manager"`
	}
	if err := sigsyaml.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	if v.Image.Repository != "registry.example.com/lf" || v.Image.Digests["manager"] != built[0].Digest || v.Image.Digests["redirector"] != built[1].Digest {
		t.Errorf("values: %+v", v.Image)
	}
	if v.Manager.Replicas != 1 || v.Image.Tag != "" {
		t.Errorf("other values changed: %+v", v)
	}
	// Only the three values' lines change.
	var changed []string
	before, after := strings.Split(values, "\n"), strings.Split(string(out), "\n")
	if len(before) != len(after) {
		t.Fatalf("%d lines, was %d:\n%s", len(after), len(before), out)
	}
	for i := range before {
		if before[i] != after[i] {
			changed = append(changed, strings.TrimSpace(after[i]))
		}
	}
	want := []string{`repository: "registry.example.com/lf"`, `manager: "` + built[0].Digest + `"`, `redirector: "` + built[1].Digest + `"`}
	if strings.Join(changed, "\n") != strings.Join(want, "\n") {
		t.Errorf("changed lines %q, want %q", changed, want)
	}
}

// TestChartValuesNeedsTheKeys checks values without a place for a digest
// are an error, not a value the templates would ignore.
func TestChartValuesNeedsTheKeys(t *testing.T) {
	for name, v := range map[string]string{
		"no digests":       "image:\n  repository: x\n",
		"no redirector":    "image:\n  repository: x\n  digests:\n    manager: \"\"\n",
		"digests a string": "image:\n  repository: x\n  digests: \"\"\n",
	} {
		if _, err := ChartValues([]byte(v), "r", built); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
