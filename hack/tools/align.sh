#!/usr/bin/env bash
# align.sh (make tools-align): for each module that linkforge and this tools
# module both compile at two versions (internal/repocheck's
# TestToolsShareTheProjectsVersions lists them), raises the older to the
# newer with go get, in go.mod or hack/tools/go.mod, until none is left.
# Run the tests after it: a raised library is a dependency update.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
modules() { (cd "$1" && shift && go list -deps -f '{{with .Module}}{{if .Version}}{{.Path}} {{.Version}}{{end}}{{end}}' "$@" | sort -u); }
for round in 1 2 3 4 5; do
	project=() tools=()
	while read -r module pv tv; do
		newer=$(printf '%s\n%s\n' "$pv" "$tv" | sort -V | tail -1)
		if [ "$newer" = "$pv" ]; then tools+=("$module@$pv"); else project+=("$module@$tv"); fi
		echo "$module: $pv (go.mod), $tv (hack/tools) -> $newer"
	done < <(join <(modules "$root" -test ./...) <(modules "$here" tool ./otelcol) | awk '$2 != $3')
	if [ ${#project[@]} = 0 ] && [ ${#tools[@]} = 0 ]; then
		echo "aligned"
		exit 0
	fi
	[ ${#project[@]} = 0 ] || (cd "$root" && go get "${project[@]}" && go mod tidy)
	# tidy -e: a test dependency of the Collector's file exporter is not on
	# the proxy (otelcol/README.md); the build needs none of it.
	[ ${#tools[@]} = 0 ] || (cd "$here" && go get "${tools[@]}" && go mod tidy -e)
done
echo "hack/tools/align.sh: still two versions after $round rounds" >&2
exit 1
