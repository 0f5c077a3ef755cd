#!/usr/bin/env bash
# bench-redirect.sh: the redirector against nginx on the same 100,000 links.
#
# What it runs (loopback only, 127.0.0.1):
#   - hack/redirector-bench: the production redirect.Redirector, index,
#     informer transform and fasthttp server (redirect.NewServer with the
#     defaults of bin/redirector's flags), except that its ShortLinks come
#     from a generator instead of an API server. The generated objects look
#     like what an API server returns (uid, labels, a kubectl last-applied
#     annotation, managedFields, full status) and are streamed through a
#     client-go SharedIndexInformer with the redirector's transform and the
#     same event handlers as in production. See hack/redirector-bench/synthetic.go.
#   - nginx answering `return 302 <url>` from a `map` of the same N paths
#     (one worker, access log off, unlimited keep-alive requests).
#   - the fasthttp floor (hack/fasthttp-floor): bare fasthttp answering 302
#     from a Go map of the same paths with the same headers, i.e. what the
#     library costs without linkforge's index, expiry checks, metrics and
#     limits. It runs fasthttp's defaults, so it reads right after each
#     response; the redirector yields before that read while it helps
#     (internal/redirect/readyield.go), which is why it can beat the floor.
#   - with EVENTS=on, the redirector with click events on as well
#     (--events-cloudevents-url): batches of CloudEvents to a second nginx
#     on LOAD_CPU that answers 204 and discards them. The batcher and the
#     sink run in the redirector's process, on its core: its CPU per
#     request is the whole cost of events (docs/events.md, Cost).
#   - with RULES=on, the cost of routing: a second redirector whose N links
#     have 8 rules and 3 variants each (--link-kind=rules, as in
#     hack/callgrind-bench -only rules,plain), and the plain redirector,
#     both asked by a browser's requests from a newsletter (desktop Chrome,
#     en-US, a utm query: hitpath.Options.Browser's), which miss every
#     rule and go to the split. Their CPU per request compares a link
#     with rules against a plain one (goal >= 0.90x).
#   - wrk with a Lua script cycling through all N paths, keep-alive.
# The servers are pinned to SERVER_CPU (one core), wrk to LOAD_CPU; same
# duration and connections for all, in ROUNDS alternating rounds of the same
# run (the median round of each is reported, so that load from other work on
# the machine hits all alike).
#
# RSS per link: VmRSS of the redirector with N links minus VmRSS with none
# (same binary, same flags, --links=0), divided by N; measured once idle
# after the initial sync has settled and once after the same wrk load. It
# includes everything the process holds per link: the informer's stripped
# ShortLink and its store entry, the index entry
# and its map slot, and the Go heap's headroom and fragmentation around them.
#
# CPU time varies with whatever else the machine runs (rounds of one run
# spread by 10-30%); instructions do not. hack/callgrind-bench measures the
# same servers in instructions per request under callgrind, repeatably, and
# internal/hitpath's TestRedirectorInstructionBudget holds the redirector to
# a budget in them. This script measures what instructions cannot: system
# calls' cost in the kernel, cache misses (100,000 links; callgrind-bench
# -cache counts the misses of its 256 links deterministically), the read
# yield under load, and memory per link.
#
# Usage: hack/bench-redirect.sh            (defaults below; about 4 minutes)
#        N=100000 DURATION=15s ROUNDS=3 CONNS=64 hack/bench-redirect.sh
#        EVENTS=on hack/bench-redirect.sh  (adds the click events' redirector)
#        RULES=on hack/bench-redirect.sh   (adds links with rules against plain ones)
# Needs nginx and wrk (installed with apt-get if missing) and taskset.
# Not part of `make test`.
set -euo pipefail

N=${N:-100000}
NSS=${NSS:-100}
DURATION=${DURATION:-15s}
ROUNDS=${ROUNDS:-3}
WARMUP=${WARMUP:-5s}
CONNS=${CONNS:-64}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
SETTLE=${SETTLE:-15}
REDIR_PORT=${REDIR_PORT:-18080}
PROBE_PORT=${PROBE_PORT:-18081}
NGINX_PORT=${NGINX_PORT:-18090}
FLOOR_PORT=${FLOOR_PORT:-18070}
NOCOUNT_PORT=${NOCOUNT_PORT:-18060}
NOCOUNT_PROBE_PORT=${NOCOUNT_PROBE_PORT:-18061}
EVENTS=${EVENTS:-off}
EVENTS_PORT=${EVENTS_PORT:-18050}
EVENTS_PROBE_PORT=${EVENTS_PROBE_PORT:-18051}
SINK_PORT=${SINK_PORT:-18052}
RULES=${RULES:-off}
RULES_PORT=${RULES_PORT:-18040}
RULES_PROBE_PORT=${RULES_PROBE_PORT:-18041}

