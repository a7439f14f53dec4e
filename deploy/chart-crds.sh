#!/usr/bin/env bash
# Puts the OpenReports CustomResourceDefinitions into the chart, at build time, for
# `operator.reports.installCrds` (charts/operator/templates/openreports-crds.yaml): config/crd/ of
# the Go module github.com/openreports/reports-api at the version (and hash) pinned by
# e2e/components/openreports/go.mod + go.sum, fetched from the Go module proxy by
# e2e/scripts/module-crds.sh (the same files the e2e tests install). The repository holds no copy:
# the destination, charts/operator/files/openreports/, is ignored by git and filled by
# `make chart-crds` (which `make package`, `make chart-test`, `make components` and `make demo`
# run), so a packaged chart carries them. Rewrites a file only when it changes.
# The last stdout line is the destination directory.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
dest=$repo/deploy/kubeplus-isolation/charts/operator/files/openreports
src=$("$repo/e2e/scripts/module-crds.sh" openreports | tail -1)
version=$(cd "$repo/e2e/components/openreports" && GOWORK=off GOFLAGS=-mod=readonly go list -m -f '{{.Version}}' github.com/openreports/reports-api 2>/dev/null || echo unknown)
mkdir -p "$dest"
for f in openreports.io_reports.yaml openreports.io_clusterreports.yaml; do
  tmp=$(mktemp "$dest/.$f.XXXXXX")
  {
    printf '# github.com/openreports/reports-api %s config/crd/%s, unmodified: copied by\n' "$version" "$f"
    printf '# deploy/chart-crds.sh at build time (e2e/components/openreports pins the module). Not in git.\n'
    cat "$src/$f"
  } >"$tmp"
  chmod 0644 "$tmp"
  if cmp -s "$tmp" "$dest/$f"; then rm -f "$tmp"; else mv -f "$tmp" "$dest/$f"; fi
done
printf '%s\n' "$dest"
