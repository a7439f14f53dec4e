#!/usr/bin/env bash
# `make package`: the artifacts a user installs, in dist/:
#   dist/kubeplus-isolation-<version>.tgz   the umbrella chart (`helm package`) of the one version
#                                           (the VERSION file: chart version, appVersion, image
#                                           tags), its image repositories from IMAGE_REGISTRY
#   dist/images/{webhook,operator}.tar      the images (deploy/image/build-images.sh: no
#                                           container engine needed), tagged alike: per service
#                                           one OCI image index (linux/amd64, linux/arm64) as an
#                                           OCI layout archive
#   dist/images/<service>.linux-<arch>.spdx.json  the SBOM of each image (SPDX 2.3)
#   dist/images/SHA256SUMS                  the sha256 of each archive and SBOM (`sha256sum -c`),
#                                           and, as comments, each index's and image's digest
# Push an index with `mkdir w && tar -xf dist/images/webhook.tar -C w && crane push w
# $IMAGE_REGISTRY/kubeplus-isolation-webhook:$IMAGE_TAG` (and the operator's), then
# `helm push dist/kubeplus-isolation-<version>.tgz oci://<registry>/charts`.
#
# The version is VERSION's, which `make release VERSION=x.y.z` stamps into the charts and the
# binaries: the package, the chart inside it, its default image tag and the images' --version are
# one version. IMAGE_TAG (or VERSION in the environment, as `make package VERSION=…` passes it) is
# accepted only when it names that version; another one is refused, saying to release it first
# (a chart 0.2.0 whose images are 0.3.0 would be a second, different "0.2.0").
# Environment: IMAGE_REGISTRY (default: the chart's, deploy/kubeplus-isolation/charts/*/values.yaml),
# IMAGE_TAG / VERSION (must equal the VERSION file), HELM (default: the pinned helm from
# e2e/scripts/build-components.sh), PACKAGE_OUT_DIR (default <repo>/dist), PACKAGE_CHART_ONLY=1
# to skip the images.
# The last stdout line is the chart archive's path.
set -euo pipefail

log() { printf '[package] %s\n' "$*" >&2; }
die() { printf 'package: error: %s\n' "$*" >&2; exit 1; }

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
chart=$repo/deploy/kubeplus-isolation
registry=${IMAGE_REGISTRY:-$(sed -n 's#^  repository: \(.*\)/kubeplus-isolation-webhook$#\1#p' "$chart/charts/webhook/values.yaml")}
version=$(tr -d '[:space:]' <"$repo/VERSION")
for asked in "IMAGE_TAG=${IMAGE_TAG:-}" "VERSION=${VERSION:-}"; do
  [[ -z ${asked#*=} || ${asked#*=} == "$version" ]] ||
    die "$asked is not the version of this tree ($version, the VERSION file): the chart, its appVersion, the image tags and the binaries' --version are one version; stamp it first with \`make release VERSION=${asked#*=}\`"
done
chart_version=$(sed -n 's/^version: *//p' "$chart/Chart.yaml")
[[ $chart_version == "$version" ]] || die "deploy/kubeplus-isolation/Chart.yaml says version $chart_version, VERSION says $version: run \`make release VERSION=$version\`"
tag=$version
out=${PACKAGE_OUT_DIR:-$repo/dist}
helm=${HELM:-$("$repo/e2e/scripts/build-components.sh" helm | tail -1)/helm}
[[ -x $helm ]] || die "helm not found at $helm"
[[ $registry =~ ^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._/-]+)?$ ]] || die "IMAGE_REGISTRY=$registry is not an image name prefix"
[[ $tag =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]] || die "IMAGE_TAG=$tag is not an image tag"

# The OpenReports CRDs the chart installs with operator.reports.installCrds, from their pinned Go
# module (deploy/chart-crds.sh): in the archive, never in git.
"$repo/deploy/chart-crds.sh" >/dev/null
work=$(mktemp -d "${TMPDIR:-/tmp}/kpi-package-XXXXXX")
trap 'rm -rf "$work"' EXIT
cp -R "$chart" "$work/kubeplus-isolation"
# The image references users install: repository per subchart (the tag is appVersion, VERSION).
for service in webhook operator; do
  values=$work/kubeplus-isolation/charts/$service/values.yaml
  grep -q "^  repository: .*/kubeplus-isolation-$service$" "$values" || die "no image.repository line in charts/$service/values.yaml"
  sed -i "s#^  repository: .*/kubeplus-isolation-$service\$#  repository: $registry/kubeplus-isolation-$service#" "$values"
done
mkdir -p "$out"
"$helm" lint "$work/kubeplus-isolation" >&2
archive=$("$helm" package "$work/kubeplus-isolation" --destination "$out" | sed -n 's/^Successfully packaged chart and saved it to: //p')
[[ -f $archive ]] || die "helm package wrote no archive"
[[ $(basename "$archive") == "kubeplus-isolation-$version.tgz" ]] || die "helm package wrote $archive, not kubeplus-isolation-$version.tgz"
log "chart: $archive (images $registry/kubeplus-isolation-{webhook,operator}:$tag)"
if [[ ${PACKAGE_CHART_ONLY:-} != 1 ]]; then
  IMAGE_REGISTRY=$registry IMAGE_TAG=$tag IMAGE_OUT_DIR=$out/images "$repo/deploy/image/build-images.sh" webhook operator >/dev/null
  # The records a user verifies the images by: checksums of the archives and SBOMs, and the
  # digests a registry reports for them once pushed (`crane digest`, `crane digest --platform`).
  (
    cd "$out/images"
    files=()
    for service in webhook operator; do
      [[ -f $service.tar ]] || die "no $service.tar"
      sboms=("$service".linux-*.spdx.json)
      [[ -f ${sboms[0]} ]] || die "no SBOM $service.linux-<arch>.spdx.json next to $service.tar"
      files+=("$service.tar" "${sboms[@]}")
      index=$(tar -xOf "$service.tar" index.json | node -e 'let s="";process.stdin.on("data",(d)=>(s+=d)).on("end",()=>console.log(JSON.parse(s).manifests[0].digest))')
      printf '# %s index %s\n' "$service" "$index"
      tar -xOf "$service.tar" "blobs/${index/://}" | node -e '
        let s = "";
        process.stdin.on("data", (d) => (s += d)).on("end", () => {
          for (const m of JSON.parse(s).manifests)
            console.log(`# ${process.argv[1]} ${m.platform.os}/${m.platform.architecture} ${m.digest}`);
        });' "$service"
    done >SHA256SUMS.tmp
    sha256sum "${files[@]}" >>SHA256SUMS.tmp
    mv -f SHA256SUMS.tmp SHA256SUMS
  )
  log "images: $out/images/{webhook,operator}.tar (OCI image indexes: linux/amd64, linux/arm64)"
  log "SBOMs:  $(cd "$out/images" && ls ./*.spdx.json | sed "s#^\./#$out/images/#" | paste -sd' ')"
  log "sums:   $out/images/SHA256SUMS (sha256sum -c; index and image digests as comments)"
fi
printf '%s\n' "$archive"
