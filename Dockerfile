# One image, three binaries: /manager, /redirector and /linkforge (the CLI).
# The Deployments in config/ choose the entry point.
FROM golang:1.26 AS builder
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

ENV CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH}
RUN for b in manager redirector linkforge; do \
      go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/$b ./cmd/$b || exit 1; \
    done

FROM gcr.io/distroless/static:nonroot
WORKDIR /
COPY --from=builder /out/manager /out/redirector /out/linkforge /
USER 65532:65532
ENTRYPOINT ["/manager"]
