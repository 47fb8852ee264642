#!/usr/bin/env bash
# The whole-model evidence of issues 5 and 7 (docs/PERFORMANCE.md "Whole model, issue 5/7 tables"),
# run on another x86-64 machine from a bundle made here (`bash tools/bench_bundle.sh build`).
#   STAGES="anchor v2lite isa kernels" bash tools/device_evidence.sh [BUNDLE_DIR]; output in $OUT
# Stages (each writes JSONL from latte-bench, or Google Benchmark JSON):
#   anchor   ANCHORS.md's 4-layer file, llama-bench -p 512 -n 64 -mla 3 -fa 1 -ctk q8_0, THREADS
#            (1..16), and the 16-layer file at 16 threads with -gp 8192,64 in -mla 1 and 3
#   v2lite   a 2-layer V2-Lite (Q8_0 weights): -mla 1,2,3 PP-512 / TG-64 at depths 0, 4K, 16K,
#            q8_0 and q8_KV caches, 16 threads (and DEPTH_THREADS)
#   isa      the same file at depth 0, 16 threads, LATTE_ISA=scalar / avx2 / avx512 (the reference
#            forward against the SIMD-only builds)
#   v2lamx   issue 7's device table: the same file, -p 512 -n 64 at depths 0 and 4K (and 16K at
#            V2L_DEEP_THREADS, default 16), q8_0 and q8_KV caches, LATTE_ISA=amx then avx512 for each
#            thread count in V2L_THREADS (default 16 8 4 2 1), one JSONL per level
#            (v2lamx-LEVEL.jsonl; tools/isa_table.py v2lamx-amx.jsonl v2lamx-avx512.jsonl prints the table)
#   auto     -mla auto against forced 1, 2, 3 on the 4-layer anchor file, 16 threads (AUTO_THREADS),
#            prompts of 32, 128 and 512 tokens at depths 0 and 2048, AUTO_ROUNDS invocations
#   v3attn   ANCHORS.md's DeepSeek-V3 attention file (n_embd 7168, 128 heads, q_lora 1536, dense FFN
#            2048, 8 experts of 256, 2 used, 1 shared, 4 layers, Q8_0): -p 512 -n 32 -gp 8192,32,
#            -mla 3 (MODES), q8_0 and q8_KV caches, 16 threads
#   kernels  attention kernel benches: TG 16/128 heads at 4K..64K, PP 512 rows at 4K, threads 1..16
#   amx      the kernel tests on every level the machine has (latte-kernel-tests in the bundle), the
#            q8_KV kernel benches at amx against avx512 (ATTN_THREADS), and the 16-layer anchor file
#            with a q8_KV cache, -mla 1 and 3, depth 0 and 8192, at LATTE_ISA=avx512 and amx
#   bf16     the bf16-tile attention (amx level: f16, bf16, q8_0 caches) against avx512: kernel benches
#            (TG 16/128 heads at 8K and 32K, PP 512 rows at 4K, ATTN_THREADS)
#   bf16model  the whole model with a q8_0 and a bf16 cache at LATTE_ISA=avx512 and amx: the V3
#            attention file -p 512 -n 32 -gp 8192,32 and the 16-layer anchor file -p 512 -n 64
#            -gp 8192,64, -mla 3, 16 threads
#   hosttests  the host suite's kernel-level subsets ([attention],[forward],[kernels],[oracle],
#            [matmul]) at LATTE_ISA=amx and avx512 (HOSTTEST_ISAS), from the bundle's latte-tests; its model and
#            fixture paths are those of the build it came from, so that build's source directory
#            (HOST_SRC, default /work/main) is linked to this tree when it does not exist here
# Every latte-bench run also writes its --profile lines (where the time went) to the stage's .err.
# BUNDLE_DIR may also be a .tar.xz of the bundle folder (smaller to carry): it is unpacked first.
set -uo pipefail
b=${1:-build/bench-bundle}
if [[ "$b" == *.tar.xz ]]; then mkdir -p bundle && tar -C bundle -xJf "$b" && b=bundle/$(ls bundle | head -n 1); fi
out=${OUT:-./evidence-out}
stages=${STAGES:-anchor v2lite isa auto kernels}
mkdir -p "$out" models
run() { "$b/run.sh" "$@"; }
{ nproc; grep -m1 'model name' /proc/cpuinfo; date -u; } > "$out/machine.txt"
has() { [[ " $stages " == *" $1 "* ]]; }
if has anchor; then
  run latte-mkmodel --preset anchor -o models/anchor4.gguf --quiet
  run latte-bench -m models/anchor4.gguf -p 512 -n 64 -mla 3 -fa 1 -ctk q8_0 -t "${THREADS:-1,2,3,4,6,8,12,16}" \
    -r 3 -o jsonl --profile > "$out/anchor4.jsonl" 2> "$out/anchor4.err"
  run latte-mkmodel --preset anchor --layers 16 -o models/anchor16.gguf --quiet
  run latte-bench -m models/anchor16.gguf -p 512 -n 64 -gp 8192,64 -mla "${MODES:-1,3}" -fa 1 -ctk q8_0,q8_KV -t 16 \
    -r 2 -o jsonl --profile > "$out/anchor16.jsonl" 2> "$out/anchor16.err"
