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
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

.tools/.ok: scripts/ensure-node.sh package.json
	@scripts/ensure-node.sh
	@touch $@

node_modules/.modules.yaml: .tools/.ok pnpm-lock.yaml package.json $(wildcard */*/package.json) e2e/package.json
	pnpm install --frozen-lockfile --reporter=append-only
	@touch $@

.PHONY: install
install: node_modules/.modules.yaml ## Bootstrap Node.js 24 + pnpm, install dependencies (frozen lockfile)

.PHONY: build
build: install ## Compile every TypeScript project (tsc -b)
	tsc -b tsconfig.json

.PHONY: lint
lint: install ## Typecheck sources and tests, then lint (tsc + Biome)
	tsc -b tsconfig.json
	tsc -p tsconfig.test.json
	biome check .

.PHONY: test-unit
test-unit: install ## Fast unit tests of every package (no cluster)
	$(JEST) --selectProjects unit

.PHONY: test
test: lint test-unit ## Everything CI runs: lint, unit tests, e2e on a real control plane

.PHONY: clean
clean: ## Remove build output (keeps .tools and node_modules)
	rm -rf packages/*/dist services/*/dist e2e/dist
