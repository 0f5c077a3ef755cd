# shellcheck shell=bash
# Sourced by hack/envtest-assets.sh and hack/node/binaries.sh.
#
# kube_build ARGS...: go build for Kubernetes' and etcd's binaries, in a
# scratch module of their own (-mod=mod). Static (cgo off: their only cgo
# is the standard library's resolver and user lookup, and Kubernetes builds
# all but the kubelet so), trimmed and with the build tags make exports
# for linkforge's own builds, so that one build cache compiles the standard
# library once for both (a package's cache key covers all three).
kube_build() {
	CGO_ENABLED=0 GOFLAGS="-mod=mod -trimpath -tags=${BUILD_TAGS:-timetzdata}" go build "$@"
}
