#!/usr/bin/env bash
# make e2e-cluster: the cluster end-to-end suite on a real node.
#
# Builds the node's binaries where they are missing (hack/node/binaries.sh),
# brings up a single node on this machine (bin/node up: installs the Debian
# packages it needs, as root), imports the images `make images` built
# (dist/images), installs the release as the README's Install section
# tells a user (kubectl apply --server-side -f dist/install.yaml), runs
# internal/clustere2e against it, and takes the node down: also when a test
# fails or the run is interrupted. Needs `make release` and `make
# gateway-binaries` first (the Makefile's target depends on both): the
# exposure test runs Traefik and cert-manager's controller as pods.
#
# The node's settings are bin/node's flags' environment variables
# (LINKFORGE_NODE_BRIDGE, LINKFORGE_NODE_POD_SUBNET,
# LINKFORGE_NODE_SERVICE_SUBNET, LINKFORGE_NODE_PORT_BASE, ...: bin/node up -h).
# CLUSTER_E2E_RUN is a go test -run pattern; CLUSTER_E2E_KEEP=1 leaves the
# node up afterwards (take it down with bin/node down).
#
# The suite starts from the previous release, as a user upgrading would:
# UPGRADE_FROM (a commit; default the one tagged v0.3.0, the last release)
# is built with its own Makefile (hack/node/previous-release.sh), its images
# imported beside this tree's, its dist/install.yaml applied; the suite's
# first test upgrades to this tree's release, its last one does the same
# with the Helm charts.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

log() { echo "e2e-cluster: $*" >&2; }
started=$(date +%s)

[ "$(id -u)" = 0 ] || { log "needs root (it starts containerd and a kubelet, makes a bridge; CI runs as root)"; exit 1; }
[ -f dist/install.yaml ] || { log "no dist/install.yaml: run make release first"; exit 1; }
LINKFORGE_NODE_BIN=$(hack/node/binaries.sh)
export LINKFORGE_NODE_BIN
go build -o bin/node ./hack/node
# UPGRADE_FROM and UPGRADE_FROM_VERSION: their defaults are hack/node/previous-release.env's.
# shellcheck source=hack/node/previous-release.env
. hack/node/previous-release.env
prev_started=$(date +%s)
# Built already when make test's lint lane built it (make previous-release).
LINKFORGE_PREVIOUS_RELEASE=$(hack/node/previous-release.sh "$UPGRADE_FROM" "$UPGRADE_FROM_VERSION")
export LINKFORGE_PREVIOUS_RELEASE UPGRADE_FROM_VERSION
log "previous release $UPGRADE_FROM_VERSION ($UPGRADE_FROM) in $(($(date +%s) - prev_started))s: $LINKFORGE_PREVIOUS_RELEASE/dist"

# bin/node up takes down what it started when it fails or is interrupted,
# and touches nothing when it refuses (a node already up, the bridge or a
# subnet in use): so the trap that takes the node down comes after it.
up_started=$(date +%s)
bin/node up
log "node up in $(($(date +%s) - up_started))s"

status=0
down() {
	status=${status:-$?}
	trap - EXIT INT TERM
	if [ "${CLUSTER_E2E_KEEP:-}" = 1 ]; then
		log "the node is still up (CLUSTER_E2E_KEEP=1): bin/node down takes it down"
	else
		bin/node down || status=1
	fi
	log "$([ "$status" = 0 ] && echo ok || echo FAIL) in $(($(date +%s) - started))s"
	exit "$status"
}
trap 'status=$?; down' EXIT
trap 'status=130; down' INT
trap 'status=143; down' TERM

eval "$(bin/node env)"

# Traefik and cert-manager's controller, which the exposure test runs as
# pods (make gateway-binaries built them).
bin/node import-gateway

# The previous release, as the README's Install section told its users; the
# suite's first test upgrades it to this one the same way.
bin/node import -images "$LINKFORGE_PREVIOUS_RELEASE/dist/images"
install_started=$(date +%s)
KUBECONFIG=$LINKFORGE_CLUSTER_KUBECONFIG "$LINKFORGE_CLUSTER_KUBECTL" apply --server-side -f "$LINKFORGE_PREVIOUS_RELEASE/dist/install.yaml"
log "previous release applied in $(($(date +%s) - install_started))s"

go test -tags "${BUILD_TAGS:+$BUILD_TAGS,}clustere2e" ./internal/clustere2e -count=1 -v -timeout 30m ${CLUSTER_E2E_RUN:+-run "$CLUSTER_E2E_RUN"}
