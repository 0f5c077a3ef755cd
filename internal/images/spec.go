// Package images defines linkforge's container images once: which binaries
// they hold and where, the user and working directory they run as, the files of
// their base (the equivalent of a distroless static nonroot image) and the Go
// build flags. `make images` builds them with ko from this definition; the
// Dockerfile and .ko.yaml are rendered from it (`make generate`), and tests
// hold the built OCI layouts to it.
package images

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Image is one image: a single Go binary on the base.
type Image struct {
	// Name is the binary's and the image's name (<repository>/<Name>).
	Name string
	// Package is the main package, relative to the module root.
	Package string
}

// Images are the images linkforge ships. The CLI (cmd/linkforge) is a
// kubectl plugin users run on their own machine, so it has no image.
var Images = []Image{
	{Name: "manager", Package: "./cmd/manager"},
	{Name: "redirector", Package: "./cmd/redirector"},
}

// Lookup returns the image called name.
func Lookup(name string) (Image, error) {
	for _, im := range Images {
		if im.Name == name {
			return im, nil
		}
	}
	return Image{}, fmt.Errorf("no image %q (images: %s)", name, strings.Join(Names(), ", "))
}

// Names returns the images' names.
func Names() []string {
	names := make([]string, 0, len(Images))
	for _, im := range Images {
		names = append(names, im.Name)
	}
	return names
}

// AppDir is where ko puts an image's binary (ko's fixed /ko-app).
const AppDir = "/ko-app"

// BinaryPath is the binary's path in the image.
func (im Image) BinaryPath() string { return path.Join(AppDir, im.Name) }

// Entrypoint is the image's entrypoint; the Deployments' command is the same.
func (im Image) Entrypoint() []string { return []string{im.BinaryPath()} }

// Platforms are the platforms every image is built for.
var Platforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64"},
}

// PlatformStrings returns Platforms as os/arch strings, as ko's --platform takes them.
func PlatformStrings() []string { return PlatformStringsOf(Platforms) }

// PlatformStringsOf returns ps as os/arch strings.
func PlatformStringsOf(ps []v1.Platform) []string {
	s := make([]string, 0, len(ps))
	for _, p := range ps {
		s = append(s, p.OS+"/"+p.Architecture)
	}
	return s
}

// ParsePlatforms reads a comma-separated list of os/arch platforms (as ko's
// --platform takes them), each one of Platforms; empty means all of them.
// They come back in Platforms' order, so a build's index does not depend on
// how the list was written. make test builds only linux/amd64 (the node and
// the end-to-end tests run it); make release builds every platform.
func ParsePlatforms(list string) ([]v1.Platform, error) {
	if strings.TrimSpace(list) == "" {
		return Platforms, nil
	}
	want := map[string]bool{}
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains(PlatformStrings(), s) {
			return nil, fmt.Errorf("platform %q is not one the images are built for (%s)", s, strings.Join(PlatformStrings(), ", "))
		}
		if want[s] {
			return nil, fmt.Errorf("platform %q is listed twice", s)
		}
		want[s] = true
	}
	var out []v1.Platform
	for _, p := range Platforms {
		if want[p.OS+"/"+p.Architecture] {
			out = append(out, p)
		}
	}
	return out, nil
}

// PlatformsFile is the file, beside the layouts, in which `images build`
// records the platforms it was asked for: the image tests hold the layouts'
// indexes to it, whichever platforms the build chose.
const PlatformsFile = "platforms"

// WritePlatforms records ps in dir's PlatformsFile.
func WritePlatforms(dir string, ps []v1.Platform) error {
	return os.WriteFile(filepath.Join(dir, PlatformsFile), []byte(strings.Join(PlatformStringsOf(ps), ",")+"\n"), 0o644)
}

// ReadPlatforms reads the platforms recorded in dir's PlatformsFile; a
// directory without one (layouts written before it existed) holds every
// platform.
func ReadPlatforms(dir string) ([]v1.Platform, error) {
	b, err := os.ReadFile(filepath.Join(dir, PlatformsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Platforms, nil
	}
	if err != nil {
		return nil, err
	}
	ps, err := ParsePlatforms(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, PlatformsFile), err)
	}
	return ps, nil
}

// The user the images run as: distroless' nonroot, which the base's
// /etc/passwd names.
const (
	UID     = 65532
	GID     = 65532
	User    = "65532:65532"
	HomeDir = "/home/nonroot"
	// WorkDir is the working directory, as in distroless' nonroot images.
	WorkDir = HomeDir
	// CABundle is where the base holds the CA certificates; SSL_CERT_FILE
	// names it too.
	CABundle = "/etc/ssl/certs/ca-certificates.crt"
)

// Env is the base's environment (distroless static's). ko appends its
// /ko-app to PATH.
var Env = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"SSL_CERT_FILE=" + CABundle,
}

// BuildTags are the Go build tags of the binaries: timetzdata embeds the time
// zone database, so the base needs no /usr/share/zoneinfo.
const BuildTags = "timetzdata"

// Ldflags are the Go linker flags: stripped, with main.version set.
func Ldflags(version string) []string {
	return []string{"-s", "-w", "-X main.version=" + version}
}

// Labels are the OCI labels of every image.
func Labels(version, revision string) map[string]string {
	return map[string]string{
		"org.opencontainers.image.source":   Source,
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": revision,
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
}

// Source is the project's repository, for the org.opencontainers.image.source label.
const Source = "https://github.com/linkforge/linkforge"
