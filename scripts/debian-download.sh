#!/usr/bin/env bash
# Downloads Debian packages (the .deb files, nothing installed) into <dest-dir>, with apt's lists and
# cache in a private temp directory: the machine's apt state is neither read nor changed, and no
# root-owned lock is taken. Used where the build needs files from Debian packages without
# installing them: the images' C runtime (deploy/image/build-images.sh), libseccomp for runc and
# nftables for kube-proxy (e2e/scripts/build-components.sh).
#
# Usage: scripts/debian-download.sh <dest-dir> <package>...
# Environment: DEBIAN_ARCH  the packages' architecture (default the machine's; e.g. arm64 for the
#              arm64 images): apt's lists of that architecture only, in the same private directory.
set -euo pipefail
die() { printf 'debian-download: error: %s\n' "$*" >&2; exit 1; }
(($# >= 2)) || die "usage: $0 <dest-dir> <package>..."
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
(cd "$dest" && apt-get "${opts[@]}" download "$@" >&2) || die "apt-get download $* failed"
