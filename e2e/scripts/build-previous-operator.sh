#!/usr/bin/env bash
# Builds the operator (services/operator and the workspace packages it needs) as it was at a git
# commit, for upgrade tests that run a previous operator before this one. Built once per commit
# into the cache (like build-components.sh): `git archive` of the commit, `pnpm install --offline`
# from the local store this checkout was installed from, codegen, `tsc -b`. The repository's git
# state is not touched (no worktree). Prints the operator's entry point (dist/main.js) last.
#
#   e2e/scripts/build-previous-operator.sh <commit-ish>
#   KUBEPLUS_ISOLATION_CACHE   cache root (default: $HOME/.cache/kubeplus-isolation)
set -euo pipefail
ref=${1:?usage: build-previous-operator.sh <commit-ish>}
root=$(cd "$(dirname "$0")/../.." && pwd -P)
commit=$(git -C "$root" rev-parse --verify "$ref^{commit}")
cache=${KUBEPLUS_ISOLATION_CACHE:-$HOME/.cache/kubeplus-isolation}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd -P)
dir=$cache/operator-${commit:0:12}
entry=$dir/services/operator/dist/main.js

if [ ! -f "$dir/.built" ]; then
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$cache/.operator-build.lock"
    flock 9
  fi
  if [ ! -f "$dir/.built" ]; then
    echo "[previous-operator] building the operator of ${commit:0:12} into $dir" >&2
    tmp=$dir.partial
    rm -rf "$tmp" "$dir"
    mkdir -p "$tmp"
    git -C "$root" archive --format=tar "$commit" | tar -x -C "$tmp"
    export PATH="$root/.tools/node_modules/.bin:$PATH"
    (
      cd "$tmp"
      pnpm install --frozen-lockfile --offline --reporter=append-only \
        --filter '@kubeplus-isolation/operator...' >&2
      node packages/spec/codegen/generate-validators.ts >&2
      node_modules/.bin/tsc -b services/operator/tsconfig.json >&2
    )
    test -f "$tmp/services/operator/dist/main.js"
    mv "$tmp" "$dir"
    touch "$dir/.built"
  fi
fi
echo "$entry"
