#!/usr/bin/env bash
# make test: the stages below, each a make target, timed and logged to
# $TEST_LOGS/make/<stage>.log, then the Go tests (make go-test: a log per
# package), then the release on a real node (make e2e-cluster), then a
# summary, also when a stage fails. Exits non-zero if any stage failed.
#
# The builds of the tools and of the envtest control plane depend on nothing
# else, so they run beside the project's stages: on two cores one lane links
# or downloads while another compiles. The real node's suite runs after the
# Go tests, not beside them: beside them, on a machine already busy, the
# stopping redirectors' last writes lose races to the new ones', and the
# previous release (v0.3.0), whose pods the upgrade test stops, gives up
# after four (fixed since; run 10 of issue 41), so the node gets the cores
# to itself. Each stage runs with
# `make -o` for the stages done before it, so a prerequisite (build's vet,
# say) is not run twice.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit

MAKE=${MAKE:-make}
LOGS=${TEST_LOGS:-bin/test-logs}
rm -rf "$LOGS"
mkdir -p "$LOGS/make"
started=$(date +%s)
# Background jobs in their own process groups, so a failure can stop a whole lane.
set -m

# Background lanes (the tools, envtest's kube-apiserver and etcd), then the
# main lane. The summary lists stages in this order.
TOOLS=(test-packages golangci-lint crd-ref-docs helm ko kustomize otelcol)
MAIN=(controller-gen manifests generate fmt vet lint api-docs-check build images release image-binaries go-test e2e-cluster)

done_flags=() # -o <target> for every stage of the main lane done so far

# stage NAME TARGET...: make TARGET..., its output to the console and the
# stage's log, its result ("ok|FAIL seconds") to the stage's .result file.
stage() {
	local name=$1 start status
	shift
	start=$(date +%s)
	echo "=== make test: $name"
	"$MAKE" --no-print-directory "${done_flags[@]}" "$@" 2>&1 | tee "$LOGS/make/$name.log"
	status=${PIPESTATUS[0]}
	echo "$([ "$status" = 0 ] && echo ok || echo FAIL) $(($(date +%s) - start))" >"$LOGS/make/$name.result"
	return "$status"
}

summary() {
	local status=$? name result secs log
	trap - EXIT INT TERM
	# A stopped run leaves no lane behind (and no job notice on the console).
	for pid in $(jobs -p); do
		kill -- -"$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	{
		echo
		echo "=== make test: $([ "$status" = 0 ] && echo ok || echo FAIL) in $(($(date +%s) - started))s (logs in $LOGS)"
		printf '%-16s %-8s %6s  %s\n' stage result time log
		for name in tools envtest-assets node-binaries "${MAIN[@]}"; do
			log="$LOGS/make/$name.log"
			if [ -f "$LOGS/make/$name.result" ]; then
				read -r result secs <"$LOGS/make/$name.result"
				secs="${secs}s"
			elif [ -f "$log" ]; then
				result=stopped secs=- # still running when another stage failed
			else
				result="not run" secs=- log=
			fi
			printf '%-16s %-8s %6s  %s\n' "$name" "$result" "$secs" "$log"
		done
		echo "(tools: ${TOOLS[*]}; they, envtest-assets and node-binaries ran beside the others)"
		for name in tools envtest-assets node-binaries "${MAIN[@]}"; do
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

stage tools "${TOOLS[@]}" </dev/null &
tools=$!
# The control plane for envtest, then the real node's binaries (for
# e2e-cluster), which go-test does not wait for.
{ stage envtest-assets envtest-assets && stage node-binaries node-binaries; } </dev/null &
envtest=$!

for target in "${MAIN[@]}"; do
	# A lane that failed stops the run at the next stage, as make would.
	grep -qs '^FAIL' "$LOGS/make/tools.result" "$LOGS/make/envtest-assets.result" "$LOGS/make/node-binaries.result" && exit 1
	case $target in
	lint) wait "$tools" || exit 1 ;; # the tools lane has built all the tools by now
	go-test)
		# envtest-assets is done when its result is written (the lane goes on).
		while [ ! -f "$LOGS/make/envtest-assets.result" ]; do
			kill -0 "$envtest" 2>/dev/null || break
			sleep 1
		done
		grep -qs '^ok' "$LOGS/make/envtest-assets.result" || exit 1
		;;
	e2e-cluster)
		wait "$envtest" || exit 1
		done_flags+=(-o node-binaries)
		;;
	esac
	stage "$target" "$target" || exit 1
	done_flags+=(-o "$target")
done
