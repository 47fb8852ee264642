#!/usr/bin/env bash
# Copies the shared libraries a program resolves here into a folder, so that it runs on another
# x86-64 Linux machine (glibc at least Debian 12's) without installing anything: every resolved
# library except the C library and the loader, which come from the target machine. Used by
# tools/bench_bundle.sh and tools/device_attn_ab.sh.
#   bash tools/bundle_libs.sh PROGRAM LIBDIR
set -euo pipefail
mkdir -p "$2"
ldd "$1" | awk '/=> \//{print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*) ;;
    *) cp -L "$lib" "$2/" ;;
  esac
done
