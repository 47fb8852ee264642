#!/usr/bin/env bash
# Fresh Debian 12 machine to a full test run: installs what is missing, builds (Release), then runs
# every test with ctest. Then the NEON kernels: cross-built for aarch64 (build-neon: the kernels and
# their tests only, cmake/aarch64-toolchain.cmake, -DLATTE_KERNELS_ONLY=ON) and tested under
# qemu-aarch64 (about 1.5 minutes on 2 cores). Exits non-zero when either part fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash tools/install-deps.sh

generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
# An existing build dir keeps the generator it was made with.
if [ -f build/CMakeCache.txt ]; then generator=(); fi
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"

rc=0
ctest --test-dir build --output-on-failure -j2 || rc=$?

# ---- fuzzing and sanitizers (issue 8, docs/RELIABILITY.md) ----------------------------------
# The libFuzzer targets (clang, build-fuzz/), LATTE_FUZZ_SECONDS each (default 45), then the suite
# under ASan+UBSan (build-asan/) and the threaded tests under TSan (build-tsan/). About 11 minutes on
# 2 cores from a clean clone (3 fuzzing, 8 sanitizers). LATTE_SKIP_RELIABILITY=1 skips both.
reliability_summary=
if [ "${LATTE_SKIP_RELIABILITY:-0}" != 1 ]; then
  mkdir -p build
  LATTE_FUZZ_SECONDS=${LATTE_FUZZ_SECONDS:-45} bash tools/fuzz.sh 2>&1 | tee build/fuzz.out || rc=1
  bash tools/sanitize.sh 2>&1 | tee build/sanitize.out || rc=1
  reliability_summary=$(grep -hE '^(fuzz [a-z]+:|sanitizers:)' build/fuzz.out build/sanitize.out || true)
  [ -n "$reliability_summary" ] || reliability_summary="fuzz/sanitizers: FAILED before their summaries (see build/fuzz.out, build/sanitize.out)"
fi

# ---- NEON kernels under qemu-aarch64 ---------------------------------------------------------
neon_summary=
if [ "$(uname -m)" = aarch64 ]; then
  neon_summary="NEON kernel tests: run natively by the build above (aarch64 host)"
elif ! command -v aarch64-linux-gnu-g++ >/dev/null 2>&1 || ! command -v qemu-aarch64 >/dev/null 2>&1; then
  neon_summary="NEON kernel tests: NOT RUN: aarch64-linux-gnu-g++ or qemu-aarch64 missing (bash tools/install-deps.sh installs them)"
  rc=1
else
  ngen=()
  if command -v ninja >/dev/null 2>&1; then ngen=(-G Ninja); fi
  if [ -f build-neon/CMakeCache.txt ]; then ngen=(); fi
  neon_rc=0
  # LATTE_EXPECT_ISA=neon: the tests fail unless the neon table is available and active under qemu.
  cmake -S . -B build-neon "${ngen[@]}" -DCMAKE_BUILD_TYPE=Release -DLATTE_KERNELS_ONLY=ON \
    -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-toolchain.cmake -DLATTE_EXPECT_ISA=neon &&
    cmake --build build-neon -j"$(nproc)" || neon_rc=$?
  if [ "$neon_rc" -eq 0 ]; then
    ctest --test-dir build-neon --output-on-failure -j2 | tee build-neon/ctest-neon.out || neon_rc=$?
    counts=$(grep -Eo '[0-9]+ tests failed out of [0-9]+' build-neon/ctest-neon.out | tail -n1 || true)
    failed=$(echo "$counts" | awk '{print $1}')
    total=$(echo "$counts" | awk '{print $NF}')
    # The one line the tests print about the table they ran (Testing/Temporary/LastTest.log).
    table=$(grep -ho 'latte kernels: active table.*' build-neon/Testing/Temporary/LastTest*.log 2>/dev/null | head -n1 || true)
    [ -n "$table" ] && echo "NEON build, ${table#latte kernels: }"
    if [ -n "$counts" ] && [ "$neon_rc" -eq 0 ]; then
      neon_summary="NEON kernel tests: $((total - failed)) passed under qemu-aarch64"
    elif [ -n "$counts" ]; then
      neon_summary="NEON kernel tests: $((total - failed)) passed, $failed FAILED under qemu-aarch64"
    else
      neon_summary="NEON kernel tests: FAILED under qemu-aarch64 (ctest exit status $neon_rc)"
    fi
  else
    neon_summary="NEON kernel tests: NOT RUN: the aarch64 cross build failed (exit status $neon_rc)"
  fi
  [ "$neon_rc" -eq 0 ] || rc=1
fi
[ -n "$reliability_summary" ] && echo "$reliability_summary"
echo "$neon_summary"
exit "$rc"
