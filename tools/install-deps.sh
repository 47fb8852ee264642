#!/usr/bin/env bash
# Installs the Debian 12 packages latte needs to build and test, and only those that are missing.
# Prints nothing when everything is already there.
#
#   bash tools/install-deps.sh           # build + test dependencies
#   bash tools/install-deps.sh --cross   # also the aarch64 cross compiler and qemu-user (NEON work)
set -euo pipefail

packages=(build-essential cmake ninja-build pkg-config libeigen3-dev libdnnl-dev libhwloc-dev catch2 libbenchmark-dev)

for arg in "$@"; do
  case "$arg" in
    --cross) packages+=(g++-aarch64-linux-gnu qemu-user) ;;
    -h|--help)
      sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'
      exit 0 ;;
    *) echo "install-deps.sh: error: unknown argument '$arg' (expected --cross)" >&2; exit 2 ;;
  esac
done

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
