// Tensor element types as GGUF/ggml number them, and row conversion to and from f32.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace latte {

// ggml's type ids (the numbers stored in GGUF tensor infos).
enum class GGMLType : uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
    Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
    IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21,
    IQ2_S = 22, IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28,
    IQ1_M = 29, BF16 = 30,
    // Internal types: never stored in files (is_known_type() is false for them).
    // q8_KV (as in ik_llama.cpp): per row an 8-byte header {float d; int32 sum of the row's int8},
    // then n int8 values; x = d*q. row_bytes(Q8_KV, n) = 8 + n. A prefix of a q8_KV row read with
    // the row's own header (d) is a valid q8_KV row for dequantisation (the sum covers the whole row).
    Q8_KV = 1008,
    // q8_0_r16 (issue 7; as ik_llama.cpp's q8_0_r8, with 16 rows): Q8_0 rows repacked at load in
    // groups of 16 rows. A group of 16 rows of n = 32·nb elements holds, for each 32-block b (at
    // byte 544·b of the group): the 16 rows' fp16 scales (32 bytes), then 8 vectors of 64 bytes,
    // vector k holding bytes 4k..4k+3 of the block's quants of row 0, row 1, ..., row 15, each
    // stored as u8 q+128. Same bytes per row as Q8_0 (row_bytes = 34·nb): a group occupies 16
    // row strides, so rows [16g, 16g+16·c) of a repacked matrix are group g onward. A row cannot
    // be read alone: dequantize_row refuses it (convertible false); see repack_q8_0_r16.
    Q8_0_R16 = 1009,
    // q4_0_r16: Q4_0 rows repacked the same way: per 32-block of a 16-row group (at byte 288·b), the
    // 16 fp16 scales (32 bytes), then 4 vectors of 64 bytes, vector k holding quant bytes 4k..4k+3
    // of rows 0..15 as stored in Q4_0 (low nibbles: elements 4k..4k+3, high: 16+4k..16+4k+3).
    // row_bytes = 18·nb, as Q4_0. See repack_r16.
    Q4_0_R16 = 1010,
    // q4_K_r / q5_K_r / q6_K_r (issue 7): Q4_K / Q5_K / Q6_K rows with each 256-block rearranged at
    // load so that the int8 kernels' per-block work is loads instead of bit-unpacking. Same block size
    // and bytes as the file type (144 / 176 / 210 per 256), blocks and rows independent: any row range
    // is a valid matrix and dequantize_row / quantize_row work on a row (through repack_k / unpack_k,
    // bit for bit the file type's values). q = the unsigned quant (0..15 / 0..31 / 0..63) of element
    // 32l + j (sub-block l, q4_K/q5_K) or 16k + j (sub-block k, q6_K) of the block.
    // q4_K_r: d, dmin (f16, as Q4_K); 12 bytes of 6-bit scales sc and mins m, plainer than ggml's: byte
    // l (0..7) = sc_l | (m_l >> 4) << 6, byte 8+k (0..3) = (m_k & 15) | (m_{k+4} & 15) << 4; then 4
    // vectors of 32 bytes: vector c byte 4l+i holds q(32l+4c+i) in its low nibble and q(32l+16+4c+i) in
    // its high one (so "element vector" e (0..7), 4 bytes per sub-block, is vector e's low nibbles
    // for e < 4, vector e-4's high nibbles for e >= 4: byte 4l+i is element 32l+4e+i).
    Q4_K_R = 1011,
    // q5_K_r: d, dmin, the 12 scale bytes as q4_K_r; qh[32]: bit e of byte 4l+i is bit 4 of
    // q(32l+4e+i); then the low nibbles as q4_K_r's 128 bytes.
    Q5_K_R = 1012,
    // q6_K_r: ql[128]: vector c (0..3) byte 2k+i holds the low 4 bits of q(16k+2c+i) (low nibble) and of
    // q(16k+8+2c+i) (high), i.e. element vector e byte 2k+i is element 16k+2e+i; qh[64]: vector j (0..1)
    // byte 2k+i, bits 2u..2u+1 are bits 4-5 of element vector 4j+u's byte 2k+i; then scales[16] and d
    // as Q6_K.
    Q6_K_R = 1013,
};

struct TypeInfo {
    const char* name;     // "f32", "q8_0", ...
    int64_t block_size;   // elements per block
    size_t type_size;     // bytes per block
    bool convertible;     // dequantize_row/quantize_row implemented
};

// False for ids ggml does not define (or that we cannot size), and for internal types (Q8_KV).
bool is_known_type(uint32_t id);
// Throws latte::Error for unknown ids.
const TypeInfo& type_info(GGMLType t);
const char* type_name(GGMLType t);
// Parses "f32", "f16", "bf16", "q8_0", "q4_0", "q4_K", "q5_K", "q6_K", "q8_KV" (case-insensitive);
// throws on others.
GGMLType parse_type(const std::string& s);
// Bytes of a row of n elements; throws if n is not a multiple of the block size.
size_t row_bytes(GGMLType t, int64_t n);

// Row conversion for F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, Q8_KV, and Q4_K_R / Q5_K_R / Q6_K_R
// (through their file types; throws for other types).
// The K-quants' dequantisation is ggml's (dequantize_row_q{4,5,6}_K) to the bit; their quantisation
// is a simple round-to-nearest reference (not ggml's search): per 32 (q4_K/q5_K) or 16 (q6_K)
// elements the step is chosen to cover the sub-block's range, so |x - x'| <= step/2 + dmin/2 (q4_K,
// q5_K; step = d·sc of the sub-block) or <= |d·sc|/2 (q6_K). For tests and latte-mkmodel.
void dequantize_row(GGMLType t, const void* src, float* dst, int64_t n);
void quantize_row(GGMLType t, const float* src, void* dst, int64_t n);

