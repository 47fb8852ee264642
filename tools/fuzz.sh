#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ with clang (-fsanitize=fuzzer,address,undefined) in
# build-fuzz/ and runs each for a bounded time, starting from its seed corpus (tests/fuzz/corpus/T/,
# copied to build-fuzz/corpus/T/ so that the run's new inputs stay out of the repository).
# A crash leaves its input as build-fuzz/crash-T-*: copy it to tests/fuzz/regressions/T/ and the
# ordinary suite (tests/test_fuzz_regressions.cpp) replays it from then on.
#
# Targets: gguf (GGUFFile::from_memory + the tokenizer's reading of a file), tokenizer (encode/decode
# with the tiny model's vocabulary), args (tools/args.h: the tools' flag parser and value parsers).
#
#   bash tools/fuzz.sh                    # every target, 60 s each (LATTE_FUZZ_SECONDS overrides)
#   bash tools/fuzz.sh gguf 600           # one target, 10 minutes
#   bash tools/fuzz.sh --build-only
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

targets=(gguf tokenizer args)
seconds=${LATTE_FUZZ_SECONDS:-60}
build_only=0
sel=()
for a in "$@"; do
  case "$a" in
    --build-only) build_only=1 ;;
    [0-9]*) seconds=$a ;;
    *) sel+=("$a") ;;
  esac
done
[ ${#sel[@]} -gt 0 ] && targets=("${sel[@]}")

cxx=${LATTE_FUZZ_CXX:-}
if [ -z "$cxx" ]; then
  for c in clang++ clang++-14 clang++-15 clang++-16; do
    if command -v "$c" >/dev/null 2>&1; then cxx=$c; break; fi
  done
fi
[ -n "$cxx" ] || { echo "fuzz.sh: error: clang++ not found (bash tools/install-deps.sh installs clang and libclang-rt-14-dev)" >&2; exit 1; }

out=build-fuzz
mkdir -p "$out/obj"
flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fno-sanitize-recover=all -DLATTE_FUZZING=1 -Iinclude -Isrc -Itools)
lib_srcs=(src/gguf.cpp src/gguf_load.cpp src/types.cpp src/tokenizer.cpp tools/args.cpp)
objs=()
# The library sources with the fuzzer's coverage instrumentation (no main), rebuilt when newer.
for s in "${lib_srcs[@]}"; do
  o="$out/obj/$(basename "${s%.cpp}").o"
  if [ ! -f "$o" ] || [ "$s" -nt "$o" ] || [ "$0" -nt "$o" ] || find include src tools -name '*.h' -newer "$o" | grep -q .; then
    "$cxx" "${flags[@]}" -fsanitize=fuzzer-no-link,address,undefined -c "$s" -o "$o" &
  fi
  objs+=("$o")
done
wait
for t in "${targets[@]}"; do
  bin="$out/fuzz_$t"
  "$cxx" "${flags[@]}" -fsanitize=fuzzer,address,undefined "tests/fuzz/fuzz_$t.cpp" "${objs[@]}" -o "$bin"
done
[ "$build_only" -eq 1 ] && exit 0

rc=0
summary=()
for t in "${targets[@]}"; do
  corpus="$out/corpus/$t"
  mkdir -p "$corpus"
  cp -n tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  # The saved crash inputs first: each must pass (they are fixed bugs).
  if compgen -G "tests/fuzz/regressions/$t/*" >/dev/null; then
    "$out/fuzz_$t" tests/fuzz/regressions/"$t"/* >"$out/regressions-$t.log" 2>&1 || {
      echo "fuzz.sh: $t: a saved regression input fails again (see $out/regressions-$t.log)" >&2; rc=1; }
  fi
  log="$out/fuzz-$t.log"
  start=$(date +%s)
  if ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
     "$out/fuzz_$t" "$corpus" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -timeout=20 \
       -print_final_stats=1 -artifact_prefix="$out/crash-$t-" >"$log" 2>&1; then
    st=ok
  else
    st=FAILED; rc=1
    tail -n 40 "$log" >&2
  fi
  runs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || echo '?')
  nc=$(find "$corpus" -type f | wc -l)
  summary+=("fuzz $t: $st, $runs executions in $(( $(date +%s) - start )) s, corpus $nc inputs")
done
printf '%s\n' "${summary[@]}"
exit "$rc"