fi
if has v3attn; then
  run latte-mkmodel --preset anchor --n-embd 7168 --heads 128 --q-lora-rank 1536 --ff 2048 --ff-exp 256 --experts 8 \
    --experts-used 2 --shared-experts 1 --layers 4 -o models/v3attn4.gguf --quiet
  run latte-bench -m models/v3attn4.gguf -p 512 -n 32 -gp 8192,32 -mla "${MODES:-3}" -fa 1 -ctk q8_0,q8_KV -t 16 -r 2 \
    -o jsonl --profile > "$out/v3attn4.jsonl" 2> "$out/v3attn4.err"
fi
if has v2lite || has isa || has v2lamx; then
  [ -f models/v2lite-2l.gguf ] || run latte-mkmodel --preset v2-lite --layers 2 --type q8_0 -o models/v2lite-2l.gguf --quiet
fi
if has v2lite; then
  run latte-bench -m models/v2lite-2l.gguf -p 512 -n 64 -d 0,4096,16384 -mla 1,2,3 -fa 1 -ctk q8_0,q8_KV \
    -t "${DEPTH_THREADS:-16}" -r 2 -o jsonl > "$out/v2lite.jsonl" 2> "$out/v2lite.err"
fi
if has isa; then
  for isa in scalar avx2 avx512; do
    LATTE_ISA=$isa run latte-bench -m models/v2lite-2l.gguf -p 512 -n 64 -mla 1,2,3 -fa 1 -ctk q8_0 -t 16 -r 2 \
      -o jsonl > "$out/isa-$isa.jsonl" 2> "$out/isa-$isa.err"
  done
fi
if has v2lamx; then
  # the levels alternate per thread count, so that a drift of a shared host's speed lands on both
  : > "$out/v2lamx-amx.jsonl"; : > "$out/v2lamx-avx512.jsonl"
  for t in ${V2L_THREADS:-16 8 4 2 1}; do
    depths=0,4096; [[ " ${V2L_DEEP_THREADS:-16} " == *" $t "* ]] && depths=0,4096,16384
    for isa in amx avx512; do
      LATTE_ISA=$isa run latte-bench -m models/v2lite-2l.gguf -p 512 -n 64 -d "$depths" -ctk q8_0,q8_KV -t "$t" -r 2 \
        -o jsonl >> "$out/v2lamx-$isa.jsonl" 2>> "$out/v2lamx.err"
    done
  done
fi
if has auto; then
  [ -f models/anchor4.gguf ] || run latte-mkmodel --preset anchor -o models/anchor4.gguf --quiet
  # AUTO_ROUNDS invocations, appended: the modes of one test are then interleaved in time, so a drift
  # of the machine's speed over the run does not masquerade as a difference between modes (take the
  # median of each test's samples over the rounds). LATTE_MLA_VERBOSE: auto's rates and choices.
  : > "$out/auto.jsonl"; : > "$out/auto.err"
  # Even rounds run the modes in the reverse order (auto first), so that neither end of a process's
  # life is always the same mode's.
  for round in $(seq "${AUTO_ROUNDS:-1}"); do
    modes=1,2,3,auto; [ $((round % 2)) -eq 0 ] && modes=auto,3,2,1
    LATTE_MLA_VERBOSE=1 run latte-bench -m models/anchor4.gguf -p 32,128,512 -n 0 -d 0,2048 -mla "$modes" -fa 1 \
      -ctk q8_0 -t "${AUTO_THREADS:-16}" -r 3 -o jsonl >> "$out/auto.jsonl" 2>> "$out/auto.err"
  done
