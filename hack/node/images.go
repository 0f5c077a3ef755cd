package main

import (
	"archive/tar"
	"compress/gzip"
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

	"github.com/linkforge/linkforge/internal/gatewaytest"
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
// image of it, tagged pauseImage, as the archive ctr imports.
func pauseArchive(ctx context.Context, archive string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	bin := filepath.Join(filepath.Dir(archive), "pause")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./hack/node/pause")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the pause program: %w\n%s", err, out)
	}
	return binaryImageArchive(bin, "pause", pauseImage, "65535:65535", archive)
}

// binaryImageArchive writes a one-layer image of the static program bin,
// at /file, its entrypoint, run as user, tagged tag, as an archive ctr
// imports.
func binaryImageArchive(bin, file, tag, user, archive string) error {
	f, err := os.Open(bin)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	// The layer is written to a file: Traefik's is 144 MB.
	layerFile := archive + ".layer"
	defer func() { _ = os.Remove(layerFile) }()
	lf, err := os.Create(layerFile)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(lf)
	err = tw.WriteHeader(&tar.Header{Name: file, Mode: 0o755, Size: info.Size(), Typeflag: tar.TypeReg})
	if err == nil {
		_, err = io.Copy(tw, f)
	}
	if err == nil {
		err = tw.Close()
	}
	if cerr := lf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	l, err := tarball.LayerFromFile(layerFile, tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return err
	}
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: "amd64",
		OS:           "linux",
		Config:       v1.Config{Entrypoint: []string{"/" + file}, User: user},
		RootFS:       v1.RootFS{Type: "layers", DiffIDs: mustDiffIDs(l)},
	})
	if err != nil {
		return err
	}
	t, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(archive, t, img)
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
	pause := filepath.Join(c.stateDir, "images", "pause.tar")
	if err := pauseArchive(ctx, pause); err != nil {
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

// importGateway imports an image of each program of gatewaytest.Images,
// from bin/<its name>, which make gateway-binaries builds: Traefik and
// cert-manager's controller, which the node suite runs as pods.
func importGateway(ctx context.Context, c *config) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	for program, tag := range gatewaytest.Images {
		bin := filepath.Join(root, "bin", program)
		if _, err := os.Stat(bin); err != nil {
			return fmt.Errorf("no %s: make gateway-binaries builds it", bin)
		}
		dir := filepath.Join(c.stateDir, "images")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		archive := filepath.Join(dir, program+".tar")
		if err := binaryImageArchive(bin, program, tag, "65532:65532", archive); err != nil {
			return fmt.Errorf("image of %s: %w", bin, err)
		}
		if _, err := ctr(ctx, c, "images", "import", "--platform", "linux/amd64", archive); err != nil {
			return err
		}
		_ = os.Remove(archive)
		logf("imported %s (from %s)", tag, bin)
	}
	return nil
}
