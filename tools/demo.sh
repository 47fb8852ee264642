#!/usr/bin/env bash
# Fresh Debian 12 machine to generated text: installs what is missing, builds (Release), writes the
# tiny model and runs the embedded English model (models/latte-tiny-en.gguf, trained on Jane Austen:
# docs/ORACLE.md) greedily. Extra arguments go to latte-cli, e.g. `bash tools/demo.sh -mla 1`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash tools/install-deps.sh

generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
# An existing build dir keeps the generator it was made with.
if [ -f build/CMakeCache.txt ]; then generator=(); fi
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"

build/latte-cli -m models/latte-tiny-en.gguf -p "The quick brown fox" -n 48 --temp 0 -t 2 "$@"
