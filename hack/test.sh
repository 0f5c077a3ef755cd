#!/usr/bin/env bash
# make test: the stages below, each a make target, timed and logged to
# $TEST_LOGS/make/<stage>.log, then a summary, also when a stage fails.
# Exits non-zero if any stage failed.
#
# First the standard library, compiled once for everything below (each
# lane would compile it at once from a cold cache). Then three lanes, so
# that the two cores stay busy while one lane links, downloads or waits
# for a pod:
#   lint:    valgrind for the Go tests (Debian), golangci-lint, built;
#            then, once the main lane's vet has compiled the packages, the
#            previous release for e2e-cluster's upgrade test (built with
#            this tree's versions: hack/node/previous-release.sh) and lint
#            (lint reuses them);
#   envtest: once vet is done too (Kubernetes builds with linkforge's
#            versions: hack/kube-build.sh), kube-apiserver and etcd for
#            envtest, then the real node's binaries, then Traefik and
#            cert-manager's controller (hack/gateway: their own module);
#   main:    the tools and the test Collector (hack/tools, one go build;
#            they share linkforge's versions, so vet then finds most of
#            its packages compiled), generate, vet, build, the images and
#            the release, then the Go tests (make go-test: a log per
#            package) beside the release on a real node (make e2e-cluster).
# The node's suite runs beside the Go tests since the stopping redirectors
# retry a write that lost its races until their shutdown timeout (issue
# 41, run 10: they gave up after four, and a busy machine made four likely).
# Each stage runs with `make -o` for the stages done before it, so a
# prerequisite (build's vet, say) is not run twice.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit

MAKE=${MAKE:-make}
# The images for linux/amd64 alone, the platform the node and the end-to-end
# tests run; `make release` builds every platform (IMAGE_PLATFORMS= make
# test checks them all here).
export IMAGE_PLATFORMS=${IMAGE_PLATFORMS-linux/amd64}
LOGS=${TEST_LOGS:-bin/test-logs}
rm -rf "$LOGS"
mkdir -p "$LOGS/make"

# loadavg: the machine's load average over 1, 5 and 15 minutes. cpus: the
# CPUs this run may use, and the machine's when fewer (taskset). With each
# stage's CPU they say why a run was slow: a machine busy with other work,
# or one with fewer cores than its load.
loadavg() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown; }
cpus() {
	local usable all
	usable=$(nproc 2>/dev/null || echo '?')
	all=$(nproc --all 2>/dev/null || echo '?')
	if [ "$usable" = "$all" ]; then echo "$usable CPUs"; else echo "$usable of $all CPUs"; fi
}
started=$(date +%s)
load_at_start=$(loadavg)
# Background jobs in their own process groups, so a failure can stop a whole lane.
set -m

# The summary lists stages in this order: the lanes beside the main one,
# then the main lane's.
FIRST=(std)
BESIDE=(test-packages golangci-lint previous-release lint envtest-assets node-binaries gateway-binaries)
MAIN=(tools manifests generate fmt vet build api-docs-check images release image-binaries go-test e2e-cluster)

done_flags=() # -o <target> for every stage of the main lane done so far

# stage NAME TARGET...: make TARGET..., its output to the console and the
# stage's log, its result ("ok|FAIL seconds cpu-seconds") to the stage's .result file.
stage() {
	local name=$1 start status
	shift
	start=$(date +%s)
	echo "=== make test: $name"
	# The CPU the stage's processes used (user + system, seconds), for the
	# summary: on two cores, a cold run's CPU is what bounds its time.
	# Timed in a subshell of its own: the shell that runs a lane also reaps
	# the other lanes, whose CPU a `time` there would count too.
	local cpu
	(
		TIMEFORMAT='%U %S'
		time { "$MAKE" --no-print-directory "${done_flags[@]}" "$@" 2>&1 | tee "$LOGS/make/$name.log"; s=${PIPESTATUS[0]}; }
		exit "$s"
	) 2>"$LOGS/make/$name.cpu"
	status=$?
	cpu=$(awk 'END { printf "%.0f", $1 + $2 }' "$LOGS/make/$name.cpu")
	echo "$([ "$status" = 0 ] && echo ok || echo FAIL) $(($(date +%s) - start)) $cpu" >"$LOGS/make/$name.result"
	return "$status"
}

