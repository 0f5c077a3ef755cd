# shellcheck shell=bash
# Sourced by hack/envtest-assets.sh and hack/node/binaries.sh: how both build
# Kubernetes' binaries and etcd, from the Go module proxy, in one scratch
# module. Needs K8S_VERSION and ETCD_VERSION set.

# The repository's go.mod, whose versions the scratch module takes (below).
KUBE_BUILD_REPO_GOMOD=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/go.mod

# kube_module DIR: writes DIR/go.mod, the module every Kubernetes binary and
# etcd build in:
#   - k8s.io/kubernetes requires its staging modules at v0.0.0 with local
#     replaces, which do not apply to a module that depends on it: each is
#     pinned to v0.<minor>.<patch>;
#   - etcd's server at ETCD_VERSION, so that it and kube-apiserver share
#     etcd's client, gRPC and the rest;
#   - every module linkforge's go.mod requires, at its version: where
#     Kubernetes asks for an older one, the build takes linkforge's (patch
#     and minor releases of the same libraries), so the half of
#     kube-apiserver's and the kubelet's packages that linkforge also
#     imports (client-go, apimachinery, the API types, gRPC, protobuf,
#     Prometheus...) compile once, in the same build cache, for both. That
#     is why K8S_VERSION follows the k8s.io/* version of go.mod.
kube_module() {
	local dir=$1 gomod staging_version="v0.${K8S_VERSION#*.}"
	mkdir -p "$dir"
	gomod=$(cd "$dir" && go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
	[ -n "$gomod" ] || { echo "kube-build: k8s.io/kubernetes v$K8S_VERSION: no go.mod from the module proxy" >&2; return 1; }
	{
		echo "module linkforge.local/kubernetes"
		echo
		echo "go 1.26"
		echo
		echo "require k8s.io/kubernetes v$K8S_VERSION"
		echo "require go.etcd.io/etcd/server/v3 v$ETCD_VERSION"
		awk '$1 == "require" && $2 == "(" { in_block = 1; next }
			in_block && $1 == ")" { in_block = 0; next }
			in_block && $2 ~ /^v/ { print "require " $1 " " $2 }
			$1 == "require" && $3 ~ /^v/ { print "require " $2 " " $3 }' "$KUBE_BUILD_REPO_GOMOD" |
			grep -v -e '^require k8s\.io/kubernetes ' -e '^require go\.etcd\.io/etcd/server/v3 '
		echo
		awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" { print $1 }' "$gomod" | sort -u |
			while read -r m; do echo "replace $m => $m $staging_version"; done
	} >"$dir/go.mod"
}

# kube_ldflags: the link flags of a Kubernetes binary: stripped, and the
# version it reports.
kube_ldflags() {
	local major=${K8S_VERSION%%.*} minor=${K8S_VERSION#*.} ldflags="-s -w" p
	minor=${minor%%.*}
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=" -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=$major -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
	done
	echo "$ldflags"
}

# kube_build ARGS...: go build in the scratch module (-mod=mod). Static (cgo
# off: their only cgo is the standard library's resolver and user lookup,
# and Kubernetes builds all but the kubelet so), trimmed and with the build
# tags make exports for linkforge's own builds, so that one build cache
# compiles the standard library and the shared modules once for both (a
# package's cache key covers all three).
kube_build() {
	CGO_ENABLED=0 GOFLAGS="-mod=mod -trimpath -tags=${BUILD_TAGS:-timetzdata}" go build "$@"
}
