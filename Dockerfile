# Generated from internal/images by `make generate`; edit that, not this file.
#
# The images `make images` builds with ko, for those who build with a Docker
# engine: the same binaries at the same paths, user, working directory,
# environment and base files. One target per image:
#   docker build --target manager --build-arg VERSION=v1.2.3 -t REGISTRY/manager .
#   docker build --target redirector --build-arg VERSION=v1.2.3 -t REGISTRY/redirector .
FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
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
RUN go run ./hack/images rootfs -ca /etc/ssl/certs/ca-certificates.crt /rootfs

ENV CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH}
RUN go build -trimpath -tags timetzdata -ldflags "-s -w -X main.version=${VERSION}" -o /out/manager ./cmd/manager
RUN go build -trimpath -tags timetzdata -ldflags "-s -w -X main.version=${VERSION}" -o /out/redirector ./cmd/redirector

# The base: the equivalent of distroless static nonroot.
FROM scratch AS base
COPY --from=builder /rootfs/ /
COPY --from=builder --chown=65532:65532 /rootfs/home/nonroot/ /home/nonroot/
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/ko-app
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
ENV KO_DATA_PATH=/var/run/ko
USER 65532:65532
WORKDIR /home/nonroot

FROM base AS redirector
COPY --from=builder /out/redirector /ko-app/redirector
ENTRYPOINT ["/ko-app/redirector"]

FROM base AS manager
COPY --from=builder /out/manager /ko-app/manager
ENTRYPOINT ["/ko-app/manager"]
