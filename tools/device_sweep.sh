#!/usr/bin/env bash
# The 16-core sweep behind docs/PERFORMANCE.md, run on another x86-64 Linux machine from a bundle
# made here with `bash tools/bench_bundle.sh build` (binaries + their .so files: nothing to install
# there). Writes JSON and logs to $OUT (or ./sweep-out).
#   bash tools/device_sweep.sh [BUNDLE_DIR]        (default build/bench-bundle)
set -uo pipefail
b=${1:-build/bench-bundle}
out=${OUT:-./sweep-out}
mkdir -p "$out" models
run() { "$b/run.sh" "$@"; }
{
  echo "== machine"; nproc; grep -m1 'model name' /proc/cpuinfo
  grep -m1 flags /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_vnni|avx512_bf16|amx_tile|amx_int8|amx_bf16)$' | tr '\n' ' '; echo
  date -u
} 2>&1 | tee "$out/machine.txt"
# Models: the tiny one and a 2-layer V2-Lite (Q8_0 weights), made there by latte-mkmodel.
run latte-mkmodel --preset tiny -o models/tiny.gguf --quiet
run latte-mkmodel --preset v2-lite --layers 2 --type q8_0 -o models/v2lite-2l-q8_0.gguf --quiet
# 1. The thread pool over 1..16 threads.
LATTE_BENCH_POOL_THREADS=${POOL_THREADS:-1,2,3,4,6,8,12,16} LATTE_BENCH_POOL_MB=${POOL_MB:-1024} \
  run latte-bench-pool --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  --benchmark_min_time=0.2 --benchmark_out="$out/pool.json" --benchmark_out_format=json > "$out/pool.txt" 2>&1
# 2. The forward (reference + dispatched attention): PP and TG, -mla 3, f16 cache.
for m in tiny v2lite-2l-q8_0; do
  LATTE_BENCH_MODEL=models/$m.gguf LATTE_BENCH_THREADS=${FWD_THREADS:-1,2,4,8,16} LATTE_BENCH_PP=64 \
  LATTE_BENCH_DEPTHS=0,64 run latte-gbench --benchmark_filter='BM_(PP|TG)/' --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true --benchmark_min_time=0.01 \
    --benchmark_out="$out/forward-$m.json" --benchmark_out_format=json > "$out/forward-$m.txt" 2>&1
done
# 3. Attention kernels at -mla 1 shapes, all threads.
LATTE_BENCH_THREADS=${ATTN_THREADS:-16} run latte-gbench --benchmark_filter='BM_attn_(TG/h(16|128)/d(4096|32768)|PP/h16/d4096)/.*/(avx2|avx512)' \
  --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  --benchmark_out="$out/attn.json" --benchmark_out_format=json > "$out/attn.txt" 2>&1
tail -n 5 "$out"/*.txt
