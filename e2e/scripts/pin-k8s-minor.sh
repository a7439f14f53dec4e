#!/usr/bin/env bash
# Writes e2e/components/k8s-<minor>/go.mod + go.sum: the pin of ONE older Kubernetes minor's control
# plane (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl) and node (kubelet,
# kube-proxy: a kubelet must not be newer than its API server) for the version matrix
# (e2e/README.md "Kubernetes versions"). A maintainer's tool, run when a pin moves; the build never
# runs it. The newest minor (the real node's) keeps its own module, e2e/components/k8s.
#
# Usage: e2e/scripts/pin-k8s-minor.sh v1.30.14 [k8s.io/<staging>=v0.<minor>.<other patch> ...]
#
# An override pins one staging module at another patch of the same minor, for a tag the module
# proxy does not serve (v1.32.13: `k8s.io/endpointslice@v0.32.13: 403 Forbidden, This module version
# is not available`, so `k8s.io/endpointslice=v0.32.12`); go.mod records it in a comment.
#
# k8s.io/kubernetes replaces every staging module with ./staging/src/k8s.io/X; replaces apply only
# in the main module, so the pin repeats them, pointing at the published staging tags
# (v0.<minor>.<patch>). The list is read from THAT version's own go.mod, never written by hand: the
# staging set changes between minors (k8s.io/externaljwt appeared in 1.32, k8s.io/cri-streaming in 1.36).
set -euo pipefail
die() { printf 'pin-k8s-minor: error: %s\n' "$*" >&2; exit 1; }

version=${1:-}
shift || true
declare -A override=()
for o in "$@"; do
  [[ $o =~ ^(k8s\.io/[a-z0-9-]+)=(v0\.[0-9]+\.[0-9]+)$ ]] || die "override '$o' is not k8s.io/<module>=v0.<minor>.<patch>"
  override[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
done
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || die "usage: $0 v1.<minor>.<patch> (got '${version}')"
minor=${BASH_REMATCH[1]} patch=${BASH_REMATCH[2]}
staging=v0.$minor.$patch
components=$(cd "$(dirname "${BASH_SOURCE[0]}")/../components" && pwd -P)
dir=$components/k8s-1.$minor

upstream=$(GOWORK=off GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$version" |
  sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[[ -f $upstream ]] || die "go mod download k8s.io/kubernetes@$version gave no go.mod"
mapfile -t staged < <(awk '$2 == "=>" && $3 ~ /^\.\/staging\/src\// { print $1 }' \
  <(sed -e 's/^[[:space:]]*replace[[:space:]]*//' "$upstream") | sort -u)
((${#staged[@]} > 10)) || die "found only ${#staged[@]} staging replaces in $upstream"

for m in "${!override[@]}"; do
  [[ " ${staged[*]} " == *" $m "* ]] || die "override $m is not a staging module of $version"
  [[ ${override[$m]} == v0.$minor.* ]] || die "override $m=${override[$m]} is not of minor 1.$minor"
done
mkdir -p "$dir"
{
  printf '// The control plane of Kubernetes %s for the version matrix (../README.md, "Kubernetes\n' "$version"
  printf '// versions"). Written by e2e/scripts/pin-k8s-minor.sh %s; built by\n' "$version"
  printf '// e2e/scripts/build-components.sh when KUBEPLUS_ISOLATION_K8S=1.%s. The staging replaces are\n' "$minor"
  printf '// those of k8s.io/kubernetes %s'"'"'s own go.mod, at their published tags.\n' "$version"
  for m in $(printf '%s\n' "${!override[@]}" | sort); do
    printf '// %s is pinned at %s: the module proxy does not serve %s@%s.\n' "$m" "${override[$m]}" "$m" "$staging"
  done
  printf 'module kubeplus-isolation/e2e/components/k8s-1.%s\n\ngo 1.26.0\n\n' "$minor"
  printf 'tool (\n'
  for c in kube-apiserver kube-controller-manager kube-proxy kube-scheduler kubectl kubelet; do printf '\tk8s.io/kubernetes/cmd/%s\n' "$c"; done
  printf ')\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$version"
  for m in "${staged[@]}"; do printf '\t%s => %s %s\n' "$m" "$m" "${override[$m]:-$staging}"; done
  printf ')\n'
} >"$dir/go.mod"
rm -f "$dir/go.sum"
(cd "$dir" && GOWORK=off GOFLAGS=-mod=mod go mod tidy)
printf '%s\n' "$dir"
