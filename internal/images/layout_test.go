package images

import (
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

// TestIndexOne checks that a layout holding one image, as ko writes a
// one-platform build, becomes a layout holding an index of that image with
// its platform and annotations, and that anything else is refused.
func TestIndexOne(t *testing.T) {
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	img = mutate.Annotations(img, map[string]string{"org.opencontainers.image.base.name": "base@sha256:x"}).(v1.Image)
	dir := filepath.Join(t.TempDir(), "manager")
	l, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	amd64 := v1.Platform{OS: "linux", Architecture: "amd64"}
	if err := IndexOne(dir, amd64); err != nil {
		t.Fatal(err)
	}
	idx, err := OpenIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := PlatformImage(idx, amd64)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	if d, _ := got.Digest(); d != want {
		t.Errorf("the index's image is %s, want %s", d, want)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Annotations["org.opencontainers.image.base.name"] != "base@sha256:x" {
		t.Errorf("index %d manifests, annotations %v: want one, and the image's", len(m.Manifests), m.Annotations)
	}
	// Now it holds an index: a second call refuses it, and leaves it whole.
	if err := IndexOne(dir, amd64); err == nil || !strings.Contains(err.Error(), "exactly one image") {
		t.Errorf("IndexOne on an index: %v, want a refusal", err)
	}
	if _, err := OpenIndex(dir); err != nil {
		t.Errorf("the refused layout is no longer one: %v", err)
	}
	if err := IndexOne(filepath.Join(t.TempDir(), "none"), amd64); err == nil {
		t.Error("IndexOne on no layout: no error")
	}
}
