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
// Parses "f32", "f16", "bf16", "q8_0", "q4_0", "q8_KV" (case-insensitive); throws on others.
GGMLType parse_type(const std::string& s);
// Bytes of a row of n elements; throws if n is not a multiple of the block size.
size_t row_bytes(GGMLType t, int64_t n);

// Row conversion for F32, F16, BF16, Q8_0, Q4_0, Q8_KV (throws for other types).
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

}  // namespace latte
