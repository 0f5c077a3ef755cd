// Command images makes and reads linkforge's container images, from the
// definition in internal/images, for the Makefile (make images, release,
// images-push, generate) and the Dockerfile:
//
//	images build -out DIR ...              build every image with ko, offline, into OCI layouts
//	images base -ca FILE -kocache DIR      the base, into ko's cache; prints its reference by digest
//	images rootfs -ca FILE DIR             the base's files as a directory (the Dockerfile's base)
//	images dockerfile | koconfig           render the Dockerfile or .ko.yaml
//	images extract -out DIR -platform P    each image's binary out of the layouts
//	images index-one -platform P DIR       a layout ko wrote for one platform, as an index of it
//	images push -repo REPO -tag TAG        push the layouts to REPO/<name>:TAG
//	images release -repo REPO ...          the overlay and chart values of a release
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/linkforge/linkforge/internal/images"
	"github.com/linkforge/linkforge/internal/release"
)

// baseRepository names the base in ko's KO_DEFAULTBASEIMAGE and in the
// images' org.opencontainers.image.base.name annotation. It is never pulled
// (.invalid): ko finds the base by digest in its cache.
const baseRepository = "linkforge.invalid/base"

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "build":
		err = build(args)
	case "base":
		err = base(args)
	case "rootfs":
		err = rootfs(args)
	case "dockerfile":
		fmt.Print(images.Dockerfile())
	case "koconfig":
		fmt.Print(images.KoConfig())
	case "index-one":
		err = indexOne(args)
	case "extract":
		err = extract(args)
	case "push":
		err = push(args)
	case "release":
		err = writeRelease(args)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "images %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: images build|base|rootfs|dockerfile|koconfig|index-one|extract|push|release [flags]")
	os.Exit(2)
}

// parse parses args with fs, exiting with its usage on a bad flag.
func parse(fs *flag.FlagSet, args []string) {
	if err := fs.Parse(args); err != nil {
		os.Exit(2)
	}
}

func readCA(path string) ([]byte, error) {
	ca, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("the CA bundle: %w", err)
	}
	if !strings.Contains(string(ca), "-----BEGIN CERTIFICATE-----") {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return ca, nil
}

func base(args []string) error {
	fs := flag.NewFlagSet("base", flag.ExitOnError)
	ca := fs.String("ca", images.CABundle, "the CA bundle to put in the base")
	kocache := fs.String("kocache", "", "ko's cache directory (KOCACHE) to write the base into")
	parse(fs, args)
	ref, err := writeBase(*ca, *kocache)
	if err != nil {
		return err
	}
	fmt.Println(ref)
	return nil
}

// writeBase makes the base from the CA bundle at ca, writes it into ko's
// cache at kocache and returns its reference by digest.
func writeBase(ca, kocache string) (string, error) {
	if kocache == "" {
		return "", fmt.Errorf("no ko cache directory")
	}
	bundle, err := readCA(ca)
	if err != nil {
		return "", err
	}
	idx, err := images.BaseIndex(images.BaseEntries(bundle))
	if err != nil {
		return "", err
	}
	if err := images.WriteKoCache(kocache, idx); err != nil {
		return "", err
	}
	h, err := idx.Digest()
	if err != nil {
		return "", err
	}
	return baseRepository + "@" + h.String(), nil
}

// build builds every image with ko into <out>/<name> (an OCI layout) and
// its SBOMs into <out>/sbom, offline: the base comes from ko's cache by
// digest, the modules from the module cache or proxy.
func build(args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	ko := fs.String("ko", "bin/ko", "the ko binary")
	out := fs.String("out", "dist/images", "the output directory, emptied first")
	kocache := fs.String("kocache", "bin/kocache", "ko's cache directory (KOCACHE), emptied first")
	ca := fs.String("ca", images.CABundle, "the CA bundle to put in the base")
	version := fs.String("version", "dev", "the version: main.version and the org.opencontainers.image.version label")
	revision := fs.String("revision", "", "the source's commit, for the org.opencontainers.image.revision label")
	epoch := fs.String("source-date-epoch", "0", "the images' creation time, in seconds since 1970 (the commit's time)")
	platformList := fs.String("platforms", "", "comma-separated os/arch platforms to build, of "+strings.Join(images.PlatformStrings(), ",")+" (empty: all)")
	parse(fs, args)
	if *revision == "" {
		return fmt.Errorf("-revision is required")
	}
	platforms, err := images.ParsePlatforms(*platformList)
	if err != nil {
		return fmt.Errorf("-platforms: %w", err)
	}
	for _, dir := range []string{*out, *kocache} {
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	ref, err := writeBase(*ca, *kocache)
	if err != nil {
		return err
	}
	absCache, err := filepath.Abs(*kocache)
	if err != nil {
		return err
	}
	env := []string{
		"KO_DEFAULTBASEIMAGE=" + ref,
		"KOCACHE=" + absCache,
		"VERSION=" + *version,
		"SOURCE_DATE_EPOCH=" + *epoch,
		"KO_DATA_DATE_EPOCH=" + *epoch,
	}
	for _, e := range os.Environ() {
		// ko refuses --platform beside GOOS/GOARCH/GOARM, and sets its own.
		if k, _, _ := strings.Cut(e, "="); k != "GOOS" && k != "GOARCH" && k != "GOARM" && !strings.HasPrefix(k, "KO_") && k != "KOCACHE" {
			env = append(env, e)
		}
	}
	// ko names what it writes to a layout <path>@<digest>, which must parse
	// as an image reference: hand it the path relative to here.
	koOut, err := refSafePath(*out)
	if err != nil {
		return err
	}
	labels := images.Labels(*version, *revision)
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, im := range images.Images {
		cmdArgs := []string{"build", "--push=false",
			"--oci-layout-path", images.LayoutDir(koOut, im.Name),
			"--sbom=spdx", "--sbom-dir", filepath.Join(koOut, "sbom"),
			"--platform", strings.Join(images.PlatformStringsOf(platforms), ",")}
		for _, k := range keys {
			cmdArgs = append(cmdArgs, "--image-label", k+"="+labels[k])
		}
		cmd := exec.Command(*ko, append(cmdArgs, im.Package)...)
		cmd.Env = env
		cmd.Stdout = io.Discard // the layout's path; the digest is in the layout
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("ko build %s: %w", im.Package, err)
		}
		if len(platforms) == 1 { // ko wrote an image, not an index
			if err := images.IndexOne(images.LayoutDir(*out, im.Name), platforms[0]); err != nil {
				return err
			}
		}
		h, err := images.IndexDigest(images.LayoutDir(*out, im.Name))
		if err != nil {
			return err
		}
		fmt.Printf("%s: %s@%s\n", im.Name, images.LayoutDir(*out, im.Name), h)
	}
	return images.WritePlatforms(*out, platforms)
}

