# Userland Makefile. `make help` lists the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/userland-dev/userland/internal/version.Version=$(VERSION) -X github.com/userland-dev/userland/internal/version.Commit=$(COMMIT)

BIN := $(CURDIR)/bin
CONTROLLER_GEN_VERSION := v0.23.0
GOLANGCI_LINT_VERSION := v2.15.0
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
GOLANGCI_LINT := $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)

# Tests build and start a real control plane; give them room on 2 cores.
TEST_TIMEOUT ?= 60m
TEST_FLAGS ?=

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2} /^##@/ {printf "\n\033[1m%s\033[0m\n", substr($$0, 5)}' $(MAKEFILE_LIST)

##@ Development

.PHONY: build
build: ## Build bin/userland and the kubectl plugin bin/kubectl-userland.
	@hack/quiet.sh "build: bin/userland" $(BIN)/logs/build-userland.log go build -ldflags '$(LDFLAGS)' -o $(BIN)/userland ./cmd/userland
	@hack/quiet.sh "build: bin/kubectl-userland" $(BIN)/logs/build-kubectl-userland.log go build -ldflags '$(LDFLAGS)' -o $(BIN)/kubectl-userland ./cmd/kubectl-userland

.PHONY: dev
dev: build ## Run the whole system locally: simulated cluster, controller, gateway, dashboard (http://127.0.0.1:8000).
	USERLAND_CONTROL_PLANE_DIR=$$(hack/build-control-plane.sh dev) $(BIN)/userland dev $(DEV_FLAGS)

.PHONY: dev-real-node
dev-real-node: build control-plane ## As make dev, but the pods run on one real node (kubelet, containerd, kube-proxy, kube-router's firewall, CoreDNS): Linux and root only. First run builds the node's parts.
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o $(BIN)/nodeimage ./hack/nodeimage && $(BIN)/nodeimage pack $(BIN)/node-images
	USERLAND_CONTROL_PLANE_DIR=$$(hack/build-control-plane.sh) $(BIN)/userland dev --real-node \
		--node-dir $$(hack/build-node.sh | tail -1) --node-images $(BIN)/node-images \
		--app-images $$(hack/build-app-images.sh | tail -1) $(DEV_FLAGS)

IMAGE ?= ghcr.io/userland-dev/userland

