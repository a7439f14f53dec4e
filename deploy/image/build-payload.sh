#!/usr/bin/env bash
# Builds the production payload of one service into <out-dir>: compiled JavaScript plus its
# production dependencies only (`pnpm deploy --prod`), ready to be copied into a runtime image
# as /app. Used by services/<service>/Dockerfile and by deploy/test/image-payload.test.ts, so
# the image build and its test run the very same steps.
#
# Usage (from the workspace root, with node, pnpm and the lockfile's packages in the store):
#   deploy/image/build-payload.sh <webhook|operator> <out-dir>
# Environment:
#   PNPM_STORE_DIR  pnpm store to install from (offline); default: pnpm's own
set -euo pipefail

die() { printf 'build-payload: %s\n' "$*" >&2; exit 1; }
[[ $# -eq 2 ]] || die "usage: $0 <webhook|operator> <out-dir>"
service=$1 out=$2
[[ $service =~ ^(webhook|operator)$ ]] || die "unknown service '$service' (expected webhook or operator)"
[[ -f pnpm-workspace.yaml && -f services/$service/package.json ]] || die "run from the workspace root"
[[ ! -e $out ]] || die "$out already exists"

manifest=services/$service/package.json
pkg=$(node -p "require('./$manifest').name")
main=$(node -p "require('./$manifest').main")
store=()
[[ -n ${PNPM_STORE_DIR:-} ]] && store=(--store-dir "$PNPM_STORE_DIR")

# The service, its workspace dependencies, and the root (which holds the TypeScript compiler).
pnpm install --offline --frozen-lockfile "${store[@]}" --reporter=append-only \
  --filter "$pkg..." --filter kubeplus-isolation
# Sources generated before compiling (packages/spec's validators: ajv standalone code), by each
# workspace package's `generate` script, then the compiler.
pnpm --filter "$pkg..." --if-present run generate
node_modules/.bin/tsc -b "services/$service"
pnpm --filter "$pkg" deploy --prod --offline "${store[@]}" --reporter=append-only "$out"

[[ -f $out/$main ]] || die "$out/$main missing after deploy (package.json main: $main)"
# Readable by the runtime user (65532), writable by nobody but root.
chmod -R a+rX,go-w "$out"
printf 'build-payload: %s -> %s (entry point %s)\n' "$pkg" "$out" "$main" >&2
