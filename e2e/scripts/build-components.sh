#!/usr/bin/env bash
# Builds the real control-plane binaries the e2e suite runs against:
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, helm
# from the pinned Go modules in e2e/components/{k8s,etcd,helm}, into a cache
# directory outside the repo (built once per machine, keyed by version).
#
# Usage:
#   ASSETS=$(e2e/scripts/build-components.sh | tail -1)        # all six binaries
#   ASSETS=$(e2e/scripts/build-components.sh helm | tail -1)   # only those named
#
# Progress goes to stderr; the LAST line of stdout is the absolute path of a
# flat directory containing all six binaries.
#
# Environment:
#   KUBEPLUS_ISOLATION_CACHE   cache root (default: $HOME/.cache/kubeplus-isolation)
#   KUBEPLUS_ISOLATION_ASSETS  flat directory with prebuilt etcd, kube-apiserver,
#                              kube-controller-manager, kube-scheduler, kubectl
#                              and helm (KUBEBUILDER_ASSETS-style). When set,
#                              nothing is built and that directory is printed.
#
# Versions come from the go.mod files (never duplicated here). Verified to
# build with local go1.26.8: k8s.io/kubernetes v1.36.3 (staging v0.36.3),
# go.etcd.io/etcd/server/v3 v3.6.16, helm.sh/helm/v3 v3.22.0.
set -euo pipefail

log() { printf '%s\n' "$*" >&2; }
die() { printf 'build-components: error: %s\n' "$*" >&2; exit 1; }

BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl helm)
# Binaries named on the command line restrict the work to them (e.g. `helm` for the chart tests).
if (($#)); then
  for b in "$@"; do
    [[ " ${BINARIES[*]} " == *" $b "* ]] || die "unknown binary '$b' (one of: ${BINARIES[*]})"
  done
  BINARIES=("$@")
fi

# --- Prebuilt assets: build nothing -----------------------------------------
if [[ -n "${KUBEPLUS_ISOLATION_ASSETS:-}" ]]; then
  assets=$KUBEPLUS_ISOLATION_ASSETS
  [[ -d "$assets" ]] || die "KUBEPLUS_ISOLATION_ASSETS=$assets is not a directory"
  assets=$(cd "$assets" && pwd -P)
  missing=()
  for b in "${BINARIES[@]}"; do
    [[ -f "$assets/$b" && -x "$assets/$b" ]] || missing+=("$b")
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

k8s_version=$(gomod_version "$components/k8s/go.mod" k8s.io/kubernetes)
etcd_version=$(gomod_version "$components/etcd/go.mod" go.etcd.io/etcd/server/v3)
helm_version=$(gomod_version "$components/helm/go.mod" helm.sh/helm/v3)

[[ $k8s_version =~ ^v([0-9]+)\.([0-9]+)\.([0-9]+)$ ]] || die "unexpected k8s.io/kubernetes version $k8s_version"
k8s_major=${BASH_REMATCH[1]} k8s_minor=${BASH_REMATCH[2]} k8s_patch=${BASH_REMATCH[3]}
# The staging modules are tagged v0.<minor>.<patch> for kubernetes v1.<minor>.<patch>.
staging_want="v0.${k8s_minor}.${k8s_patch}"
for m in k8s.io/api k8s.io/apimachinery k8s.io/client-go k8s.io/component-base k8s.io/apiserver; do
  got=$(gomod_replace_version "$components/k8s/go.mod" "$m")
  [[ "$got" == "$staging_want" ]] ||
    die "$components/k8s/go.mod replaces $m with '${got:-nothing}', expected $staging_want to match k8s.io/kubernetes $k8s_version"
done

cache=${KUBEPLUS_ISOLATION_CACHE:-$HOME/.cache/kubeplus-isolation}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd -P)
k8s_dir=$cache/k8s-$k8s_version
etcd_dir=$cache/etcd-$etcd_version
helm_dir=$cache/helm-$helm_version
bin_dir=$cache/bin-$k8s_version

# name|module dir|package|output dir
targets=(
  "kube-apiserver|k8s|k8s.io/kubernetes/cmd/kube-apiserver|$k8s_dir"
  "kube-controller-manager|k8s|k8s.io/kubernetes/cmd/kube-controller-manager|$k8s_dir"
  "kube-scheduler|k8s|k8s.io/kubernetes/cmd/kube-scheduler|$k8s_dir"
  "kubectl|k8s|k8s.io/kubernetes/cmd/kubectl|$k8s_dir"
  "etcd|etcd|go.etcd.io/etcd/server/v3|$etcd_dir"
  "helm|helm|helm.sh/helm/v3/cmd/helm|$helm_dir"
)

present() { [[ -f "$1" && -x "$1" ]]; }

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
module_time() { # <module dir> <module path>
  (cd "$components/$1" && GOWORK=off go list -mod=readonly -m \
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
    k8s)
      local date
      date=$(build_date k8s k8s.io/kubernetes)
      for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        x+=("-X $p.gitVersion=$k8s_version"
            "-X $p.gitMajor=$k8s_major"
            "-X $p.gitMinor=$k8s_minor"
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
  esac
  printf '%s' "-s -w${x[*]:+ ${x[*]}}"
}

if ((todo)); then
  log "[build] $todo of ${#targets[@]} binaries missing under $cache"
  log "[build] versions: kubernetes $k8s_version, etcd $etcd_version, helm $helm_version ($(go version | awk '{print $3}'))"
  log "[build] estimate: a cold build (empty Go module + build caches) takes 10-20 min on 2 cores"
  log "[build]   (measured: 10m22s on 2 cores, apiserver ~6 min of it; downloads ~1.3 GiB into GOMODCACHE,"
  log "[build]   ~3.7 GiB into GOCACHE, ~400 MiB of binaries); with a warm Go build cache it is seconds per binary,"
  log "[build]   and once the binaries are cached it takes well under a second"
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
  log "[build] $name ($i/${#targets[@]}) … go build $pkg"
  flags=$(ldflags_for "$mod")
  start=$SECONDS
  (
    cd "$components/$mod"
    # Default -mod=readonly with the committed go.sum: reproducible, and fails
    # loudly instead of silently editing go.mod. GOWORK=off so a go.work
    # elsewhere in the monorepo can never change the pinned versions.
    exec env GOWORK=off CGO_ENABLED=0 go build -mod=readonly -trimpath \
      -ldflags "$flags" -o "$tmp" "$pkg"
  ) >&2 &
  build_pid=$!
  # If we are interrupted, stop go build first (it writes -o only at the very
  # end), then drop whatever it may have written.
  trap 'kill -TERM "$build_pid" 2>/dev/null || true; wait "$build_pid" 2>/dev/null || true; rm -f "$tmp"; exit 130' INT TERM HUP
  trap 'rm -f "$tmp"' EXIT
  wait "$build_pid" || die "building $name ($pkg) failed"
  mv -f "$tmp" "$out/$name"
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
