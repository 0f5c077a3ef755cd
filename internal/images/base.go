package images

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Entry is one directory or regular file of the base's filesystem.
type Entry struct {
	// Path is absolute and clean, e.g. /etc/passwd.
	Path string
	// Mode holds the permission bits, fs.ModeDir for a directory and
	// fs.ModeSticky for /tmp.
	Mode     fs.FileMode
	UID, GID int
	// Data is a regular file's content.
	Data []byte
}

// IsDir reports whether the entry is a directory.
func (e Entry) IsDir() bool { return e.Mode.IsDir() }

// epoch is every time in the base: its files' mtimes, its history and its
// config's created, so the base's digest depends on its content only.
var epoch = time.Unix(0, 0).UTC()

// BaseEntries returns the base's filesystem: the users and groups of
// distroless (root, nobody, nonroot 65532), the CA bundle caBundle, /tmp and
// the nonroot user's home. There is no shell, no package manager and no libc.
func BaseEntries(caBundle []byte) []Entry {
	dir := func(p string, perm fs.FileMode) Entry { return Entry{Path: p, Mode: fs.ModeDir | perm} }
	file := func(p, data string) Entry { return Entry{Path: p, Mode: 0o644, Data: []byte(data)} }
	home := dir(HomeDir, 0o700)
	home.UID, home.GID = UID, GID
	return []Entry{
		dir("/etc", 0o755),
		file("/etc/passwd", "root:x:0:0:root:/root:/sbin/nologin\n"+
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"+
			fmt.Sprintf("nonroot:x:%d:%d:nonroot:%s:/sbin/nologin\n", UID, GID, HomeDir)),
		file("/etc/group", "root:x:0:\nnobody:x:65534:\n"+fmt.Sprintf("nonroot:x:%d:\n", GID)),
		// Go's resolver reads it; without it, it falls back to its own order.
		file("/etc/nsswitch.conf", "hosts: files dns\n"),
		dir("/etc/ssl", 0o755),
		dir("/etc/ssl/certs", 0o755),
		{Path: CABundle, Mode: 0o644, Data: caBundle},
		dir("/home", 0o755),
		home,
		dir("/root", 0o700),
		dir("/tmp", fs.ModeSticky|0o777),
	}
}

// sorted returns entries sorted by path, so a parent precedes its children
// and the order of the input does not change the layer.
func sorted(entries []Entry) []Entry {
	s := slices.Clone(entries)
	slices.SortFunc(s, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	return s
}

// Tar returns entries as a tar archive (a layer's content): sorted, every
// mtime the epoch, no user or group names, so the same entries give the same
// bytes.
func Tar(entries []Entry) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	s := sorted(entries)
	for i, e := range s {
		if !path.IsAbs(e.Path) || path.Clean(e.Path) != e.Path || e.Path == "/" {
			return nil, fmt.Errorf("entry %q: want a clean absolute path other than /", e.Path)
		}
		if i > 0 && s[i-1].Path == e.Path {
			return nil, fmt.Errorf("entry %q twice", e.Path)
		}
		hdr := &tar.Header{
			Name:    strings.TrimPrefix(e.Path, "/"),
			Mode:    int64(e.Mode.Perm()),
			Uid:     e.UID,
			Gid:     e.GID,
			ModTime: epoch,
			Format:  tar.FormatUSTAR,
		}
		if e.Mode&fs.ModeSticky != 0 {
			hdr.Mode |= 0o1000 // c_ISVTX
		}
		if e.IsDir() {
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(e.Data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("entry %s: %w", e.Path, err)
		}
		if _, err := tw.Write(e.Data); err != nil {
			return nil, fmt.Errorf("entry %s: %w", e.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// BaseIndex returns the base: an OCI image index with one image per platform
// in Platforms, each the single layer Tar(entries) with the nonroot user,
// working directory and environment of distroless static nonroot. The same
// entries give the same digest.
func BaseIndex(entries []Entry) (v1.ImageIndex, error) {
	content, err := Tar(entries)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(content)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range Platforms {
		img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:     layer,
			MediaType: types.OCILayer,
			History: v1.History{
				Created:   v1.Time{Time: epoch},
				CreatedBy: "hack/images base",
				Comment:   "distroless static nonroot equivalent: users, CA bundle, /tmp, /home/nonroot",
			},
		})
		if err != nil {
			return nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
		cf.Created = v1.Time{Time: epoch}
		cf.Config.User = User
		cf.Config.WorkingDir = WorkDir
		cf.Config.Env = slices.Clone(Env)
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return nil, err
		}
		platform := p
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &platform},
		})
	}
	return idx, nil
}

// WriteKoCache writes idx where ko's on-disk cache ($KOCACHE/img, an OCI
// layout) finds it, so `ko build` with KOCACHE=dir and a base given by
// digest (<any repository>@<idx digest>) reads the base from disk and never
// from a registry. ko looks up the index and then each platform's image by
// digest among the layout's top-level manifests, so both are listed there.
func WriteKoCache(dir string, idx v1.ImageIndex) error {
	p, err := writeIndexLayout(filepath.Join(dir, "img"), idx)
	if err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return err
		}
		if err := p.AppendImage(img, layout.WithPlatform(*d.Platform)); err != nil {
			return err
		}
	}
	return nil
}

// WriteRootfs writes entries as a directory tree under dir, for the
// Dockerfile's base stage. Ownership is the Dockerfile's business (COPY makes
// files root's unless --chown): see Dockerfile().
func WriteRootfs(dir string, entries []Entry) error {
	for _, e := range sorted(entries) {
		p := filepath.Join(dir, filepath.FromSlash(e.Path))
		if e.IsDir() {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		} else if err := os.WriteFile(p, e.Data, 0o644); err != nil {
			return err
		}
		// Chmod, not the umask-filtered create mode, and the sticky bit too.
		if err := os.Chmod(p, e.Mode&(fs.ModePerm|fs.ModeSticky)); err != nil {
			return err
		}
	}
	return nil
}
