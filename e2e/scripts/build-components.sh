#!/usr/bin/env bash
# Builds the real Kubernetes binaries the e2e suite runs, from the pinned Go modules in
# e2e/components/*, into a cache directory outside the repo (built once per machine, keyed by
# version):
#   control plane (default):  etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
#                             kubectl, helm
#   node (argument `node`):   kubelet, kube-proxy, containerd, containerd-shim-runc-v2, ctr,
#                             runc (cgo + libseccomp), the CNI plugins bridge, host-local,
#                             loopback and portmap, nft (Debian packages, unpacked locally),
#                             crane, pause-image.tar (a static pause binary as an image
#                             archive), agent-sandbox-controller and its image archive,
#                             runsc and containerd-shim-runsc-v1 (gVisor): what the harness's
#                             real node runs (e2e/README.md); cosign (signs and verifies what
#                             `make publish` pushes, and the publish suite's checks)
#   upstream's e2e suite (argument `upstream-e2e`): agent-sandbox-e2e.test and
#                             agent-sandbox-e2e-extensions.test (`go test -c` of the pinned
#                             sigs.k8s.io/agent-sandbox module's test/e2e and test/e2e/extensions)
#                             and busybox-image.tar (Debian's busybox-static as an image archive):
#                             what `make test-agent-sandbox-upstream` runs (e2e/README.md
#                             "Upstream's own suite")
#
# Usage:
#   ASSETS=$(e2e/scripts/build-components.sh | tail -1)        # the control plane
#   ASSETS=$(e2e/scripts/build-components.sh node | tail -1)   # the node's components
#   ASSETS=$(e2e/scripts/build-components.sh helm | tail -1)   # only those named
#
# Progress goes to stderr (during a go build, a line every 30 s with its elapsed time); the LAST
# line of stdout is the absolute path of a flat directory holding every binary asked for (symlinks
# into the versioned cache directories).
#
# Environment:
#   KUBEPLUS_ISOLATION_CACHE   cache root (default: $HOME/.cache/kubeplus-isolation)
#   KUBEPLUS_ISOLATION_ASSETS  flat directory with prebuilt binaries (KUBEBUILDER_ASSETS-style).
#                              When set, nothing is built: the script checks that every binary
#                              asked for is there and prints that directory.
#   KUBEPLUS_ISOLATION_BUILD_HEARTBEAT  seconds between the "still building" lines (default 30)
#
# Versions come from the go.mod files (never duplicated here). Verified to build with local
# go1.26.8: k8s.io/kubernetes v1.36.3 (staging v0.36.3), go.etcd.io/etcd/server/v3 v3.6.16,
# helm.sh/helm/v3 v3.22.0, github.com/containerd/containerd/v2 v2.2.9,
# github.com/opencontainers/runc v1.3.7, github.com/containernetworking/plugins v1.10.0,
# github.com/google/go-containerregistry v0.22.1 (deploy/image/crane), github.com/sigstore/cosign/v3 v3.1.3.
set -euo pipefail

log() { printf '%s\n' "$*" >&2; }
die() { printf 'build-components: error: %s\n' "$*" >&2; exit 1; }

# A cold build of one binary takes minutes (kube-apiserver ~6 min) and go build prints nothing
# meanwhile: say every KUBEPLUS_ISOLATION_BUILD_HEARTBEAT seconds (default 30) that it is alive, so
# that neither a person nor a CI no-output timeout takes it for a hang. To stderr, like all progress.
heartbeat_s=${KUBEPLUS_ISOLATION_BUILD_HEARTBEAT:-30}
[[ $heartbeat_s =~ ^[1-9][0-9]*$ ]] || die "KUBEPLUS_ISOLATION_BUILD_HEARTBEAT=$heartbeat_s: expected a number of seconds"
heartbeat() { # <pid> <started at ($SECONDS)> <what>
  # sleep's output goes nowhere: killed mid-sleep, it must not hold a caller's pipe open.
  while sleep "$heartbeat_s" >/dev/null 2>&1 </dev/null; do
    kill -0 "$1" 2>/dev/null || return 0
    log "[build] $3 … still building, $((SECONDS - $2))s elapsed"
  done
}

CONTROL_PLANE=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl helm)
NODE=(kubelet kube-proxy containerd containerd-shim-runc-v2 ctr runc bridge host-local loopback portmap nft crane
  pause-image.tar agent-sandbox-controller agent-sandbox-controller-image.tar runsc containerd-shim-runsc-v1 cosign)