.PHONY: image
image: ## Build the container image as an OCI archive, bin/userland-image.tar, without a container engine.
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags '$(LDFLAGS) -s -w' -o $(BIN)/linux-amd64/userland ./cmd/userland
	go run ./hack/image --binary $(BIN)/linux-amd64/userland --ref $(IMAGE):$(VERSION) --version $(VERSION) --revision $(COMMIT) --out $(BIN)/userland-image.tar

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate DeepCopy methods for the API types.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs (config/crd/bases), the controller's ClusterRole (config/rbac) and docs/api.md.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=userland-controller paths="./internal/controller/...;./internal/webhook/..." output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) webhook paths=./internal/webhook/... output:webhook:artifacts:config=config/webhook
	go run ./hack/crdpatch config/crd/bases
	go run ./hack/apidocs config/crd/bases config/samples docs/api.md
	# The chart carries copies of what config/ generates; verify fails on drift.
	rm -rf charts/userland/crds charts/userland/files
	mkdir -p charts/userland/crds charts/userland/files/rbac charts/userland/files/webhook charts/userland/files/samples
	cp config/crd/bases/*.yaml charts/userland/crds/
	cp config/rbac/role.yaml config/rbac/roles.yaml charts/userland/files/rbac/
	cp config/webhook/manifests.yaml charts/userland/files/webhook/
	cp config/samples/template-*.yaml charts/userland/files/samples/
	go run ./hack/kustomize-default charts/userland config/default

.PHONY: clean-cache
clean-cache: ## Remove what the first run built and cached under ~/.cache/userland (control plane, code-server); the next run builds it again.
	rm -rf "$${XDG_CACHE_HOME:-$$HOME/.cache}/userland"

.PHONY: control-plane
control-plane: ## Build (or reuse from cache) kube-apiserver, controller-manager, scheduler, etcd and kwok.
	hack/build-control-plane.sh >/dev/null

.PHONY: test
test: control-plane ## Run all tests against a real control plane, headless Chromium and real apps (first run builds the control plane, ~20 minutes, and code-server, ~3).
	hack/ensure-chromium.sh
	hack/ensure-apps.sh
	hack/ensure-code-server.sh >/dev/null
	USERLAND_CONTROL_PLANE_DIR=$$(hack/build-control-plane.sh) hack/test-summary.sh bin/logs/test.log go test -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) ./...

.PHONY: test-faults
test-faults: control-plane ## Fault tests (controller killed, leader lost, API server down, etcd restarted, webhook down, garbage collector killed, three gateway replicas; about 7 minutes), then test-race, then every fuzz target for FUZZTIME (10s) each. CI runs it after make test.
	USERLAND_CONTROL_PLANE_DIR=$$(hack/build-control-plane.sh) go test -tags faults -count=1 -timeout $(TEST_TIMEOUT) -v ./test/faults/
	$(MAKE) test-race
	FUZZTIME=$(or $(FUZZTIME),10s) hack/fuzz.sh

# The packages whose code runs concurrently in production: the gateway
# (proxy, sessions, activity, informer caches), the reconcilers and
# webhooks, and the small pure packages they call. e2e, the plugin, the
# chart and image tests add minutes under the race detector and little
# concurrency of their own. internal/webhook is left out: its certificate
# test trips a race inside controller-runtime (DefaultServer.WebhookMux()
# reads the mux without the lock its Start takes), which the webhooks
# registered after the certificate is ready cannot avoid without starting
# the server before its certificate exists.
RACE_PACKAGES ?= ./internal/gateway/... ./internal/controller/... ./internal/access/... \
	./internal/actions/ ./internal/apilimits/ ./internal/course/ ./internal/idle/ ./internal/metricsauth/ ./internal/naming/ \
	./internal/roster/ ./internal/simcluster/ ./internal/userlands/ ./internal/wsframe/

.PHONY: test-race
test-race: control-plane ## The gateway, controller and pure packages' tests under the race detector (about 13 minutes on 2 cores). make test-faults runs it.
	USERLAND_CONTROL_PLANE_DIR=$$(hack/build-control-plane.sh) hack/test-summary.sh bin/logs/test-race.log go test -race -count=1 -p 1 -timeout $(TEST_TIMEOUT) $(RACE_PACKAGES)

# The real node's tests (internal/realnode, build tag realnode): Linux and
# root; they say why and skip elsewhere, and fail when a part is missing.
# Not part of make test: they change host-wide sysctls for their run and
# need root. hack/build-node.sh installs Debian's containerd, runc, CNI
# plugins, nftables, iptables, ipset and conntrack when missing.
.PHONY: test-node
test-node: control-plane ## Real-node tests (Linux, root): a real kubelet, containerd, kube-proxy, kube-router and CoreDNS beside the control plane; NetworkPolicy enforced between students' pods; the chart installed with the real helm as the README says; the samples' apps (local builds from Debian's packages) Ready with their claims kept; each real app used in Chromium through the in-cluster gateway, idle-stopped and woken; userland dev --real-node; wake, idle stop and a rollout timed beside kwok; teardown after a kill -9. First run builds the node's parts and the apps' images.
	USERLAND_CONTROL_PLANE_DIR=$$(hack/build-control-plane.sh) USERLAND_NODE_DIR=$$(hack/build-node.sh | tail -1) \
		USERLAND_APP_IMAGES=$$(hack/build-app-images.sh | tail -1) \
		go test -tags realnode -count=1 -p 1 -timeout $(TEST_TIMEOUT) -v $(TEST_FLAGS) ./internal/realnode/

.PHONY: fuzz
fuzz: ## Run every fuzz target (route parsing, naming, header filters, WebSocket frames) for FUZZTIME (default 60s) each; make test replays their committed corpora.
	FUZZTIME=$(or $(FUZZTIME),60s) hack/fuzz.sh

.PHONY: bench
bench: build control-plane ## Run the benchmarks (about 38 minutes on 2 cores: 24 before the class start, which took 14) and write docs/benchmarks.md. On Linux as root it also times each real app's wake on a real node beside kwok (the parts as make test-node builds them); elsewhere those rows say why not. BENCH_FLAGS=-only-real-wake runs just that and prints its rows.
	if [ "$$(uname)" = Linux ] && [ "$$(id -u)" = 0 ]; then \
		CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o $(BIN)/nodeimage ./hack/nodeimage && $(BIN)/nodeimage pack $(BIN)/node-images; \
		node=$$(hack/build-node.sh | tail -1); apps=$$(hack/build-app-images.sh | tail -1); \
		export USERLAND_NODE_DIR=$$node USERLAND_APP_IMAGES=$$apps USERLAND_REALNODE_IMAGES=$(BIN)/node-images; \
	fi; \
	USERLAND_CONTROL_PLANE_DIR=$$(hack/build-control-plane.sh) go run ./hack/bench $(BENCH_FLAGS)

.PHONY: bench-class
bench-class: build control-plane ## Only the class-start scenario, under each client limit set (14 minutes measured here); writes docs/benchmarks-class-start.md.
	USERLAND_CONTROL_PLANE_DIR=$$(hack/build-control-plane.sh) go run ./hack/bench -n "" -gateway=false -real-wake=false -class-warm-students 0 -out docs/benchmarks-class-start.md $(BENCH_FLAGS)

.PHONY: bench-warm
bench-warm: build control-plane ## Only the class start of a 200-student course, cold and then warmed by its timetable's warm-up; writes docs/benchmarks-course-warm.md.
	USERLAND_CONTROL_PLANE_DIR=$$(hack/build-control-plane.sh) go run ./hack/bench -n "" -gateway=false -real-wake=false -class-students 0 -course-students 0 -out docs/benchmarks-course-warm.md $(BENCH_FLAGS)

.PHONY: bench-course
bench-course: build control-plane ## Only a 500-student course provisioned beside 500 plain Userlands; writes docs/benchmarks-course.md.
	USERLAND_CONTROL_PLANE_DIR=$$(hack/build-control-plane.sh) go run ./hack/bench -n "" -gateway=false -real-wake=false -class-students 0 -class-warm-students 0 -out docs/benchmarks-course.md $(BENCH_FLAGS)

.PHONY: bench-pages
bench-pages: build control-plane ## Only the admin page at 10000 Userlands and a 2000-student course page, timed through the gateway, and a 2000-row roster import; writes docs/benchmarks-pages.md.
	USERLAND_CONTROL_PLANE_DIR=$$(hack/build-control-plane.sh) go run ./hack/bench -n "" -gateway=false -real-wake=false -class-students 0 -course-students 0 -class-warm-students 0 -pages 10000 -out docs/benchmarks-pages.md $(BENCH_FLAGS)

.PHONY: bench-10k
bench-10k: build control-plane ## 10000 Userlands in one namespace and over 50 (as 50 courses), each on a fresh cluster: controller and gateway RSS, time to all Ready, steady writes, a rollout to all, stopped at -large-rollout-limit (20 m) and reported as far as it got (59 minutes here); writes docs/benchmarks-10000.md.
	USERLAND_CONTROL_PLANE_DIR=$$(hack/build-control-plane.sh) go run ./hack/bench -large 10000 -large-namespaces 1,50 -out docs/benchmarks-10000.md $(BENCH_FLAGS)

.PHONY: bench-budget
bench-budget: build control-plane ## 1000 environments running under a weekly compute-hour budget: steady-state writes and the writes at the week's rollover (about 8 minutes here); writes docs/benchmarks-budget.md.
	USERLAND_CONTROL_PLANE_DIR=$$(hack/build-control-plane.sh) go run ./hack/bench -budget 1000 -out docs/benchmarks-budget.md $(BENCH_FLAGS)

.PHONY: bench-large
bench-large: build control-plane ## Provision 5000 Userlands against the baseline (about 22 minutes) and write docs/benchmarks-5000.md.
	USERLAND_CONTROL_PLANE_DIR=$$(hack/build-control-plane.sh) go run ./hack/bench -n 5000 -rollout=false -gateway=false -real-wake=false -class-warm-students 0 -out docs/benchmarks-5000.md $(BENCH_FLAGS)

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint.
	$(GOLANGCI_LINT) run --allow-parallel-runners ./...

.PHONY: verify
verify: ## Fail if generated files are stale, then vet and lint.
	$(MAKE) generate manifests
	@if [ -n "$$(git status --porcelain -- api config docs charts)" ]; then \
		echo "verify: generated files are stale; run 'make generate manifests' and commit:"; \
		git status --porcelain -- api config docs charts; git --no-pager diff -- api config docs charts | head -50; exit 1; \
	fi
	# The import rules (dependencies point downwards, rule packages are
	# leaves, shipped binaries link no test code) and the docs' links (every
	# relative link and anchor resolves inside the repository); make test runs
	# them too.
	go test -count=1 ./test/deps/ ./test/docs/
	go vet ./...
	go vet -tags faults ./test/faults/
	go vet -tags realnode ./internal/realnode/
	# The CLI and userland dev run on a Mac too (the real node only says it
	# cannot run there): the whole module must build for it.
	GOOS=darwin GOARCH=arm64 go build ./...
	$(MAKE) lint

##@ Tools

$(CONTROLLER_GEN):
	GOBIN=$(BIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(BIN)/controller-gen $@

$(GOLANGCI_LINT):
	GOBIN=$(BIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(BIN)/golangci-lint $@
