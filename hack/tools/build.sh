#!/usr/bin/env bash
# build.sh TOOL...: builds the named tools into $LOCALBIN (default bin/):
# each tool as <name>-<version>, its version the one its module's go.mod
# pins, with <name> a symlink to it; a local main (otelcol, the test
# Collector; mockoidc, the test OpenID Connect provider) as bin/<name>,
# again when its module changed. The tools come from two modules: this one
# (hack/tools), whose versions of the libraries linkforge also compiles are
# linkforge's, and hack/authproxy (oauth2-proxy and mockoidc, for the test
# of gated links behind a real auth proxy), which has a go.mod of its own
# because oauth2-proxy needs newer versions of some of those libraries
# (prometheus/common, procfs, genproto's rpc) than linkforge and the tools
# here compile. Only what is missing or stale is built, in one go build a
# module, so the packages the tools of a module share compile once and both
# cores stay busy.
#
# Tools: controller-gen setup-envtest kustomize helm crd-ref-docs ko otelcol (hack/tools)
#        oauth2-proxy mockoidc (hack/authproxy)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
hack=$(cd "$here/.." && pwd)
bin=${LOCALBIN:-$here/../../bin}
mkdir -p "$bin"
bin=$(cd "$bin" && pwd)

# The module (a directory of hack/), package and module of each tool; a
# local main's module is -.
package() {
	case $1 in
	controller-gen) echo tools sigs.k8s.io/controller-tools/cmd/controller-gen sigs.k8s.io/controller-tools ;;
	setup-envtest) echo tools sigs.k8s.io/controller-runtime/tools/setup-envtest sigs.k8s.io/controller-runtime/tools/setup-envtest ;;
	kustomize) echo tools sigs.k8s.io/kustomize/kustomize/v5 sigs.k8s.io/kustomize/kustomize/v5 ;;
	helm) echo tools helm.sh/helm/v4/cmd/helm helm.sh/helm/v4 ;;
	crd-ref-docs) echo tools github.com/elastic/crd-ref-docs github.com/elastic/crd-ref-docs ;;
	ko) echo tools github.com/google/ko github.com/google/ko ;;
	otelcol) echo tools ./otelcol - ;;
	oauth2-proxy) echo authproxy github.com/oauth2-proxy/oauth2-proxy/v7 github.com/oauth2-proxy/oauth2-proxy/v7 ;;
	mockoidc) echo authproxy ./mockoidc - ;;
	*) echo "hack/tools/build.sh: unknown tool $1 (known: controller-gen setup-envtest kustomize helm crd-ref-docs ko otelcol oauth2-proxy mockoidc)" >&2 && return 1 ;;
	esac
}

# version DIR MODULE: the version hack/DIR/go.mod requires.
version() { awk -v m="$2" '$1 == m && $2 ~ /^v/ { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$hack/$1/go.mod"; }

links=()
# A go build a module: its packages and, for each, name=where it goes.
declare -A pkgs outs
for name in "$@"; do
	spec=$(package "$name") || exit 1
	read -r dir pkg module <<<"$spec"
	if [ "$module" = - ]; then
		out=$bin/$name
		# Stale when its module's go.mod or go.sum or its own directory is
		# newer than the binary.
		if [ -x "$out" ] && [ -z "$(find "$hack/$dir/go.mod" "$hack/$dir/go.sum" "$hack/$dir/$name" -newer "$out" -print -quit)" ]; then
			continue
		fi
	else
		v=$(version "$dir" "$module")
		[ -n "$v" ] || { echo "hack/tools/build.sh: $module is not in $hack/$dir/go.mod" >&2; exit 1; }
		out=$bin/$name-$v
		links+=("$name=$name-$v")
		[ -x "$out" ] && continue
	fi
	pkgs[$dir]+=" $pkg" outs[$dir]+=" $name=$out"
done

tmp=
trap '[ -z "$tmp" ] || rm -rf "$tmp"' EXIT
for dir in tools authproxy; do
	[ -n "${pkgs[$dir]:-}" ] || continue
	read -r -a p <<<"${pkgs[$dir]}"
	read -r -a o <<<"${outs[$dir]}"
	start=$(date +%s)
	tmp=$(mktemp -d "$bin/.tools-XXXXXX")
	echo "building ${o[*]##*/} (hack/$dir)"
	# Stripped (-s -w): nothing debugs the tools, and their DWARF was most
	# of each link.
	(cd "$hack/$dir" && go build -ldflags="-s -w" -o "$tmp/" "${p[@]}")
	# go build names a binary after its package's last element (kustomize/v5
	# is kustomize); into place only once all built.
	for x in "${o[@]}"; do mv -f "$tmp/${x%%=*}" "${x#*=}"; done
	rm -rf "$tmp"
	tmp=
	echo "built in $(($(date +%s) - start))s"
done
for l in ${links[@]+"${links[@]}"}; do ln -sfn "${l#*=}" "$bin/${l%%=*}"; done
