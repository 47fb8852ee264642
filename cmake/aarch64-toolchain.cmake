# Cross-compiling for aarch64 Linux from an x86-64 Debian host (g++-aarch64-linux-gnu, qemu-user:
# bash tools/install-deps.sh installs both). Used for the NEON kernels and their tests:
#   cmake -S . -B build-neon -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-toolchain.cmake -DLATTE_KERNELS_ONLY=ON
#   cmake --build build-neon && ctest --test-dir build-neon     # tests run under qemu-aarch64
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Libraries and headers from the target's sysroot only; programs (the build tools) from the host.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# add_test() and catch_discover_tests() run target executables through this (user-mode qemu; its
# default CPU model, "max", has Advanced SIMD and the dot-product extension the NEON level needs).
set(CMAKE_CROSSCOMPILING_EMULATOR "qemu-aarch64;-L;/usr/aarch64-linux-gnu")