cd "$(dirname "$0")/.."
root=$(pwd)
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

log() { echo "bench: $*" >&2; }

if ! command -v nginx >/dev/null || ! command -v wrk >/dev/null; then
	log "installing nginx and wrk"
	apt-get update -qq >/dev/null
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx wrk >/dev/null
fi
command -v taskset >/dev/null || { log "taskset is missing (util-linux)"; exit 1; }

log "building the benchmark's redirector and the fasthttp floor"
# YIELD=off builds the redirector without the read yield (a build tag, not a
# flag), to decide the yield on measurements of the same script.
tags=""
[ "${YIELD:-on}" = off ] && tags="-tags=noreadyield"
# shellcheck disable=SC2086 # $tags is empty or one word
go build -trimpath $tags -o "$work/redirector-bench" ./hack/redirector-bench
go build -trimpath -o "$work/fasthttp-floor" ./hack/fasthttp-floor

log "generating $N links over $NSS namespaces"
"$work/redirector-bench" --links="$N" --namespaces="$NSS" --table="$work/links.txt"

# wrk: pre-formatted requests, cycled from a random start.
awk '{ print "/" $1 "/" $2 }' "$work/links.txt" >"$work/paths.txt"
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
  io.write(string.format("RESULT rps=%.0f p50_us=%d p99_us=%d requests=%d errors=%d bad_status=%d\n",
    summary.requests / secs, latency:percentile(50), latency:percentile(99), summary.requests,
    e.connect + e.read + e.write + e.timeout, e.status))
end
EOF

# The same cycle as a browser following the links from a newsletter
# (RULES=on): hitpath.Options.Browser's query and headers.
sed -e 's|reqs\[n\] = wrk.format("GET", line)|reqs[n] = wrk.format("GET", line .. "?utm_source=newsletter\&utm_medium=email", browser)|' \
	-e 's|^function init(args)$|local browser = {\
  ["User-Agent"] = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/121.0.0.0 Safari/537.36",\
  ["Accept"] = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",\
  ["Accept-Language"] = "en-US,en;q=0.9",\
  ["Accept-Encoding"] = "gzip, deflate, br",\
}\
function init(args)|' "$work/cycle.lua" >"$work/browser.lua"
grep -q 'utm_source' "$work/browser.lua" || { log "could not write the browser's wrk script"; exit 1; }

# nginx: one worker on SERVER_CPU, a map of the same paths.
{
	echo "map \$uri \$target {"
	echo "    default \"\";"
	awk '{ printf "    /%s/%s \"%s\";\n", $1, $2, $3 }' "$work/links.txt"
	echo "}"
} >"$work/map.conf"
mkdir -p "$work/nginx"
cat >"$work/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    server_tokens off;
    keepalive_requests 100000000;
    keepalive_timeout 120s;
    map_hash_max_size 262144;
    map_hash_bucket_size 256;
    client_body_temp_path $work/nginx;
    proxy_temp_path $work/nginx;
    fastcgi_temp_path $work/nginx;
    uwsgi_temp_path $work/nginx;
    scgi_temp_path $work/nginx;
    include $work/map.conf;
    server {
        listen 127.0.0.1:$NGINX_PORT reuseport backlog=4096;
        location / {
            if (\$target = "") { return 404; }
            return 302 \$target;
        }
    }
}
EOF

