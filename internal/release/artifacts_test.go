package release

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/linkforge/linkforge/internal/images"
	"github.com/linkforge/linkforge/internal/testenv"
)

// These tests check what `make release` wrote into dist/ (make test runs it
// first): dist/install.yaml and the packaged chart.

func distDir(t *testing.T) (root, dist string) {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dist = filepath.Join(root, "dist")
	if _, err := os.Stat(filepath.Join(dist, "install.yaml")); err != nil {
		t.Fatalf("no release in %s: run `make release` (make test does): %v", dist, err)
	}
	return root, dist
}

// container is what the tests read of a Deployment's container.
type container struct {
	Name    string   `json:"name"`
	Image   string   `json:"image"`
	Command []string `json:"command"`
	Args    []string `json:"args"`
}

type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Template struct {
			Spec struct {
				InitContainers []container `json:"initContainers"`
				Containers     []container `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

func decodeAll(t *testing.T, data []byte) []object {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(data)), 4096)
	var objs []object
	for {
		var o object
		if err := dec.Decode(&o); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		if o.Kind != "" {
			objs = append(objs, o)
		}
	}
	return objs
}

var digestRef = regexp.MustCompile(`^(.+)/([a-z0-9-]+)@(sha256:[0-9a-f]{64})$`)

// checkImages checks every container of every workload in objs names one of
// the built images by digest, with the image's entrypoint as its command and
// args the image's binary accepts, and that every built image is used. It
// returns the references.
func checkImages(t *testing.T, what string, objs []object, layouts string, binaries map[string]string) []string {
	t.Helper()
	used := map[string]bool{}
	var refs []string
	for _, o := range objs {
		pod := o.Spec.Template.Spec
		for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
			m := digestRef.FindStringSubmatch(c.Image)
			if m == nil {
				t.Errorf("%s: %s %s container %s: image %q is not <repository>/<name>@sha256:<digest>", what, o.Kind, o.Metadata.Name, c.Name, c.Image)
				continue
			}
			refs = append(refs, c.Image)
			spec, err := images.Lookup(m[2])
			if err != nil {
				t.Errorf("%s: %s: %v", what, c.Image, err)
				continue
			}
			want, err := images.IndexDigest(images.LayoutDir(layouts, spec.Name))
			if err != nil {
				t.Fatal(err)
			}
			if m[3] != want.String() {
				t.Errorf("%s: %s %s names %s, the image built is %s", what, o.Kind, o.Metadata.Name, c.Image, want)
			}
			used[spec.Name] = true
			if !slices.Equal(c.Command, spec.Entrypoint()) {
				t.Errorf("%s: %s %s: command %q, the image's entrypoint is %q", what, o.Kind, o.Metadata.Name, c.Command, spec.Entrypoint())
			}
			// The binary parses every flag before --help; an unknown one fails.
			out, err := exec.Command(binaries[spec.Name], append(slices.Clone(c.Args), "--help")...).CombinedOutput()
			if err != nil {
				t.Errorf("%s: %s %s: its image's binary refuses args %q: %v\n%s", what, o.Kind, o.Metadata.Name, c.Args, err, out)
			}
		}
	}
	for _, im := range images.Images {
		if !used[im.Name] {
			t.Errorf("%s: no container runs the %s image", what, im.Name)
		}
	}
	return refs
}

// imageBinaries takes each image's linux/amd64 binary out of its layout.
func imageBinaries(t *testing.T, layouts string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	bins := map[string]string{}
	for _, im := range images.Images {
		idx, err := images.OpenIndex(images.LayoutDir(layouts, im.Name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := images.PlatformImage(idx, images.Platforms[0])
		if err != nil {
			t.Fatal(err)
		}
		bins[im.Name] = filepath.Join(dir, im.Name)
		if err := images.ExtractFile(img, im.BinaryPath(), bins[im.Name]); err != nil {
			t.Fatal(err)
		}
	}
	return bins
}

// TestReleaseNamesTheBuiltImages checks dist/install.yaml and the chart
// (rendered with its default values) name only the images built, by digest,
// the same in both, with commands and args that fit them.
func TestReleaseNamesTheBuiltImages(t *testing.T) {
	root, dist := distDir(t)
	layouts := filepath.Join(dist, "images")
	bins := imageBinaries(t, layouts)

	install, err := os.ReadFile(filepath.Join(dist, "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	fromInstall := checkImages(t, "install.yaml", decodeAll(t, install), layouts, bins)

	chart := packagedChart(t, dist)
	helm := testenv.HelmBinary(t, root)
	out, err := exec.Command(helm, "template", "linkforge", chart, "--namespace", "linkforge-system").CombinedOutput()
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", chart, err, out)
	}
	fromChart := checkImages(t, filepath.Base(chart), decodeAll(t, out), layouts, bins)

	slices.Sort(fromInstall)
	slices.Sort(fromChart)
	if !slices.Equal(fromInstall, fromChart) {
		t.Errorf("install.yaml names %v, the chart %v", fromInstall, fromChart)
	}
}

func packagedChart(t *testing.T, dist string) string {
	t.Helper()
	charts, _ := filepath.Glob(filepath.Join(dist, "linkforge-*.tgz"))
	if len(charts) != 1 {
		t.Fatalf("want one packaged chart in %s, have %v", dist, charts)
	}
	return charts[0]
}

// TestInstallYAMLApplies applies dist/install.yaml to a local API server
// (envtest: it runs no pods) with server-side apply, as the docs say to, and
// checks every object was created.
func TestInstallYAMLApplies(t *testing.T) {
	root, dist := distDir(t)
	kubeconfig := testenv.StartWithoutCRDs(t, root)
	kubectl := testenv.KubectlBinary(t, root)
	install := filepath.Join(dist, "install.yaml")
	if out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "apply", "--server-side", "-f", install).CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply --server-side -f %s: %v\n%s", install, err, out)
	}
	out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "get", "-f", install, "-o", "name").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get -f %s: %v\n%s", install, err, out)
	}
	data, err := os.ReadFile(install)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(strings.Fields(string(out))), len(decodeAll(t, data)); got != want {
		t.Errorf("kubectl get -f found %d objects, install.yaml has %d:\n%s", got, want, out)
	}
}
