#!/usr/bin/env bash
# Builds the test collector (this module) and runs internal/events' tests
# against it: go test -tags otelcol. Prints the build's time. More packages
# may follow (make test-otelcol adds ./internal/e2e, whose Collector test
# needs KUBEBUILDER_ASSETS).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mkdir -p "$root/bin"
start=$(date +%s)
(cd "$here" && go build -o "$root/bin/otelcol" .)
echo "built bin/otelcol in $(( $(date +%s) - start ))s"
cd "$root"
OTELCOL="$root/bin/otelcol" go test -tags otelcol -count=1 -run Collector ./internal/events "$@"
