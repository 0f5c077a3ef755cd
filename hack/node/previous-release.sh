#!/usr/bin/env bash
# previous-release.sh [COMMIT VERSION]: the release of an earlier commit
# (default: hack/node/previous-release.env's, v0.3.0), for
# the cluster suite's upgrade test, its images for linux/amd64. Builds that commit's tree (git archive,
# no checkout) with its own Makefile and this tree's ko, kustomize and helm,
# and prints the directory whose dist/ holds its install.yaml, chart and
# image layouts. A commit's release is built once per machine: it is kept in
# $LINKFORGE_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/linkforge), like Go's
# build cache, so a fresh clone does not build it again. Built in a scratch
# directory and renamed into place, so a concurrent or interrupted run never
# leaves half a release there.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

# shellcheck source=hack/node/previous-release.env
. hack/node/previous-release.env
commit=$(git rev-parse --verify "${1:-$UPGRADE_FROM}^{commit}")
version=${2:-$UPGRADE_FROM_VERSION}
cache=${LINKFORGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/linkforge}/previous-release
dir=$cache/$commit
if [ -f "$dir/src/dist/install.yaml" ]; then
	echo "$dir/src"
	exit 0
fi
mkdir -p "$cache"
scratch=$(mktemp -d "$cache/.build-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/src"
git archive "$commit" | tar -x -C "$scratch/src"
# Its dependencies raised to this tree's versions where this tree requires
# a newer one (patch and minor releases of the same libraries: the upgrade
# test is about its manifests, its protocol and its code, not about which
# client-go patch it links). Every package this tree compiles (vet, build,
# the images) is then the same compile for that tree too, and comes from
# the build cache: without it, a cold run compiled Kubernetes' client
# libraries a second time for this stage alone. go build (-mod=mod below)
# completes its go.sum from the module cache.
raises=()
while read -r mod_path mod_version; do
	raises+=("-require=$mod_path@$mod_version")
done < <(go list -m -f '{{if not .Main}}{{.Path}} {{.Version}}{{end}}' all 2>/dev/null | awk 'NF == 2')
(cd "$scratch/src" && go mod edit "${raises[@]}")
tools=$PWD/bin
# This tree's hack/images, for the wrapper below (its own copy: make test
# builds this beside the main lane, whose images stage writes bin/images).
go build -o "$scratch/images" ./hack/images
# Its images for the node's platform alone (linux/amd64): its Makefile asks
# ko for every platform, and an older tree's linux/arm64 compile costs
# minutes of a cold run that the upgrade test never uses. So its ko is a
# wrapper (named as its Makefile names a ko it need not build,
# $(KO)-$(KO_VERSION)) that rewrites --platform, and writes the one image
# ko then builds as an index of it, as this tree's `images build` does.
mkdir -p "$scratch/ko"
cat >"$scratch/ko/ko-amd64" <<KO
#!/usr/bin/env bash
set -euo pipefail
args=() prev= layout=
for a in "\$@"; do
	case \$a in --platform=*) a=--platform=linux/amd64 ;; esac
	[ "\$prev" = --platform ] && a=linux/amd64
	[ "\$prev" = --oci-layout-path ] && layout=\$a
	args+=("\$a") prev=\$a
done
"$tools/ko" "\${args[@]}"
if [ "\${1:-}" = build ] && [ -n "\$layout" ]; then
	"$scratch/images" index-one -platform linux/amd64 "\$layout"
fi
KO
chmod +x "$scratch/ko/ko-amd64"
# Its Makefile finds this tree's kustomize and helm by their versioned
# names (hack/tools/go.mod's versions), so it builds neither.
tool_version() { awk -v m="$1" '$1 == m && $2 ~ /^v/ { print $2; exit }' hack/tools/go.mod; }
GOFLAGS="${GOFLAGS:-} -mod=mod" make -C "$scratch/src" --no-print-directory release \
	KO="$scratch/ko/ko" KO_VERSION=amd64 \
	KUSTOMIZE="$tools/kustomize" KUSTOMIZE_VERSION="$(tool_version sigs.k8s.io/kustomize/kustomize/v5)" \
	HELM="$tools/helm" HELM_VERSION="$(tool_version helm.sh/helm/v4)" \
	VERSION="$version" REVISION="$commit" SOURCE_DATE_EPOCH="$(git log -1 --format=%ct "$commit")" >&2
# Another run may have finished first: keep its copy, which is the same release.
mv -T "$scratch" "$dir" 2>/dev/null || true
echo "$dir/src"
