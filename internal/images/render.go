package images

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
)

// GoImage is the Dockerfile's build stage; its Go is go.mod's.
const GoImage = "golang:1.26"

// generated heads the rendered files.
const generated = "# Generated from internal/images by `make generate`; edit that, not this file.\n"

// ImageEnv is the environment of a built image: the base's, with what ko
// adds (its binary directory on PATH, and where its kodata would be).
func ImageEnv() []string {
	env := make([]string, 0, len(Env)+1)
	for _, e := range Env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			e = "PATH=" + v + ":" + AppDir
		}
		env = append(env, e)
	}
	return append(env, "KO_DATA_PATH=/var/run/ko")
}

// KoConfig renders .ko.yaml: one build per image, with the build tags and
// ldflags (the version from $VERSION). The base comes from
// KO_DEFAULTBASEIMAGE, set by hack/build-images.sh, since its digest depends
// on the machine's CA bundle.
func KoConfig() string {
	var b strings.Builder
	b.WriteString(generated)
	b.WriteString("# The base image is given by digest in KO_DEFAULTBASEIMAGE (hack/images build).\n")
	b.WriteString("defaultPlatforms:\n")
	for _, p := range PlatformStrings() {
		fmt.Fprintf(&b, "- %s\n", p)
	}
	b.WriteString("builds:\n")
	for _, im := range Images {
		fmt.Fprintf(&b, "- id: %s\n  main: %s\n  flags:\n  - -tags=%s\n  ldflags:\n", im.Name, im.Package, BuildTags)
		for _, f := range Ldflags("{{.Env.VERSION}}") {
			fmt.Fprintf(&b, "  - %s\n", f)
		}
	}
	return b.String()
}

// Dockerfile renders the Dockerfile: for a Docker engine, one target per
// image with the same binary at the same path, the same user, working
// directory and environment, on a base of the same files (written by
// `hack/images rootfs` from BaseEntries, with the build stage's CA bundle).
func Dockerfile() string {
	var b strings.Builder
	b.WriteString(generated)
	b.WriteString(`#
# The images ` + "`make images`" + ` builds with ko, for those who build with a Docker
# engine: the same binaries at the same paths, user, working directory,
# environment and base files. One target per image:
`)
	for _, im := range Images {
		fmt.Fprintf(&b, "#   docker build --target %s --build-arg VERSION=v1.2.3 -t REGISTRY/%s .\n", im.Name, im.Name)
	}
	fmt.Fprintf(&b, `FROM --platform=$BUILDPLATFORM %s AS builder
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev

WORKDIR /workspace
# Dependencies first, so source edits do not invalidate the module cache layer.
COPY go.mod go.sum ./
RUN go mod download

COPY api/ api/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY internal/ internal/
COPY hack/images/ hack/images/

# The base's files, from the definition ko's base is made from.
RUN go run ./hack/images rootfs -ca %s /rootfs

ENV CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH}
`, GoImage, CABundle)
	for _, im := range Images {
		fmt.Fprintf(&b, "RUN go build -trimpath -tags %s -ldflags %q -o /out/%s %s\n",
			BuildTags, strings.Join(Ldflags("${VERSION}"), " "), im.Name, im.Package)
	}
	b.WriteString("\n# The base: the equivalent of distroless static nonroot.\nFROM scratch AS base\nCOPY --from=builder /rootfs/ /\n")
	// COPY makes everything root's; give back what the base gives others.
	for _, e := range sorted(BaseEntries(nil)) {
		if e.UID != 0 || e.GID != 0 {
			suffix := ""
			if e.Mode&fs.ModeDir != 0 {
				suffix = "/"
			}
			fmt.Fprintf(&b, "COPY --from=builder --chown=%d:%d /rootfs%s%s %s%s\n", e.UID, e.GID, e.Path, suffix, e.Path, suffix)
		}
	}
	for _, e := range ImageEnv() {
		k, v, _ := strings.Cut(e, "=")
		fmt.Fprintf(&b, "ENV %s=%s\n", k, v)
	}
	fmt.Fprintf(&b, "USER %s\nWORKDIR %s\n", User, WorkDir)
	// The first image is the default target, so it comes last.
	for i := len(Images) - 1; i >= 0; i-- {
		im := Images[i]
		entrypoint, _ := json.Marshal(im.Entrypoint())
		fmt.Fprintf(&b, "\nFROM base AS %s\nCOPY --from=builder /out/%s %s\nENTRYPOINT %s\n", im.Name, im.Name, im.BinaryPath(), entrypoint)
	}
	return b.String()
}
