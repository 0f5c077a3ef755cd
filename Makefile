# Where the images are pushed and pulled from: <KO_DOCKER_REPO>/manager and
# <KO_DOCKER_REPO>/redirector (make images-push, make release).
KO_DOCKER_REPO ?= ghcr.io/linkforge/linkforge
# Kubernetes version of the envtest control plane (kube-apiserver) and its etcd,
# pinned in hack/envtest-versions.env, which the Go tests read too.
include hack/envtest-versions.env
ENVTEST_K8S_VERSION ?= $(K8S_VERSION)
ENVTEST_ETCD_VERSION ?= $(ETCD_VERSION)

# Go binaries land in GOBIN.
ifeq (,$(shell go env GOBIN))
GOBIN=$(shell go env GOPATH)/bin
else
GOBIN=$(shell go env GOBIN)
endif

# One Go build configuration for everything make builds: vet, build, the
# tests, the tools and ko's linux/amd64 images. ko builds with cgo off,
# -trimpath and the images' build tags (internal/images.BuildTags; a test
# keeps the two equal); the build cache is keyed by all three, so any other
# configuration compiles every package a second time (about 250 CPU-seconds
# from a cold cache). Set CGO_ENABLED or GOFLAGS to build otherwise; a
# command that needs a tag of its own adds it to BUILD_TAGS (a -tags flag
# replaces GOFLAGS' tags).
export BUILD_TAGS = timetzdata
export CGO_ENABLED ?= 0
export GOFLAGS ?= -trimpath -tags=$(BUILD_TAGS)

# Recipes use bash with errexit and pipefail, so a failing step fails the target.
SHELL = /usr/bin/env bash -o pipefail
.SHELLFLAGS = -ec

