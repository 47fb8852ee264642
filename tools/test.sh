#!/usr/bin/env bash
# Fresh Debian 12 machine to a full test run: installs what is missing, builds (Release), then runs
# every test with ctest. Exits with ctest's status.
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
exit "$rc"
