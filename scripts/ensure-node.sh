#!/usr/bin/env bash
# Makes Node.js >= 22.19 and the pinned pnpm available under .tools/, with no manual step.
# Node.js 24 LTS comes from the npm registry's `node` package when the machine's own node is
# missing or older than 22.19 (@kubernetes/client-node 2.x needs it). Prints nothing on success
# when everything is already in place. Idempotent.
set -euo pipefail
NODE_VERSION=24.21.0
PNPM_VERSION=$(sed -n 's/.*"packageManager": *"pnpm@\([^"]*\)".*/\1/p' "$(dirname "$0")/../package.json")
root=$(cd "$(dirname "$0")/.." && pwd)
tools="$root/.tools"
bin="$tools/node_modules/.bin"

node_ok() { # $1 = node binary
  "$1" -e 'const [a,b]=process.versions.node.split(".").map(Number);process.exit(a>22||(a===22&&b>=19)?0:1)' 2>/dev/null
}

need=()
if [ ! -x "$bin/node" ] && ! { command -v node >/dev/null && node_ok node; }; then
  need+=("node@$NODE_VERSION")
fi
if [ ! -x "$bin/pnpm" ] || [ "$("$bin/pnpm" --version 2>/dev/null || true)" != "$PNPM_VERSION" ]; then
  need+=("pnpm@$PNPM_VERSION")
fi
if [ ${#need[@]} -gt 0 ]; then
  command -v npm >/dev/null || { echo "ensure-node: npm is needed once to bootstrap ${need[*]}; install any Node.js with npm" >&2; exit 1; }
  echo "[bootstrap] installing ${need[*]} into .tools/ from the npm registry" >&2
  mkdir -p "$tools"
  [ -f "$tools/package.json" ] || echo '{"private":true}' > "$tools/package.json"
  npm install --prefix "$tools" --save-exact --no-audit --no-fund --loglevel=error "${need[@]}" >&2
fi
