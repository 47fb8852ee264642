# LATTE_KERNELS_ONLY=ON (included from CMakeLists.txt once LATTE_SOURCES and the ISA kernel files'
# flags are set): the attention and weight-matmul kernels of this target's ISA levels, the row
# types and their Catch2 tests as one executable, latte-kernel-tests; nothing else of the engine.
# No Eigen, oneDNN, hwloc or Google Benchmark is needed, so this mode cross-builds: tools/test.sh
# builds the NEON kernels for aarch64 with cmake/aarch64-toolchain.cmake and runs their tests
# under qemu-aarch64.

set(LATTE_EXPECT_ISA "" CACHE STRING
    "Kernel level the tests must find available and active (e.g. neon under qemu-aarch64); empty: none")

set(LATTE_KERNEL_TEST_SOURCES ${LATTE_SOURCES})
list(FILTER LATTE_KERNEL_TEST_SOURCES INCLUDE REGEX "/kernels/")  # dispatch, scalar, this target's ISAs
list(APPEND LATTE_KERNEL_TEST_SOURCES
     ${PROJECT_SOURCE_DIR}/src/types.cpp
     ${PROJECT_SOURCE_DIR}/tests/test_kernels.cpp
     ${PROJECT_SOURCE_DIR}/tests/test_kernels_active.cpp
     ${PROJECT_SOURCE_DIR}/tests/test_kernels_gemm.cpp
     ${PROJECT_SOURCE_DIR}/tests/main.cpp)
if(LATTE_KERNELS_X86)  # the AMX matmul on emulated tiles (and on real ones where the CPU has them)
  list(APPEND LATTE_KERNEL_TEST_SOURCES ${PROJECT_SOURCE_DIR}/tests/test_amx_emulated.cpp
       ${PROJECT_SOURCE_DIR}/tests/test_amx_attn_emulated.cpp)
  set_source_files_properties(${PROJECT_SOURCE_DIR}/tests/test_amx_attn_emulated.cpp PROPERTIES COMPILE_OPTIONS
    "${LATTE_FLAGS_AVX512_VBMI};-Wno-maybe-uninitialized")
endif()

# Catch2 v2 is header-only; cross-compiling, the host's copy is the one there is. Find it outside
# the target sysroot and hand the compiler only that header, never the host's include directory
# (its x86 system headers must not shadow the target's).
find_package(Catch2 2 REQUIRED CONFIG NO_CMAKE_FIND_ROOT_PATH)
get_target_property(LATTE_CATCH2_HOST_INCLUDE Catch2::Catch2 INTERFACE_INCLUDE_DIRECTORIES)
find_file(LATTE_CATCH2_HEADER catch2/catch.hpp PATHS ${LATTE_CATCH2_HOST_INCLUDE} NO_DEFAULT_PATH
          NO_CMAKE_FIND_ROOT_PATH REQUIRED)
configure_file(${LATTE_CATCH2_HEADER} ${CMAKE_BINARY_DIR}/catch2-include/catch2/catch.hpp COPYONLY)

add_executable(latte-kernel-tests ${LATTE_KERNEL_TEST_SOURCES})
# Catch2's own header trips GCC 12's -Wmaybe-uninitialized inside <regex>: not our code.
set_source_files_properties(tests/main.cpp PROPERTIES COMPILE_OPTIONS -Wno-maybe-uninitialized)
target_include_directories(latte-kernel-tests PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src
                                                      ${PROJECT_SOURCE_DIR})
target_include_directories(latte-kernel-tests SYSTEM PRIVATE ${CMAKE_BINARY_DIR}/catch2-include)

# One CTest test per Catch2 test case, listed after the build by running the executable — through
# CMAKE_CROSSCOMPILING_EMULATOR (qemu-aarch64) when cross-compiling, which ctest then uses too.
enable_testing()
include(${Catch2_DIR}/Catch.cmake)
catch_discover_tests(latte-kernel-tests PROPERTIES TIMEOUT 900 ENVIRONMENT "LATTE_EXPECT_ISA=${LATTE_EXPECT_ISA}")
