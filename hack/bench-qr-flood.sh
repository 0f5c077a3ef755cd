#!/usr/bin/env bash
# bench-qr-flood.sh: do QR codes starve the redirects on the same port?
#
# What it runs (loopback only): hack/redirector-bench (the production
# redirect.Redirector and fasthttp server with the defaults of
# bin/redirector's flags, fed N synthetic links; see bench-redirect.sh),
# pinned to one core (SERVER_CPU), and two wrk clients on LOAD_CPU:
#   - redirects: CONNS keep-alive connections cycling through all N links;
#   - the flood: FLOOD_CONNS connections asking, as fast as they can, for QR
#     codes of the first FLOOD_LINKS links at every size (64-1024), margin
#     (0-16) and format, under changing Host headers of up to 2,000 bytes.
# It measures the redirects alone, then the redirects while the flood runs,
# and prints their rates and p99 latencies and what the flood got (statuses).
# Goal (issue 40): with the flood, redirects keep at least half their rate
# and a p99 under 50 ms.
#
# Usage: hack/bench-qr-flood.sh                (about 1 minute)
#        SRC=/tmp/before hack/bench-qr-flood.sh (the redirector of another tree)
#        REDIRECTOR_FLAGS="--public-base-url=https://go.example.com" hack/bench-qr-flood.sh
# Needs wrk (apt-get install wrk) and taskset. Not part of `make test`.
set -euo pipefail

N=${N:-100000}
NSS=${NSS:-100}
DURATION=${DURATION:-15s}
WARMUP=${WARMUP:-3s}
CONNS=${CONNS:-64}
FLOOD_CONNS=${FLOOD_CONNS:-8}
FLOOD_LINKS=${FLOOD_LINKS:-1000}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
REDIR_PORT=${REDIR_PORT:-18180}
PROBE_PORT=${PROBE_PORT:-18181}
REDIRECTOR_FLAGS=${REDIRECTOR_FLAGS:-}

cd "$(dirname "$0")/.."
root=$(pwd)
src=${SRC:-$root}
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
log() { echo "bench: $*" >&2; }

command -v wrk >/dev/null || { log "wrk is missing (apt-get install wrk)"; exit 1; }
command -v taskset >/dev/null || { log "taskset is missing (util-linux)"; exit 1; }

log "building the benchmark's redirector from $src"
(cd "$src" && go build -trimpath -o "$work/redirector-bench" ./hack/redirector-bench)
"$work/redirector-bench" --links="$N" --namespaces="$NSS" --table="$work/links.txt"
awk '{ print "/" $1 "/" $2 }' "$work/links.txt" >"$work/paths.txt"
head -n "$FLOOD_LINKS" "$work/paths.txt" >"$work/flood-paths.txt"

cat >"$work/cycle.lua" <<'EOF'
local reqs, n, idx = {}, 0, 0
function init(args)
  for line in io.lines(args[1]) do
    n = n + 1
    reqs[n] = wrk.format("GET", line)
  end
  idx = math.random(n)
end
function request()
  idx = idx + 1
  if idx > n then idx = 1 end
  return reqs[idx]
end
function done(summary, latency, requests)
  local secs = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format("RESULT rps=%.0f p50_us=%d p99_us=%d requests=%d errors=%d non2xx3xx=%d\n",
    summary.requests / secs, latency:percentile(50), latency:percentile(99), summary.requests,
    e.connect + e.read + e.write + e.timeout, e.status))
end
EOF

# The flood: QR codes of FLOOD_LINKS links, every size, margin, format and
# a new Host each time (a long one every fourth request).
cat >"$work/flood.lua" <<'EOF'
local paths, n, i = {}, 0, 0
function init(args)
  for line in io.lines(args[1]) do
    n = n + 1
    paths[n] = line
  end
  math.randomseed(os.time() + math.random(1000))
