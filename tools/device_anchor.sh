#!/usr/bin/env bash
# latte on the ANCHORS.md side-by-side models, with the commands ANCHORS.md quotes for
# ik_llama.cpp, on another x86-64 machine from a bundle made here (`bash tools/bench_bundle.sh build`).
#   bash tools/device_anchor.sh [BUNDLE_DIR]      (default build/bench-bundle); output in $OUT
set -uo pipefail
b=${1:-build/bench-bundle}
out=${OUT:-./anchor-out}
mkdir -p "$out" models
run() { "$b/run.sh" "$@"; }
{ nproc; grep -m1 'model name' /proc/cpuinfo; date -u; } > "$out/machine.txt"
run latte-mkmodel --preset anchor -o models/anchor4.gguf --quiet
run latte-mkmodel --preset anchor --layers 16 -o models/anchor16.gguf --quiet
# ANCHORS: "Device CPU, 4-layer model, llama-bench -p 512 -n 64 -mla 3 -fa 1 -ctk q8_0", threads 1..16
run latte-bench -m models/anchor4.gguf -p 512 -n 64 -mla 3 -fa 1 -ctk q8_0 -t ${THREADS:-1,2,3,4,6,8,12,16} -r 3 \
  -o jsonl > "$out/anchor4.jsonl" 2> "$out/anchor4.err"
# ANCHORS: "Device CPU, 16 threads, 16-layer model, -p 512 -n 64 -gp 8192,64 -fa 1 -ctk q8_0"
run latte-bench -m models/anchor16.gguf -p 512 -n 64 -gp 8192,64 -mla ${MODES:-3} -fa 1 -ctk q8_0 -t 16 -r 2 \
  -o jsonl > "$out/anchor16.jsonl" 2> "$out/anchor16.err"
for f in "$out"/*.jsonl; do echo "== $f"; cat "$f"; done | cut -c1-400