# Upstream Agent Sandbox's own e2e suite, compiled, and the busybox image some of its tests run.
UPSTREAM_E2E=(agent-sandbox-e2e.test agent-sandbox-e2e-extensions.test busybox-image.tar)
BINARIES=("${CONTROL_PLANE[@]}")
# Arguments restrict the work to the binaries named (e.g. `helm` for the chart tests); `node` names
# the node's set, `upstream-e2e` upstream's suite's.
if (($#)); then
  BINARIES=()
  for b in "$@"; do
    if [[ $b == node ]]; then
      BINARIES+=("${NODE[@]}")
      continue
    fi
    if [[ $b == upstream-e2e ]]; then
      BINARIES+=("${UPSTREAM_E2E[@]}")
      continue
    fi
    [[ " ${CONTROL_PLANE[*]} ${NODE[*]} ${UPSTREAM_E2E[*]} " == *" $b "* ]] ||
      die "unknown binary '$b' (one of: ${CONTROL_PLANE[*]} ${NODE[*]} ${UPSTREAM_E2E[*]}, or node, or upstream-e2e)"
    BINARIES+=("$b")
  done
fi

# --- Prebuilt assets: build nothing -----------------------------------------
if [[ -n "${KUBEPLUS_ISOLATION_ASSETS:-}" ]]; then
  assets=$KUBEPLUS_ISOLATION_ASSETS
  [[ -d "$assets" ]] || die "KUBEPLUS_ISOLATION_ASSETS=$assets is not a directory"
  assets=$(cd "$assets" && pwd -P)
  missing=()
  for b in "${BINARIES[@]}"; do
    [[ -f "$assets/$b" && ( -x "$assets/$b" || $b == *.tar ) ]] || missing+=("$b")
  done
  if ((${#missing[@]})); then
    die "KUBEPLUS_ISOLATION_ASSETS=$assets is missing (or has non-executable): ${missing[*]} (expected all of: ${BINARIES[*]})"
  fi
  log "[build] using prebuilt binaries from KUBEPLUS_ISOLATION_ASSETS=$assets; building nothing"
  printf '%s\n' "$assets"
  exit 0
fi

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
components=$(cd "$script_dir/../components" && pwd -P)

# Reads the version a go.mod requires for a module (single-line or block form;
# replace lines are ignored because their second field is "=>").
gomod_version() { # <go.mod> <module path>
  local v
  v=$(awk -v m="$2" '
    { sub(/^[ \t]*require[ \t]+/, "") }
    $1 == m && $2 ~ /^v[0-9]/ { print $2; exit }' "$1")
  [[ -n "$v" ]] || die "cannot find a require for $2 in $1"
  printf '%s\n' "$v"
}
# Reads the version a go.mod replaces a module with ("m => m vX").
gomod_replace_version() { # <go.mod> <module path>
  awk -v m="$2" '
    { sub(/^[ \t]*replace[ \t]+/, "") }
    $1 == m && $2 == "=>" && $4 ~ /^v[0-9]/ { print $4; exit }' "$1"
}

# The real node's Kubernetes (kubelet, kube-proxy) and the default control plane: e2e/components/k8s.
node_k8s_version=$(gomod_version "$components/k8s/go.mod" k8s.io/kubernetes)
[[ $node_k8s_version =~ ^v1\.([0-9]+)\. ]] || die "unexpected k8s.io/kubernetes version $node_k8s_version"
node_minor=1.${BASH_REMATCH[1]}
# The version matrix (e2e/README.md "Kubernetes versions"): KUBEPLUS_ISOLATION_K8S=1.<minor> builds
# the control plane (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl) and the
# node's kubelet and kube-proxy (never newer than the API server) of that minor from
# e2e/components/k8s-1.<minor> (written by pin-k8s-minor.sh); everything else (etcd, helm,
# containerd, runc, CNI, gVisor, …) is the same for every minor.
pinned_minors() { (cd "$components" && for d in k8s-1.*/go.mod; do [[ -f $d ]] && printf '%s ' "${d%%/*}"; done) | sed 's/k8s-//g'; }
cp_module=k8s
if [[ -n ${KUBEPLUS_ISOLATION_K8S:-} && ${KUBEPLUS_ISOLATION_K8S} != "$node_minor" ]]; then
  [[ $KUBEPLUS_ISOLATION_K8S =~ ^1\.[0-9]+$ ]] ||
    die "KUBEPLUS_ISOLATION_K8S=$KUBEPLUS_ISOLATION_K8S: expected a minor such as 1.30 (pinned: $(pinned_minors)$node_minor)"
  [[ -f $components/k8s-$KUBEPLUS_ISOLATION_K8S/go.mod ]] ||
    die "KUBEPLUS_ISOLATION_K8S=$KUBEPLUS_ISOLATION_K8S: no control plane is pinned for it (pinned: $(pinned_minors)$node_minor; e2e/scripts/pin-k8s-minor.sh adds one)"
  cp_module=k8s-$KUBEPLUS_ISOLATION_K8S
fi
k8s_version=$(gomod_version "$components/$cp_module/go.mod" k8s.io/kubernetes)
etcd_version=$(gomod_version "$components/etcd/go.mod" go.etcd.io/etcd/server/v3)
helm_version=$(gomod_version "$components/helm/go.mod" helm.sh/helm/v3)
containerd_version=$(gomod_version "$components/containerd/go.mod" github.com/containerd/containerd/v2)
runc_version=$(gomod_version "$components/runc/go.mod" github.com/opencontainers/runc)
cni_version=$(gomod_version "$components/cni/go.mod" github.com/containernetworking/plugins)
# The Agent Sandbox release: e2e/components/agent-sandbox (the default), or agent-sandbox-<x.y> with
# KUBEPLUS_ISOLATION_AGENT_SANDBOX=<x.y> (agent-sandbox-component.sh; e2e/README.md "Agent Sandbox versions").
agent_sandbox_module=$("$script_dir/agent-sandbox-component.sh")
agent_sandbox_version=$(gomod_version "$components/$agent_sandbox_module/go.mod" sigs.k8s.io/agent-sandbox)
gvisor_version=$(gomod_version "$components/gvisor/go.mod" gvisor.dev/gvisor)
crane_module=$(cd "$script_dir/../../deploy/image/crane" && pwd -P)
crane_version=$(gomod_version "$crane_module/go.mod" github.com/google/go-containerregistry)
cosign_version=$(gomod_version "$components/cosign/go.mod" github.com/sigstore/cosign/v3)

[[ $k8s_version =~ ^v([0-9]+)\.([0-9]+)\.([0-9]+)$ ]] || die "unexpected k8s.io/kubernetes version $k8s_version"
k8s_major=${BASH_REMATCH[1]} k8s_minor=${BASH_REMATCH[2]} k8s_patch=${BASH_REMATCH[3]}
# The staging modules are tagged v0.<minor>.<patch> for kubernetes v1.<minor>.<patch>.
staging_want="v0.${k8s_minor}.${k8s_patch}"
for m in k8s.io/api k8s.io/apimachinery k8s.io/client-go k8s.io/component-base k8s.io/apiserver; do
  got=$(gomod_replace_version "$components/$cp_module/go.mod" "$m")
  [[ "$got" == "$staging_want" ]] ||
    die "$components/$cp_module/go.mod replaces $m with '${got:-nothing}', expected $staging_want to match k8s.io/kubernetes $k8s_version"
done
cache=${KUBEPLUS_ISOLATION_CACHE:-$HOME/.cache/kubeplus-isolation}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd -P)
k8s_dir=$cache/k8s-$k8s_version
etcd_dir=$cache/etcd-$etcd_version
helm_dir=$cache/helm-$helm_version
containerd_dir=$cache/containerd-$containerd_version
runc_dir=$cache/runc-$runc_version
cni_dir=$cache/cni-plugins-$cni_version
crane_dir=$cache/crane-$crane_version
cosign_dir=$cache/cosign-$cosign_version
# nft and the pause image are assembled, not compiled from a module: their directories carry the
# versions of what they hold (the Debian release's nftables; the pause program below).
nft_dir=$cache/nft-debian12
pause_dir=$cache/pause-1
# Debian 12's busybox-static (1.35.0; its exact version is written beside the archive): "-1", the
# revision of the assembly below.
busybox_dir=$cache/busybox-debian12-1
agent_sandbox_dir=$cache/agent-sandbox-$agent_sandbox_version
# "-1": the revision of the shim's build-time change (see shim_oom_overlay below).
gvisor_dir=$cache/gvisor-$gvisor_version-1
# Another Agent Sandbox release than the default gets a bin directory of its own, so that runs of
# both (the version matrix) never re-point each other's links.
bin_dir=$cache/bin-$k8s_version${KUBEPLUS_ISOLATION_AGENT_SANDBOX:+-agent-sandbox-$agent_sandbox_version}

# name|module dir|package|output dir  (module dir "-": assembled by a function below)
targets=(
  "kube-apiserver|$cp_module|k8s.io/kubernetes/cmd/kube-apiserver|$k8s_dir"
  "kube-controller-manager|$cp_module|k8s.io/kubernetes/cmd/kube-controller-manager|$k8s_dir"
  "kube-scheduler|$cp_module|k8s.io/kubernetes/cmd/kube-scheduler|$k8s_dir"
  "kubectl|$cp_module|k8s.io/kubernetes/cmd/kubectl|$k8s_dir"
  "etcd|etcd|go.etcd.io/etcd/server/v3|$etcd_dir"
  "helm|helm|helm.sh/helm/v3/cmd/helm|$helm_dir"
  "kubelet|$cp_module|k8s.io/kubernetes/cmd/kubelet|$k8s_dir"
  "kube-proxy|$cp_module|k8s.io/kubernetes/cmd/kube-proxy|$k8s_dir"
  "containerd|containerd|github.com/containerd/containerd/v2/cmd/containerd|$containerd_dir"
  "containerd-shim-runc-v2|containerd|github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2|$containerd_dir"
  "ctr|containerd|github.com/containerd/containerd/v2/cmd/ctr|$containerd_dir"
  "runc|runc|github.com/opencontainers/runc|$runc_dir"
  "bridge|cni|github.com/containernetworking/plugins/plugins/main/bridge|$cni_dir"
  "host-local|cni|github.com/containernetworking/plugins/plugins/ipam/host-local|$cni_dir"
  "loopback|cni|github.com/containernetworking/plugins/plugins/main/loopback|$cni_dir"
  "portmap|cni|github.com/containernetworking/plugins/plugins/meta/portmap|$cni_dir"
  "crane|crane|github.com/google/go-containerregistry/cmd/crane|$crane_dir"
  "cosign|cosign|github.com/sigstore/cosign/v3/cmd/cosign|$cosign_dir"
  "nft|-|nft|$nft_dir"
  "pause-image.tar|-|pause|$pause_dir"
  "agent-sandbox-controller|$agent_sandbox_module|sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller|$agent_sandbox_dir"
  "agent-sandbox-controller-image.tar|-|agent_sandbox_image|$agent_sandbox_dir"
  "agent-sandbox-e2e.test|$agent_sandbox_module|sigs.k8s.io/agent-sandbox/test/e2e|$agent_sandbox_dir"
  "agent-sandbox-e2e-extensions.test|$agent_sandbox_module|sigs.k8s.io/agent-sandbox/test/e2e/extensions|$agent_sandbox_dir"
  "busybox-image.tar|-|busybox|$busybox_dir"
  "runsc|gvisor|gvisor.dev/gvisor/runsc|$gvisor_dir"
  "containerd-shim-runsc-v1|gvisor|gvisor.dev/gvisor/shim|$gvisor_dir"
)

present() { [[ -f "$1" && ( -x "$1" || $1 == *.tar ) ]]; }

wanted=()
for t in "${targets[@]}"; do
  [[ " ${BINARIES[*]} " == *" ${t%%|*} "* ]] && wanted+=("$t")
done
targets=("${wanted[@]}")

todo=0
for t in "${targets[@]}"; do
  IFS='|' read -r name _ _ out <<<"$t"
  present "$out/$name" || todo=$((todo + 1))
done

if ((todo)); then
  # Fall back to the standard tarball install location if go is not on PATH.
  if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
    PATH=$PATH:/usr/local/go/bin
  fi
  command -v go >/dev/null 2>&1 || die "go not found in PATH (need Go >= 1.26 to build $todo missing binaries; or set KUBEPLUS_ISOLATION_ASSETS)"
  # Serialise concurrent invocations on the same cache (if flock is available).
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$cache/.build.lock"
    if ! flock -n 9; then
      log "[build] another build-components.sh holds $cache/.build.lock; waiting…"
      flock 9
    fi
  fi
fi

# The ldflags mirror kubernetes' hack/lib/version.sh, helm's Makefile and etcd's
# build script. buildDate is the release tag's commit time (from the module
# proxy metadata) so builds are reproducible; SOURCE_DATE_EPOCH overrides it.
# The directory of a module named in `targets` (crane's is deploy/image/crane, shared with the images).
module_dir() { # <module dir>
  if [[ $1 == crane ]]; then printf '%s\n' "$crane_module"; else printf '%s\n' "$components/$1"; fi
}
module_time() { # <module dir> <module path>
  (cd "$(module_dir "$1")" && GOWORK=off go list -mod=readonly -m \
    -f '{{if .Time}}{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' "$2" 2>/dev/null) || true
}
build_date() { # <module dir> <module path>
  local d=""
  if [[ -n "${SOURCE_DATE_EPOCH:-}" ]]; then
    d=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
  else
    d=$(module_time "$1" "$2")
  fi
  [[ -n "$d" ]] || d=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  printf '%s\n' "$d"
}

ldflags_for() { # <module dir>
  local x=() p
  case $1 in
    k8s | k8s-1.*)
      local date v
      date=$(build_date "$1" k8s.io/kubernetes)
      v=$(gomod_version "$components/$1/go.mod" k8s.io/kubernetes)
      [[ $v =~ ^v([0-9]+)\.([0-9]+)\. ]] || die "unexpected k8s.io/kubernetes version $v in $1/go.mod"
      for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        x+=("-X $p.gitVersion=$v"
            "-X $p.gitMajor=${BASH_REMATCH[1]}"
            "-X $p.gitMinor=${BASH_REMATCH[2]}"
            "-X $p.gitTreeState=clean"
            "-X $p.buildDate=$date")
      done
      ;;
    etcd)
      # go.etcd.io/etcd/api/v3/version.Version is already set in source; only
      # GitSHA is meant to be injected and the module zip carries no commit id.
      ;;
    helm)
      local cg
      cg=$(gomod_version "$components/helm/go.mod" k8s.io/client-go) # v0.<minor>.<patch>
      [[ $cg =~ ^v0\.([0-9]+)\. ]] || die "unexpected k8s.io/client-go $cg in helm/go.mod"
      p=helm.sh/helm/v3
      x+=("-X $p/internal/version.version=$helm_version"
          "-X $p/internal/version.gitTreeState=clean"
          "-X $p/pkg/lint/rules.k8sVersionMajor=1"
          "-X $p/pkg/lint/rules.k8sVersionMinor=${BASH_REMATCH[1]}"
          "-X $p/pkg/chartutil.k8sVersionMajor=1"
          "-X $p/pkg/chartutil.k8sVersionMinor=${BASH_REMATCH[1]}")
      ;;
    containerd)
      x+=("-X github.com/containerd/containerd/v2/version.Version=$containerd_version"
          "-X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2")
      ;;
    runc)
      # runc's Makefile: -X main.version; static, as its release binaries are.
      x+=("-X main.version=${runc_version#v}" "-extldflags=-static")
      ;;
    cni)
      x+=("-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$cni_version")
      ;;
    agent-sandbox | agent-sandbox-*)
      x+=("-X sigs.k8s.io/agent-sandbox/internal/version.gitVersion=$agent_sandbox_version")
      ;;
    cosign)
      # cosign's Makefile: its version through sigs.k8s.io/release-utils (`cosign version`).
      x+=("-X sigs.k8s.io/release-utils/version.gitVersion=$cosign_version"
          "-X sigs.k8s.io/release-utils/version.gitTreeState=clean")
      ;;
    gvisor)
      # runsc --version says VERSION_MISSING unless set (gVisor's own release builds set it).
      x+=("-X gvisor.dev/gvisor/runsc/version.version=$gvisor_version")
      ;;
  esac
  printf '%s' "-s -w${x[*]:+ ${x[*]}}"
}

