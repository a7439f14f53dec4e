#!/usr/bin/env bash
# Prints the path of qemu-aarch64-static, the user-mode emulator that runs the arm64 images' node
# binary on an amd64 machine (deploy/test/image-archive.test.ts). From Debian's qemu-user-static
# package, fetched by scripts/debian-download.sh into a private directory and unpacked into the
# cache, once per machine: nothing is installed, no binfmt_misc handler is registered (the binary
# is called directly, the image's root given with -L). On an arm64 machine nothing is needed; the
# script then prints nothing and exits 0.
#
# Usage: deploy/image/qemu-aarch64.sh        Environment: KUBEPLUS_ISOLATION_CACHE (default
# ~/.cache/kubeplus-isolation). Progress goes to stderr; the last stdout line is the binary's path.
set -euo pipefail
die() { printf 'qemu-aarch64: error: %s\n' "$*" >&2; exit 1; }

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
[[ $(uname -m) == aarch64 ]] && exit 0
[[ $(uname -m) == x86_64 ]] || die "no qemu-user-static for $(uname -m) here (amd64 or arm64 machines)"
cache=${KUBEPLUS_ISOLATION_CACHE:-$HOME/.cache/kubeplus-isolation}
dir=$cache/qemu-user-static-debian12
bin=$dir/qemu-aarch64-static
if [[ ! -x $bin ]]; then
  printf '[qemu] fetching Debian qemu-user-static (once, ~60 MB) for %s\n' "$bin" >&2
  work=$(mktemp -d "${TMPDIR:-/tmp}/kpi-qemu-XXXXXX")
  trap 'rm -rf "$work"' EXIT
  DEBIAN_ARCH=amd64 "$repo/scripts/debian-download.sh" "$work/debs" qemu-user-static || die "fetching qemu-user-static failed"
  dpkg-deb --fsys-tarfile "$work"/debs/qemu-user-static_*.deb | tar -x -C "$work" ./usr/bin/qemu-aarch64-static
  mkdir -p "$dir"
  install -m 0755 "$work/usr/bin/qemu-aarch64-static" "$bin.tmp.$$"
  mv -f "$bin.tmp.$$" "$bin"
fi
printf '%s\n' "$bin"