summary() {
	local status=$? name result secs cpu log total_cpu
	trap - EXIT INT TERM
	# A stopped run leaves no lane behind (and no job notice on the console).
	for pid in $(jobs -p); do
		kill -- -"$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	{
		echo
		total_cpu=$(cat "$LOGS"/make/*.result 2>/dev/null | awk '{ s += $3 } END { printf "%d", s }')
		echo "=== make test: $([ "$status" = 0 ] && echo ok || echo FAIL) in $(($(date +%s) - started))s, ${total_cpu} CPU-s (logs in $LOGS)"
		echo "$(cpus); load average $load_at_start at the start, $(loadavg) at the end"
		printf '%-16s %-8s %6s %7s  %s\n' stage result time cpu log
		for name in "${FIRST[@]}" "${BESIDE[@]}" "${MAIN[@]}"; do
			log="$LOGS/make/$name.log"
			if [ -f "$LOGS/make/$name.result" ]; then
				read -r result secs cpu <"$LOGS/make/$name.result"
				secs="${secs}s" cpu="${cpu}s"
			elif [ -f "$log" ]; then
				result=stopped secs=- cpu=- # still running when another stage failed
			else
				result="not run" secs=- cpu=- log=
			fi
			printf '%-16s %-8s %6s %7s  %s\n' "$name" "$result" "$secs" "$cpu" "$log"
		done
		echo "(after std: test-packages, golangci-lint, previous-release and lint, envtest-assets, node-binaries and gateway-binaries ran beside the main lane, e2e-cluster beside go-test)"
		for name in "${FIRST[@]}" "${BESIDE[@]}" "${MAIN[@]}"; do
			if [ "$name" != go-test ] && grep -qs '^FAIL' "$LOGS/make/$name.result"; then
				echo
				echo "--- $name failed; the end of $LOGS/make/$name.log:"
				tail -n 15 "$LOGS/make/$name.log"
			fi
		done
		if [ -f "$LOGS/go/packages.txt" ]; then
			echo
			echo "go test, by package (failures first, then slowest first):"
			cat "$LOGS/go/packages.txt"
		fi
	} | tee "$LOGS/summary.txt"
	exit "$status"
}
trap summary EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# result NAME: the stage's result ("ok" or "FAIL") once it has one, waiting
# for it while the lane that runs it (pid LANE) is alive; "" if the lane
# ended without running it.
result() {
	local name=$1 lane=$2
	while [ ! -f "$LOGS/make/$name.result" ]; do
		kill -0 "$lane" 2>/dev/null || break
		sleep 1
	done
	cut -d' ' -f1 "$LOGS/make/$name.result" 2>/dev/null
}

stage std std || exit 1
# Lint once vet has compiled every package: lint's `go list -export` then
# finds them compiled (the same flags), where beside vet both would compile
# them at once.
main=$$
{ stage test-packages test-packages && stage golangci-lint golangci-lint &&
	[ "$(result vet "$main")" = ok ] && stage previous-release -o tools previous-release &&
	stage lint -o golangci-lint lint; } </dev/null &
lint=$!
# The control plane for envtest, then the real node's binaries (for
# e2e-cluster), which go-test does not wait for. Both once vet has
# compiled linkforge's packages: Kubernetes builds with go.mod's versions
# (hack/kube-build.sh), so half of what it compiles is then in the cache.
# Then Traefik and cert-manager's controller (hack/gateway), which the
# node suite runs as pods.
{ [ "$(result vet "$main")" = ok ] && stage envtest-assets envtest-assets && stage node-binaries node-binaries &&
	stage gateway-binaries gateway-binaries; } </dev/null &
envtest=$!

# failed: whether a stage of a lane beside the main one failed: the run
# stops at the main lane's next stage, as make would.
failed() { grep -qs '^FAIL' "$LOGS"/make/{test-packages,golangci-lint,previous-release,lint,envtest-assets,node-binaries,gateway-binaries}.result; }

for target in "${MAIN[@]}"; do
	if [ "$target" = e2e-cluster ]; then
		wait "$cluster" || exit 1
		continue
	fi
	failed && exit 1
	case $target in
	go-test)
		[ "$(result test-packages "$lint")" = ok ] || exit 1
		[ "$(result envtest-assets "$envtest")" = ok ] || exit 1
		# The release on a real node, beside the Go tests: it needs the
		# node's and the Gateway's binaries, which the envtest lane builds
		# last, and the previous release, which the lint lane builds.
		{ [ "$(result gateway-binaries "$envtest")" = ok ] && [ "$(result previous-release "$lint")" = ok ] &&
			stage e2e-cluster -o node-binaries -o gateway-binaries -o previous-release e2e-cluster; } </dev/null &
		cluster=$!
		;;
	esac
	stage "$target" "$target" || { [ "$target" = go-test ] && wait "$cluster"; exit 1; }
	done_flags+=(-o "$target")
done
wait "$lint" || exit 1
failed && exit 1
exit 0
