#!/usr/bin/env bash
# Prints the directory holding the upstream CustomResourceDefinitions the tests install, taken
# from the Go module pinned (with its hash) in e2e/components/<component>/go.mod + go.sum and
# downloaded from the Go module proxy into the Go module cache once per machine. The repository
# holds no copy of upstream files.
#
#   agent-sandbox  k8s/crds/ of sigs.k8s.io/agent-sandbox       (override: KUBEPLUS_SANDBOX_CRDS_DIR;
#                  the release: e2e/components/agent-sandbox, or agent-sandbox-<x.y> with
#                  KUBEPLUS_ISOLATION_AGENT_SANDBOX=<x.y>: agent-sandbox-component.sh)
#   openreports    config/crd/ of github.com/openreports/reports-api (override: KUBEPLUS_OPENREPORTS_CRDS_DIR)
#
# Usage:
#   CRDS=$(e2e/scripts/module-crds.sh agent-sandbox | tail -1)
#
# Progress goes to stderr; the LAST line of stdout is the absolute path of the CRD directory.
# The override variable, when set, is checked and printed instead (nothing is downloaded).
set -euo pipefail

log() { printf '%s\n' "$*" >&2; }
die() { printf 'module-crds: error: %s\n' "$*" >&2; exit 1; }

case "${1:-}" in
  agent-sandbox)
    component=$("$(dirname "${BASH_SOURCE[0]}")/agent-sandbox-component.sh")
    module=sigs.k8s.io/agent-sandbox
    subdir=k8s/crds
    override=KUBEPLUS_SANDBOX_CRDS_DIR
    title='Agent Sandbox'
    # The checksum database has no entry for this module: go.sum pins its hash instead.
    export GONOSUMDB=$module
    crds=(
      agents.x-k8s.io_sandboxes.yaml
      extensions.agents.x-k8s.io_sandboxclaims.yaml
      extensions.agents.x-k8s.io_sandboxtemplates.yaml
      extensions.agents.x-k8s.io_sandboxwarmpools.yaml
    )
    ;;
  openreports)
    component=openreports
    module=github.com/openreports/reports-api
    subdir=config/crd
    override=KUBEPLUS_OPENREPORTS_CRDS_DIR
    title=OpenReports
    crds=(openreports.io_reports.yaml openreports.io_clusterreports.yaml)
    ;;
  *) die "usage: $0 agent-sandbox|openreports" ;;
esac

check() { # <dir>
  local missing=() f
  for f in "${crds[@]}"; do [[ -f "$1/$f" ]] || missing+=("$f"); done
  ((${#missing[@]} == 0)) || die "$1 lacks ${missing[*]}"
}

if [[ -n "${!override:-}" ]]; then
  check "${!override}"
  (cd "${!override}" && pwd -P)
  exit 0
fi

if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then PATH=$PATH:/usr/local/go/bin; fi
command -v go >/dev/null 2>&1 || die "go not found in PATH (needed to fetch the $module module; or set $override)"

cd "$(dirname "${BASH_SOURCE[0]}")/../components/$component"
# -mod=readonly makes a hash mismatch an error rather than an edit. GOWORK=off: nothing outside
# this module can change the version.
export GOWORK=off GOFLAGS=-mod=readonly
version=$(go list -m -f '{{.Version}}' "$module")
dir=$(go list -m -f '{{.Dir}}' "$module" 2>/dev/null || true)
if [[ -z "$dir" || ! -d "$dir" ]]; then
  log "[crds] downloading $module@$version from the Go module proxy"
  go mod download "$module" >&2 || die "go mod download $module@$version failed"
  dir=$(go list -m -f '{{.Dir}}' "$module")
fi
check "$dir/$subdir"
log "[crds] $title $version CRDs: $dir/$subdir"
printf '%s\n' "$dir/$subdir"