# wait_http URL PID [CODE]: until URL answers CODE (200), for as long as the
# server PID runs: a busy machine slows its start (100,000 links take 10-20 s
# on a quiet one), only a server that exits stops it. WAIT_BACKSTOP seconds
# (600) bound it all the same.
wait_http() {
	local start=$SECONDS
	while [ $((SECONDS - start)) -lt "${WAIT_BACKSTOP:-600}" ]; do
		[ "$(curl -s -o /dev/null -w '%{http_code}' "$1" || true)" = "${3:-200}" ] && return 0
		kill -0 "$2" 2>/dev/null || { log "the server waited for ($1) exited"; return 1; }
		sleep 0.2
	done
	log "timed out waiting for $1 (WAIT_BACKSTOP=${WAIT_BACKSTOP:-600}s)"
	return 1
}

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# settled_rss PID: VmRSS once it has stopped falling (the Go scavenger returns
# the initial sync's garbage to the OS over a few seconds), at most SETTLE s.
settled_rss() {
	local prev cur
	prev=$(rss_kib "$1")
	for _ in $(seq 1 "$SETTLE"); do
		sleep 1
		cur=$(rss_kib "$1")
		[ $((prev - cur)) -lt 256 ] && break
		prev=$cur
	done
	rss_kib "$1"
}

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; } # utime + stime
CLK_TCK=$(getconf CLK_TCK)

# run_wrk URL PID [SCRIPT]: a warm-up, then the measured run (of the wrk
# script SCRIPT, cycle.lua by default); prints its RESULT line plus the
# server's CPU time per request (user + system, from /proc/PID/stat), which
# other work on the machine disturbs much less than requests/s.
run_wrk() {
	local t0 t1 out script=${3:-$work/cycle.lua}
	taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d"$WARMUP" -s "$script" "$1" -- "$work/paths.txt" >/dev/null
	t0=$(cpu_ticks "$2")
	out=$(taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d"$DURATION" -s "$script" "$1" -- "$work/paths.txt" | grep '^RESULT')
	t1=$(cpu_ticks "$2")
	awk -v o="$out" -v d=$((t1 - t0)) -v hz="$CLK_TCK" 'BEGIN {
		split(o, f, "requests="); split(f[2], g, " ")
		printf "%s cpu_ns=%.0f\n", o, d * 1e9 / hz / g[1] }'
}

