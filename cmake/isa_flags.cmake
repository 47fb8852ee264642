# The compile flags of each ISA's kernel files (kernels/<isa>/, DESIGN.md §4), in one place:
# CMakeLists.txt, cmake/kernels_only.cmake and tools/sanitize.sh (which reads the set() lines below
# with sed: keep each on one line, values in double quotes) all take them from here. A flag added
# to one copy of three and not the others broke the TSan build once (session 18, -mavx512vbmi).
set(LATTE_FLAGS_AVX2 "-mavx2;-mfma;-mf16c")
# the avx2 attention kernels again with AVX-VNNI (vpdpbusd/vpdpwssd on 256-bit vectors)
set(LATTE_FLAGS_AVX2_VNNI "-mavx2;-mfma;-mf16c;-mavxvnni")
set(LATTE_FLAGS_AVX512 "-mavx512f;-mavx512bw;-mavx512vl;-mavx512vnni;-mavx512bf16;-mavx512dq;-mfma;-mf16c")
# the amx kernels' vector code: avx512 plus AVX512-VBMI's byte permutes (every AMX CPU has them);
# the files that compile them on emulated tiles take these
set(LATTE_FLAGS_AVX512_VBMI "-mavx512f;-mavx512bw;-mavx512vl;-mavx512vnni;-mavx512bf16;-mavx512dq;-mavx512vbmi;-mfma;-mf16c")
set(LATTE_FLAGS_AMX "-mavx512f;-mavx512bw;-mavx512vl;-mavx512vnni;-mavx512bf16;-mavx512dq;-mavx512vbmi;-mfma;-mf16c;-mamx-tile;-mamx-int8;-mamx-bf16")
set(LATTE_FLAGS_NEON "-march=armv8.2-a+dotprod")
