#!/usr/bin/env bash
# Builds latte-kernel-tests (the kernel tests alone, a LATTE_KERNELS_ONLY build in KERNELS_BUILD,
# default BUILD_DIR-ko, configured when missing) and prints its path: the device bundles
# (tools/bench_bundle.sh, tools/device_attn_ab.sh) carry it to run the kernels on levels this
# machine lacks.
#   bash tools/kernel_tests_bin.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build}
ko=${KERNELS_BUILD:-$build-ko}
[ -f "$ko/build.ninja" ] || [ -f "$ko/Makefile" ] ||
  cmake -S . -B "$ko" -DCMAKE_BUILD_TYPE=Release -DLATTE_KERNELS_ONLY=ON >/dev/null
cmake --build "$ko" --target latte-kernel-tests >/dev/null
# the binary's absolute path, whether KERNELS_BUILD or BUILD_DIR was given relative or absolute
echo "$(cd "$ko" && pwd)/latte-kernel-tests"