# The Helm chart.
CHART = config/helm/linkforge

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The images' org.opencontainers.image.revision label, and their creation time
# (the commit's), so the same tree gives the same image digests.
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
# The images' OCI layouts and SBOMs (make images) and the release (make release).
DIST ?= dist
IMAGES_DIR = $(DIST)/images
# The platforms make images builds, comma-separated (empty: every one of
# internal/images.Platforms, linux/amd64 and linux/arm64, as a release
# needs). make test builds linux/amd64 alone: the node and the end-to-end
# tests run it, and the arm64 compile is about 260 CPU-seconds from a cold
# cache. The image tests check the platforms built (recorded in
# dist/images/platforms).
IMAGE_PLATFORMS ?=
# The manager and redirector taken out of the linux/amd64 images, which the
# end-to-end test runs (make test).
IMAGE_BINARIES = bin/image-linux-amd64
LDFLAGS ?= -s -w -X main.version=$(VERSION)

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Display this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate the CRD and RBAC manifests.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="./api/..." paths="./controllers/..." output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) rbac:roleName=redirector-role paths="./internal/redirect/..." output:rbac:artifacts:config=config/rbac/redirector
	@# The Helm chart renders the CRDs, the generated roles and the destination policy from copies (config/helm/chart_test.go checks them).
	rm -f $(CHART)/files/crds/*.yaml
	cp config/crd/bases/*.yaml $(CHART)/files/crds/
	cp config/rbac/role.yaml $(CHART)/files/rbac/manager-role.yaml
	cp config/rbac/redirector/role.yaml $(CHART)/files/rbac/redirector-role.yaml
	rm -f $(CHART)/files/destination-policy/*.yaml
	cp config/destination-policy/*_policy.yaml config/destination-policy/*_binding.yaml $(CHART)/files/destination-policy/
	cp config/monitoring/rules.yaml config/monitoring/linkforge-dashboard.json $(CHART)/files/monitoring/

.PHONY: generate
generate: controller-gen ## Generate DeepCopy methods, and the Dockerfile and .ko.yaml from internal/images.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."
	go run ./hack/images dockerfile > Dockerfile.tmp && mv Dockerfile.tmp Dockerfile
	go run ./hack/images koconfig > .ko.yaml.tmp && mv .ko.yaml.tmp .ko.yaml

.PHONY: fmt
fmt: ## Run gofmt on every package's directory (go fmt ./... skips files behind build tags, such as the clustere2e suite).
	gofmt -l -w $$(go list -f '{{.Dir}}' ./...)

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: golangci-lint ## Run golangci-lint (.golangci.yml).
	$(GOLANGCI_LINT) run

.PHONY: lint-fix
lint-fix: golangci-lint ## Run golangci-lint and apply its fixes.
	$(GOLANGCI_LINT) run --fix

.PHONY: envtest-assets
envtest-assets: ## Find, download or build kube-apiserver and etcd for envtest (minutes, first run only).
	@SETUP_ENVTEST=$(SETUP_ENVTEST) ENVTEST_K8S_VERSION=$(ENVTEST_K8S_VERSION) ENVTEST_ETCD_VERSION=$(ENVTEST_ETCD_VERSION) hack/envtest-assets.sh >/dev/null

# The assets directory, computed only by the recipes that need it.
ASSETS = $$(SETUP_ENVTEST=$(SETUP_ENVTEST) ENVTEST_K8S_VERSION=$(ENVTEST_K8S_VERSION) ENVTEST_ETCD_VERSION=$(ENVTEST_ETCD_VERSION) hack/envtest-assets.sh)

.PHONY: api-docs
api-docs: crd-ref-docs ## Generate the API reference (docs/reference/api.md) from the Go types.
	$(CRD_REF_DOCS) --source-path=./api --config=hack/crd-ref-docs.yaml --renderer=markdown --output-path=docs/reference/api.md --log-level=ERROR

.PHONY: api-docs-check
api-docs-check: crd-ref-docs ## Fail if docs/reference/api.md is not what the Go types generate.
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(CRD_REF_DOCS) --source-path=./api --config=hack/crd-ref-docs.yaml --renderer=markdown --output-path="$$tmp/api.md" --log-level=ERROR; \
	if ! diff -u docs/reference/api.md "$$tmp/api.md"; then \
		echo "docs/reference/api.md is stale: the API types changed. Run 'make api-docs' and commit it." >&2; exit 1; \
	fi

# make test's stages, in hack/test.sh: each a target below, timed, in four
# lanes (the tools, lint, the envtest and node binaries beside the main
# lane; go-test and e2e-cluster side by side at its end), then a summary.
.PHONY: test
test: ## Run lint, unit, envtest, image, release and end-to-end tests (the e2e runs the amd64 images' binaries); summary and logs in bin/test-logs.
	@MAKE="$(MAKE)" TEST_LOGS="$(TEST_LOGS)" hack/test.sh

# Where make test and go-test write their logs: stages in make/, a log per
# package in go/, the summary in summary.txt.
TEST_LOGS ?= bin/test-logs
# The slowest packages start first, so neither is left running alone at the
# end (go test runs as many packages at once as there are cores).
TEST_FIRST = ./internal/e2e ./controllers
# A package's test binary is killed after this long (go test's default is
# 10m). Every wait inside a test is bounded by what the code promises; this
# is the backstop for a machine so busy that a package's whole run is slow
# (internal/e2e takes 2-5 minutes, internal/hitpath 1-10 under load).
GO_TEST_TIMEOUT ?= 30m

# The Debian packages the Go tests run: valgrind for the hit path's
# instruction budget (internal/hitpath). Installed only when missing (as root).
.PHONY: test-packages
test-packages: ## Install what the Go tests need from Debian when it is missing (valgrind).
	@command -v valgrind >/dev/null && command -v vgdb >/dev/null || { \
		echo "installing valgrind (apt-get)"; \
		apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null; }

# The standard library as everything here builds it (GOFLAGS, CGO_ENABLED
# above; hack/kube-build.sh for Kubernetes' binaries): make test compiles it
# first, once, rather than in each of its lanes at the same time.
.PHONY: std
std: ## Compile the standard library into the build cache (make test's first stage; seconds when cached).
	go build std

.PHONY: go-test
go-test: otelcol ## Run the Go tests only, as make test does last (after its other stages, once), with a log per package.
	go build -o bin/testsummary ./hack/testsummary
	LINKFORGE_E2E_BINARIES="$(CURDIR)/$(IMAGE_BINARIES)" LINKFORGE_OTELCOL="$(OTELCOL)" KUBEBUILDER_ASSETS="$(ASSETS)" \
		go test -json -timeout $(GO_TEST_TIMEOUT) $(TEST_FIRST) ./... -coverprofile cover.out | bin/testsummary -dir $(TEST_LOGS)/go

.PHONY: test-otelcol
test-otelcol: envtest-assets otelcol ## Run only the tests against the test OpenTelemetry Collector (bin/otelcol): the OTLP sink (internal/events) and the real redirector's click events (internal/e2e). go test runs them too.
	KUBEBUILDER_ASSETS="$(ASSETS)" hack/tools/otelcol/test.sh ./internal/e2e

# Traefik and cert-manager's controller, built from their Go modules in a
# module of their own (hack/gateway/README.md), for the tests through a real
# Gateway: the node suite runs them as pods (make test builds them in its
# envtest lane, after the node's binaries), internal/gatewaytest out of
# cluster.
.PHONY: gateway-binaries
gateway-binaries: ## Build Traefik and cert-manager's controller (hack/gateway) into bin/ where missing, with the Gateway API's and cert-manager's CRDs in bin/gateway-crds (minutes the first time).
	@LOCALBIN="$(LOCALBIN)" hack/gateway/build.sh

.PHONY: gateway-test
gateway-test: envtest-assets gateway-binaries build ## Run internal/gatewaytest: HTTPS through Traefik's Gateway with a certificate cert-manager issued, out of cluster on a local control plane (builds bin/manager and bin/redirector first: the flow test runs them; the node suite of make test runs the same flow in pods).
	KUBEBUILDER_ASSETS="$(ASSETS)" go test -tags $(BUILD_TAGS),gatewaytest -count=1 -v -timeout $(GO_TEST_TIMEOUT) ./internal/gatewaytest

# A backstop per package of benchmarks, against a hang: their waits fail
# on a stall, not on time (docs/development.md, Timing in tests), and a
# busy machine makes the end-to-end ones (about 20 minutes on a quiet one)
# take an hour and more.
BENCH_TIMEOUT ?= 180m

.PHONY: bench
bench: envtest-assets build ## Run the benchmarks: code algorithm, controller and reaper against envtest, counting uses, the hit path in instructions (callgrind), redirector vs nginx.
	go test ./internal/shortcode -run '^$$' -bench . -benchmem
	KUBEBUILDER_ASSETS="$(ASSETS)" go test ./controllers -run '^$$' -bench . -benchtime 1x -timeout $(BENCH_TIMEOUT)
	go test ./internal/redirect -run '^$$' -bench CountingOverhead -benchtime 1x
	KUBEBUILDER_ASSETS="$(ASSETS)" go test ./internal/e2e -run '^$$' -bench 'UsesDrain|FirstClicks|BusyLimitedLinks|UnreachableHolder|StopReturnsEverything|ClickOutage|GateFlood' -benchtime 1x -timeout $(BENCH_TIMEOUT)
	go test ./internal/peer -run '^$$' -bench Forward -count 3
	go run ./hack/callgrind-bench
	hack/bench-redirect.sh

.PHONY: node-binaries
node-binaries: ## Build the real node's kubelet, kube-proxy, kube-controller-manager, kube-scheduler and kubectl into the envtest store (minutes, first run only).
	@ENVTEST_K8S_VERSION=$(ENVTEST_K8S_VERSION) ENVTEST_ETCD_VERSION=$(ENVTEST_ETCD_VERSION) hack/node/binaries.sh >/dev/null

# The release before this one, for e2e-cluster's upgrade test: built once
# per machine into ~/.cache/linkforge (hack/node/previous-release.sh).
# make test builds it in its lint lane once the tools are built, so the
# node's suite does not wait for it (183 s of a cold run otherwise).
.PHONY: previous-release
previous-release: ko kustomize helm ## Build the previous release (hack/node/previous-release.env: v0.3.0, or UPGRADE_FROM and UPGRADE_FROM_VERSION) for e2e-cluster's upgrade test, once a machine.
	@hack/node/previous-release.sh >/dev/null

.PHONY: e2e-cluster
e2e-cluster: release node-binaries gateway-binaries previous-release ## Run the release on a real single-node cluster (as root; installs containerd, runc, CNI plugins from Debian): install the previous release (v0.3.0) and upgrade it to dist/install.yaml, run internal/clustere2e, take the node down. make test runs it beside go-test.
	hack/node/e2e-cluster.sh

.PHONY: bench-scale
bench-scale: envtest-assets build ## Measure linkforge at N links (default 100000; N=10000 make bench-scale; LINKS=limited or routed): local control plane, the real binaries (not part of make test).
	go build -o bin/bench-scale ./hack/bench-scale
	KUBEBUILDER_ASSETS="$(ASSETS)" bin/bench-scale $(if $(N),-n $(N))

##@ Build

# Trimmed, like everything make builds (GOFLAGS above), so the build shares
# the compiled packages of vet, the tests and the images.
.PHONY: build
build: manifests generate fmt vet ## Build bin/manager, bin/redirector and bin/linkforge.
	go build -ldflags "$(LDFLAGS)" -o bin/ ./cmd/manager ./cmd/redirector ./cmd/linkforge

# Where install-plugin puts kubectl-linkforge; a directory on your PATH.
PLUGIN_DIR ?= $(HOME)/bin

.PHONY: install-plugin
install-plugin: ## Build the CLI as the kubectl plugin kubectl-linkforge into PLUGIN_DIR (default ~/bin).
	mkdir -p $(PLUGIN_DIR)
	go build -trimpath -ldflags "$(LDFLAGS)" -o $(PLUGIN_DIR)/kubectl-linkforge ./cmd/linkforge

# make dev's knobs (docs/development.md#make-dev): more flags for each
# binary, and EVENTS=1 to print the click events.
MANAGER_FLAGS ?=
REDIRECTOR_FLAGS ?=
EVENTS ?=
DEV_ADDRESS ?= 127.0.0.1:8080

.PHONY: dev
dev: build envtest-assets ## Run linkforge locally: control plane, manager, redirector on DEV_ADDRESS (127.0.0.1:8080), samples; MANAGER_FLAGS=, REDIRECTOR_FLAGS=, EVENTS=1 print click events. Ctrl-C stops it.
	go build -o bin/dev ./hack/dev
	MANAGER_FLAGS='$(MANAGER_FLAGS)' REDIRECTOR_FLAGS='$(REDIRECTOR_FLAGS)' EVENTS='$(EVENTS)' bin/dev -redirect-address '$(DEV_ADDRESS)'

.PHONY: run
run: manifests generate fmt vet ## Run the manager against the cluster in ~/.kube/config (or KUBECONFIG).
	go run ./cmd/manager

.PHONY: images
images: ko ## Build the manager and redirector images (linux/amd64, linux/arm64; IMAGE_PLATFORMS picks) offline with ko into dist/images: OCI layouts and SBOMs.
	go build -o bin/images ./hack/images
	bin/images build -ko $(KO) -out $(IMAGES_DIR) -kocache bin/kocache -platforms "$(IMAGE_PLATFORMS)" \
		-version $(VERSION) -revision $(REVISION) -source-date-epoch $(SOURCE_DATE_EPOCH)

.PHONY: image-binaries
image-binaries: images ## Take the manager and redirector out of the linux/amd64 images into bin/image-linux-amd64.
	bin/images extract -layouts $(IMAGES_DIR) -platform linux/amd64 -out $(IMAGE_BINARIES)

.PHONY: images-push
images-push: images ## Push the images built to $(KO_DOCKER_REPO)/<name>:$(VERSION) (needs a registry; credentials from `docker login`).
	bin/images push -layouts $(IMAGES_DIR) -repo $(KO_DOCKER_REPO) -tag $(VERSION)

.PHONY: release
release: images kustomize helm ## Write dist/install.yaml and the Helm chart dist/linkforge-*.tgz, both naming the images built by digest.
	bin/images release -layouts $(IMAGES_DIR) -repo $(KO_DOCKER_REPO) -overlay bin/release/overlay -chart bin/release/linkforge
	$(KUSTOMIZE) build bin/release/overlay > $(DIST)/install.yaml
	rm -f $(DIST)/linkforge-*.tgz
	$(HELM) package bin/release/linkforge --app-version $(VERSION) --destination $(DIST)

.PHONY: release-check
release-check: release ## Check the images and the release just built, every platform they were built for (the image and release tests).
	go test -count=1 ./internal/images ./internal/release

.PHONY: docker-build
docker-build: ## Build the images with a Docker engine instead, from the Dockerfile (generated from the same definition).
	docker build --target manager --build-arg VERSION=$(VERSION) -t $(KO_DOCKER_REPO)/manager:$(VERSION) .
	docker build --target redirector --build-arg VERSION=$(VERSION) -t $(KO_DOCKER_REPO)/redirector:$(VERSION) .

##@ Deployment

ifndef ignore-not-found
  ignore-not-found = false
endif

.PHONY: install
install: manifests ## Install the CRD into the cluster in KUBECONFIG.
	kubectl apply --server-side -k config/crd

.PHONY: uninstall
uninstall: manifests ## Uninstall the CRD. Call with ignore-not-found=true to ignore missing resources.
	kubectl delete --ignore-not-found=$(ignore-not-found) -k config/crd

.PHONY: deploy
deploy: release ## Deploy dist/install.yaml (the images must be in KO_DOCKER_REPO: make images-push).
	kubectl apply --server-side -f $(DIST)/install.yaml

.PHONY: undeploy
undeploy: kustomize ## Remove the operator. Call with ignore-not-found=true to ignore missing resources.
	$(KUSTOMIZE) build config/default | kubectl delete --ignore-not-found=$(ignore-not-found) -f -

##@ Dependencies

LOCALBIN ?= $(shell pwd)/bin
$(LOCALBIN):
	mkdir -p $(LOCALBIN)

CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen
SETUP_ENVTEST ?= $(LOCALBIN)/setup-envtest
KUSTOMIZE ?= $(LOCALBIN)/kustomize
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint
HELM ?= $(LOCALBIN)/helm
CRD_REF_DOCS ?= $(LOCALBIN)/crd-ref-docs
KO ?= $(LOCALBIN)/ko
OTELCOL ?= $(LOCALBIN)/otelcol

GOLANGCI_LINT_VERSION ?= v2.15.0

# The other tools come from one module, hack/tools, whose go.mod pins each
# tool's version, and so does the test Collector. Its versions of the
# libraries linkforge also compiles (k8s.io/api, client-go, grpc, the
# OpenTelemetry SDK, go-containerregistry, ...) are linkforge's, so one
# build cache compiles each of them once for the tools, the Collector, vet,
# the tests and the images: from a cold cache, a module per tool compiled
# k8s.io/api four times (issue 41). internal/repocheck's
# TestToolsShareTheProjectsVersions keeps the two in step.
# hack/tools/build.sh builds what is missing, all in one go build;
# golangci-lint keeps its own module, as its authors advise, and so do
# oauth2-proxy and the test OIDC provider (hack/authproxy, for the e2e test
# of gated links behind a real auth proxy): oauth2-proxy needs newer
# versions of a few libraries than linkforge compiles (hack/authproxy/README.md).
TOOLS_BUILD = LOCALBIN="$(LOCALBIN)" hack/tools/build.sh

.PHONY: tools
tools: ## Build controller-gen, kustomize, helm, crd-ref-docs, ko and the test Collector (hack/tools), oauth2-proxy and the test OIDC provider (hack/authproxy) where missing, in one go build a module.
	@$(TOOLS_BUILD) controller-gen kustomize helm crd-ref-docs ko otelcol oauth2-proxy mockoidc

.PHONY: controller-gen setup-envtest kustomize helm crd-ref-docs ko oauth2-proxy mockoidc
controller-gen setup-envtest kustomize helm crd-ref-docs ko oauth2-proxy mockoidc: ## A tool of hack/tools (or hack/authproxy), built where missing as bin/<tool>-<version> (its go.mod's; a local main as bin/<tool>).
	@$(TOOLS_BUILD) $@

.PHONY: tools-align
tools-align: ## Raise the older of each library linkforge and hack/tools compile at two versions (go.mod or hack/tools/go.mod), and hack/gateway's older ones but those held back (hack/gateway/held-back.txt); then run the tests.
	hack/tools/align.sh
	hack/gateway/align.sh

.PHONY: golangci-lint
golangci-lint: $(GOLANGCI_LINT)-$(GOLANGCI_LINT_VERSION) ## golangci-lint, versioned in bin/.
	@ln -sf $(notdir $(GOLANGCI_LINT)-$(GOLANGCI_LINT_VERSION)) $(GOLANGCI_LINT)
$(GOLANGCI_LINT)-$(GOLANGCI_LINT_VERSION): | $(LOCALBIN)
	@set -e; echo "Installing golangci-lint@$(GOLANGCI_LINT_VERSION)"; rm -f "$(GOLANGCI_LINT)"; \
	GOBIN="$(LOCALBIN)" go install -ldflags="-s -w" "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)"; \
	mv "$(GOLANGCI_LINT)" "$@"

# The test OpenTelemetry Collector (hack/tools/otelcol), built again only
# when hack/tools changed. The Collector tests use it by LINKFORGE_OTELCOL;
# without it they build the same bin/otelcol themselves.
.PHONY: otelcol
otelcol: ## The test OpenTelemetry Collector (hack/tools/otelcol) in bin/otelcol: minutes the first time, nothing while hack/tools is unchanged.
	@$(TOOLS_BUILD) otelcol
