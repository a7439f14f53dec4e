#!/usr/bin/env bash
# Downloads Debian packages (the .deb files, nothing installed) into <dest-dir>, with apt's lists and
# cache in a private temp directory: the machine's apt state is neither read nor changed, and no
# root-owned lock is taken. Used where the build needs files from Debian packages without
# installing them: the images' C runtime (deploy/image/build-images.sh), libseccomp for runc and
# nftables for kube-proxy (e2e/scripts/build-components.sh).
#
# Usage: scripts/debian-download.sh [--resolve-only] <dest-dir> <package>...
# Next to the .deb files it writes apt's own account of where they come from (read by
# deploy/image/apt-source.ts): apt-policy.txt (`apt-cache policy`: every package index and its
# Release's origin, version and codename) and apt-candidates.txt (`apt-cache policy <package>...`:
# the candidate versions, which `apt-get download` fetches, and the indexes offering them).
# --resolve-only writes those two files and downloads nothing (what versions would be fetched).
# Environment: DEBIAN_ARCH  the packages' architecture (default the machine's; e.g. arm64 for the
#              arm64 images): apt's lists of that architecture only, in the same private directory.
set -euo pipefail
die() { printf 'debian-download: error: %s\n' "$*" >&2; exit 1; }
resolve_only=0
[[ ${1:-} == --resolve-only ]] && { resolve_only=1; shift; }
(($# >= 2)) || die "usage: $0 [--resolve-only] <dest-dir> <package>..."
dest=$1
shift
for t in apt-get dpkg-deb; do command -v "$t" >/dev/null 2>&1 || die "$t is needed (a Debian machine)"; done
mkdir -p "$dest"
state=$(mktemp -d "${TMPDIR:-/tmp}/kpi-apt-XXXXXX")
trap 'rm -rf "$state"' EXIT
mkdir -p "$state/lists/partial" "$state/cache/archives/partial"
opts=(-q -o "Dir::State::Lists=$state/lists" -o "Dir::Cache=$state/cache" -o Debug::NoLocking=1
  -o APT::Sandbox::User=root)
if [[ -n ${DEBIAN_ARCH:-} ]]; then
  [[ $DEBIAN_ARCH =~ ^[a-z0-9]+$ ]] || die "DEBIAN_ARCH=$DEBIAN_ARCH is not a Debian architecture"
  opts+=(-o "APT::Architecture=$DEBIAN_ARCH" -o "APT::Architectures::=$DEBIAN_ARCH")
fi
apt-get "${opts[@]}" update >&2 || die "apt-get update (private lists under $state) failed"
apt-cache "${opts[@]}" policy >"$dest/apt-policy.txt" || die "apt-cache policy failed"
apt-cache "${opts[@]}" policy "$@" >"$dest/apt-candidates.txt" || die "apt-cache policy $* failed"
((resolve_only)) && exit 0
(cd "$dest" && apt-get "${opts[@]}" download "$@" >&2) || die "apt-get download $* failed"
