#!/usr/bin/env bash
# Packs latte's benchmark and tool binaries with the shared libraries they need (Google Benchmark,
# hwloc and theirs; not glibc) into one folder that runs on another Linux x86-64 machine (glibc at
# least Debian 12's) without installing anything — used for the 16-core sweeps in docs/PERFORMANCE.md:
#   bash tools/bench_bundle.sh [BUILD_DIR] [OUT_DIR]     (defaults: build, BUILD_DIR/bench-bundle)
#   OUT_DIR/run.sh PROGRAM [args...]                     (PROGRAM: latte-bench-pool, latte-gbench, latte-bench, latte-sweep,
#                                                         latte-mkmodel, latte-cli)
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
  # every resolved library except the C library and the loader (those come from the target machine)
  ldd "$build/$p" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*) ;;
      *) cp -L "$lib" "$out/lib/" ;;
    esac
  done
done
cat > "$out/run.sh" <<'RUN'
#!/bin/sh
# run.sh PROGRAM [args...]: runs one of the bundled programs with the bundled libraries.
here=$(cd "$(dirname "$0")" && pwd)
prog=$1
shift
LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/$prog" "$@"
RUN
chmod +x "$out/run.sh"
du -sh "$out"
