#!/usr/bin/env bash
# build.sh TOOL...: builds the named tools of this module (hack/tools) into
# $LOCALBIN (default bin/): each tool as <name>-<version>, its version the
# one go.mod pins, with <name> a symlink to it; otelcol, the test Collector
# (./otelcol), as bin/otelcol, again when this module changed. Only what is
# missing or stale is built, and in one go build, so the packages the tools
# share compile once and both cores stay busy.
#
# Tools: controller-gen setup-envtest kustomize helm crd-ref-docs ko otelcol
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=${LOCALBIN:-$here/../../bin}
mkdir -p "$bin"
bin=$(cd "$bin" && pwd)

# package and module of each tool
package() {
	case $1 in
	controller-gen) echo sigs.k8s.io/controller-tools/cmd/controller-gen sigs.k8s.io/controller-tools ;;
	setup-envtest) echo sigs.k8s.io/controller-runtime/tools/setup-envtest sigs.k8s.io/controller-runtime/tools/setup-envtest ;;
	kustomize) echo sigs.k8s.io/kustomize/kustomize/v5 sigs.k8s.io/kustomize/kustomize/v5 ;;
	helm) echo helm.sh/helm/v4/cmd/helm helm.sh/helm/v4 ;;
	crd-ref-docs) echo github.com/elastic/crd-ref-docs github.com/elastic/crd-ref-docs ;;
	ko) echo github.com/google/ko github.com/google/ko ;;
	otelcol) echo ./otelcol - ;;
	*) echo "hack/tools/build.sh: unknown tool $1 (known: controller-gen setup-envtest kustomize helm crd-ref-docs ko otelcol)" >&2 && return 1 ;;
	esac
}

# version MODULE: the version go.mod requires.
version() { awk -v m="$1" '$1 == m && $2 ~ /^v/ { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$here/go.mod"; }

pkgs=() outs=() links=()
for name in "$@"; do
	read -r pkg module <<<"$(package "$name")"
	if [ "$name" = otelcol ]; then
		out=$bin/otelcol
		# Stale when anything of this module is newer than the binary.
		if [ -x "$out" ] && [ -z "$(find "$here/go.mod" "$here/go.sum" "$here/otelcol" -newer "$out" -print -quit)" ]; then
			continue
		fi
	else
		v=$(version "$module")
		[ -n "$v" ] || { echo "hack/tools/build.sh: $module is not in $here/go.mod" >&2; exit 1; }
		out=$bin/$name-$v
		links+=("$name=$name-$v")
		[ -x "$out" ] && continue
	fi
	pkgs+=("$pkg") outs+=("$name=$out")
done

if [ ${#pkgs[@]} -gt 0 ]; then
	start=$(date +%s)
	tmp=$(mktemp -d "$bin/.tools-XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	echo "building ${outs[*]##*/} (hack/tools)"
	# Stripped (-s -w): nothing debugs the tools, and their DWARF was most
	# of each link.
	(cd "$here" && go build -ldflags="-s -w" -o "$tmp/" "${pkgs[@]}")
	# go build names a binary after its package's last element (kustomize/v5
	# is kustomize); into place only once all built.
	for o in "${outs[@]}"; do mv -f "$tmp/${o%%=*}" "${o#*=}"; done
	echo "built in $(($(date +%s) - start))s"
fi
for l in ${links[@]+"${links[@]}"}; do ln -sfn "${l#*=}" "$bin/${l%%=*}"; done
