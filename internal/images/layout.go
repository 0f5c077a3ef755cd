package images

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// LayoutDir is where `make images` writes the OCI layout of the image named image, under the
// output directory out (dist/images).
func LayoutDir(out, image string) string { return filepath.Join(out, image) }

// OpenIndex returns the image index held by the OCI layout at dir, which
// `make images` writes with exactly one: the image for every platform.
func OpenIndex(dir string) (v1.ImageIndex, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("no OCI layout at %s (run `make images`): %w", dir, err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	im, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(im.Manifests) != 1 || !im.Manifests[0].MediaType.IsIndex() {
		return nil, fmt.Errorf("%s: want exactly one image index in index.json, have %d manifests (was the layout written twice?)", dir, len(im.Manifests))
	}
	return top.ImageIndex(im.Manifests[0].Digest)
}

// PlatformImage returns idx's image for platform.
func PlatformImage(idx v1.ImageIndex, platform v1.Platform) (v1.Image, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.OS == platform.OS && d.Platform.Architecture == platform.Architecture && d.Platform.Variant == platform.Variant {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("no image for %s/%s in the index", platform.OS, platform.Architecture)
}

// File is one entry of an image's flattened filesystem.
type File struct {
	Header *tar.Header
	// Data is a regular file's content when it was asked for.
	Data []byte
}

// Files returns img's flattened filesystem (every layer applied, whiteouts
// honoured) by absolute path; keep says which regular files' content to read.
func Files(img v1.Image, keep func(file string) bool) (map[string]File, error) {
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	files := map[string]File{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		p := path.Clean("/" + hdr.Name)
		f := File{Header: hdr}
		if hdr.Typeflag == tar.TypeReg && keep != nil && keep(p) {
			if f.Data, err = io.ReadAll(tr); err != nil {
				return nil, err
			}
		}
		files[p] = f
	}
}

// ExtractFile writes the regular file at path in img to dst, executable.
func ExtractFile(img v1.Image, file, dst string) error {
	files, err := Files(img, func(p string) bool { return p == file })
	if err != nil {
		return err
	}
	f, ok := files[file]
	if !ok || f.Header.Typeflag != tar.TypeReg {
		return fmt.Errorf("no regular file %s in the image", file)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	// Write a new file and rename it, so a running copy is never overwritten.
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, f.Data, 0o755); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// Push pushes the index of the layout at dir to ref (repository:tag) and
// returns the pushed reference by digest. Credentials come from the Docker
// config (~/.docker/config.json, `docker login`, credential helpers).
func Push(dir, ref string, opts ...name.Option) (name.Digest, error) {
	idx, err := OpenIndex(dir)
	if err != nil {
		return name.Digest{}, err
	}
	tag, err := name.NewTag(ref, opts...)
	if err != nil {
		return name.Digest{}, err
	}
	if err := remote.WriteIndex(tag, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return name.Digest{}, fmt.Errorf("pushing %s: %w", tag, err)
	}
	h, err := idx.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	return tag.Context().Digest(h.String()), nil
}

// IndexDigest returns the digest of the image index in the layout at dir.
func IndexDigest(dir string) (v1.Hash, error) {
	idx, err := OpenIndex(dir)
	if err != nil {
		return v1.Hash{}, err
	}
	return idx.Digest()
}

// DigestRef returns repo/name@digest, the reference of an image by digest.
func DigestRef(repo, imageName string, digest v1.Hash) string {
	return strings.TrimSuffix(repo, "/") + "/" + imageName + "@" + digest.String()
}

// IndexOne rewrites the OCI layout at dir, which holds a single image (what
// ko writes when it builds one platform), as a layout holding an index of
// that image for platform p, which is what ko writes for several: so a
// release names an image index by digest whatever the platforms built. The
// index carries the image manifest's annotations (its base), as ko's do.
func IndexOne(dir string, p v1.Platform) error {
	l, err := layout.FromPath(dir)
	if err != nil {
		return fmt.Errorf("no OCI layout at %s: %w", dir, err)
	}
	top, err := l.ImageIndex()
	if err != nil {
		return err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return err
	}
	if len(m.Manifests) != 1 || !m.Manifests[0].MediaType.IsImage() {
		return fmt.Errorf("%s: want a layout holding exactly one image, have %d manifests", dir, len(m.Manifests))
	}
	img, err := top.Image(m.Manifests[0].Digest)
	if err != nil {
		return err
	}
	im, err := img.Manifest()
	if err != nil {
		return err
	}
	d := m.Manifests[0]
	d.Platform = &p
	idx := mutate.Annotations(mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: img, Descriptor: d}), im.Annotations).(v1.ImageIndex)
	idx = mutate.IndexMediaType(idx, types.OCIImageIndex)
	tmp := dir + ".index-one"
	if _, err := writeIndexLayout(tmp, idx); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// writeIndexLayout writes a new OCI layout at dir (emptied first) holding idx.
func writeIndexLayout(dir string, idx v1.ImageIndex) (layout.Path, error) {
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", err
	}
	return p, p.AppendIndex(idx)
}
