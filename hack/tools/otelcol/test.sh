#!/usr/bin/env bash
# Builds the test collector (this module) into bin/otelcol when it changed
# (make otelcol) and runs the tests against it: internal/events' Collector
# tests, and those of the packages given (make test-otelcol adds
# ./internal/e2e, whose Collector test needs KUBEBUILDER_ASSETS). They run
# in every go test as well, building the collector themselves unless
# LINKFORGE_OTELCOL names one.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
cd "$root"
start=$(date +%s)
make --no-print-directory otelcol
echo "bin/otelcol up to date in $(( $(date +%s) - start ))s"
LINKFORGE_OTELCOL="$root/bin/otelcol" go test -count=1 -run Collector ./internal/events "$@"
