#!/usr/bin/env bash
# previous-release.sh COMMIT VERSION: the release of an earlier commit, for
# the cluster suite's upgrade test. Builds that commit's tree (git archive,
# no checkout) with its own Makefile and this tree's ko, kustomize and helm,
# and prints the directory whose dist/ holds its install.yaml, chart and
# image layouts. A commit's release is built once per machine: it is kept in
# $LINKFORGE_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/linkforge), like Go's
# build cache, so a fresh clone does not build it again. Built in a scratch
# directory and renamed into place, so a concurrent or interrupted run never
# leaves half a release there.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

commit=$(git rev-parse --verify "${1:?usage: previous-release.sh COMMIT VERSION}^{commit}")
version=${2:?usage: previous-release.sh COMMIT VERSION}
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
tools=$PWD/bin
make -C "$scratch/src" --no-print-directory release \
	KO="$tools/ko" KUSTOMIZE="$tools/kustomize" HELM="$tools/helm" \
	VERSION="$version" REVISION="$commit" SOURCE_DATE_EPOCH="$(git log -1 --format=%ct "$commit")" >&2
# Another run may have finished first: keep its copy, which is the same release.
mv -T "$scratch" "$dir" 2>/dev/null || true
echo "$dir/src"
