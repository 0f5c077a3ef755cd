package images

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

var testCA = []byte("-----BEGIN CERTIFICATE-----\nnot really\n-----END CERTIFICATE-----\n")

func baseDigest(t *testing.T, entries []Entry) v1.Hash {
	t.Helper()
	idx, err := BaseIndex(entries)
	if err != nil {
		t.Fatal(err)
	}
	h, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestBaseReproducible checks the base's digest depends on its entries'
// content only: the same entries, in any order, give the same digest; a
// different CA bundle gives another.
func TestBaseReproducible(t *testing.T) {
	entries := BaseEntries(testCA)
	first := baseDigest(t, entries)
	if again := baseDigest(t, BaseEntries(testCA)); again != first {
		t.Errorf("the same entries gave %s, then %s", first, again)
	}
	reversed := slices.Clone(entries)
	slices.Reverse(reversed)
	if got := baseDigest(t, reversed); got != first {
		t.Errorf("the entries reversed gave %s, in order %s", got, first)
	}
	if other := baseDigest(t, BaseEntries(append(slices.Clone(testCA), '\n'))); other == first {
		t.Errorf("another CA bundle gave the same digest %s", first)
	}
}

// TestTar checks the layer's archive: sorted entries, parents first, the
// epoch as every mtime, owners and modes (the sticky /tmp) as defined.
func TestTar(t *testing.T) {
	data, err := Tar(BaseEntries(testCA))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(data))
	var names []string
	byName := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(epoch) {
			t.Errorf("%s mtime %v, want the epoch", h.Name, h.ModTime)
		}
		names = append(names, h.Name)
		byName[h.Name] = h
	}
	if !slices.IsSorted(names) {
		t.Errorf("entries not sorted: %v", names)
	}
	if h := byName["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("tmp/: %+v, want mode 1777", h)
	}
	if h := byName["home/nonroot/"]; h == nil || h.Uid != UID || h.Gid != GID || h.Mode != 0o700 {
		t.Errorf("home/nonroot/: %+v, want 65532:65532 mode 700", h)
	}
	if h := byName["etc/ssl/certs/ca-certificates.crt"]; h == nil || h.Size != int64(len(testCA)) {
		t.Errorf("the CA bundle: %+v", h)
	}
}

// TestTarRejects checks bad entries are refused, not written.
func TestTarRejects(t *testing.T) {
	for name, entries := range map[string][]Entry{
		"relative":  {{Path: "etc", Mode: fs.ModeDir | 0o755}},
		"unclean":   {{Path: "/etc/../etc", Mode: fs.ModeDir | 0o755}},
		"root":      {{Path: "/", Mode: fs.ModeDir | 0o755}},
		"duplicate": {{Path: "/a", Mode: 0o644}, {Path: "/a", Mode: 0o644}},
	} {
		if _, err := Tar(entries); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestWriteKoCache checks ko's cache layout lists the base index and each
// platform's image at its top level, where ko looks digests up.
func TestWriteKoCache(t *testing.T) {
	idx, err := BaseIndex(BaseEntries(testCA))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteKoCache(dir, idx); err != nil {
		t.Fatal(err)
	}
	p, err := layout.FromPath(filepath.Join(dir, "img"))
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	listed := make([]v1.Hash, 0, len(tm.Manifests))
	for _, d := range tm.Manifests {
		listed = append(listed, d.Digest)
	}
	want, _ := idx.Digest()
	im, _ := idx.IndexManifest()
	wantAll := make([]v1.Hash, 0, 1+len(im.Manifests))
	wantAll = append(wantAll, want)
	for _, d := range im.Manifests {
		wantAll = append(wantAll, d.Digest)
	}
	for _, h := range wantAll {
		if !slices.Contains(listed, h) {
			t.Errorf("%s is not at the top of the cache's index.json (%v)", h, listed)
		}
	}
	// Written twice (make images again), the cache holds one copy.
	if err := WriteKoCache(dir, idx); err != nil {
		t.Fatal(err)
	}
	p, _ = layout.FromPath(filepath.Join(dir, "img"))
	top, _ = p.ImageIndex()
	if tm2, _ := top.IndexManifest(); len(tm2.Manifests) != len(wantAll) {
		t.Errorf("after a second write the cache lists %d manifests, want %d", len(tm2.Manifests), len(wantAll))
	}
}

// TestWriteRootfs checks the Dockerfile's base tree has the entries' modes
// and content.
func TestWriteRootfs(t *testing.T) {
	dir := t.TempDir()
	if err := WriteRootfs(dir, BaseEntries(testCA)); err != nil {
		t.Fatal(err)
	}
	for _, e := range BaseEntries(testCA) {
		fi, err := os.Stat(filepath.Join(dir, e.Path))
		if err != nil {
			t.Error(err)
			continue
		}
		if got, want := fi.Mode()&(fs.ModePerm|fs.ModeSticky|fs.ModeDir), e.Mode; got != want {
			t.Errorf("%s: mode %v, want %v", e.Path, got, want)
		}
		if !e.IsDir() {
			if data, _ := os.ReadFile(filepath.Join(dir, e.Path)); !bytes.Equal(data, e.Data) {
				t.Errorf("%s: content differs", e.Path)
			}
		}
	}
}
