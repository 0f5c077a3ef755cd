package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/linkforge/linkforge/internal/images"
)

// moduleRoot is the directory of the go.mod above the working directory.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("run node from the linkforge checkout")
	}
	return filepath.Dir(gomod), nil
}

// pauseArchive builds hack/node/pause (static) and writes a one-layer
// image of it, tagged pauseImage, as an archive ctr imports.
func pauseArchive(ctx context.Context, c *config) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(c.stateDir, "images")
	bin := filepath.Join(dir, "pause")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./hack/node/pause")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the pause program: %w\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Name: "pause", Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		return "", err
	}
	if _, err := tw.Write(data); err != nil {
		return "", err
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layer.Bytes())), nil
	})
	if err != nil {
		return "", err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return "", err
	}
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: "amd64",
		OS:           "linux",
		Config:       v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535"},
		RootFS:       v1.RootFS{Type: "layers", DiffIDs: mustDiffIDs(l)},
	})
	if err != nil {
		return "", err
	}
	tag, err := name.NewTag(pauseImage)
	if err != nil {
		return "", err
	}
	archive := filepath.Join(dir, "pause.tar")
	return archive, tarball.WriteToFile(archive, tag, img)
}

func mustDiffIDs(l v1.Layer) []v1.Hash {
	h, err := l.DiffID()
	if err != nil {
		panic(err)
	}
	return []v1.Hash{h}
}

// layoutArchive writes the OCI layout dir as a tar archive (oci.v1, which
// ctr imports).
func layoutArchive(dir, archive string) error {
	f, err := os.Create(archive)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer func() { _ = src.Close() }()
		_, err = io.Copy(tw, src)
		return err
	})
	if cerr := tw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func ctr(ctx context.Context, c *config, args ...string) (string, error) {
	return run(ctx, "ctr", append([]string{"--address", c.containerdSock(), "--namespace", "k8s.io"}, args...)...)
}

// importImages imports the pause image and, from -images, every image of
// internal/images (linux/amd64) as <repo>/<name>@<digest>: the references
// dist/install.yaml names, which imagePullPolicy IfNotPresent then finds.
func importImages(ctx context.Context, c *config) error {
	pause, err := pauseArchive(ctx, c)
	if err != nil {
		return err
	}
	if _, err := ctr(ctx, c, "images", "import", "--platform", "linux/amd64", pause); err != nil {
		return err
	}
	return importLayouts(ctx, c)
}

// importLayouts imports the images of -images into the running node's
// containerd (node import: another release's images, for the upgrade test).
func importLayouts(ctx context.Context, c *config) error {
	if c.imagesDir == "" {
		return nil
	}
	for _, im := range images.Images {
		layout := images.LayoutDir(c.imagesDir, im.Name)
		h, err := images.IndexDigest(layout)
		if err != nil {
			return err
		}
		archive := filepath.Join(c.stateDir, "images", im.Name+".tar")
		if err := layoutArchive(layout, archive); err != nil {
			return err
		}
		base := strings.TrimSuffix(c.repo, "/") + "/" + im.Name
		if _, err := ctr(ctx, c, "images", "import", "--base-name", base, "--digests", "--platform", "linux/amd64", archive); err != nil {
			return err
		}
		ref := base + "@" + h.String()
		out, err := ctr(ctx, c, "images", "ls", "-q")
		if err != nil {
			return err
		}
		if !strings.Contains(out, ref) {
			return fmt.Errorf("imported %s but containerd has no %s; it has:\n%s", archive, ref, out)
		}
		logf("imported %s", ref)
	}
	return nil
}
