#!/usr/bin/env bash
# Builds the webhook and operator image archives as they were at a git commit (a previous
# release), for the chart upgrade test: the previous chart runs the previous release's own images,
# as a cluster upgraded from that release did. Built once per commit into the cache, like
# build-previous-operator.sh: `git archive` of the commit, this checkout's toolchain (.tools),
# `pnpm install --offline` from the local store, then that commit's own deploy/image/build-images.sh
# (its image names and tag: the previous chart's defaults). The repository's git state is not
# touched. Prints the directory holding webhook.tar and operator.tar last.
#
#   e2e/scripts/build-previous-images.sh <commit-ish>
#   KUBEPLUS_ISOLATION_CACHE   cache root (default: $HOME/.cache/kubeplus-isolation)
set -euo pipefail
ref=${1:?usage: build-previous-images.sh <commit-ish>}
root=$(cd "$(dirname "$0")/../.." && pwd -P)
commit=$(git -C "$root" rev-parse --verify "$ref^{commit}")
cache=${KUBEPLUS_ISOLATION_CACHE:-$HOME/.cache/kubeplus-isolation}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd -P)
dir=$cache/images-${commit:0:12}

if [ ! -f "$dir/.built" ]; then
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$cache/.previous-images.lock"
    flock 9
  fi
  if [ ! -f "$dir/.built" ]; then
    echo "[previous-images] building the images of ${commit:0:12} into $dir" >&2
    tmp=$dir.partial
    rm -rf "$tmp" "$dir"
    mkdir -p "$tmp/src"
    git -C "$root" archive --format=tar "$commit" | tar -x -C "$tmp/src"
    ln -s "$root/.tools" "$tmp/src/.tools"
    export PATH="$root/.tools/node_modules/.bin:$PATH"
    (
      cd "$tmp/src"
      # The commit's own build (its SOURCE_DATE_EPOCH: the commit's time, as a checkout of it has).
      export SOURCE_DATE_EPOCH
      SOURCE_DATE_EPOCH=$(git -C "$root" log -1 --format=%ct "$commit")
      pnpm install --frozen-lockfile --offline --reporter=append-only >&2
      IMAGE_OUT_DIR="$tmp/images" deploy/image/build-images.sh webhook operator >&2
    )
    test -f "$tmp/images/webhook.tar" && test -f "$tmp/images/operator.tar"
    mkdir -p "$dir"
    mv "$tmp/images" "$dir/images"
    rm -rf "$tmp"
    touch "$dir/.built"
  fi
fi
echo "$dir/images"