# libseccomp's headers and static library for runc's cgo build: Debian's packages, unpacked into
# the cache (nothing installed on the machine).
seccomp_root=$cache/libseccomp-debian12
libseccomp_sysroot() {
  [[ -f $seccomp_root/usr/lib/x86_64-linux-gnu/libseccomp.a ]] && return
  log "[build] libseccomp for runc: Debian packages libseccomp-dev libseccomp2 (unpacked under $seccomp_root)"
  local debs
  debs=$(mktemp -d "${TMPDIR:-/tmp}/kpi-seccomp-XXXXXX")
  "$script_dir/../../scripts/debian-download.sh" "$debs" libseccomp-dev libseccomp2 || die "fetching libseccomp failed"
  rm -rf "$seccomp_root.tmp.$$"
  for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$seccomp_root.tmp.$$"; done
  rm -rf "$debs" "$seccomp_root"
  mv "$seccomp_root.tmp.$$" "$seccomp_root"
}

# nft for kube-proxy's nftables mode: Debian 12's nftables and the libraries it links, unpacked
# under <out>/root; <out>/nft is a wrapper that runs it with those libraries.
assemble_nft() { # <tmp file> <out dir>
  local debs root=$2/root
  debs=$(mktemp -d "${TMPDIR:-/tmp}/kpi-nft-XXXXXX")
  "$script_dir/../../scripts/debian-download.sh" "$debs" nftables libnftables1 libnftnl11 libmnl0 libjansson4 \
    libedit2 libbsd0 libmd0 libxtables12 libgmp10 || die "fetching nftables failed"
  rm -rf "$root"
  for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$root"; done
  rm -rf "$debs" "$root/usr/share"
  printf '#!/bin/sh\n# nft from Debian packages unpacked here (build-components.sh), with their libraries.\nLD_LIBRARY_PATH=%s exec %s "$@"\n' \
    "$root/usr/lib/x86_64-linux-gnu:$root/lib/x86_64-linux-gnu" "$root/usr/sbin/nft" >"$1"
  chmod 0755 "$1"
  "$1" --version >/dev/null || die "the unpacked nft does not run: $("$1" --version 2>&1)"
}

