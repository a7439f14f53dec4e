#!/usr/bin/env bash
# `make publish REGISTRY=host[:port]/path`: a release on any OCI registry, signed.
#   1. the images `make images` built (dist/images/<service>.tar: one OCI index each, linux/amd64 +
#      linux/arm64) pushed as REGISTRY/kubeplus-isolation-<service>:<tag> (crane push, no
#      container engine);
#   2. the chart packaged with those image references (deploy/package.sh) and pushed as an OCI
#      artifact: REGISTRY/kubeplus-isolation:<chart version> (`helm push`), installable with
#      `helm install <name> oci://REGISTRY/kubeplus-isolation --version <chart version>`;
#   3. cosign signatures on each image index, each platform image and the chart (by digest), and
#      each platform image's SPDX SBOM (dist/images/<service>.linux-<arch>.spdx.json) attached to
#      it as a signed attestation (`cosign attest --type spdxjson`).
# Verifying: README.md "Install from an OCI registry" (`cosign verify`, `cosign verify-attestation`).
#
# Signing: with COSIGN_KEY (a cosign private key file; its password in COSIGN_PASSWORD, as cosign
# reads it) signatures are made with that key and no transparency log is written (nothing leaves
# for Sigstore's public services); without it, keyless: cosign's own flow (an OIDC identity —
# in CI the workload's token — a Fulcio certificate and a Rekor entry), for real releases.
#
# Environment:
#   REGISTRY            where to publish (required), e.g. ghcr.io/acme or 127.0.0.1:5000/kpi
#   IMAGE_TAG           the images' tag (default the chart's appVersion)
#   IMAGES_DIR          the built images and SBOMs (default <repo>/dist/images)
#   PUBLISH_OUT_DIR     the packaged chart and the publish record (default <repo>/dist/publish)
#   REGISTRY_PLAIN_HTTP=1  the registry speaks plain HTTP (a local test registry)
#   COSIGN_KEY, COSIGN_PASSWORD  key-based signing (above)
#   CRANE, HELM, COSIGN  the tools (default: built by e2e/scripts/build-components.sh)
# The last stdout line is the publish record: refs and digests of everything pushed and signed.
set -euo pipefail

