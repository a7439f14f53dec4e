#!/usr/bin/env bash
# Prints the e2e/components/ directory that pins the Agent Sandbox release a run uses:
#   agent-sandbox        the default (v1.0.x: v1beta1 only)
#   agent-sandbox-<x.y>  with KUBEPLUS_ISOLATION_AGENT_SANDBOX=<x.y> (e.g. 0.5: the latest v0.5.x,
#                        serving v1beta1 and the deprecated v1alpha1 through a conversion webhook)
# Read by module-crds.sh (the CRDs and manifests) and build-components.sh (the controller), so that
# both always agree. e2e/README.md "Agent Sandbox versions" says which run uses which.
set -euo pipefail
components=$(cd "$(dirname "${BASH_SOURCE[0]}")/../components" && pwd -P)
want=${KUBEPLUS_ISOLATION_AGENT_SANDBOX:-}
if [[ -z $want ]]; then
  printf 'agent-sandbox\n'
  exit 0
fi
pinned=$(cd "$components" && for d in agent-sandbox-*/go.mod; do [[ -f $d ]] && printf '%s ' "${d%%/*}"; done | sed 's/agent-sandbox-//g')
[[ $want =~ ^[0-9]+\.[0-9]+$ && -f $components/agent-sandbox-$want/go.mod ]] || {
  printf 'agent-sandbox-component: KUBEPLUS_ISOLATION_AGENT_SANDBOX=%s: no release is pinned for it (pinned: %sand the default in agent-sandbox/)\n' "$want" "$pinned" >&2
  exit 1
}
printf 'agent-sandbox-%s\n' "$want"
