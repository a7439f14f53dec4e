#!/usr/bin/env bash
# Prints the directory holding the Agent Sandbox CustomResourceDefinitions the tests install:
# k8s/crds/ of the Go module sigs.k8s.io/agent-sandbox at the version pinned (with its hash) in
# e2e/components/agent-sandbox/go.mod + go.sum, downloaded from the Go module proxy into the Go
# module cache once per machine. The repository holds no copy of upstream files.
#
# Usage:
#   CRDS=$(e2e/scripts/agent-sandbox-crds.sh | tail -1)
#
# Progress goes to stderr; the LAST line of stdout is the absolute path of the CRD directory.
# KUBEPLUS_SANDBOX_CRDS_DIR, when set, is checked and printed instead (nothing is downloaded).
set -euo pipefail

log() { printf '%s\n' "$*" >&2; }
die() { printf 'agent-sandbox-crds: error: %s\n' "$*" >&2; exit 1; }

CRDS=(
  agents.x-k8s.io_sandboxes.yaml
  extensions.agents.x-k8s.io_sandboxclaims.yaml
  extensions.agents.x-k8s.io_sandboxtemplates.yaml
  extensions.agents.x-k8s.io_sandboxwarmpools.yaml
)

check() { # <dir>
  local missing=() f
  for f in "${CRDS[@]}"; do [[ -f "$1/$f" ]] || missing+=("$f"); done
  ((${#missing[@]} == 0)) || die "$1 lacks ${missing[*]}"
}

if [[ -n "${KUBEPLUS_SANDBOX_CRDS_DIR:-}" ]]; then
  check "$KUBEPLUS_SANDBOX_CRDS_DIR"
  (cd "$KUBEPLUS_SANDBOX_CRDS_DIR" && pwd -P)
  exit 0
fi

if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then PATH=$PATH:/usr/local/go/bin; fi
command -v go >/dev/null 2>&1 || die "go not found in PATH (needed to fetch the sigs.k8s.io/agent-sandbox module; or set KUBEPLUS_SANDBOX_CRDS_DIR)"

module=sigs.k8s.io/agent-sandbox
component=$(cd "$(dirname "${BASH_SOURCE[0]}")/../components/agent-sandbox" && pwd -P)
cd "$component"
# The checksum database has no entry for this module: go.sum pins its hash instead, and
# -mod=readonly makes a mismatch an error rather than an edit. GOWORK=off: nothing outside
# this module can change the version.
export GOWORK=off GOFLAGS=-mod=readonly GONOSUMDB=$module
version=$(go list -m -f '{{.Version}}' "$module")
dir=$(go list -m -f '{{.Dir}}' "$module" 2>/dev/null || true)
if [[ -z "$dir" || ! -d "$dir" ]]; then
  log "[crds] downloading $module@$version from the Go module proxy"
  go mod download "$module" >&2 || die "go mod download $module@$version failed"
  dir=$(go list -m -f '{{.Dir}}' "$module")
fi
check "$dir/k8s/crds"
log "[crds] Agent Sandbox $version CRDs: $dir/k8s/crds"
printf '%s\n' "$dir/k8s/crds"