fi
if has kernels; then
  for t in ${ATTN_THREADS:-1 2 4 8 16}; do
    LATTE_BENCH_THREADS=$t run latte-gbench \
      --benchmark_filter='BM_attn_(TG/h(16/d(4096|32768|65536)|128/d(8192|32768))|PP/h16/d4096)/q8_KV/avx512' \
      --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
      --benchmark_out="$out/attn-t$t.json" --benchmark_out_format=json > "$out/attn-t$t.txt" 2>&1
  done
fi
if has amx; then
  [ -x "$b/latte-kernel-tests" ] && LATTE_TEST_ERRORS=1 timeout 600 "$b/run.sh" latte-kernel-tests > "$out/kernel-tests.txt" 2>&1
  for t in ${ATTN_THREADS:-1 2 4 8 16}; do
    LATTE_BENCH_THREADS=$t run latte-gbench \
      --benchmark_filter='BM_attn_(TG/h(16/d(4096|32768|65536)|128/d(8192|32768))|PP/h16/d(4096|16384))/q8_KV/(avx512|amx)' \
      --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
      --benchmark_out="$out/amx-attn-t$t.json" --benchmark_out_format=json > "$out/amx-attn-t$t.txt" 2>&1
  done
  if [ -n "${AMX_MODEL:-1}" ]; then
    [ -f models/anchor16.gguf ] || run latte-mkmodel --preset anchor --layers 16 -o models/anchor16.gguf --quiet
    for isa in avx512 amx; do
      LATTE_ISA=$isa run latte-bench -m models/anchor16.gguf -p 512 -n 64 -gp 8192,64 -mla 1,3 -fa 1 -ctk q8_KV -t 16 \
        -r 2 -o jsonl > "$out/amx-model-$isa.jsonl" 2> "$out/amx-model-$isa.err"
    done
  fi
fi
if has bf16; then
  for t in ${ATTN_THREADS:-2 16}; do
    LATTE_BENCH_THREADS=$t run latte-gbench \
      --benchmark_filter='BM_attn_(TG/h(16|128)/d(8192|32768)|PP/h16/d4096)/(f16|bf16|q8_0)/(avx512|amx)' \
      --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
      --benchmark_out="$out/bf16-attn-t$t.json" --benchmark_out_format=json > "$out/bf16-attn-t$t.txt" 2>&1
  done
fi
if has bf16model; then
  [ -f models/v3attn4.gguf ] || run latte-mkmodel --preset anchor --n-embd 7168 --heads 128 --q-lora-rank 1536 --ff 2048 \
    --ff-exp 256 --experts 8 --experts-used 2 --shared-experts 1 --layers 4 -o models/v3attn4.gguf --quiet
  [ -f models/anchor16.gguf ] || run latte-mkmodel --preset anchor --layers 16 -o models/anchor16.gguf --quiet
  for isa in avx512 amx; do
    LATTE_ISA=$isa run latte-bench -m models/v3attn4.gguf -p 512 -n 32 -gp 8192,32 -mla 3 -fa 1 -ctk q8_0,bf16 -t 16 \
      -r 2 -o jsonl --profile > "$out/bf16-v3attn4-$isa.jsonl" 2> "$out/bf16-v3attn4-$isa.err"
    LATTE_ISA=$isa run latte-bench -m models/anchor16.gguf -p 512 -n 64 -gp 8192,64 -mla 3 -fa 1 -ctk q8_0,bf16 -t 16 \
      -r 2 -o jsonl --profile > "$out/bf16-anchor16-$isa.jsonl" 2> "$out/bf16-anchor16-$isa.err"
  done
fi
if has hosttests; then
  src=${HOST_SRC:-/work/main}
  if [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"; fi
  mkdir -p "$src/build/models"
  for p in latte-tests latte-mkmodel latte-cli latte-bench latte-sweep; do cp "$b/$p" "$src/build/"; done
  [ -f "$src/build/models/tiny.gguf" ] || run latte-mkmodel --preset tiny -o "$src/build/models/tiny.gguf" --quiet
  for isa in ${HOSTTEST_ISAS:-amx avx512}; do
    LATTE_ISA=$isa LD_LIBRARY_PATH="$PWD/$b/lib" timeout 900 "$src/build/latte-tests" \
      "[attention],[forward],[kernels],[oracle],[matmul]" > "$out/hosttests-$isa.txt" 2>&1
    echo "hosttests $isa exit $?" >> "$out/hosttests-$isa.txt"
  done
fi
for f in "$out"/*.jsonl; do echo "== $f"; cut -c1-300 "$f"; done
tail -n 3 "$out"/*.err "$out"/*.txt 2>/dev/null