# An image archive from one layer, with crane. `crane mutate` (entrypoint, user, and any further
# mutate arguments, e.g. --env) works against a registry: one is served on loopback for this build only.
crane_image() { # <work dir> <layer.tar> <name> <entrypoint> <user> <out.tar> [crane mutate arguments...]
  "$crane_dir/crane" registry serve --address 127.0.0.1:0 >"$1/registry.log" 2>&1 &
  local registry=$! port=
  for _ in $(seq 1 100); do
    port=$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$1/registry.log")
    [[ -n $port ]] && break
    sleep 0.1
  done
  [[ -n $port ]] || { kill "$registry"; die "crane registry did not start: $(cat "$1/registry.log")"; }
  local ref=127.0.0.1:$port/image:1
  "$crane_dir/crane" append --oci-empty-base -f "$2" -t "$ref" >/dev/null &&
    "$crane_dir/crane" mutate "$ref" --entrypoint "$4" --user "$5" "${@:7}" --set-platform linux/amd64 -t "$3" -o "$6" >/dev/null ||
    { kill "$registry"; die "crane ($3) failed"; }
  kill "$registry"
  wait "$registry" 2>/dev/null || true
}

# The upstream Agent Sandbox controller as an image (its manifests name a ko:// placeholder the
# deployment replaces): the static binary, and a /tmp it may write its webhook certificates to.
assemble_agent_sandbox_image() { # <tmp file> <out dir>
  local work
  work=$(mktemp -d "${TMPDIR:-/tmp}/kpi-asc-XXXXXX")
  mkdir -p "$work/root/tmp"
  chmod 1777 "$work/root/tmp"
  install -m 0755 "$2/agent-sandbox-controller" "$work/root/agent-sandbox-controller"
  tar --mtime=@0 --numeric-owner --owner=0 --group=0 -C "$work/root" -cf "$work/layer.tar" agent-sandbox-controller tmp
  crane_image "$work" "$work/layer.tar" "kubeplus-isolation.local/agent-sandbox-controller:$agent_sandbox_version" \
    /agent-sandbox-controller 65532:65532 "$work/img.tar"
  mv "$work/img.tar" "$1"
  rm -rf "$work"
}