func rootfs(args []string) error {
	fs := flag.NewFlagSet("rootfs", flag.ExitOnError)
	ca := fs.String("ca", images.CABundle, "the CA bundle to put in the base")
	parse(fs, args)
	if fs.NArg() != 1 {
		return fmt.Errorf("want one directory, have %d arguments", fs.NArg())
	}
	bundle, err := readCA(*ca)
	if err != nil {
		return err
	}
	return images.WriteRootfs(fs.Arg(0), images.BaseEntries(bundle))
}

// indexOne rewrites the layout ko wrote for one platform as an index of its
// image, as `images build` does; for ko wrappers (hack/node/previous-release.sh
// builds an earlier tree's release for linux/amd64 alone).
func indexOne(args []string) error {
	fs := flag.NewFlagSet("index-one", flag.ExitOnError)
	platform := fs.String("platform", "linux/amd64", "the platform the image was built for")
	parse(fs, args)
	if fs.NArg() != 1 {
		return fmt.Errorf("want one layout directory, have %d arguments", fs.NArg())
	}
	p, err := v1.ParsePlatform(*platform)
	if err != nil {
		return err
	}
	return images.IndexOne(fs.Arg(0), *p)
}

func extract(args []string) error {
	fs := flag.NewFlagSet("extract", flag.ExitOnError)
	layouts := fs.String("layouts", "dist/images", "the directory of the OCI layouts")
	out := fs.String("out", "", "where to write the binaries (<out>/<name>)")
	platform := fs.String("platform", "linux/amd64", "the platform's image to take them from")
	parse(fs, args)
	p, err := v1.ParsePlatform(*platform)
	if err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("-out is required")
	}
	for _, im := range images.Images {
		idx, err := images.OpenIndex(images.LayoutDir(*layouts, im.Name))
		if err != nil {
			return err
		}
		img, err := images.PlatformImage(idx, *p)
		if err != nil {
			return fmt.Errorf("%s: %w", im.Name, err)
		}
		if err := images.ExtractFile(img, im.BinaryPath(), *out+"/"+im.Name); err != nil {
			return fmt.Errorf("%s: %w", im.Name, err)
		}
	}
	return nil
}

func push(args []string) error {
	fs := flag.NewFlagSet("push", flag.ExitOnError)
	layouts := fs.String("layouts", "dist/images", "the directory of the OCI layouts")
	repo := fs.String("repo", os.Getenv("KO_DOCKER_REPO"), "the repository the images go to, as <repo>/<name> (default $KO_DOCKER_REPO)")
	tag := fs.String("tag", "", "the tag to push them with")
	insecure := fs.Bool("insecure", false, "allow a registry over plain HTTP")
	parse(fs, args)
	if *repo == "" || *tag == "" {
		return fmt.Errorf("-repo (or KO_DOCKER_REPO) and -tag are required")
	}
	var opts []name.Option
	if *insecure {
		opts = append(opts, name.Insecure)
	}
	for _, im := range images.Images {
		ref, err := images.Push(images.LayoutDir(*layouts, im.Name), strings.TrimSuffix(*repo, "/")+"/"+im.Name+":"+*tag, opts...)
		if err != nil {
			return err
		}
		fmt.Println(ref)
	}
	return nil
}

// refSafePath returns dir relative to the working directory if it is below
// it, and fails unless the result has only the characters of an image
// repository (lower case letters, digits, _-./).
func refSafePath(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	p := abs
	if rel, err := filepath.Rel(wd, abs); err == nil && !strings.HasPrefix(rel, "..") {
		p = rel
	}
	if !regexp.MustCompile(`^[a-z0-9_./-]+$`).MatchString(p) {
		return "", fmt.Errorf("output directory %s: ko needs a path of lower case letters, digits and _-./ (put it under this directory)", p)
	}
	return p, nil
}

func writeRelease(args []string) error {
	fs := flag.NewFlagSet("release", flag.ExitOnError)
	layouts := fs.String("layouts", "dist/images", "the directory of the OCI layouts")
	repo := fs.String("repo", os.Getenv("KO_DOCKER_REPO"), "the repository the images are pulled from, as <repo>/<name> (default $KO_DOCKER_REPO)")
	overlay := fs.String("overlay", "", "where to write the kustomize overlay")
	chart := fs.String("chart", "", "where to write the chart with the images' digests")
	parse(fs, args)
	if *overlay == "" || *chart == "" {
		return fmt.Errorf("-overlay and -chart are required")
	}
	built, err := release.Write(".", *layouts, *repo, *overlay, *chart)
	if err != nil {
		return err
	}
	for _, im := range built {
		fmt.Println(im.Ref())
	}
	return nil
}
