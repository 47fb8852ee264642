#!/usr/bin/env bash
# Packs latte's benchmark and tool binaries with the shared libraries they need (Google Benchmark,
# hwloc and theirs; not glibc) into one folder that runs on another Linux x86-64 machine (glibc at
# least Debian 12's) without installing anything — used for the 16-core sweeps in docs/PERFORMANCE.md:
#   bash tools/bench_bundle.sh [BUILD_DIR] [OUT_DIR]     (defaults: build, BUILD_DIR/bench-bundle)
#   OUT_DIR/run.sh PROGRAM [args...]                     (PROGRAM: latte-bench-pool, latte-gbench, latte-bench, latte-sweep,
#                                                         latte-mkmodel, latte-cli, latte-kernel-tests)
# latte-kernel-tests comes from a LATTE_KERNELS_ONLY build in KERNELS_BUILD (default BUILD_DIR-ko),
# configured and built here when missing, so the other machine can run the kernel tests of levels
# this one lacks (AMX, AVX-512). OUT_DIR.tar.xz is written too: the device run carries at most
# 64 MiB with the tree, and the packed bundle is a quarter of the folder.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build}
out=${2:-$build/bench-bundle}
programs=(latte-bench-pool latte-gbench latte-mkmodel latte-cli latte-bench latte-sweep)
cmake --build "$build" --target "${programs[@]}" >/dev/null
rm -rf "$out"
mkdir -p "$out/lib"
for p in "${programs[@]}"; do
  cp "$build/$p" "$out/" && strip --strip-unneeded "$out/$p"
  bash tools/bundle_libs.sh "$build/$p" "$out/lib"
done
kt=$(bash tools/kernel_tests_bin.sh "$build")
cp "$kt" "$out/" && strip --strip-unneeded "$out/latte-kernel-tests"
# latte-tests too when it is built (the device_evidence.sh hosttests stage runs its kernel-level
# subsets at the levels this machine lacks)
if [ -x "$build/latte-tests" ]; then cp "$build/latte-tests" "$out/" && strip --strip-unneeded "$out/latte-tests"; fi
cat > "$out/run.sh" <<'RUN'
#!/bin/sh
# run.sh PROGRAM [args...]: runs one of the bundled programs with the bundled libraries.
here=$(cd "$(dirname "$0")" && pwd)
prog=$1
shift
LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/$prog" "$@"
RUN
chmod +x "$out/run.sh"
tar -C "$(dirname "$out")" -cJf "$out.tar.xz" "$(basename "$out")"
du -sh "$out" "$out.tar.xz"
