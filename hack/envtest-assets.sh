#!/usr/bin/env bash
# Finds or makes the control-plane binaries envtest needs (kube-apiserver, etcd)
# and prints the directory that holds them, for KUBEBUILDER_ASSETS.
#
# Order: the local store -> setup-envtest (downloads where the internet is
# reachable; built only then) -> a build from the Go modules through the
# module proxy.
# The store is setup-envtest's own (~/.local/share/kubebuilder-envtest), so a
# fresh clone on the same machine reuses what an earlier run built.
#
# Progress goes to stderr; stdout is only the directory.
set -euo pipefail

# The pins (K8S_VERSION, ETCD_VERSION); the environment may override them.
# shellcheck source=hack/envtest-versions.env
. "$(dirname "${BASH_SOURCE[0]}")/envtest-versions.env"
# shellcheck source=hack/kube-build.sh
. "$(dirname "${BASH_SOURCE[0]}")/kube-build.sh"
K8S_VERSION=${ENVTEST_K8S_VERSION:-$K8S_VERSION}
ETCD_VERSION=${ENVTEST_ETCD_VERSION:-$ETCD_VERSION}
STORE=${ENVTEST_STORE:-${XDG_DATA_HOME:-$HOME/.local/share}/kubebuilder-envtest}
SETUP_ENVTEST=${SETUP_ENVTEST:-}
GOOS=$(go env GOOS)
GOARCH=$(go env GOARCH)
DIR="$STORE/k8s/$K8S_VERSION-$GOOS-$GOARCH"

log() { echo "envtest: $*" >&2; }
# kubectl is built beside them where the machine has none (make dev and the
# end-to-end tests use it from there).
need_kubectl() { [ "${ENVTEST_BUILD_KUBECTL:-}" = 1 ] || ! command -v kubectl >/dev/null 2>&1; }
have_all() {
	[ -x "$1/kube-apiserver" ] && [ -x "$1/etcd" ] && { ! need_kubectl || [ -x "$1/kubectl" ]; }
}

if have_all "$DIR"; then
	echo "$DIR"
	exit 0
fi

# setup-envtest is built (hack/tools) only where its release index answers:
# a machine without the internet would build it and then not download.
ENVTEST_INDEX=${ENVTEST_INDEX:-https://raw.githubusercontent.com/kubernetes-sigs/controller-tools/HEAD/envtest-releases.yaml}
if [ -n "$SETUP_ENVTEST" ] && [ ! -x "$SETUP_ENVTEST" ]; then
	if command -v curl >/dev/null && curl -fsSL --max-time 10 -o /dev/null "$ENVTEST_INDEX" 2>/dev/null; then
		LOCALBIN=$(dirname "$SETUP_ENVTEST") "$(dirname "${BASH_SOURCE[0]}")/tools/build.sh" setup-envtest >&2
	else
		log "setup-envtest's index ($ENVTEST_INDEX) does not answer: building from Go modules"
	fi
fi
if [ -n "$SETUP_ENVTEST" ] && [ -x "$SETUP_ENVTEST" ]; then
	log "asking setup-envtest for Kubernetes $K8S_VERSION"
	if out=$(timeout 120 "$SETUP_ENVTEST" use "$K8S_VERSION" --bin-dir "$STORE" -p path 2>/dev/null) &&
		[ -n "$out" ] && have_all "$out"; then
		echo "$out"
		exit 0
	fi
	log "setup-envtest could not download; building from Go modules instead"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
staged="$work/out"
mkdir -p "$staged"

# etcd, kube-apiserver and (where the machine has none) kubectl, in one go
# build in the scratch module of hack/kube-build.sh: the packages they
# share, and those they share with linkforge, compile once.
targets=() pkgs=()
[ -x "$DIR/etcd" ] || { targets+=(etcd); pkgs+=(go.etcd.io/etcd/server/v3); }
[ -x "$DIR/kube-apiserver" ] || { targets+=(kube-apiserver); pkgs+=(k8s.io/kubernetes/cmd/kube-apiserver); }
if need_kubectl && [ ! -x "$DIR/kubectl" ]; then targets+=(kubectl); pkgs+=(k8s.io/kubernetes/cmd/kubectl); fi
start=$(date +%s)
kube_module "$work/mod"
log "building ${targets[*]} (Kubernetes v$K8S_VERSION, etcd v$ETCD_VERSION) from source (first run only; 6-12 minutes on 2 cores)"
(cd "$work/mod" && kube_build -ldflags "$(kube_ldflags)" -o "$staged/" "${pkgs[@]}")
# etcd's main package is its module's root, go.etcd.io/etcd/server/v3,
# which go build names server.
[ ! -e "$staged/server" ] || mv "$staged/server" "$staged/etcd"
mkdir -p "$DIR"
# Move into place only once all built, so an interrupted run leaves no half store.
for f in "$staged"/*; do mv -f "$f" "$DIR/"; done
log "built in $(($(date +%s) - start))s into $DIR"
echo "$DIR"