# gVisor's containerd shim, unmodified, cannot start on a node whose root lacks CAP_SYS_RESOURCE
# (this machine kind): its `start` step writes a hard-coded -999 (const oomScoreMax,
# pkg/shim/v1/manager.go) to the new shim daemon's /proc/<pid>/oom_score_adj and fails on the
# error. It does not copy containerd's score (containerd's own runc shim does), so no score
# containerd is started with helps: the kernel refuses any value below the oom_score_adj_min a
# process inherits (0 here) without CAP_SYS_RESOURCE, and containerd's sys.SetOOMScore forgives
# that refusal only for a non-root caller or inside a user namespace. The shim is therefore built
# from a vendored copy of the pinned module in a temporary directory (never in the repository)
# whose manager.go has that one condition widened to forgive a permission refusal: the daemon
# then keeps the score it inherited, as runc does under containerd's restrict_oom_score_adj. The
# build fails if the line is not there exactly once (a new pin must be reviewed).
vendor_shim() { # <work dir>: vendors the gvisor component module into it, patched
  cp "$components/gvisor/go.mod" "$components/gvisor/go.sum" "$1/"
  (cd "$1" && GOWORK=off go mod vendor) >&2 || die "go mod vendor of the gvisor module failed"
  local src=$1/vendor/gvisor.dev/gvisor/pkg/shim/v1/manager.go
  local want='if err := sys.SetOOMScore(cmd.Process.Pid, oomScoreMax); err != nil {'
  [[ $(grep -cF "$want" "$src") == 1 ]] ||
    die "gVisor's shim no longer holds exactly one '$want': review its oom_score_adj handling before building"
  sed -i 's/if err := sys.SetOOMScore(cmd.Process.Pid, oomScoreMax); err != nil {/if err := sys.SetOOMScore(cmd.Process.Pid, oomScoreMax); err != nil \&\& !os.IsPermission(err) {/' "$src"
  grep -qF '&& !os.IsPermission(err) {' "$src" || die "patching $src failed"
}

