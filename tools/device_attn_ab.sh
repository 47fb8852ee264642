#!/usr/bin/env bash
# Interleaved attention A/B on another x86-64 machine (the lent 16-core device): amx against
# avx512 and the avx512 16-row routing against the general path, in one process per shape
# (latte-attn-ab: variants timed in turns, ratio = median of per-round ratios).
#   here:  bash tools/device_attn_ab.sh pack [BUILD_DIR]   -> BUILD_DIR/ab-bundle (binaries + libs, ~8 MB;
#          with latte-kernel-tests, which the run starts with unless KTESTS=0)
#   there: bash build/ab-bundle/device_attn_ab.sh run       (THREADS="16 2", TYPES="q8_KV q8_0 bf16 f16"
#          by default; AMX_EXTRA="--variant isa=amx,ENV=V ..." adds amx variants to TG 128 heads and
#          PP; prints medians); PHASES=1 first runs latte-amx-phases (the amx int8 kernel's time per
#          phase on real tiles, TG 128 heads @ 8K, 1 thread; PHASES_VARIANTS="- LATTE_AMX_PAIR=0 ..."),
#          PHASES=only runs nothing else
# The device run carries the bundle: run(command='bash build/ab-bundle/device_attn_ab.sh run',
# carry=['build/ab-bundle']).
set -uo pipefail
mode=${1:-run}
if [ "$mode" = pack ]; then
  cd "$(dirname "${BASH_SOURCE[0]}")/.."
  build=${2:-build}
  out=$build/ab-bundle
  cmake --build "$build" --target latte-attn-ab latte-amx-phases >/dev/null
  rm -rf "$out" && mkdir -p "$out/lib"
  for b in latte-attn-ab latte-amx-phases; do
    cp "$build/$b" "$out/" && strip --strip-unneeded "$out/$b"
    bash tools/bundle_libs.sh "$build/$b" "$out/lib"
  done
  # the kernel tests too (tools/kernel_tests_bin.sh): the run checks the kernels on the device's
  # real tiles before it times them
  kt=$(bash tools/kernel_tests_bin.sh "$build")
  cp "$kt" "$out/" && strip --strip-unneeded "$out/latte-kernel-tests"
  bash tools/bundle_libs.sh "$kt" "$out/lib"
  cp "${BASH_SOURCE[0]}" "$out/device_attn_ab.sh"
  du -sh "$out"
  exit 0
fi
d=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export LD_LIBRARY_PATH=$d/lib
ab() { "$d/latte-attn-ab" "$@" 2>&1 | grep median; }
nproc; grep -m1 'model name' /proc/cpuinfo
# KTESTS=0 skips the kernel tests (every level this CPU runs, amx on real tiles; ~30 s on the device):
# a timing of a kernel that fails them means nothing, so a failure is printed before any timing
if [ "${KTESTS:-1}" != 0 ] && [ -x "$d/latte-kernel-tests" ]; then
  if ! kt=$("$d/latte-kernel-tests" 2>&1); then
    echo "KERNEL TESTS FAILED:"; echo "$kt" | grep -B3 -A6 FAILED | head -60
  fi
  echo "$kt" | tail -n 2
fi
if [ -n "${PHASES:-}" ]; then
  # shellcheck disable=SC2086
  "$d/latte-amx-phases" 128 8192 30 ${PHASES_VARIANTS:--}
  [ "$PHASES" = only ] && exit 0
fi
grep -m1 flags /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx512_vnni|avx512_bf16|amx_int8|amx_bf16)$' | tr '\n' ' '; echo
for t in ${THREADS:-16 2}; do
  for type in ${TYPES:-q8_KV q8_0 bf16 f16}; do
    echo "== t=$t TG 128 heads @ 8K $type"
    ab --tg --heads 128 --depth 8192 --rounds 21 --type $type --threads $t \
       --variant isa=avx512,LATTE_ROWS16=0 --variant isa=avx512 --variant isa=amx \
       ${AMX_EXTRA:-}
    echo "== t=$t PP-512 16 heads @ 4K $type"
    ab --pp --heads 16 --depth 4096 --rounds 5 --type $type --threads $t \
       --variant isa=avx512,LATTE_ROWS16=0 --variant isa=avx512 --variant isa=amx \
       ${AMX_EXTRA:-}
    echo "== t=$t TG 16 heads @ 8K $type"
    ab --tg --heads 16 --depth 8192 --rounds 21 --type $type --threads $t --variant isa=avx512 --variant isa=amx
  done
done
