// Package release turns the images `make images` built into what users
// install: a kustomize overlay of config/default that names every image by
// digest (built into dist/install.yaml) and the Helm chart's values with the
// same digests (packaged into dist/).
package release

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/linkforge/linkforge/internal/images"
)

// Image is one built image, by digest.
type Image struct {
	// Name is the image's name in internal/images (manager, redirector).
	Name string
	// Repository is where it is pulled from: <repo>/<Name>.
	Repository string
	// Digest is the digest of its image index, sha256:...
	Digest string
}

// Ref is the image's reference by digest.
func (im Image) Ref() string { return im.Repository + "@" + im.Digest }

// Built returns every image of internal/images as built into the OCI layouts
// under out (dist/images), to be pulled from repo/<name>.
func Built(out, repo string) ([]Image, error) {
	repo = strings.TrimSuffix(repo, "/")
	if repo == "" {
		return nil, errors.New("no image repository (KO_DOCKER_REPO)")
	}
	built := make([]Image, 0, len(images.Images))
	for _, im := range images.Images {
		h, err := images.IndexDigest(images.LayoutDir(out, im.Name))
		if err != nil {
			return nil, err
		}
		built = append(built, Image{Name: im.Name, Repository: repo + "/" + im.Name, Digest: h.String()})
	}
	return built, nil
}

// kustomization is the part of a kustomization.yaml this package reads and writes.
type kustomization struct {
	APIVersion string           `json:"apiVersion,omitempty"`
	Kind       string           `json:"kind,omitempty"`
	Resources  []string         `json:"resources,omitempty"`
	Images     []kustomizeImage `json:"images,omitempty"`
}

type kustomizeImage struct {
	Name    string `json:"name"`
	NewName string `json:"newName,omitempty"`
	NewTag  string `json:"newTag,omitempty"`
	Digest  string `json:"digest,omitempty"`
}

// Overlay returns a kustomization.yaml that builds base (a path relative to
// the overlay's directory, to config/default) with every image replaced by
// its digest. baseKustomization is base's own kustomization.yaml: the images
// it sets are the names the overlay replaces.
func Overlay(baseKustomization []byte, base string, built []Image) ([]byte, error) {
	var k kustomization
	if err := sigsyaml.Unmarshal(baseKustomization, &k); err != nil {
		return nil, fmt.Errorf("reading the base kustomization: %w", err)
	}
	overlay := kustomization{
		APIVersion: "kustomize.config.k8s.io/v1beta1",
		Kind:       "Kustomization",
		Resources:  []string{base},
	}
	for _, im := range built {
		i := indexOf(k.Images, im.Name)
		if i < 0 {
			return nil, fmt.Errorf("the base kustomization sets no image %q: its Deployment's image is replaced by name", im.Name)
		}
		// The base has already renamed its placeholder; match what it made.
		current := k.Images[i].Name
		if k.Images[i].NewName != "" {
			current = k.Images[i].NewName
		}
		overlay.Images = append(overlay.Images, kustomizeImage{Name: current, NewName: im.Repository, Digest: im.Digest})
	}
	out, err := sigsyaml.Marshal(overlay)
	if err != nil {
		return nil, err
	}
	return append([]byte("# Written by `make release` (hack/images release): config/default with the built images by digest.\n"), out...), nil
}

func indexOf(imgs []kustomizeImage, name string) int {
	for i, im := range imgs {
		if im.Name == name {
			return i
		}
	}
	return -1
}

// ChartValues returns the chart's values.yaml with image.repository set to
// repo and image.digests.<name> to each built image's digest. Only those
// values change: the rest of the file, comments and layout, stays as it is.
func ChartValues(values []byte, repo string, built []Image) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(values, &doc); err != nil {
		return nil, fmt.Errorf("reading values.yaml: %w", err)
	}
	lines := strings.Split(string(values), "\n")
	set := func(keys []string, value string) error {
		n, err := lookup(&doc, keys)
		if err != nil {
			return err
		}
		// Replace the scalar where it is written: to the end of its line,
		// or to a comment after it.
		line := lines[n.Line-1]
		start := n.Column - 1
		end := len(line)
		if i := strings.Index(line[start:], " #"); i >= 0 {
			end = start + i
		}
		lines[n.Line-1] = line[:start] + strconv.Quote(value) + line[end:]
		return nil
	}
	if err := set([]string{"image", "repository"}, strings.TrimSuffix(repo, "/")); err != nil {
		return nil, err
	}
	for _, im := range built {
		if err := set([]string{"image", "digests", im.Name}, im.Digest); err != nil {
			return nil, err
		}
	}
	return []byte(strings.Join(lines, "\n")), nil
}

// lookup returns the scalar at keys in doc: a key the chart does not have is
// an error, not a new value the templates would ignore.
func lookup(doc *yaml.Node, keys []string) (*yaml.Node, error) {
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	for _, k := range keys {
		if n.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("values.yaml: %s is not a map", strings.Join(keys, "."))
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
				break
			}
		}
		if next == nil {
			return nil, fmt.Errorf("values.yaml has no %s", strings.Join(keys, "."))
		}
		n = next
	}
	if n.Kind != yaml.ScalarNode {
		return nil, fmt.Errorf("values.yaml: %s is not a scalar", strings.Join(keys, "."))
	}
	return n, nil
}

// Write writes the overlay into overlayDir (kustomization.yaml, whose base is
// config/default under root) and a copy of the chart at root/config/helm/linkforge
// into chartDir with its values set, for `kustomize build` and `helm package`.
func Write(root, out, repo, overlayDir, chartDir string) ([]Image, error) {
	built, err := Built(out, repo)
	if err != nil {
		return nil, err
	}
	defaultDir := filepath.Join(root, "config", "default")
	baseK, err := os.ReadFile(filepath.Join(defaultDir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(overlayDir, 0o755); err != nil {
		return nil, err
	}
	absOverlay, err := filepath.Abs(overlayDir)
	if err != nil {
		return nil, err
	}
	absDefault, err := filepath.Abs(defaultDir)
	if err != nil {
		return nil, err
	}
	rel, err := filepath.Rel(absOverlay, absDefault)
	if err != nil {
		return nil, err
	}
	overlay, err := Overlay(baseK, filepath.ToSlash(rel), built)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(overlayDir, "kustomization.yaml"), overlay, 0o644); err != nil {
		return nil, err
	}

	if err := os.RemoveAll(chartDir); err != nil {
		return nil, err
	}
	src := filepath.Join(root, "config", "helm", "linkforge")
	if err := os.CopyFS(chartDir, os.DirFS(src)); err != nil {
		return nil, fmt.Errorf("copying the chart: %w", err)
	}
	values, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		return nil, err
	}
	if values, err = ChartValues(values, repo, built); err != nil {
		return nil, err
	}
	return built, os.WriteFile(filepath.Join(chartDir, "values.yaml"), values, 0o644)
}