# The Pod sandbox ("pause") image: a static C program that sleeps until SIGINT/SIGTERM and reaps
# orphans, as upstream's pause does; one layer, made an image archive with crane.
assemble_pause() { # <tmp file> <out dir>
  local work
  work=$(mktemp -d "${TMPDIR:-/tmp}/kpi-pause-XXXXXX")
  cat >"$work/pause.c" <<'C'
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static void stop(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }
int main(void) {
  struct sigaction a = {0}, b = {0};
  a.sa_handler = stop;
  sigaction(SIGINT, &a, NULL);
  sigaction(SIGTERM, &a, NULL);
  b.sa_handler = reap;
  b.sa_flags = SA_NOCLDSTOP;
  sigaction(SIGCHLD, &b, NULL);
  for (;;) pause();
}
C
  mkdir -p "$work/root"
  gcc -static -Os -o "$work/root/pause" "$work/pause.c" || die "compiling pause failed (gcc with a static libc)"
  strip "$work/root/pause"
  tar --mtime=@0 --numeric-owner --owner=0 --group=0 -C "$work/root" -cf "$work/layer.tar" pause
  crane_image "$work" "$work/layer.tar" kubeplus-isolation.local/pause:1 /pause 65535:65535 "$work/img.tar"
  mv "$work/img.tar" "$1"
  rm -rf "$work"
}

