package images

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/x509"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/linkforge/linkforge/internal/testenv"
)

// These tests check the images `make images` built into dist/images (make
// test builds them first): what users pull.

// builtDir is the directory of the layouts: LINKFORGE_IMAGES if set, else
// dist/images.
func builtDir(t *testing.T) (root, dir string) {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir = os.Getenv("LINKFORGE_IMAGES")
	if dir == "" {
		dir = filepath.Join(root, "dist", "images")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("no images in %s: run `make images` (make test does): %v", dir, err)
	}
	return root, dir
}

// builtPlatforms are the platforms the images in dir were built for, as
// `images build` recorded them (make test: linux/amd64; make release: all).
func builtPlatforms(t *testing.T, dir string) []v1.Platform {
	t.Helper()
	ps, err := ReadPlatforms(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// builtImage is one platform's image of one of Images, read from its layout.
type builtImage struct {
	spec     Image
	platform v1.Platform
	config   *v1.ConfigFile
	files    map[string]File
}

// readBuilt opens every image and platform in dir, reading the content of
// the binaries and the base's regular files.
func readBuilt(t *testing.T, dir string) []builtImage {
	t.Helper()
	if all, ok := builtCache[dir]; ok {
		return all
	}
	platforms := builtPlatforms(t, dir)
	all := make([]builtImage, 0, len(Images)*len(platforms))
	for _, spec := range Images {
		idx, err := OpenIndex(LayoutDir(dir, spec.Name))
		if err != nil {
			t.Fatal(err)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		var indexed []string
		for _, d := range im.Manifests {
			if d.Platform == nil {
				t.Errorf("%s: index entry %s has no platform", spec.Name, d.Digest)
				continue
			}
			indexed = append(indexed, d.Platform.OS+"/"+d.Platform.Architecture)
		}
		if want := PlatformStringsOf(platforms); !slices.Equal(indexed, want) {
			t.Errorf("%s: the index has platforms %v, want %v", spec.Name, indexed, want)
		}
		for _, p := range platforms {
			img, err := PlatformImage(idx, p)
			if err != nil {
				t.Fatalf("%s: %v", spec.Name, err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			files, err := Files(img, func(path string) bool {
				return path == spec.BinaryPath() || strings.HasPrefix(path, "/etc/")
			})
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, builtImage{spec: spec, platform: p, config: cf, files: files})
		}
	}
	builtCache[dir] = all
	return all
}

// builtCache keeps what readBuilt read, by directory: the layouts do not
// change while the tests run, and reading them takes a second. Tests that
// change an image change a copy.
var builtCache = map[string][]builtImage{}

func (b builtImage) String() string {
	return b.spec.Name + " " + b.platform.OS + "/" + b.platform.Architecture
}

var elfMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// TestBuiltImages checks every image for every platform: its config (platform,
// entrypoint, user, working directory, environment, labels), a static binary
// of the right architecture at the entrypoint, no shell or package manager,
// and the base's files (users, CA bundle, /tmp, home).
func TestBuiltImages(t *testing.T) {
	_, dir := builtDir(t)
	caBundle, err := os.ReadFile(CABundle)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range readBuilt(t, dir) {
		t.Run(b.String(), func(t *testing.T) {
			checkConfig(t, b)
			checkBinary(t, b)
			checkNoShell(t, b)
			checkBaseFiles(t, b, caBundle)
		})
	}
}

// reporter is what the checks report to: the test, or a recorder in
// TestChecksCatchBadImages.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
}

// checkConfig checks the image's config: platform, entrypoint (and no cmd),
// user, working directory, environment and labels.
func checkConfig(t reporter, b builtImage) {
	t.Helper()
	c := b.config
	if c.OS != b.platform.OS || c.Architecture != b.platform.Architecture {
		t.Errorf("config platform %s/%s", c.OS, c.Architecture)
	}
	if !slices.Equal(c.Config.Entrypoint, b.spec.Entrypoint()) || len(c.Config.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want %q and no cmd", c.Config.Entrypoint, c.Config.Cmd, b.spec.Entrypoint())
	}
	if c.Config.User != User {
		t.Errorf("user %q, want %q", c.Config.User, User)
	}
	if c.Config.WorkingDir != WorkDir {
		t.Errorf("working directory %q, want %q", c.Config.WorkingDir, WorkDir)
	}
	if !slices.Equal(c.Config.Env, ImageEnv()) {
		t.Errorf("env %q, want %q", c.Config.Env, ImageEnv())
	}
	checkLabels(t, c.Config.Labels)
}

func checkLabels(t reporter, labels map[string]string) {
	t.Helper()
	if got := labels["org.opencontainers.image.source"]; got != Source {
		t.Errorf("label org.opencontainers.image.source %q, want %q", got, Source)
	}
	if got := labels["org.opencontainers.image.version"]; got == "" || got == "dev" {
		t.Errorf("label org.opencontainers.image.version %q, want the version `git describe` gives", got)
	}
	if got := labels["org.opencontainers.image.revision"]; !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(got) {
		t.Errorf("label org.opencontainers.image.revision %q, want a commit", got)
	}
}

// checkBinary checks the entrypoint is a static ELF executable (no
// interpreter, no shared libraries) for the image's architecture, stamped
// with the image's version.
func checkBinary(t reporter, b builtImage) {
	t.Helper()
	f, ok := b.files[b.spec.BinaryPath()]
	if !ok || f.Header.Typeflag != tar.TypeReg {
		t.Errorf("no regular file %s", b.spec.BinaryPath())
		return
	}
	if f.Header.Mode&0o111 == 0 {
		t.Errorf("%s mode %o: not executable", b.spec.BinaryPath(), f.Header.Mode)
	}
	ef, err := elf.NewFile(bytes.NewReader(f.Data))
	if err != nil {
		t.Errorf("%s is not ELF: %v", b.spec.BinaryPath(), err)
		return
	}
	if ef.Machine != elfMachine[b.platform.Architecture] {
		t.Errorf("%s is for %v, want %v", b.spec.BinaryPath(), ef.Machine, elfMachine[b.platform.Architecture])
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has an ELF interpreter: not static", b.spec.BinaryPath())
		}
	}
	if libs, _ := ef.ImportedLibraries(); len(libs) != 0 {
		t.Errorf("%s needs shared libraries %v", b.spec.BinaryPath(), libs)
	}
	if ef.Section(".symtab") != nil {
		t.Errorf("%s has a symbol table: built without -s", b.spec.BinaryPath())
	}
	if version := b.config.Config.Labels["org.opencontainers.image.version"]; !bytes.Contains(f.Data, []byte(version)) {
		t.Errorf("%s does not hold its version %q (main.version)", b.spec.BinaryPath(), version)
	}
}

// shellsAndPackageManagers are what a distroless image must not have.
var shellsAndPackageManagers = []string{
	"/bin/sh", "/bin/bash", "/bin/dash", "/bin/ash", "/bin/busybox", "/usr/bin/sh", "/usr/bin/bash",
	"/usr/bin/apt", "/usr/bin/apt-get", "/usr/bin/dpkg", "/sbin/apk", "/usr/bin/yum", "/usr/bin/dnf", "/usr/bin/rpm",
}

// checkNoShell checks there is no shell or package manager: the binary is
// the image's only executable file.
func checkNoShell(t reporter, b builtImage) {
	t.Helper()
	for _, p := range shellsAndPackageManagers {
		if _, ok := b.files[p]; ok {
			t.Errorf("the image has %s", p)
		}
	}
	for p, f := range b.files {
		if f.Header.Typeflag != tar.TypeDir && f.Header.Mode&0o111 != 0 && p != b.spec.BinaryPath() {
			t.Errorf("%s is executable (mode %o): the binary should be the only one", p, f.Header.Mode)
		}
		if f.Header.Typeflag == tar.TypeSymlink || f.Header.Typeflag == tar.TypeLink {
			t.Errorf("%s is a link to %s", p, f.Header.Linkname)
		}
	}
}

// checkBaseFiles checks the image holds every file of the base as
// BaseEntries defines it, with this machine's CA bundle, and that the
// bundle and the user database are usable.
func checkBaseFiles(t reporter, b builtImage, caBundle []byte) {
	t.Helper()
	for _, e := range BaseEntries(caBundle) {
		f, ok := b.files[e.Path]
		if !ok {
			t.Errorf("no %s", e.Path)
			continue
		}
		h := f.Header
		mode := fs.FileMode(h.Mode).Perm()
		if h.Mode&0o1000 != 0 {
			mode |= fs.ModeSticky
		}
		if e.IsDir() != (h.Typeflag == tar.TypeDir) || mode != e.Mode&(fs.ModePerm|fs.ModeSticky) || h.Uid != e.UID || h.Gid != e.GID {
			t.Errorf("%s: type %c mode %o owner %d:%d, want dir=%v mode %v owner %d:%d", e.Path, h.Typeflag, h.Mode, h.Uid, h.Gid, e.IsDir(), e.Mode, e.UID, e.GID)
		}
		if !e.IsDir() && !bytes.Equal(f.Data, e.Data) {
			t.Errorf("%s differs from the base's", e.Path)
		}
	}
	if pool := x509.NewCertPool(); !pool.AppendCertsFromPEM(b.files[CABundle].Data) {
		t.Errorf("%s holds no certificate", CABundle)
	}
	if !hasLine(b.files["/etc/passwd"].Data, "nonroot:x:65532:65532:") || !hasLine(b.files["/etc/group"].Data, "nonroot:x:65532:") {
		t.Errorf("/etc/passwd or /etc/group has no nonroot 65532")
	}
}

func hasLine(data []byte, prefix string) bool {
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		if strings.HasPrefix(s.Text(), prefix) {
			return true
		}
	}
	return false
}

// TestBuiltImagesReproducible builds the images again from the same inputs
// (this tree, this machine's CA bundle, the version, revision and creation
// time read from the built images) into a temporary directory, and checks
// every image index has the same digest.
func TestBuiltImagesReproducible(t *testing.T) {
	root, dir := builtDir(t)
	ko := filepath.Join(root, "bin", "ko")
	if _, err := os.Stat(ko); err != nil {
		t.Fatalf("no %s: run `make ko` (make images does)", ko)
	}
	first := readBuilt(t, dir)[0].config
	labels := first.Config.Labels
	// Under bin/, not t.TempDir(): ko wants a path it can name an image by.
	again, err := os.MkdirTemp(filepath.Join(root, "bin"), "reproduce-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(again) })
	cmd := exec.Command("go", "run", "./hack/images", "build", "-ko", ko,
		"-out", filepath.Join(again, "images"), "-kocache", filepath.Join(again, "kocache"),
		"-version", labels["org.opencontainers.image.version"],
		"-revision", labels["org.opencontainers.image.revision"],
		"-source-date-epoch", strconv.FormatInt(first.Created.Unix(), 10),
		"-platforms", strings.Join(PlatformStringsOf(builtPlatforms(t, dir)), ","))
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building again: %v\n%s", err, out)
	}
	for _, im := range Images {
		want, err := IndexDigest(LayoutDir(dir, im.Name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := IndexDigest(LayoutDir(filepath.Join(again, "images"), im.Name))
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: built again from the same inputs, digest %s, first %s", im.Name, got, want)
		}
	}
}

// TestSBOMs checks an SPDX SBOM was written beside the images for every
// image and platform, naming the image's Go modules.
func TestSBOMs(t *testing.T) {
	_, dir := builtDir(t)
	for _, im := range Images {
		sboms := PlatformStringsOf(builtPlatforms(t, dir))
		if len(sboms) > 1 { // ko writes the index's SBOM only for an index it built
			sboms = append(sboms, "index")
		}
		for _, p := range sboms {
			file := im.Name + "-" + strings.ReplaceAll(p, "/", "-") + ".spdx.json"
			data, err := os.ReadFile(filepath.Join(dir, "sbom", file))
			if err != nil {
				t.Errorf("no SBOM: %v", err)
				continue
			}
			var doc struct {
				SPDXVersion string `json:"spdxVersion"`
				Packages    []struct {
					Name string `json:"name"`
				} `json:"packages"`
			}
			if err := json.Unmarshal(data, &doc); err != nil || !strings.HasPrefix(doc.SPDXVersion, "SPDX-") {
				t.Errorf("%s is not an SPDX document: %v", file, err)
				continue
			}
			if p == "index" {
				continue
			}
			if !slices.ContainsFunc(doc.Packages, func(pk struct {
				Name string `json:"name"`
			}) bool {
				return pk.Name == "sigs.k8s.io/controller-runtime" || pk.Name == "k8s.io/client-go"
			}) {
				t.Errorf("%s names none of the image's Go modules", file)
			}
		}
	}
}

// TestPushBuiltImages pushes the layouts to a registry on loopback (an
// in-memory one, as `make images-push` would to a real one) and pulls them
// back by tag: the same index digest, every platform's image whole.
func TestPushBuiltImages(t *testing.T) {
	_, dir := builtDir(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, im := range Images {
		want, err := IndexDigest(LayoutDir(dir, im.Name))
		if err != nil {
			t.Fatal(err)
		}
		tag := host + "/linkforge/" + im.Name + ":test"
		pushed, err := Push(LayoutDir(dir, im.Name), tag)
		if err != nil {
			t.Fatal(err)
		}
		if pushed.DigestStr() != want.String() {
			t.Errorf("%s: pushed as %s, the layout's digest is %s", im.Name, pushed, want)
		}
		ref, err := name.ParseReference(tag)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := remote.Index(ref)
		if err != nil {
			t.Fatalf("pulling %s: %v", tag, err)
		}
		if got, _ := idx.Digest(); got != want {
			t.Errorf("%s: pulled %s, pushed %s", tag, got, want)
		}
		if err := validate.Index(idx); err != nil {
			t.Errorf("%s: the pulled index is not whole: %v", tag, err)
		}
	}
}

// recorder records what a check reports.
type recorder struct{ errs []string }

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestChecksCatchBadImages checks the checks of TestBuiltImages fail on what
// they guard against: an image built on another base (a shell, root, a
// dynamic binary, no CA bundle), unlabelled, for another architecture.
func TestChecksCatchBadImages(t *testing.T) {
	_, dir := builtDir(t)
	good := readBuilt(t, dir)[0] // manager linux/amd64
	dynamic, err := os.ReadFile("/bin/ls")
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(CABundle)
	if err != nil {
		t.Fatal(err)
	}
	checkBase := func(t reporter, b builtImage) { checkBaseFiles(t, b, ca) }
	for bad, tc := range map[string]struct {
		mutate func(b *builtImage)
		check  func(t reporter, b builtImage)
		want   string
	}{
		"root user":          {func(b *builtImage) { b.config.Config.User = "" }, checkConfig, "user"},
		"another entrypoint": {func(b *builtImage) { b.config.Config.Entrypoint = []string{"/manager"} }, checkConfig, "entrypoint"},
		"no revision label":  {func(b *builtImage) { delete(b.config.Config.Labels, "org.opencontainers.image.revision") }, checkConfig, "revision"},
		"dynamic binary": {func(b *builtImage) {
			b.files[b.spec.BinaryPath()] = File{Header: b.files[b.spec.BinaryPath()].Header, Data: dynamic}
		}, checkBinary, "interpreter"},
		"another architecture": {func(b *builtImage) { b.platform.Architecture = "arm64" }, checkBinary, "EM_AARCH64"},
		"a shell": {func(b *builtImage) {
			b.files["/bin/sh"] = File{Header: &tar.Header{Typeflag: tar.TypeReg, Mode: 0o755}}
		}, checkNoShell, "/bin/sh"},
		"no CA bundle": {func(b *builtImage) { delete(b.files, CABundle) }, checkBase, CABundle},
		"home owned by root": {func(b *builtImage) {
			h := *b.files[HomeDir].Header
			h.Uid, h.Gid = 0, 0
			b.files[HomeDir] = File{Header: &h}
		}, checkBase, HomeDir},
	} {
		t.Run(bad, func(t *testing.T) {
			b := good
			b.config = good.config.DeepCopy()
			b.files = maps.Clone(good.files)
			tc.mutate(&b)
			var r recorder
			tc.check(&r, b)
			if !slices.ContainsFunc(r.errs, func(e string) bool { return strings.Contains(e, tc.want) }) {
				t.Errorf("the check reported %q, want a report naming %q", r.errs, tc.want)
			}
			// The unchanged image passes the same check.
			var clean recorder
			tc.check(&clean, good)
			if len(clean.errs) != 0 {
				t.Errorf("the built image fails the check: %q", clean.errs)
			}
		})
	}
}