// Q8_0 <-> Q8_0_R16 (layout above). n_out % 16 == 0, n_in % 32 == 0; src and dst rows of
// row_bytes(Q8_0, n_in) bytes, contiguous (ldw = row_bytes); dst must not overlap src.
// unpack_q8_0_r16(repack_q8_0_r16(x)) == x byte for byte.
void repack_q8_0_r16(const void* src, int64_t n_in, int64_t n_out, void* dst);
void unpack_q8_0_r16(const void* src, int64_t n_in, int64_t n_out, void* dst);
// The same for either file type: t = Q8_0 or Q4_0 (throws otherwise); r16_type(t) is the
// repacked type (Q8_0_R16, Q4_0_R16), r16_base(r) the file type of a repacked one.
void repack_r16(GGMLType t, const void* src, int64_t n_in, int64_t n_out, void* dst);
void unpack_r16(GGMLType t, const void* src, int64_t n_in, int64_t n_out, void* dst);
GGMLType r16_type(GGMLType t);
GGMLType r16_base(GGMLType r);
bool is_r16(GGMLType t);  // Q8_0_R16 or Q4_0_R16
// Q4_K / Q5_K / Q6_K <-> Q4_K_R / Q5_K_R / Q6_K_R (layouts above), n elements (a multiple of 256) of
// one row or of several contiguous rows; block by block, so dst may equal src (not partly overlap).
// t = the file type for repack_k, the repacked type for unpack_k (throws otherwise); exact inverses
// for any bytes. kr_type(t) is the repacked type, kr_base(r) the file type; is_kr(r) is true for them.
void repack_k(GGMLType t, const void* src, void* dst, int64_t n);
void unpack_k(GGMLType r, const void* src, void* dst, int64_t n);
GGMLType kr_type(GGMLType t);
GGMLType kr_base(GGMLType r);
bool is_kr(GGMLType t);
// q4_K_r / q5_K_r: the 6-bit scale and min of sub-block l (0..7) from the block's 12 scale bytes at
// sc (byte l = sc_l | (m_l >> 4) << 6, byte 8+k = (m_k & 15) | (m_{k+4} & 15) << 4; layouts above).
inline void kr_scale_min(const uint8_t* sc, int l, int& scale, int& min) {
    scale = sc[l] & 63;
    min = ((sc[l] >> 6) << 4) | (l < 4 ? sc[8 + l] & 15 : sc[4 + l] >> 4);
}

// Scalar conversions (IEEE half with round-to-nearest-even; bf16 rounds to nearest even).
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);

// Q8_0 block: fp16 scale d, 32 int8; x = d*q.
struct BlockQ8_0 { uint16_t d; int8_t qs[32]; };
// Q4_0 block: fp16 scale d, 16 bytes of nibbles; x = d*(q-8); low nibbles are elements 0..15.
struct BlockQ4_0 { uint16_t d; uint8_t qs[16]; };
static_assert(sizeof(BlockQ8_0) == 34, "q8_0 block");
// Q8_KV row header (then n int8 follow).
struct RowQ8KVHeader { float d; int32_t sum; };
static_assert(sizeof(RowQ8KVHeader) == 8, "q8_KV header");
static_assert(sizeof(BlockQ4_0) == 18, "q4_0 block");

// K-quants (ggml's block_q4_K / q5_K / q6_K), super-blocks of QK_K = 256 elements.
constexpr int64_t kQK_K = 256;
// Q4_K: 8 sub-blocks of 32; x = d·sc_j·q - dmin·m_j, q in 0..15. scales[12] packs 8 6-bit scales sc
// and 8 6-bit mins m: j < 4: sc = s[j] & 63, m = s[j+4] & 63; j >= 4: sc = (s[j+4] & 15) | (s[j-4] >> 6) << 4,
// m = (s[j+4] >> 4) | (s[j] >> 6) << 4. qs: for chunk c (0..3) 32 bytes, low nibbles elements 64c..64c+31
// (sub-block 2c), high nibbles 64c+32..64c+63 (sub-block 2c+1).
struct BlockQ4_K { uint16_t d; uint16_t dmin; uint8_t scales[12]; uint8_t qs[128]; };
// Q5_K: as Q4_K with a fifth bit: q = nibble + 16·((qh[l] >> (2c + hi)) & 1) for byte l of chunk c
// (hi: 0 for the low nibble, 1 for the high one); q in 0..31.
struct BlockQ5_K { uint16_t d; uint16_t dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; };
// Q6_K: 16 sub-blocks of 16; x = d·scales[k]·(q - 32), q in 0..63. Per half h (128 elements) and
// l < 32: elements l, l+32, l+64, l+96 take the low nibble of ql[64h+l], low of ql[64h+l+32], high of
// ql[64h+l], high of ql[64h+l+32], and bits 0-1, 2-3, 4-5, 6-7 of qh[32h+l] as bits 4-5; the scale
// of element e (in 0..255) is scales[e / 16]. d is last.
struct BlockQ6_K { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; };
static_assert(sizeof(BlockQ4_K) == 144, "q4_K block");
static_assert(sizeof(BlockQ5_K) == 176, "q5_K block");
static_assert(sizeof(BlockQ6_K) == 210, "q6_K block");
// The 6-bit scale and min of sub-block j (0..7) of a q4_K / q5_K block (ggml's get_scale_min_k4).
inline void k4_scale_min(int j, const uint8_t* s, uint8_t& sc, uint8_t& m) {
    if (j < 4) {
        sc = s[j] & 63;
        m = s[j + 4] & 63;
    } else {
        sc = static_cast<uint8_t>((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4));
        m = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

}  // namespace latte