# A stand-in for docker.io/library/busybox:1.36, which some of upstream Agent Sandbox's e2e tests run
# (`sh -c`, `sleep`, preStop hooks) and which no registry serves here: Debian 12's busybox-static
# (BusyBox 1.35.0, NOT 1.36: its Debian version is written to busybox-version.txt beside the
# archive), the static binary as /bin/busybox with a symlink per applet in /bin (`busybox --list`),
# a /tmp, PATH set, root (as the real image), `sh` as entrypoint. One layer, made an image archive
# with crane, named kubeplus-isolation.local/busybox:1.35.0-debian12; the upstream-suite runner
# tags it busybox:1.36 on the node (e2e/README.md "Upstream's own suite").
assemble_busybox() { # <tmp file> <out dir>
  local work deb version
  [[ -x $crane_dir/crane ]] || die "crane is not built yet: run e2e/scripts/build-components.sh node first"
  work=$(mktemp -d "${TMPDIR:-/tmp}/kpi-busybox-XXXXXX")
  "$script_dir/../../scripts/debian-download.sh" "$work/debs" busybox-static || die "fetching busybox-static failed"
  deb=$(ls "$work/debs"/busybox-static_*.deb)
  version=$(dpkg-deb -f "$deb" Version)
  dpkg-deb -x "$deb" "$work/unpacked"
  mkdir -p "$work/root/bin" "$work/root/tmp"
  chmod 1777 "$work/root/tmp"
  install -m 0755 "$work/unpacked/bin/busybox" "$work/root/bin/busybox"
  local applet
  for applet in $("$work/root/bin/busybox" --list); do
    [[ $applet == busybox ]] || ln -s busybox "$work/root/bin/$applet"
  done
  [[ -L $work/root/bin/sh && -L $work/root/bin/sleep ]] || die "busybox-static $version lacks sh or sleep"
  [[ $("$work/root/bin/busybox" | head -1) == "BusyBox v1.35.0 "* ]] ||
    die "busybox-static is no longer 1.35.0 ($version): review the comment above and the image name"
  tar --mtime=@0 --numeric-owner --owner=0 --group=0 -C "$work/root" -cf "$work/layer.tar" bin tmp
  crane_image "$work" "$work/layer.tar" kubeplus-isolation.local/busybox:1.35.0-debian12 /bin/sh 0:0 "$work/img.tar" \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  printf 'busybox-static %s (Debian 12): BusyBox v1.35.0\n' "$version" >"$2/busybox-version.txt"
  mv "$work/img.tar" "$1"
  rm -rf "$work"
}

if ((todo)); then
  log "[build] $todo of ${#targets[@]} binaries missing under $cache"
  log "[build] versions: kubernetes $k8s_version, etcd $etcd_version, helm $helm_version ($(go version | awk '{print $3}'))"
  log "[build] estimate, cold (empty Go module + build caches), 2 cores: the control plane 10-20 min (measured"
  log "[build]   10m22s, apiserver ~6 min of it; ~1.3 GiB GOMODCACHE, ~3.7 GiB GOCACHE, ~400 MiB of binaries), the node"
  log "[build]   ~6 min (measured 5m49s, kubelet ~4 min of it; ~1.2 GiB GOMODCACHE, ~2.5 GiB GOCACHE, ~270 MiB);"
  log "[build]   with a warm Go build cache it is seconds per binary, and once cached well under a second"
fi

