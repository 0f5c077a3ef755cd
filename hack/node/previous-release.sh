#!/usr/bin/env bash
# previous-release.sh COMMIT VERSION: the release of an earlier commit, for
# the cluster suite's upgrade test. Builds that commit's tree (git archive,
# no checkout) with its own Makefile and this tree's ko, kustomize and helm,
# into bin/previous-release/VERSION, and prints the directory whose dist/
# holds its install.yaml, chart and image layouts. Reused when already built.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

commit=$(git rev-parse --verify "${1:?usage: previous-release.sh COMMIT VERSION}^{commit}")
version=${2:?usage: previous-release.sh COMMIT VERSION}
dir=bin/previous-release/$version
if [ "$(cat "$dir/commit" 2>/dev/null)" = "$commit" ] && [ -f "$dir/src/dist/install.yaml" ]; then
	echo "$PWD/$dir/src"
	exit 0
fi
rm -rf "$dir"
mkdir -p "$dir/src"
git archive "$commit" | tar -x -C "$dir/src"
tools=$PWD/bin
make -C "$dir/src" --no-print-directory release \
	KO="$tools/ko" KUSTOMIZE="$tools/kustomize" HELM="$tools/helm" \
	VERSION="$version" REVISION="$commit" SOURCE_DATE_EPOCH="$(git log -1 --format=%ct "$commit")" >&2
echo "$commit" >"$dir/commit"
echo "$PWD/$dir/src"
