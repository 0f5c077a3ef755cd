#!/usr/bin/env bash
# align.sh (make tools-align, after hack/tools/align.sh): raises each module
# hack/gateway requires at an older version than linkforge or hack/tools
# compiles to that version, but for those under a prefix of held-back.txt
# (internal/repocheck's TestGatewaySharesTheProjectsVersions lists what is
# left). Then build (make gateway-binaries, after removing bin/traefik-*)
# and run the node suite: a raised library is a dependency update of
# Traefik or cert-manager, and one they do not build with goes in
# held-back.txt with the reason.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
compiled() { (cd "$1" && shift && go list -deps -f '{{with .Module}}{{if .Version}}{{.Path}} {{.Version}}{{end}}{{end}}' "$@"); }
required() { (cd "$here" && go mod edit -json) | awk '/"Path":/ { gsub(/[",]/, "", $2); p = $2 } /"Version":/ { gsub(/[",]/, "", $2); print p, $2 }'; }
held() { awk '$1 !~ /^#/ && NF { print $1 }' "$here/held-back.txt"; }
is_held() { local p; for p in $(held); do [[ $1 == "$p" || $1 == "$p"/* ]] && return 0; done; return 1; }
"$here/build.sh" patch
for round in 1 2 3; do
	# The newest version linkforge or hack/tools compiles, a line a module.
	newest=$( { compiled "$root" -test ./...; compiled "$root/hack/tools" tool ./otelcol; } | sort -u | sort -k1,1 -k2,2V | awk '{ v[$1] = $2 } END { for (m in v) print m, v[m] }' | sort)
	raise=()
	while read -r module gv nv; do
		older=$(printf '%s\n%s\n' "$gv" "$nv" | sort -V | head -1)
		[ "$gv" != "$nv" ] && [ "$older" = "$gv" ] || continue
		if is_held "$module"; then echo "$module: $gv (held back: held-back.txt), $nv in linkforge"; continue; fi
		echo "$module: $gv -> $nv"
		raise+=("$module@$nv")
	done < <(join <(required | sort) <(echo "$newest"))
	if [ ${#raise[@]} = 0 ]; then
		echo "hack/gateway: aligned"
		exit 0
	fi
	(cd "$here" && go get "${raise[@]}" && go mod tidy)
done
echo "hack/gateway/align.sh: still older versions after $round rounds" >&2
exit 1
