#!/usr/bin/env bash
# Finds or builds the node's binaries, Kubernetes $K8S_VERSION (the pin of
# hack/envtest-versions.env), and prints the directory that holds them:
# kube-apiserver and etcd (hack/envtest-assets.sh), then kubelet,
# kube-controller-manager, kube-scheduler, kube-proxy and kubectl, built from
# the Go module proxy the way hack/envtest-assets.sh builds kube-apiserver
# (same version pin, same replace of the staging modules) into the same store
# (~/.local/share/kubebuilder-envtest/k8s/<version>-<os>-<arch>), once: about
# 2.5 minutes with the Go build cache warm from the envtest build, 6 cold.
#
# Progress goes to stderr; stdout is only the directory.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/envtest-versions.env
. "$here/../envtest-versions.env"
# shellcheck source=hack/kube-build.sh
. "$here/../kube-build.sh"
K8S_VERSION=${ENVTEST_K8S_VERSION:-$K8S_VERSION}
ETCD_VERSION=${ENVTEST_ETCD_VERSION:-$ETCD_VERSION}
export ENVTEST_K8S_VERSION=$K8S_VERSION ENVTEST_ETCD_VERSION=$ETCD_VERSION
# kube-apiserver and etcd, where they are not built yet.
DIR=$("$here/../envtest-assets.sh")

TARGETS=(kubelet kube-controller-manager kube-scheduler kube-proxy kubectl)
log() { echo "node: $*" >&2; }

missing=()
for t in "${TARGETS[@]}"; do
	[ -x "$DIR/$t" ] || missing+=("$t")
done
if [ ${#missing[@]} = 0 ]; then
	echo "$DIR"
	exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/out"
# The scratch module of hack/kube-build.sh, as hack/envtest-assets.sh builds in.
kube_module "$work/mod"
pkgs=()
for t in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$t"); done
start=$(date +%s)
log "building ${missing[*]} v$K8S_VERSION from source (first run only; 2.5-6 minutes on 2 cores)"
# One go build for all of them: the shared packages compile once.
(cd "$work/mod" && kube_build -ldflags "$(kube_ldflags)" -o "$work/out/" "${pkgs[@]}")
# Move into place only once all built, so an interrupted run leaves no half store.
for f in "$work"/out/*; do mv -f "$f" "$DIR/"; done
log "built ${missing[*]} in $(($(date +%s) - start))s into $DIR"
echo "$DIR"
