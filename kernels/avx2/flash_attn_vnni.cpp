// The avx2 attention kernels built a second time with AVX-VNNI (-mavxvnni, CMakeLists.txt), into
// namespace avx2vnni: see the note at the end of kernels/avx2/flash_attn.cpp's header comment.
#define LATTE_AVX2_VNNI 1
#include "kernels/avx2/flash_attn.cpp"