total_start=$SECONDS
i=0
for t in "${targets[@]}"; do
  i=$((i + 1))
  IFS='|' read -r name mod pkg out <<<"$t"
  if present "$out/$name"; then
    log "[build] $name ($i/${#targets[@]}) already built: $out/$name"
    continue
  fi
  mkdir -p "$out"
  # Remove temp files left by builds that were killed (their pid is gone).
  for stale in "$out/.$name.tmp."*; do
    [[ -e "$stale" ]] || continue
    kill -0 "${stale##*.}" 2>/dev/null || rm -f "$stale"
  done
  # Build to a temp name in the same directory, then rename: an interrupted
  # build never leaves a half-written binary under the final name.
  tmp="$out/.$name.tmp.$$"
  start=$SECONDS
  if [[ $mod == - ]]; then
    log "[build] $name ($i/${#targets[@]}) … assembling $pkg"
    ("assemble_$pkg" "$tmp" "$out") >&2 &
  else
    log "[build] $name ($i/${#targets[@]}) … go build $pkg"
    flags=$(ldflags_for "$mod")
    # containerd: no btrfs snapshotter (it needs cgo and btrfs headers); runc: cgo, static, with
    # seccomp (libseccomp from Debian packages) so RuntimeDefault seccomp profiles work.
    genv=(CGO_ENABLED=0) tags=()
    build_dir=$(module_dir "$mod") mod_flag=-mod=readonly
    if [[ $name == containerd-shim-runsc-v1 ]]; then
      vendor_dir=$(mktemp -d "${TMPDIR:-/tmp}/kpi-shim-XXXXXX")
      vendor_shim "$vendor_dir"
      build_dir=$vendor_dir mod_flag=-mod=vendor
    fi
    case $mod in
      containerd) tags=(-tags no_btrfs) ;;
      # The module proxy serves it at exact versions only and the checksum database has no entry:
      # go.sum pins its hash (-mod=readonly turns a mismatch into an error).
      agent-sandbox | agent-sandbox-*) genv+=(GONOSUMDB=sigs.k8s.io/agent-sandbox) ;;
      runc)
        libseccomp_sysroot
        genv=(CGO_ENABLED=1 "PKG_CONFIG_PATH=$seccomp_root/usr/lib/x86_64-linux-gnu/pkgconfig"
          "PKG_CONFIG_SYSROOT_DIR=$seccomp_root")
        tags=(-tags "seccomp netgo osusergo")
        ;;
    esac
    (
      cd "$build_dir"
      # Default -mod=readonly with the committed go.sum: reproducible, and fails
      # loudly instead of silently editing go.mod. GOWORK=off so a go.work
      # elsewhere in the monorepo can never change the pinned versions.
      # A *.test target is a package's test binary (upstream's e2e suite): `go test -c`.
      gocmd=(build)
      [[ $name == *.test ]] && gocmd=(test -c)
      exec env GOWORK=off "${genv[@]}" go "${gocmd[@]}" "$mod_flag" -trimpath "${tags[@]}" \
        -ldflags "$flags" -o "$tmp" "$pkg"
    ) >&2 &
  fi
  build_pid=$!
  heartbeat "$build_pid" "$start" "$name ($i/${#targets[@]}): $pkg" >/dev/null &
  heartbeat_pid=$!
  # If we are interrupted, stop go build first (it writes -o only at the very
  # end), then drop whatever it may have written.
  trap 'kill "$heartbeat_pid" 2>/dev/null || true; kill -TERM "$build_pid" 2>/dev/null || true; wait "$build_pid" 2>/dev/null || true; rm -f "$tmp"; rm -rf "${vendor_dir:-}"; exit 130' INT TERM HUP
  trap 'kill "$heartbeat_pid" 2>/dev/null || true; rm -f "$tmp"; rm -rf "${vendor_dir:-}"' EXIT
  build_status=0
  wait "$build_pid" || build_status=$?
  kill "$heartbeat_pid" 2>/dev/null || true
  wait "$heartbeat_pid" 2>/dev/null || true
  ((build_status == 0)) || die "building $name ($pkg) failed"
  mv -f "$tmp" "$out/$name"
  if [[ -n ${vendor_dir:-} ]]; then rm -rf "$vendor_dir"; vendor_dir=; fi
  trap - INT TERM HUP EXIT
  log "[build] $name ($i/${#targets[@]}) done in $((SECONDS - start))s -> $out/$name"
done

# Flat directory of symlinks (KUBEBUILDER_ASSETS-style).
mkdir -p "$bin_dir"
for t in "${targets[@]}"; do
  IFS='|' read -r name _ _ out <<<"$t"
  present "$out/$name" || die "$out/$name missing after build"
  ln -sfn "$out/$name" "$bin_dir/$name"
done

log "[build] all ${#targets[@]} binaries ready in $((SECONDS - total_start))s: $bin_dir"
printf '%s\n' "$bin_dir"
