# kubeplus-isolation — every entry point a user or CI needs. See README.md.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
ROOT := $(CURDIR)
# Node.js >= 22.19 and pinned pnpm live in .tools/ (bootstrapped from the npm registry);
# they come first on PATH so the machine's older node is never used.
export PATH := $(ROOT)/.tools/node_modules/.bin:$(ROOT)/node_modules/.bin:$(PATH)
JEST := node --experimental-vm-modules --no-warnings=ExperimentalWarning $(ROOT)/node_modules/jest/bin/jest.js

.PHONY: help
help: ## List targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

.tools/.ok: scripts/ensure-node.sh package.json
	@scripts/ensure-node.sh
	@touch $@

node_modules/.modules.yaml: .tools/.ok pnpm-lock.yaml package.json $(wildcard */*/package.json) e2e/package.json
	pnpm install --frozen-lockfile --reporter=append-only
	@touch $@

.PHONY: install
install: node_modules/.modules.yaml ## Bootstrap Node.js 24 + pnpm, install dependencies (frozen lockfile)

# Sources that tsc compiles but git does not hold: packages/spec's annotation validators, ajv
# standalone code generated from its schemas (packages/spec/README.md). Every `tsc -b` needs them;
# the generator rewrites the file only when it changes, so the build stays incremental.
.PHONY: generate
generate: install ## Generate the sources tsc compiles (packages/spec/src/generated: precompiled validators)
	node packages/spec/codegen/generate-validators.ts

.PHONY: build
build: generate ## Compile every TypeScript project (tsc -b)
	tsc -b tsconfig.json
	@chmod +x packages/cli/dist/main.js

# `make validate MANIFESTS=...`: the command-line tool's validate on a fresh clone (packages/cli,
# README "Before you merge"); exit status 1 on any invalid isolation annotation.
.PHONY: validate
validate: build ## Check the isolation annotations of manifests before merging (MANIFESTS=files/dirs or -, ARGS='--output json', no cluster)
	@test -n "$(MANIFESTS)" || { echo "make validate: set MANIFESTS=<files or directories>" >&2; exit 2; }
	@node packages/cli/dist/main.js validate $(MANIFESTS) $(ARGS)

.PHONY: lint
lint: generate ## Typecheck sources and tests, then lint (tsc + Biome)
	tsc -b tsconfig.json
	tsc -p tsconfig.test.json
	biome check .

.PHONY: test-unit
test-unit: generate ## Fast unit tests of every package (no cluster)
	$(JEST) --selectProjects unit

# The command-line tool as one npm package that installs without this repository (packages/cli/README.md
# "Install"): dist/cli/kubeplus-isolation-cli-<version>.tgz (npm install -g, npx) and its krew manifest.
.PHONY: cli-package
cli-package: generate ## The standalone CLI: dist/cli/kubeplus-isolation-cli-<version>.tgz (npm install -g / npx, no repo needed) + krew manifest dist/cli/kubeplus-isolation.yaml
	node packages/cli/bundle/pack.ts --out dist/cli

# ---- e2e/: a real control plane (see e2e/README.md) ------------------------------------------
# The binaries are built once per machine from the pinned Go modules into ~/.cache/kubeplus-isolation
# (KUBEPLUS_ISOLATION_ASSETS=<dir> uses prebuilt ones); the script's last stdout line is their directory.
.PHONY: components
components: chart-crds ## Build the control plane (etcd, kube-apiserver, controllers, kubectl, helm) and the real node (kubelet, kube-proxy, containerd, runc, CNI, nft) (cached)
	e2e/scripts/build-components.sh
	e2e/scripts/build-components.sh node

# The OpenReports CRDs the chart installs with operator.reports.installCrds, copied from their pinned
# Go module into charts/operator/files/openreports/ (ignored by git; deploy/chart-crds.sh).
.PHONY: chart-crds
chart-crds: ## Put the OpenReports CRDs of the pinned Go module into the chart (operator.reports.installCrds; make package does it too)
	deploy/chart-crds.sh >/dev/null

# ---- Kubernetes versions (e2e/README.md "Kubernetes versions") ------------------------------
# KUBEPLUS_ISOLATION_K8S=1.<minor> runs `make test-e2e` and `make demo` on that minor's control plane
# (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl built from
# e2e/components/k8s-1.<minor>); empty: the newest, the real node's. On an older minor the real-node
# suites are not run (a kubelet must not be newer than its API server) and the demo uses fake nodes.
KUBEPLUS_ISOLATION_K8S ?=
export KUBEPLUS_ISOLATION_K8S
# The oldest minor the chart accepts (Chart.yaml kubeVersion), every minor the matrix proves, and the
# one below the floor on which `helm install` must refuse.
K8S_FLOOR := 1.30
K8S_MATRIX := 1.30 1.32 1.34 1.35 1.36
K8S_BELOW_FLOOR := 1.29
# The Agent Sandbox release the floor run uses instead of the default (e2e/components/agent-sandbox,
# v1.0.x): the latest v0.5.x (e2e/components/agent-sandbox-0.5), so that `make test` proves both API
# shapes (v1beta1 only; v1beta1 + the deprecated v1alpha1). e2e/README.md "Agent Sandbox versions".
AGENT_SANDBOX_FLOOR := 0.5
# Minors of K8S_MATRIX a `make test-matrix` leaves out (reported as not run), e.g. "1.30 1.36", which
# `make test` runs on every CI run.
K8S_MATRIX_SKIP ?=

# The real-node suites import the image archives `make images` builds (dist/images), as a user's
# node would pull them.
.PHONY: test-e2e
# --verbose: every test's name is printed, so a test skipped on a Kubernetes minor shows its reason in CI.
# Beside jest's own reporter, e2e/src/progress/reporter.ts: a line per finished suite while two runs go
# (test-e2e-both) and a short summary per run at the end (e2e/README.md "What `make test` prints").
# E2E_ARGS: extra jest arguments, e.g. E2E_ARGS=e2e/test/cli.test.ts runs only that suite.
E2E_ARGS ?=
E2E_JEST = KUBEPLUS_ISOLATION_ASSETS="$$(e2e/scripts/build-components.sh | tail -1)" $(JEST) $(E2E_ARGS) \
  --selectProjects e2e --runInBand --verbose --reporters=default --reporters=$(ROOT)/e2e/dist/progress/reporter.js
test-e2e: build components images ## End-to-end suites against a real control plane and a real node (KEEP_E2E_TMP=1 keeps logs of a failed run)
	$(E2E_JEST)

# `make demo`: both design documents' demo steps on a fresh local control plane, with the real
# webhook and operator processes (see e2e/DEMO.md). Exit status 0 only if every step passed.
.PHONY: demo
demo: build components images ## Walk both design documents' demo steps on a local cluster with a real node (ARGS=--keep or KEEP=1 leaves it running; ARGS=--fake-nodes)
	KUBEPLUS_ISOLATION_ASSETS="$$(e2e/scripts/build-components.sh 2>/dev/null | tail -1)" node e2e/dist/demo/main.js $(ARGS)

# A run SIGKILLed together with its watchdogs (a CI timeout, `kill -9` of the process tree) leaves a
# real node's processes, cgroups, veth and sysctls behind; every run removes them before it starts,
# and this does it on demand (e2e/README.md "Cleaning up after a killed run").
.PHONY: clean-node
clean-node: build ## Remove what killed e2e/demo/bench runs left on this host (node processes, gVisor, cgroups, veths, sysctls, temp dirs); live runs untouched
	node e2e/dist/clean-node/main.js

# The Agent Sandbox suites on the real node with the older release (AGENT_SANDBOX_FLOOR, v0.5.x):
# its controller, its conversion webhook and v1alpha1 for real. Not part of `make test` (whose floor
# run proves v0.5.x at the API level): e2e/README.md "Agent Sandbox versions".
.PHONY: test-agent-sandbox-floor
test-agent-sandbox-floor: build components images ## The real-node Agent Sandbox suites with the older Agent Sandbox release (v0.5.x)
	KUBEPLUS_ISOLATION_AGENT_SANDBOX=$(AGENT_SANDBOX_FLOOR) e2e/scripts/build-components.sh node >/dev/null
	export KUBEPLUS_ISOLATION_AGENT_SANDBOX=$(AGENT_SANDBOX_FLOOR); \
	  KUBEPLUS_ISOLATION_ASSETS="$$(e2e/scripts/build-components.sh | tail -1)" $(JEST) \
	  e2e/test/agent-sandbox.test.ts e2e/test/sandbox-pod-governance.test.ts e2e/test/gvisor-sandbox.test.ts \
	  --selectProjects e2e --runInBand --verbose

# Upstream Agent Sandbox's OWN e2e suite (the pinned module's test/e2e and test/e2e/extensions, compiled
# with `go test -c` by build-components.sh upstream-e2e), unmodified, against a real node with the chart
# installed and the upstream controller running; one jest test per upstream test, the excluded ones shown
# skipped with their reasons. Not part of `make test` (it takes ~8 min): e2e/README.md "Upstream's own suite".
.PHONY: test-agent-sandbox-upstream
test-agent-sandbox-upstream: build components images ## Agent Sandbox's own e2e suite (pinned release, unmodified) on a real node beside the chart
	dir=$$(env -u KUBEPLUS_ISOLATION_ASSETS e2e/scripts/build-components.sh upstream-e2e | tail -1); test -n "$$dir"; \
	  export KUBEPLUS_ISOLATION_UPSTREAM_SUITE=$$dir; \
	  KUBEPLUS_ISOLATION_ASSETS="$$(e2e/scripts/build-components.sh | tail -1)" $(JEST) e2e/test/agent-sandbox-upstream.test.ts \
	  --selectProjects e2e --runInBand --verbose

# The API-level suites again, on the oldest supported minor: what `make test` proves beside the newest.
.PHONY: test-e2e-oldest
test-e2e-oldest: ## The API-level e2e suites on the oldest supported Kubernetes minor (K8S_FLOOR, 1.30)
	$(MAKE) --no-print-directory test-e2e KUBEPLUS_ISOLATION_K8S=$(K8S_FLOOR)

# `make test`'s e2e part: the newest minor (every suite) and the floor (API-level suites and the
# chart on a real node of 1.30) at once, as two jest runs on two control planes (and real nodes in
# separate slots; the harness is built for concurrent runs). On 2 cores this saves ~10 min over
# running them one after the other (README "Quick start": measured). Everything they need is built
# first. Each run's full output is printed as a whole when it ends (--output-sync); meanwhile both
# print a line per finished suite, prefixed with the run's name, on file descriptor 3, which is this
# recipe's stdout and not held back; at the end both runs' summaries (e2e/src/progress/reporter.ts).
.PHONY: e2e-newest e2e-floor test-e2e-both
e2e-newest:
	export KUBEPLUS_ISOLATION_E2E_RUN=newest; $(E2E_JEST)
e2e-floor:
	export KUBEPLUS_ISOLATION_K8S=$(K8S_FLOOR) KUBEPLUS_ISOLATION_AGENT_SANDBOX=$(AGENT_SANDBOX_FLOOR) KUBEPLUS_ISOLATION_E2E_RUN=floor; $(E2E_JEST)
test-e2e-both: build components images
	KUBEPLUS_ISOLATION_K8S=$(K8S_FLOOR) KUBEPLUS_ISOLATION_AGENT_SANDBOX=$(AGENT_SANDBOX_FLOOR) e2e/scripts/build-components.sh >/dev/null
	KUBEPLUS_ISOLATION_K8S=$(K8S_FLOOR) KUBEPLUS_ISOLATION_AGENT_SANDBOX=$(AGENT_SANDBOX_FLOOR) e2e/scripts/build-components.sh node >/dev/null
	@echo "e2e: two jest runs at once, newest (Agent Sandbox: the default release) and floor ($(K8S_FLOOR), Agent Sandbox $(AGENT_SANDBOX_FLOOR).x): a line per finished suite as they go, each run's full output when it ends, both summaries last"
	@summaries=$$(mktemp -d); trap 'rm -rf "$$summaries"' EXIT; status=0; \
	KUBEPLUS_ISOLATION_E2E_SUMMARY_DIR=$$summaries KUBEPLUS_ISOLATION_E2E_PROGRESS_FD=3 \
	  $(MAKE) --no-print-directory -j2 --output-sync=target e2e-newest e2e-floor 3>&1 || status=$$?; \
	echo; echo "━━ e2e: both runs' summaries"; \
	for run in newest floor; do \
	  cat "$$summaries/$$run.txt" 2>/dev/null || echo "[e2e $$run] no summary: the run ended before its tests did (its output above says why)"; \
	done; \
	exit $$status

# Every minor of K8S_MATRIX (API-level suites; the real-node suites on the newest), then the minor
# below the floor (helm install refused); writes docs/kubernetes-versions.md from the results.
.PHONY: test-matrix
test-matrix: build images ## The e2e suites on every supported Kubernetes minor (K8S_MATRIX) + helm's refusal below the floor; writes docs/kubernetes-versions.md
	node e2e/dist/matrix/main.js --floor $(K8S_FLOOR) --below-floor $(K8S_BELOW_FLOOR) --skip "$(K8S_MATRIX_SKIP)" $(K8S_MATRIX)

.PHONY: test
test: lint test-unit chart-test test-e2e-both ## Everything CI runs: lint, unit tests, chart + image checks, e2e on the newest Kubernetes and (API-level) the oldest

.PHONY: clean
clean: ## Remove build output and generated sources (keeps .tools and node_modules)
	rm -rf packages/*/dist services/*/dist e2e/dist packages/spec/src/generated

# ---- deploy/: Helm chart and container images -----------------------------------------------
node_modules/.modules.yaml: deploy/package.json

CONTAINER_ENGINE ?= docker
# The defaults are the chart's: its webhook image repository without /kubeplus-isolation-webhook, and
# the one version (VERSION, the chart's appVersion). scripts/release/release.ts keeps them in step.
IMAGE_REGISTRY ?= $(shell sed -n 's#^  repository: \(.*\)/kubeplus-isolation-webhook$$#\1#p' deploy/kubeplus-isolation/charts/webhook/values.yaml)
IMAGE_TAG ?= $(shell cat VERSION)

# `make release VERSION=x.y.z`: the one version (the VERSION file) stamped into every chart
# (version, appVersion, dependencies: the images' default tag), every package.json (the services'
# --version and <prefix>_build_info, the CLI's --version), the alerts' runbook links (this
# repository's docs/runbooks.md at tag vx.y.z) and a CHANGELOG entry; scripts/test/release.test.ts
# fails when one place drifts. Then: make test, commit, git tag -a vx.y.z.
.PHONY: release
release: install ## Stamp one version everywhere (VERSION=x.y.z: VERSION file, charts, appVersion/image tags, package.json, --version, build_info, runbook links, CHANGELOG)
	@test -n "$(VERSION)" || { echo "make release: set VERSION=x.y.z (now: $$(cat VERSION))" >&2; exit 2; }
	node scripts/release/release.ts $(VERSION)

.PHONY: images
images: install ## Build the webhook and operator images (one OCI index each: linux/amd64 + linux/arm64) and an SPDX SBOM per image into dist/images/ WITHOUT a container engine (crane; IMAGE_REGISTRY, IMAGE_TAG, IMAGE_ARCHS)
	deploy/image/build-images.sh webhook operator

.PHONY: package
package: install ## The artifacts to install: dist/kubeplus-isolation-<VERSION>.tgz (helm package, image references filled in) + dist/images/*.tar tagged <VERSION>, their SBOMs and SHA256SUMS (IMAGE_REGISTRY; IMAGE_TAG must equal VERSION)
	deploy/package.sh

# `make publish REGISTRY=host[:port]/path`: the release on any OCI registry, signed (deploy/publish.sh; README
# "Install from an OCI registry"): the images of `make images`, the chart as an OCI artifact, cosign
# signatures on both (COSIGN_KEY=<key file>, else keyless) and each image's SBOM as an attestation.
REGISTRY ?=
.PHONY: publish
publish: images ## Push the images and the chart (OCI) to REGISTRY=host[:port]/path, sign them with cosign (COSIGN_KEY or keyless), attach each image's SBOM as an attestation
	REGISTRY="$(REGISTRY)" IMAGE_TAG="$(IMAGE_TAG)" deploy/publish.sh

.PHONY: images-docker
images-docker: ## Build the same images from the Dockerfiles with a Docker/Podman engine (CONTAINER_ENGINE, IMAGE_REGISTRY, IMAGE_TAG)
	@if ! command -v $(CONTAINER_ENGINE) >/dev/null 2>&1 || ! $(CONTAINER_ENGINE) info >/dev/null 2>&1; then \
	  echo "make images-docker: no container engine reachable ('$(CONTAINER_ENGINE) info' failed or $(CONTAINER_ENGINE) is not installed)." >&2; \
	  echo "  make images builds the same images without one." >&2; \
	  exit 1; \
	fi
	for s in webhook operator; do \
	  $(CONTAINER_ENGINE) build -f services/$$s/Dockerfile -t $(IMAGE_REGISTRY)/kubeplus-isolation-$$s:$(IMAGE_TAG) . ; \
	done

.PHONY: chart-test
chart-test: generate chart-crds ## Helm chart, Dockerfile and image tests: helm lint/template, RBAC, PSS, TLS, schema, image archives (builds helm and crane only)
	HELM="$$(e2e/scripts/build-components.sh helm | tail -1)/helm" $(JEST) --selectProjects chart

# ---- bench/: benchmarks (not part of `make test`; see bench/README.md) ----------------------
node_modules/.modules.yaml: bench/package.json

.PHONY: bench
bench: build components ## Run the benchmarks and regenerate docs/benchmarks.md + plots (~15 min; BENCH_* env vars, bench/README.md)
	KUBEPLUS_ISOLATION_ASSETS="$$(e2e/scripts/build-components.sh | tail -1)" node bench/dist/main.js