log() { printf '[publish] %s\n' "$*" >&2; }
die() { printf 'publish: error: %s\n' "$*" >&2; exit 1; }

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
chart=$repo/deploy/kubeplus-isolation
registry=${REGISTRY:-}
[[ -n $registry ]] || die "set REGISTRY=<host[:port]/path>, e.g. make publish REGISTRY=ghcr.io/acme"
[[ $registry =~ ^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._/-]+)?$ ]] || die "REGISTRY=$registry is not a registry host[:port]/path"
registry=${registry%/}
tag=${IMAGE_TAG:-$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$chart/Chart.yaml")}
images=${IMAGES_DIR:-$repo/dist/images}
out=${PUBLISH_OUT_DIR:-$repo/dist/publish}
components() { env -u KUBEPLUS_ISOLATION_ASSETS "$repo/e2e/scripts/build-components.sh" "$@" | tail -1; }
crane=${CRANE:-$(components crane)/crane}
helm=${HELM:-$(components helm)/helm}
cosign=${COSIGN:-$(components cosign)/cosign}
for t in "$crane" "$helm" "$cosign"; do [[ -x $t ]] || die "$t is missing"; done
for s in webhook operator; do
  [[ -f $images/$s.tar ]] || die "no $images/$s.tar: build the images first (make images)"
done

crane_flags=() helm_flags=() cosign_flags=()
if [[ ${REGISTRY_PLAIN_HTTP:-} == 1 ]]; then
  crane_flags=(--insecure)
  helm_flags=(--plain-http)
  cosign_flags=(--allow-http-registry --allow-insecure-registry)
fi
sign_flags=()
if [[ -n ${COSIGN_KEY:-} ]]; then
  [[ -f $COSIGN_KEY ]] || die "COSIGN_KEY=$COSIGN_KEY is not a file"
  # A key and no transparency log: signatures verifiable with the public key alone, offline.
  sign_flags=(--key "$COSIGN_KEY" --use-signing-config=false --tlog-upload=false)
  log "signing with the key $COSIGN_KEY (no transparency log)"
else
  log "signing keyless (cosign's OIDC flow: Fulcio certificate, Rekor entry)"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/kpi-publish-XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
record=$out/published.txt
: >"$record.tmp"

sign() { # <ref@digest>
  "$cosign" sign --yes "${sign_flags[@]}" "${cosign_flags[@]}" "$1" >&2 || die "cosign sign $1 failed"
}

# ---- images -----------------------------------------------------------------------------------
for service in webhook operator; do
  layout=$work/$service
  mkdir -p "$layout"
  tar -xf "$images/$service.tar" -C "$layout"
  repository=$registry/kubeplus-isolation-$service
  log "$service: crane push -> $repository:$tag"
  "$crane" push "${crane_flags[@]}" "$layout" "$repository:$tag" >&2 || die "pushing $service failed"
  index=$("$crane" digest "${crane_flags[@]}" "$repository:$tag")
  printf 'image %s:%s %s\n' "$repository" "$tag" "$index" >>"$record.tmp"
  sign "$repository@$index"
  # Each platform image: signed, and its SBOM attached as a signed SPDX attestation.
  while read -r arch digest; do
    sbom=$images/$service.linux-$arch.spdx.json
    [[ -f $sbom ]] || die "no SBOM $sbom for $service linux/$arch"
    grep -q "\"checksumValue\": \"${digest#sha256:}\"" "$sbom" ||
      die "$sbom does not describe $service linux/$arch $digest (images rebuilt without their SBOMs?)"
    sign "$repository@$digest"
    log "$service linux/$arch: cosign attest --type spdxjson ($sbom)"
    "$cosign" attest --yes "${sign_flags[@]}" "${cosign_flags[@]}" --type spdxjson --predicate "$sbom" \
      "$repository@$digest" >&2 || die "cosign attest $repository@$digest failed"
    printf 'image %s linux/%s %s sbom %s\n' "$repository" "$arch" "$digest" "$(basename "$sbom")" >>"$record.tmp"
  done < <("$crane" manifest "${crane_flags[@]}" "$repository@$index" | node -e '
    let s = "";
    process.stdin.on("data", (d) => (s += d)).on("end", () => {
      for (const m of JSON.parse(s).manifests) console.log(`${m.platform.architecture} ${m.digest}`);
    });')
done

# ---- chart ------------------------------------------------------------------------------------
archive=$(IMAGE_REGISTRY=$registry IMAGE_TAG=$tag PACKAGE_CHART_ONLY=1 PACKAGE_OUT_DIR=$out HELM=$helm \
  "$repo/deploy/package.sh" | tail -1) || die "packaging the chart failed"
log "chart: helm push $(basename "$archive") -> oci://$registry"
pushed=$("$helm" push "$archive" "oci://$registry" "${helm_flags[@]}" 2>&1) || die "helm push failed: $pushed"
printf '%s\n' "$pushed" >&2
chart_digest=$(sed -n 's/^Digest: *\(sha256:[0-9a-f]\{64\}\)$/\1/p' <<<"$pushed")
# The chart's version as helm packaged it (the archive's Chart.yaml): the release's.
version=$(sed -n 's#^Pushed: .*/kubeplus-isolation:\(.*\)$#\1#p' <<<"$pushed")
[[ -n $chart_digest && -n $version ]] || die "helm push printed no digest or version"
sign "$registry/kubeplus-isolation@$chart_digest"
printf 'chart %s/kubeplus-isolation:%s %s\n' "$registry" "$version" "$chart_digest" >>"$record.tmp"

mv -f "$record.tmp" "$record"
log "published and signed: $(wc -l <"$record") artifacts ($record)"
log "install:  helm install kpi oci://$registry/kubeplus-isolation --version $version"
printf '%s\n' "$record"
