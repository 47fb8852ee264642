#!/usr/bin/env bash
# The test suite again under the sanitizers (g++, -O1 -g), each in its own build directory with
# only latte-tests and what it needs (the library, latte-cli, latte-mkmodel, the tiny model):
#
#   build-asan  AddressSanitizer + UndefinedBehaviorSanitizer (-fno-sanitize-recover: the first
#               report fails the run): the whole latte-tests binary (every tag, the tiny model).
#   build-tsan  ThreadSanitizer: the tests that run the thread pool from the engine: [threadpool],
#               [forward] (threads 1..4), [loader] (pool options, the shared process pool),
#               [determinism]. To keep CI short this is not a CMake tree: a generated build.ninja
#               compiles the library sources (the same globs and per-ISA flags as CMakeLists.txt)
#               and only those four test files; the tiny model and latte-mkmodel come from the main
#               build (LATTE_MAIN_BUILD, default build/: tools/test.sh has built it by then).
#
#   bash tools/sanitize.sh            # both
#   bash tools/sanitize.sh asan|tsan  # one
# Prints one summary line per sanitizer; exits non-zero when a build or a run fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

which=("$@")
[ ${#which[@]} -eq 0 ] && which=(asan tsan)

gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)

# The compile flags of one ISA's kernel files, from cmake/isa_flags.cmake (the build's own list),
# space-separated: isa_flags AVX512
isa_flags() {
  local v
  v=$(sed -n "s/^set(LATTE_FLAGS_$1 \"\([^\"]*\)\")\$/\1/p" cmake/isa_flags.cmake)
  [ -n "$v" ] || { echo "sanitize.sh: no LATTE_FLAGS_$1 in cmake/isa_flags.cmake" >&2; return 1; }
  echo "${v//;/ }"
}

# build.ninja for the TSan test binary: $1 = directory, $2 = flags.
tsan_ninja() {
  local dir=$1 flags=$2 main=${LATTE_MAIN_BUILD:-build}
  [ -f "$main/models/tiny.gguf" ] && [ -x "$main/latte-mkmodel" ] ||
    { echo "sanitize.sh: tsan needs $main/models/tiny.gguf and $main/latte-mkmodel (build the main tree first)" >&2; return 1; }
  command -v ninja >/dev/null 2>&1 || { echo "sanitize.sh: tsan needs ninja (ninja-build)" >&2; return 1; }
  mkdir -p "$dir"
  local root; root=$(pwd)
  local defs="-DLATTE_TINY_MODEL=\\\"$root/$main/models/tiny.gguf\\\" -DLATTE_BUILD_DIR=\\\"$root/$dir\\\" -DLATTE_MKMODEL=\\\"$root/$main/latte-mkmodel\\\" -DLATTE_SOURCE_DIR=\\\"$root\\\""
  local hw; hw=$(pkg-config --cflags --libs hwloc)
  {
    echo "cxx = g++"
    echo "flags = -std=c++20 $flags -I$root/include -I$root/src -I$root $(pkg-config --cflags hwloc) -Wno-unused-parameter"
    echo "rule cc"
    echo "  command = \$cxx \$flags \$extra -MMD -MF \$out.d -c \$in -o \$out"
    echo "  depfile = \$out.d"
    echo "  deps = gcc"
    echo "rule link"
    echo "  command = \$cxx \$flags \$in -o \$out $hw -lpthread"
    local objs=() f o extra
    for f in src/*.cpp kernels/*.cpp kernels/scalar/*.cpp kernels/avx2/*.cpp kernels/avx512/*.cpp kernels/amx/*.cpp \
             tests/main.cpp tests/test_threadpool.cpp tests/test_forward.cpp tests/test_loader.cpp tests/test_reliability.cpp; do
      [ -f "$f" ] || continue
      case "$(uname -m):$f" in
        x86_64:kernels/avx2/*|x86_64:kernels/avx512/*|x86_64:kernels/amx/*|x86_64:kernels/dispatch.cpp) ;;
        *:kernels/avx2/*|*:kernels/avx512/*|*:kernels/amx/*) continue ;;
      esac
      case "$f" in
        kernels/avx2/flash_attn_vnni.cpp) extra=$(isa_flags AVX2_VNNI) || return 1 ;;
        kernels/avx2/*) extra=$(isa_flags AVX2) || return 1 ;;
        kernels/avx512/*) extra=$(isa_flags AVX512) || return 1 ;;
        kernels/amx/*) extra=$(isa_flags AMX) || return 1 ;;
        kernels/dispatch.cpp) extra="-DLATTE_KERNELS_X86=1" ;;
        tests/*) extra="$defs" ;;
        *) extra="" ;;
      esac
      o="obj/${f//\//_}.o"
      echo "build $o: cc $root/$f"
      echo "  extra = $extra"
      objs+=("$o")
    done
    echo "build latte-tests: link ${objs[*]}"
  } >"$dir/build.ninja"
}

rc=0
summary=()
for s in "${which[@]}"; do
  dir=build-$s
  case "$s" in
    asan)
      flags="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all"
      # The whole suite (LATTE_ASAN_TESTS narrows it to a Catch2 test spec).
      tags="${LATTE_ASAN_TESTS:-}"
      export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1
      export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ;;
    tsan)
      flags="-O1 -g -fno-omit-frame-pointer -fsanitize=thread"
      tags="[threadpool],[forward],[loader],[determinism]"
      export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 ;;
    *) echo "sanitize.sh: error: unknown sanitizer '$s' (expected asan or tsan)" >&2; exit 2 ;;
  esac
  g=("${gen[@]}")
  [ -f "$dir/CMakeCache.txt" ] && g=()
  start=$(date +%s)
  mkdir -p "$dir"
  if [ "$s" = tsan ]; then
    build_ok=1
    tsan_ninja "$dir" "$flags" >"$dir/configure.log" 2>&1 && ninja -C "$dir" -j"$(nproc)" >"$dir/build.log" 2>&1 || build_ok=0
  else
    build_ok=1
    { cmake -S . -B "$dir" "${g[@]}" -DCMAKE_BUILD_TYPE=Debug -DLATTE_BUILD_BENCH=OFF \
        -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="${flags#-O1 -g }" \
        -DCMAKE_SHARED_LINKER_FLAGS="${flags#-O1 -g }" >"$dir/configure.log" 2>&1 &&
      cmake --build "$dir" -j"$(nproc)" --target latte-tests >"$dir/build.log" 2>&1; } || build_ok=0
  fi
  if [ "$build_ok" -eq 0 ]; then
    tail -n 30 "$dir/configure.log" "$dir/build.log" 2>/dev/null >&2 || true
    summary+=("$s: BUILD FAILED (see $dir/build.log)"); rc=1; continue
  fi
  built=$(( $(date +%s) - start ))
  start=$(date +%s)
  args=()
  [ -n "$tags" ] && args=("$tags")
  # LATTE_SANITIZER: tests that only measure (RSS, timings) relax or skip under a sanitizer.
  if LATTE_SANITIZER=$s "$dir/latte-tests" "${args[@]}" >"$dir/run.log" 2>&1; then
    res=$(grep -E '^(All tests passed|test cases:)' "$dir/run.log" | tail -n1)
    summary+=("$s: clean: $res (build ${built} s, run $(( $(date +%s) - start )) s)")
  else
    tail -n 60 "$dir/run.log" >&2
    summary+=("$s: FAILED (see $dir/run.log; build ${built} s, run $(( $(date +%s) - start )) s)"); rc=1
  fi
done
printf 'sanitizers: %s\n' "${summary[@]}"
exit "$rc"
