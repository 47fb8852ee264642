#!/usr/bin/env bash
# Installs the Debian 12 packages latte needs to build and test, and only those that are missing.
# Prints nothing when everything is already there.
#
#   bash tools/install-deps.sh              # build + test dependencies, with the aarch64 cross
#                                           # compiler and qemu-user (tools/test.sh runs the NEON
#                                           # kernel tests under qemu-aarch64)
#   bash tools/install-deps.sh --no-cross   # without the aarch64 cross tools
#   (--cross, the former opt-in for the cross tools, is still accepted: they are the default now)
set -euo pipefail

packages=(build-essential cmake ninja-build pkg-config libeigen3-dev libdnnl-dev ocl-icd-opencl-dev libhwloc-dev catch2 libbenchmark-dev
          python3-numpy python3-regex clang libclang-rt-14-dev librsvg2-bin)  # clang + libclang-rt: the fuzz targets (tools/fuzz.sh); librsvg2-bin: latte-sweep's plot test renders the SVG
# ocl-icd-opencl-dev: Debian's dnnl-config.cmake runs find_package(OpenCL) and fails without it,
# yet libdnnl-dev does not depend on it (a fresh Debian 12 machine showed this).
cross=(g++-aarch64-linux-gnu qemu-user)
# On an aarch64 host the NEON kernels build and run natively: no cross tools needed.
[ "$(uname -m)" = aarch64 ] && cross=()

for arg in "$@"; do
  case "$arg" in
    --cross) ;;
    --no-cross) cross=() ;;
    -h|--help)
      sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
      exit 0 ;;
    *) echo "install-deps.sh: error: unknown argument '$arg' (expected --no-cross or --cross)" >&2; exit 2 ;;
  esac
done
packages+=("${cross[@]}")

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "install-deps.sh: error: missing packages (${missing[*]}) and not root, no sudo to install them" >&2
  exit 1
fi

echo "install-deps.sh: installing ${missing[*]}" >&2
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
