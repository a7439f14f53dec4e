#!/usr/bin/env bash
# Prints the directory holding the OpenReports CustomResourceDefinitions the tests install:
# config/crd/ of the Go module github.com/openreports/reports-api at the version pinned (with its
# hash) in e2e/components/openreports/go.mod + go.sum, downloaded from the Go module proxy into
# the Go module cache once per machine. The repository holds no copy of upstream files.
#
# Usage:
#   CRDS=$(e2e/scripts/openreports-crds.sh | tail -1)
#
# Progress goes to stderr; the LAST line of stdout is the absolute path of the CRD directory.
# KUBEPLUS_OPENREPORTS_CRDS_DIR, when set, is checked and printed instead (nothing is downloaded).
set -euo pipefail

log() { printf '%s\n' "$*" >&2; }
die() { printf 'openreports-crds: error: %s\n' "$*" >&2; exit 1; }

CRDS=(openreports.io_reports.yaml openreports.io_clusterreports.yaml)

check() { # <dir>
  local missing=() f
  for f in "${CRDS[@]}"; do [[ -f "$1/$f" ]] || missing+=("$f"); done
  ((${#missing[@]} == 0)) || die "$1 lacks ${missing[*]}"
}

if [[ -n "${KUBEPLUS_OPENREPORTS_CRDS_DIR:-}" ]]; then
  check "$KUBEPLUS_OPENREPORTS_CRDS_DIR"
  (cd "$KUBEPLUS_OPENREPORTS_CRDS_DIR" && pwd -P)
  exit 0
fi

if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then PATH=$PATH:/usr/local/go/bin; fi
command -v go >/dev/null 2>&1 || die "go not found in PATH (needed to fetch the github.com/openreports/reports-api module; or set KUBEPLUS_OPENREPORTS_CRDS_DIR)"

module=github.com/openreports/reports-api
component=$(cd "$(dirname "${BASH_SOURCE[0]}")/../components/openreports" && pwd -P)
cd "$component"
# go.sum pins the module's hash and -mod=readonly makes a mismatch an error rather than an edit.
# GOWORK=off: nothing outside this module can change the version.
export GOWORK=off GOFLAGS=-mod=readonly
version=$(go list -m -f '{{.Version}}' "$module")
dir=$(go list -m -f '{{.Dir}}' "$module" 2>/dev/null || true)
if [[ -z "$dir" || ! -d "$dir" ]]; then
  log "[crds] downloading $module@$version from the Go module proxy"
  go mod download "$module" >&2 || die "go mod download $module@$version failed"
  dir=$(go list -m -f '{{.Dir}}' "$module")
fi
check "$dir/config/crd"
log "[crds] OpenReports $version CRDs: $dir/config/crd"
printf '%s\n' "$dir/config/crd"