start_redirector() { # links [port probe-port extra-flags...]
	local links=$1 port=${2:-$REDIR_PORT} probe=${3:-$PROBE_PORT}
	shift $(($# < 3 ? $# : 3))
	taskset -c "$SERVER_CPU" "$work/redirector-bench" --links="$links" --namespaces="$NSS" \
		--bind-address=127.0.0.1:$port --health-probe-bind-address=127.0.0.1:$probe "$@" \
		>"$work/redirector-$links-$port.log" 2>&1 &
	echo $!
}

stop() { # pid: SIGTERM, then wait until it has exited
	kill -TERM "$1" 2>/dev/null || true
	for _ in $(seq 1 300); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
	log "pid $1 did not exit"
}

field() { sed -n "s/.*$2=\([0-9]*\).*/\1/p" <<<"$1"; }

log "redirector with 0 links (baseline RSS)"
rp=$(start_redirector 0)
pids+=("$rp")
wait_http "http://127.0.0.1:$PROBE_PORT/readyz" "$rp"
rss0_idle=$(settled_rss "$rp")
run_wrk "http://127.0.0.1:$REDIR_PORT" "$rp" >/dev/null
rss0_load=$(rss_kib "$rp")
stop "$rp"

log "redirector with $N links"
rp=$(start_redirector "$N")
pids+=("$rp")
wait_http "http://127.0.0.1:$PROBE_PORT/readyz" "$rp"
got=$(curl -s "http://127.0.0.1:$PROBE_PORT/metrics" | awk '/^linkforge_redirector_index_links / { print $2 }')
[ "$got" = "$N" ] || { log "index holds $got links, want $N"; exit 1; }
first=$(head -1 "$work/paths.txt")
curl -s -o /dev/null -w 'bench: redirector sample: %{http_code} -> %{redirect_url}\n' "http://127.0.0.1:$REDIR_PORT$first" >&2
rssN_idle=$(settled_rss "$rp")

log "nginx with the same $N links"
taskset -c "$SERVER_CPU" nginx -c "$work/nginx.conf" -p "$work/nginx" &
np=$!
pids+=("$np")
wait_http "http://127.0.0.1:$NGINX_PORT$first" "$np" 302
curl -s -o /dev/null -w 'bench: nginx sample: %{http_code} -> %{redirect_url}\n' "http://127.0.0.1:$NGINX_PORT$first" >&2

log "redirector with $N links, counting uses off (the baseline of counting's cost)"
op=$(start_redirector "$N" "$NOCOUNT_PORT" "$NOCOUNT_PROBE_PORT" --count-uses=false)
pids+=("$op")
wait_http "http://127.0.0.1:$NOCOUNT_PROBE_PORT/readyz" "$op"

if [ "$EVENTS" = on ]; then
	log "click events' receiver (nginx answering 204) and the redirector with click events on"
	mkdir -p "$work/sink"
	cat >"$work/sink.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $work/sink/nginx.pid;
error_log $work/sink/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_max_body_size 64m;
    keepalive_requests 100000000;
    client_body_temp_path $work/sink;
    proxy_temp_path $work/sink;
    fastcgi_temp_path $work/sink;
    uwsgi_temp_path $work/sink;
    scgi_temp_path $work/sink;
    server {
        listen 127.0.0.1:$SINK_PORT;
        location / { return 204; }
    }
}
EOF
	taskset -c "$LOAD_CPU" nginx -c "$work/sink.conf" -p "$work/sink" &
	sp=$!
	pids+=("$sp")
	ep=$(start_redirector "$N" "$EVENTS_PORT" "$EVENTS_PROBE_PORT" --events-cloudevents-url="http://127.0.0.1:$SINK_PORT/events")
	pids+=("$ep")
	wait_http "http://127.0.0.1:$EVENTS_PROBE_PORT/readyz" "$ep"
fi

if [ "$RULES" = on ]; then
	log "redirector with $N links of 8 rules and 3 variants each"
	up=$(start_redirector "$N" "$RULES_PORT" "$RULES_PROBE_PORT" --link-kind=rules)
	pids+=("$up")
	wait_http "http://127.0.0.1:$RULES_PROBE_PORT/readyz" "$up"
	got=$(curl -s "http://127.0.0.1:$RULES_PROBE_PORT/metrics" | awk '/^linkforge_redirector_index_links / { print $2 }')
	[ "$got" = "$N" ] || { log "the rules' index holds $got links, want $N"; exit 1; }
fi

log "fasthttp floor"
taskset -c "$SERVER_CPU" "$work/fasthttp-floor" --bind-address=127.0.0.1:$FLOOR_PORT --table="$work/links.txt" &
fp=$!
pids+=("$fp")
wait_http "http://127.0.0.1:$FLOOR_PORT$first" "$fp" 302

# The events' redirector's garbage: heap bytes allocated and collections
# over its rounds (warm-ups included), per event offered. The redirector
# allocates nothing per request; what events allocate is collected by
# cycles that mark the whole index, CPU that instruction counts miss.
gc_counters() { # probe port: "alloc-bytes gc-cycles offered"
	curl -s "http://127.0.0.1:$1/metrics" | awk '
		/^go_memstats_alloc_bytes_total / { a = $2 } /^go_gc_duration_seconds_count / { g = $2 }
		/^linkforge_events_offered_total / { o = $2 } END { printf "%.0f %d %.0f\n", a, g, o }'
}
[ "$EVENTS" = on ] && events_gc0=$(gc_counters "$EVENTS_PROBE_PORT")

# Alternate the servers, ROUNDS times each, so that noise from other work
# on the machine hits both alike; report each server's median round.
: >"$work/rounds.txt"
for round in $(seq 1 "$ROUNDS"); do
	log "round $round/$ROUNDS: redirector"
	echo "redirector $(run_wrk "http://127.0.0.1:$REDIR_PORT" "$rp")" >>"$work/rounds.txt"
	log "round $round/$ROUNDS: redirector, counting off"
	echo "nocount $(run_wrk "http://127.0.0.1:$NOCOUNT_PORT" "$op")" >>"$work/rounds.txt"
	if [ "$EVENTS" = on ]; then
		log "round $round/$ROUNDS: redirector, click events on"
		echo "events $(run_wrk "http://127.0.0.1:$EVENTS_PORT" "$ep")" >>"$work/rounds.txt"
	fi
	if [ "$RULES" = on ]; then
		log "round $round/$ROUNDS: links with rules, browser requests"
		echo "rules $(run_wrk "http://127.0.0.1:$RULES_PORT" "$up" "$work/browser.lua")" >>"$work/rounds.txt"
		log "round $round/$ROUNDS: plain links, browser requests"
		echo "plain $(run_wrk "http://127.0.0.1:$REDIR_PORT" "$rp" "$work/browser.lua")" >>"$work/rounds.txt"
	fi
	log "round $round/$ROUNDS: nginx"
	echo "nginx $(run_wrk "http://127.0.0.1:$NGINX_PORT" "$np")" >>"$work/rounds.txt"
	log "round $round/$ROUNDS: fasthttp floor"
	echo "floor $(run_wrk "http://127.0.0.1:$FLOOR_PORT" "$fp")" >>"$work/rounds.txt"
done
rssN_load=$(rss_kib "$rp")
stop "$rp"
stop "$op"
stop "$np"
stop "$fp"
if [ "$EVENTS" = on ]; then
	events_gc=$(awk -v a="$events_gc0" -v b="$(gc_counters "$EVENTS_PROBE_PORT")" 'BEGIN {
		split(a, x, " "); split(b, y, " "); n = y[3] - x[3]
		if (n > 0) printf "%.1f heap bytes allocated per event, %d collections (%.1f per million events)", (y[1] - x[1]) / n, y[2] - x[2], (y[2] - x[2]) * 1e6 / n }')
	events_metrics=$(curl -s "http://127.0.0.1:$EVENTS_PROBE_PORT/metrics" | awk '/^linkforge_events_(offered|sent|dropped)_total/ { split($1, n, "{"); s[n[1]] += $2 }
		END { printf "offered %d, sent %d, dropped %d", s["linkforge_events_offered_total"], s["linkforge_events_sent_total"], s["linkforge_events_dropped_total"] }')
	stop "$ep"
	stop "$sp"
fi
if [ "$RULES" = on ]; then
	split_metrics=$(curl -s "http://127.0.0.1:$RULES_PROBE_PORT/metrics" | awk '/^linkforge_redirector_split_clicks_total/ { s += $2 } END { printf "%d", s }')
	stop "$up"
fi

# median SERVER FIELD: the RESULT line of the server's median round by FIELD.
median() {
	grep "^$1 " "$work/rounds.txt" | sed "s/.* $2=\([0-9]*\).*/\1 &/" | sort -n | awk '{ a[NR] = $0 } END { print a[int((NR + 1) / 2)] }'
}
redir=$(median redirector rps)
ngx=$(median nginx rps)
flr=$(median floor rps)
noc=$(median nocount rps)
oc=$(field "$(median nocount cpu_ns)" cpu_ns)
rc=$(field "$(median redirector cpu_ns)" cpu_ns)
nc=$(field "$(median nginx cpu_ns)" cpu_ns)
fc=$(field "$(median floor cpu_ns)" cpu_ns)

rr=$(field "$redir" rps) rp50=$(field "$redir" p50_us) rp99=$(field "$redir" p99_us) rbad=$(field "$redir" bad_status)
nr=$(field "$ngx" rps) np50=$(field "$ngx" p50_us) np99=$(field "$ngx" p99_us) nbad=$(field "$ngx" bad_status)
or=$(field "$noc" rps) op50=$(field "$noc" p50_us) op99=$(field "$noc" p99_us) obad=$(field "$noc" bad_status)
fr=$(field "$flr" rps) fp50=$(field "$flr" p50_us) fp99=$(field "$flr" p99_us) fbad=$(field "$flr" bad_status)

echo
echo "rounds:"
awk '{ split($3, r, "="); split($NF, c, "="); printf "  %-10s %8s requests/s %8s CPU ns/request\n", $1, r[2], c[2] }' "$work/rounds.txt"
if [ "$EVENTS" = on ]; then
	ev=$(median events rps)
	echo "click events on: $(field "$ev" rps) requests/s (median round), p99 $(field "$ev" p99_us) us, $(field "$(median events cpu_ns)" cpu_ns) CPU ns/request; events $events_metrics; $events_gc"
fi
if [ "$RULES" = on ]; then
	ru=$(median rules rps) pl=$(median plain rps)
	echo "8 rules, 3 variants: $(field "$ru" rps) requests/s (median round), p99 $(field "$ru" p99_us) us, $(field "$(median rules cpu_ns)" cpu_ns) CPU ns/request, non-3xx $(field "$ru" bad_status); split clicks $split_metrics"
	echo "plain, the same browser requests: $(field "$pl" rps) requests/s (median round), p99 $(field "$pl" p99_us) us, $(field "$(median plain cpu_ns)" cpu_ns) CPU ns/request, non-3xx $(field "$pl" bad_status)"
fi
echo
echo "read yield: ${YIELD:-on}"
echo "links: $N over $NSS namespaces; wrk -t1 -c$CONNS -d$DURATION (after a $WARMUP warm-up), $ROUNDS alternating rounds, median shown;"
echo "servers on CPU $SERVER_CPU, wrk on CPU $LOAD_CPU; $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-17s %12s %10s %10s %9s %14s\n' server "requests/s" "p50 (us)" "p99 (us)" "non-3xx" "CPU ns/request"
printf '%-17s %12s %10s %10s %9s %14s\n' redirector "$rr" "$rp50" "$rp99" "$rbad" "$rc"
printf '%-17s %12s %10s %10s %9s %14s\n' "  counting off" "$or" "$op50" "$op99" "$obad" "$oc"
printf '%-17s %12s %10s %10s %9s %14s\n' nginx "$nr" "$np50" "$np99" "$nbad" "$nc"
printf '%-17s %12s %10s %10s %9s %14s\n' "fasthttp floor" "$fr" "$fp50" "$fp99" "$fbad" "$fc"
awk -v r="$rr" -v n="$nr" -v f="$fr" -v rc="$rc" -v nc="$nc" -v fc="$fc" -v o="$or" -v oc="$oc" 'BEGIN {
	printf "ratio counting on/off:       %.2fx by requests/s; by CPU per request: %.2fx (goal >= 0.95x)\n", r / o, oc / rc
	printf "ratio redirector/nginx:      %.2fx by requests/s; by CPU per request: %.2fx (goal >= 0.90x)\n", r / n, nc / rc
	printf "ratio redirector/floor:      %.2fx by requests/s; by CPU per request: %.2fx\n", r / f, fc / rc
	printf "ratio fasthttp floor/nginx:  %.2fx by requests/s; by CPU per request: %.2fx\n", f / n, nc / fc }'
echo
# Per-round ratios: each round measures the servers back to back, so a
# round's ratio is what noise disturbs least. Their median and spread, and
# a verdict only where every round agrees.
awk '
	function cpu(line,   i, f, n) { n = split(line, f, " "); for (i = 1; i <= n; i++) if (f[i] ~ /^cpu_ns=/) return substr(f[i], 8) + 0 }
	{ k = ++seen[$1]; c[$1, k] = cpu($0); if (k > rounds) rounds = k }
	function sort(a, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t } }
	function report(name, num, den, goal,   k, v, n, med, lo, hi, verdict) {
		n = 0
		for (k = 1; k <= rounds; k++) if (c[den, k] > 0) v[++n] = c[num, k] / c[den, k]
		if (n == 0) return
		sort(v, n)
		med = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
		lo = v[1]; hi = v[n]
		verdict = ""
		if (goal > 0) {
			if (lo >= goal) verdict = sprintf("meets %.2fx in every round", goal)
			else if (hi < goal) verdict = sprintf("misses %.2fx in every round", goal)
			else verdict = sprintf("too noisy to judge against %.2fx: the rounds straddle it", goal)
		}
		printf "  %-24s median %.2fx, rounds %.2fx-%.2fx (spread %.2f)  %s\n", name, med, lo, hi, hi - lo, verdict
	}
	END {
		print "per-round ratios by CPU per request (" rounds " rounds):"
		report("counting on/off", "nocount", "redirector", 0.95)
		report("click events on/off", "redirector", "events", 0.90)
		report("8 rules, 3 variants/plain", "plain", "rules", 0.90)
		report("redirector/nginx", "nginx", "redirector", 0.90)
		report("redirector/floor", "floor", "redirector", 0)
		report("fasthttp floor/nginx", "nginx", "floor", 0)
	}' "$work/rounds.txt"
echo
printf '%-28s %12s %12s\n' "redirector VmRSS (KiB)" "idle" "after load"
printf '%-28s %12s %12s\n' "0 links" "$rss0_idle" "$rss0_load"
printf '%-28s %12s %12s\n' "$N links" "$rssN_idle" "$rssN_load"
awk -v a="$rssN_idle" -v b="$rss0_idle" -v c="$rssN_load" -v d="$rss0_load" -v n="$N" 'BEGIN {
	printf "RSS per link: %.0f bytes idle, %.0f bytes after load (goal < 1024)\n", (a - b) * 1024 / n, (c - d) * 1024 / n }'
