#!/usr/bin/env bash
# build.sh: builds a Gateway API implementation and cert-manager from their
# Go modules into $LOCALBIN (default bin/), for the tests through a real
# Gateway (issue 56): traefik-<version> (github.com/traefik/traefik/v3's
# cmd/traefik) and cert-manager-controller-<version> (cert-manager's
# controller main, copied into overlay/cert-manager/cmd/controller:
# cert-manager does not publish it as a module), each with a symlink without the version, and the
# CRDs both need, in bin/gateway-crds/gateway-api-<version> (the Gateway API's
# standard channel) and bin/gateway-crds/cert-manager-<version>, each with a
# symlink without the version. Only what is
# missing is built, in one go build. README.md says why two dependencies are
# patched copies (.patched/, made here from the module cache and overlay/;
# `build.sh patch` makes just them).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=${LOCALBIN:-$here/../../bin}
mkdir -p "$bin"
bin=$(cd "$bin" && pwd)

# version MODULE: the version go.mod requires.
version() { awk -v m="$1" '$1 == m && $2 ~ /^v/ { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$here/go.mod"; }
# moddir MODULE VERSION: the module's directory in the module cache,
# downloaded where missing (outside this module, whose go.mod names the
# patched copies that may not be made yet).
moddir() { (cd / && GOFLAGS=-mod=mod go mod download -json "$1@$2" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p'); }

# patch NAME MODULE: .patched/NAME is MODULE at its go.mod version with each
# directory of overlay/NAME in place of the module's own; made again when
# the version or the overlay changed.
patch() {
	local name=$1 module=$2 v dir out stamp
	v=$(version "$module")
	out=$here/.patched/$name
	stamp="$v $(cd "$here/overlay/$name" && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)"
	[ -f "$out/.linkforge-stamp" ] && [ "$(cat "$out/.linkforge-stamp")" = "$stamp" ] && return
	dir=$(moddir "$module" "$v")
	rm -rf "$out"
	mkdir -p "$here/.patched"
	cp -r "$dir" "$out"
	chmod -R u+w "$out"
	(cd "$here/overlay/$name" && find . -name '*.go' -printf '%h\n' | sort -u) | while read -r d; do
		rm -rf "${out:?}/$d"
		mkdir -p "$out/$d"
		cp "$here/overlay/$name/$d"/*.go "$out/$d/"
	done
	echo "$stamp" >"$out/.linkforge-stamp"
}

# build.sh patch: just make .patched/ (before a go mod tidy here, say).
if [ "${1:-}" = patch ]; then
	patch lego github.com/go-acme/lego/v5
	patch cert-manager github.com/cert-manager/cert-manager
	exit
fi

traefik=$(version github.com/traefik/traefik/v3)
certmanager=$(version github.com/cert-manager/cert-manager)
gatewayapi=$(version sigs.k8s.io/gateway-api)

# The CRDs, from the module cache.
crds=$bin/gateway-crds
if [ ! -d "$crds/gateway-api-$gatewayapi" ]; then
	mkdir -p "$crds/gateway-api-$gatewayapi"
	cp "$(moddir sigs.k8s.io/gateway-api "$gatewayapi")"/config/crd/standard/*.yaml "$crds/gateway-api-$gatewayapi/"
	chmod u+w "$crds/gateway-api-$gatewayapi"/*
fi
if [ ! -d "$crds/cert-manager-$certmanager" ]; then
	mkdir -p "$crds/cert-manager-$certmanager"
	cp "$(moddir github.com/cert-manager/cert-manager "$certmanager")"/deploy/crds/*.yaml "$crds/cert-manager-$certmanager/"
	chmod u+w "$crds/cert-manager-$certmanager"/*
fi

pkgs=() outs=()
# Each is built again when this module changed (its versions: go.mod,
# go.sum) or what it is built from here (overlay/, traefik-dynamic-ext/).
changed() { [ ! -x "$1" ] || [ -n "$(find "$here/go.mod" "$here/go.sum" "$here/overlay" "$here/traefik-dynamic-ext" -newer "$1" -print -quit)" ]; }
if changed "$bin/traefik-$traefik"; then
	pkgs+=(github.com/traefik/traefik/v3/cmd/traefik) outs+=("traefik=$bin/traefik-$traefik")
fi
# The controller's main is cmd/controller of the patched copy (from
# overlay/), like hack/authproxy's mockoidc.
cm=$bin/cert-manager-controller-$certmanager
if changed "$cm"; then
	pkgs+=(github.com/cert-manager/cert-manager/cmd/controller) outs+=("controller=$cm")
fi
if [ ${#pkgs[@]} -gt 0 ]; then
	patch lego github.com/go-acme/lego/v5
	patch cert-manager github.com/cert-manager/cert-manager
	start=$(date +%s)
	tmp=$(mktemp -d "$bin/.gateway-XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	echo "building ${outs[*]##*/} (hack/gateway)"
	(cd "$here" && go build -ldflags="-s -w" -o "$tmp/" "${pkgs[@]}")
	for x in "${outs[@]}"; do mv -f "$tmp/${x%%=*}" "${x#*=}"; done
	echo "built in $(($(date +%s) - start))s"
fi
ln -sfn "gateway-api-$gatewayapi" "$crds/gateway-api"
ln -sfn "cert-manager-$certmanager" "$crds/cert-manager"
ln -sfn "traefik-$traefik" "$bin/traefik"
ln -sfn "cert-manager-controller-$certmanager" "$bin/cert-manager-controller"