end
function request()
  i = i + 1
  local host = "h" .. i .. ".example"
  if i % 4 == 0 then host = string.rep("a", 2000) .. i .. ".example" end
  local format = (i % 2 == 0) and "png" or "svg"
  local q = string.format("/qr?size=%d&margin=%d&format=%s", math.random(64, 1024), math.random(0, 16), format)
  return wrk.format("GET", paths[math.random(n)] .. q, { Host = host })
end
function done(summary, latency, requests)
  local secs = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format("FLOOD rps=%.0f p50_us=%d p99_us=%d requests=%d errors=%d\n",
    summary.requests / secs, latency:percentile(50), latency:percentile(99), summary.requests,
    e.connect + e.read + e.write + e.timeout))
end
EOF

# shellcheck disable=SC2086 # REDIRECTOR_FLAGS is a list of flags
taskset -c "$SERVER_CPU" "$work/redirector-bench" --links="$N" --namespaces="$NSS" \
	--bind-address=127.0.0.1:$REDIR_PORT --health-probe-bind-address=127.0.0.1:$PROBE_PORT $REDIRECTOR_FLAGS \
	>"$work/redirector.log" 2>&1 &
rp=$!
pids+=("$rp")
for _ in $(seq 1 600); do
	[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PROBE_PORT/readyz" || true)" = 200 ] && break
	sleep 0.2
done
first=$(head -1 "$work/flood-paths.txt")
curl -s -o /dev/null -w "bench: QR sample: %{http_code} %{content_type} %{size_download} bytes\n" \
	"http://127.0.0.1:$REDIR_PORT$first/qr?size=1024&margin=0" >&2

redirects() { # duration
	taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d"$1" -s "$work/cycle.lua" "http://127.0.0.1:$REDIR_PORT" -- "$work/paths.txt"
}

log "redirects alone"
redirects "$WARMUP" >/dev/null
alone=$(redirects "$DURATION" | grep '^RESULT')

log "redirects under a flood of QR codes ($FLOOD_CONNS connections)"
taskset -c "$LOAD_CPU" wrk -t1 -c"$FLOOD_CONNS" -d"$(( ${DURATION%s} + ${WARMUP%s} + 2 ))s" --timeout 10s \
	-s "$work/flood.lua" "http://127.0.0.1:$REDIR_PORT" -- "$work/flood-paths.txt" >"$work/flood.txt" 2>&1 &
fp=$!
pids+=("$fp")
redirects "$WARMUP" >/dev/null
flooded=$(redirects "$DURATION" | grep '^RESULT')
wait "$fp" || true
codes=$(curl -s "http://127.0.0.1:$PROBE_PORT/metrics" | grep -E '^linkforge_redirector_(qr_codes_total|requests_total|render)' || true)
rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$rp/status")

field() { sed -n "s/.*$2=\([0-9]*\).*/\1/p" <<<"$1"; }
echo
echo "links: $N; redirects: wrk -t1 -c$CONNS -d$DURATION; flood: wrk -t1 -c$FLOOD_CONNS over $FLOOD_LINKS links"
echo "server on CPU $SERVER_CPU, wrk on CPU $LOAD_CPU; $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "redirector flags: ${REDIRECTOR_FLAGS:-(none)}"
printf '%-22s %12s %10s %10s\n' "" "requests/s" "p50 (us)" "p99 (us)"
printf '%-22s %12s %10s %10s\n' "redirects alone" "$(field "$alone" rps)" "$(field "$alone" p50_us)" "$(field "$alone" p99_us)"
printf '%-22s %12s %10s %10s\n' "redirects, QR flood" "$(field "$flooded" rps)" "$(field "$flooded" p50_us)" "$(field "$flooded" p99_us)"
grep '^FLOOD' "$work/flood.txt" | sed 's/^FLOOD/QR flood:/' || cat "$work/flood.txt"
awk -v a="$(field "$alone" rps)" -v f="$(field "$flooded" rps)" -v p="$(field "$flooded" p99_us)" 'BEGIN {
	printf "redirect rate kept: %.2fx (goal >= 0.50x); p99 under the flood %.1f ms (goal < 50 ms)\n", f / a, p / 1000 }'
echo "redirector VmRSS after: $rss KiB"
echo "$codes"
