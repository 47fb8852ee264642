#include "latte/types.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstring>
#include <vector>

#include "latte/error.h"

namespace latte {
namespace {

constexpr TypeInfo kUnknown{nullptr, 0, 0, false};

const TypeInfo& lookup(uint32_t id) {
    static const TypeInfo table[] = {
        /*0  F32*/ {"f32", 1, 4, true},
        /*1  F16*/ {"f16", 1, 2, true},
        /*2  Q4_0*/ {"q4_0", 32, 18, true},
        /*3  Q4_1*/ {"q4_1", 32, 20, false},
        /*4*/ kUnknown,
        /*5*/ kUnknown,
        /*6  Q5_0*/ {"q5_0", 32, 22, false},
        /*7  Q5_1*/ {"q5_1", 32, 24, false},
        /*8  Q8_0*/ {"q8_0", 32, 34, true},
        /*9  Q8_1*/ {"q8_1", 32, 36, false},
        /*10 Q2_K*/ {"q2_K", 256, 84, false},
        /*11 Q3_K*/ {"q3_K", 256, 110, false},
        /*12 Q4_K*/ {"q4_K", 256, 144, true},
        /*13 Q5_K*/ {"q5_K", 256, 176, true},
        /*14 Q6_K*/ {"q6_K", 256, 210, true},
        /*15 Q8_K*/ {"q8_K", 256, 292, false},
        /*16 IQ2_XXS*/ {"iq2_xxs", 256, 66, false},
        /*17 IQ2_XS*/ {"iq2_xs", 256, 74, false},
        /*18 IQ3_XXS*/ {"iq3_xxs", 256, 98, false},
        /*19 IQ1_S*/ {"iq1_s", 256, 50, false},
        /*20 IQ4_NL*/ {"iq4_nl", 32, 18, false},
        /*21 IQ3_S*/ {"iq3_s", 256, 110, false},
        /*22 IQ2_S*/ {"iq2_s", 256, 82, false},
        /*23 IQ4_XS*/ {"iq4_xs", 256, 136, false},
        /*24 I8*/ {"i8", 1, 1, false},
        /*25 I16*/ {"i16", 1, 2, false},
        /*26 I32*/ {"i32", 1, 4, false},
        /*27 I64*/ {"i64", 1, 8, false},
        /*28 F64*/ {"f64", 1, 8, false},
        /*29 IQ1_M*/ {"iq1_m", 256, 56, false},
        /*30 BF16*/ {"bf16", 1, 2, true},
    };
    // q8_KV: one 8-byte header per row, not per block; row_bytes() special-cases it.
    static const TypeInfo q8_kv{"q8_KV", 1, 1, true};
    // q8_0_r16: Q8_0 repacked in 16-row groups, same bytes per block (34 per 32 weights).
    static const TypeInfo q8_0_r16{"q8_0_r16", 32, 34, false};
    static const TypeInfo q4_0_r16{"q4_0_r16", 32, 18, false};
    if (id == static_cast<uint32_t>(GGMLType::Q8_KV)) return q8_kv;
    if (id == static_cast<uint32_t>(GGMLType::Q8_0_R16)) return q8_0_r16;
    if (id == static_cast<uint32_t>(GGMLType::Q4_0_R16)) return q4_0_r16;
    // q4_K_r / q5_K_r / q6_K_r: K-quant blocks rearranged per block (latte/types.h), rows readable alone.
    static const TypeInfo q4_k_r{"q4_K_r", 256, 144, true}, q5_k_r{"q5_K_r", 256, 176, true},
        q6_k_r{"q6_K_r", 256, 210, true};
    if (id == static_cast<uint32_t>(GGMLType::Q4_K_R)) return q4_k_r;
    if (id == static_cast<uint32_t>(GGMLType::Q5_K_R)) return q5_k_r;
    if (id == static_cast<uint32_t>(GGMLType::Q6_K_R)) return q6_k_r;
    if (id >= sizeof(table) / sizeof(table[0])) return kUnknown;
    return table[id];
}

}  // namespace

bool is_known_type(uint32_t id) {
    return id != static_cast<uint32_t>(GGMLType::Q8_KV) && id != static_cast<uint32_t>(GGMLType::Q8_0_R16) &&
           id != static_cast<uint32_t>(GGMLType::Q4_0_R16) && !is_kr(static_cast<GGMLType>(id)) &&
           lookup(id).name != nullptr;
}

const TypeInfo& type_info(GGMLType t) {
    const TypeInfo& ti = lookup(static_cast<uint32_t>(t));
    if (!ti.name) throw Error("unknown ggml tensor type id " + std::to_string(static_cast<uint32_t>(t)));
    return ti;
}

const char* type_name(GGMLType t) {
    const TypeInfo& ti = lookup(static_cast<uint32_t>(t));
    return ti.name ? ti.name : "unknown";
}

GGMLType parse_type(const std::string& s) {
    std::string l = s;
    std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
    if (l == "f32") return GGMLType::F32;
    if (l == "f16") return GGMLType::F16;
    if (l == "bf16") return GGMLType::BF16;
    if (l == "q8_0") return GGMLType::Q8_0;
    if (l == "q4_0") return GGMLType::Q4_0;
    if (l == "q4_k") return GGMLType::Q4_K;
    if (l == "q5_k") return GGMLType::Q5_K;
    if (l == "q6_k") return GGMLType::Q6_K;
    if (l == "q8_kv") return GGMLType::Q8_KV;
    throw Error("unsupported type '" + s + "': expected one of f32, f16, bf16, q8_0, q4_0, q4_K, q5_K, q6_K, q8_KV");
}

size_t row_bytes(GGMLType t, int64_t n) {
    if (t == GGMLType::Q8_KV) {
        if (n < 0) throw Error("row of " + std::to_string(n) + " elements: negative length");
        return sizeof(RowQ8KVHeader) + static_cast<size_t>(n);
    }
    const TypeInfo& ti = type_info(t);
    if (n < 0 || n % ti.block_size != 0)
        throw Error(std::string("row of ") + std::to_string(n) + " elements is not a multiple of the " +
                    ti.name + " block size " + std::to_string(ti.block_size));
    return static_cast<size_t>(n / ti.block_size) * ti.type_size;
}

namespace {
void check_r16(const char* what, int64_t n_in, int64_t n_out) {
    if (n_in < 0 || n_in % 32 != 0 || n_out < 0 || n_out % 16 != 0)
        throw Error(std::string(what) + ": " + std::to_string(n_out) + " rows of " + std::to_string(n_in) +
                    " elements: need rows % 16 == 0 and elements % 32 == 0");
}

// One layout for both: per block of a 16-row group, the 16 fp16 scales, then for each 4-byte
// column k of the block's quants the 16 rows' 4 bytes (64 bytes); Q8_0's quants flipped to u8.
template <bool Pack>
void r16_copy(GGMLType t, const void* src, int64_t n_in, int64_t n_out, void* dst) {
    if (t != GGMLType::Q8_0 && t != GGMLType::Q4_0)
        throw Error(std::string("repacking to 16-row groups: type ") + type_name(t) + " is not q8_0 or q4_0");
    check_r16(t == GGMLType::Q8_0 ? "q8_0_r16" : "q4_0_r16", n_in, n_out);
    const size_t bs = t == GGMLType::Q8_0 ? 34 : 18, qb = bs - 2, ncol = qb / 4;
    const uint32_t flip = t == GGMLType::Q8_0 ? 0x80808080u : 0u;
    const int64_t nb = n_in / 32;
    const size_t ldw = static_cast<size_t>(nb) * bs;
    const auto* s = static_cast<const uint8_t*>(src);
    auto* d = static_cast<uint8_t*>(dst);
    for (int64_t g = 0; g < n_out / 16; ++g) {
        const size_t go = static_cast<size_t>(g) * 16 * ldw;
        for (int64_t b = 0; b < nb; ++b) {
            const size_t o = go + static_cast<size_t>(b) * 16 * bs;  // the group's block b
            for (int r = 0; r < 16; ++r) {
                const size_t blk = go + r * ldw + static_cast<size_t>(b) * bs;  // row r's block b
                for (size_t k = 0; k < ncol + 1; ++k) {
                    // k < ncol: quant column k; k == ncol: the scale (2 bytes)
                    const size_t pk = k < ncol ? o + 32 + 64 * k + 4 * r : o + 2 * r;
                    const size_t fk = k < ncol ? blk + 2 + 4 * k : blk;
                    if (k == ncol) {
                        if (Pack) std::memcpy(d + pk, s + fk, 2);
                        else std::memcpy(d + fk, s + pk, 2);
                        continue;
                    }
                    uint32_t v;
                    std::memcpy(&v, s + (Pack ? fk : pk), 4);
                    v ^= flip;
                    std::memcpy(d + (Pack ? pk : fk), &v, 4);
                }
            }
        }
    }
}
}  // namespace

void repack_r16(GGMLType t, const void* src, int64_t n_in, int64_t n_out, void* dst) {
    r16_copy<true>(t, src, n_in, n_out, dst);
}
void unpack_r16(GGMLType t, const void* src, int64_t n_in, int64_t n_out, void* dst) {
    r16_copy<false>(t, src, n_in, n_out, dst);
}
void repack_q8_0_r16(const void* src, int64_t n_in, int64_t n_out, void* dst) {
    repack_r16(GGMLType::Q8_0, src, n_in, n_out, dst);
}
void unpack_q8_0_r16(const void* src, int64_t n_in, int64_t n_out, void* dst) {
    unpack_r16(GGMLType::Q8_0, src, n_in, n_out, dst);
}
GGMLType r16_type(GGMLType t) {
    if (t == GGMLType::Q8_0) return GGMLType::Q8_0_R16;
    if (t == GGMLType::Q4_0) return GGMLType::Q4_0_R16;
    throw Error(std::string("no 16-row repacked type for ") + type_name(t));
}
GGMLType r16_base(GGMLType r) {
    if (r == GGMLType::Q8_0_R16) return GGMLType::Q8_0;
    if (r == GGMLType::Q4_0_R16) return GGMLType::Q4_0;
    throw Error(std::string(type_name(r)) + " is not a 16-row repacked type");
}

// ---- K-quant repacking (q4_K_r, q5_K_r, q6_K_r; layouts in latte/types.h) ---------------------
namespace {
// One block's unsigned quants q[256] (natural order) and, for q4_K/q5_K, the 6-bit scales and mins.
struct KBlock {
    uint8_t q[256];
    uint8_t sc[8], m[8];
};

// File layouts (ggml's) to KBlock and back.
void kget(GGMLType t, const uint8_t* p, KBlock& k) {
    if (t == GGMLType::Q6_K) {
        const auto* b = reinterpret_cast<const BlockQ6_K*>(p);
        for (int h = 0; h < 2; ++h)
            for (int l = 0; l < 32; ++l) {
                const uint8_t l0 = b->ql[64 * h + l], l1 = b->ql[64 * h + l + 32], qh = b->qh[32 * h + l];
                k.q[128 * h + l] = static_cast<uint8_t>((l0 & 15) | (qh & 3) << 4);
                k.q[128 * h + l + 32] = static_cast<uint8_t>((l1 & 15) | ((qh >> 2) & 3) << 4);
                k.q[128 * h + l + 64] = static_cast<uint8_t>((l0 >> 4) | ((qh >> 4) & 3) << 4);
                k.q[128 * h + l + 96] = static_cast<uint8_t>((l1 >> 4) | ((qh >> 6) & 3) << 4);
            }
        return;
    }
    const bool b5 = t == GGMLType::Q5_K;
    const uint8_t* scales = p + 4;
    const uint8_t* qh = p + 16;
    const uint8_t* qs = p + (b5 ? 48 : 16);
    for (int j = 0; j < 8; ++j) k4_scale_min(j, scales, k.sc[j], k.m[j]);
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) {
            const uint8_t v = qs[32 * c + l], h = b5 ? qh[l] : 0;
            k.q[64 * c + l] = static_cast<uint8_t>((v & 15) | ((h >> (2 * c)) & 1) << 4);
            k.q[64 * c + 32 + l] = static_cast<uint8_t>((v >> 4) | ((h >> (2 * c + 1)) & 1) << 4);
        }
}
void kput(GGMLType t, const KBlock& k, uint8_t* p) {  // d, dmin / scales, d: left to the caller
    if (t == GGMLType::Q6_K) {
        auto* b = reinterpret_cast<BlockQ6_K*>(p);
        for (int h = 0; h < 2; ++h)
            for (int l = 0; l < 32; ++l) {
                const uint8_t* q = k.q + 128 * h + l;
                b->ql[64 * h + l] = static_cast<uint8_t>((q[0] & 15) | (q[64] & 15) << 4);
                b->ql[64 * h + l + 32] = static_cast<uint8_t>((q[32] & 15) | (q[96] & 15) << 4);
                b->qh[32 * h + l] =
                    static_cast<uint8_t>((q[0] >> 4) | (q[32] >> 4) << 2 | (q[64] >> 4) << 4 | (q[96] >> 4) << 6);
            }
        return;
    }
    const bool b5 = t == GGMLType::Q5_K;
    uint8_t* s = p + 4;
    uint8_t* qh = p + 16;
    uint8_t* qs = p + (b5 ? 48 : 16);
    for (int j = 0; j < 4; ++j) {
        s[j] = static_cast<uint8_t>((k.sc[j] & 63) | (k.sc[j + 4] >> 4) << 6);
        s[j + 4] = static_cast<uint8_t>((k.m[j] & 63) | (k.m[j + 4] >> 4) << 6);
        s[j + 8] = static_cast<uint8_t>((k.sc[j + 4] & 15) | (k.m[j + 4] & 15) << 4);
    }
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) {
            const uint8_t lo = k.q[64 * c + l], hi = k.q[64 * c + 32 + l];
            qs[32 * c + l] = static_cast<uint8_t>((lo & 15) | (hi & 15) << 4);
        }
    if (b5)
        for (int l = 0; l < 32; ++l) {
            int h = 0;
            for (int c = 0; c < 8; ++c) h |= (k.q[32 * c + l] >> 4) << c;  // bit 2c: element 64c+l, 2c+1: 64c+32+l
            qh[l] = static_cast<uint8_t>(h);
        }
}

// Repacked layouts (t: the file type) to KBlock and back. Plain loops over the output bytes (the
// loader repacks whole models with these).
void krget(GGMLType t, const uint8_t* p, KBlock& k) {
    if (t == GGMLType::Q6_K) {
        for (int c = 0; c < 4; ++c)  // ql vector c: element vectors c (low nibbles) and c+4 (high)
            for (int kk = 0; kk < 16; ++kk)
                for (int i = 0; i < 2; ++i) {
                    const int byte = 2 * kk + i;
                    const uint8_t v = p[32 * c + byte], h0 = p[128 + byte], h1 = p[160 + byte];
                    k.q[16 * kk + 2 * c + i] = static_cast<uint8_t>((v & 15) | ((h0 >> (2 * c)) & 3) << 4);
                    k.q[16 * kk + 8 + 2 * c + i] = static_cast<uint8_t>((v >> 4) | ((h1 >> (2 * c)) & 3) << 4);
                }
        return;
    }
    const bool b5 = t == GGMLType::Q5_K;
    const uint8_t* s = p + 4;
    const uint8_t* qh = p + 16;
    const uint8_t* qs = p + (b5 ? 48 : 16);
    for (int l = 0; l < 8; ++l) {
        int sc, m;
        kr_scale_min(s, l, sc, m);
        k.sc[l] = static_cast<uint8_t>(sc);
        k.m[l] = static_cast<uint8_t>(m);
    }
    for (int c = 0; c < 4; ++c)  // quant vector c: element vectors c (low nibbles) and c+4 (high)
        for (int l = 0; l < 8; ++l)
            for (int i = 0; i < 4; ++i) {
                const int byte = 4 * l + i;
                const uint8_t v = qs[32 * c + byte], h = b5 ? qh[byte] : 0;
                k.q[32 * l + 4 * c + i] = static_cast<uint8_t>((v & 15) | ((h >> c) & 1) << 4);
                k.q[32 * l + 16 + 4 * c + i] = static_cast<uint8_t>((v >> 4) | ((h >> (c + 4)) & 1) << 4);
            }
}
void krput(GGMLType t, const KBlock& k, uint8_t* p) {
    if (t == GGMLType::Q6_K) {
        for (int c = 0; c < 4; ++c)
            for (int kk = 0; kk < 16; ++kk)
                for (int i = 0; i < 2; ++i) {
                    const uint8_t lo = k.q[16 * kk + 2 * c + i], hi = k.q[16 * kk + 8 + 2 * c + i];
                    p[32 * c + 2 * kk + i] = static_cast<uint8_t>((lo & 15) | (hi & 15) << 4);
                }
        for (int j = 0; j < 2; ++j)
            for (int kk = 0; kk < 16; ++kk)
                for (int i = 0; i < 2; ++i) {
                    const uint8_t* q = k.q + 16 * kk + 8 * j + i;  // element vectors 4j..4j+3: q[0], q[2], q[4], q[6]
                    p[128 + 32 * j + 2 * kk + i] =
                        static_cast<uint8_t>((q[0] >> 4) | (q[2] >> 4) << 2 | (q[4] >> 4) << 4 | (q[6] >> 4) << 6);
                }
        return;
    }
    const bool b5 = t == GGMLType::Q5_K;
    uint8_t* s = p + 4;
    uint8_t* qh = p + 16;
    uint8_t* qs = p + (b5 ? 48 : 16);
    for (int l = 0; l < 8; ++l) s[l] = static_cast<uint8_t>((k.sc[l] & 63) | (k.m[l] >> 4) << 6);
    for (int j = 0; j < 4; ++j) s[8 + j] = static_cast<uint8_t>((k.m[j] & 15) | (k.m[j + 4] & 15) << 4);
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 8; ++l)
            for (int i = 0; i < 4; ++i) {
                const uint8_t lo = k.q[32 * l + 4 * c + i], hi = k.q[32 * l + 16 + 4 * c + i];
                qs[32 * c + 4 * l + i] = static_cast<uint8_t>((lo & 15) | (hi & 15) << 4);
            }
    if (b5)
        for (int l = 0; l < 8; ++l)
            for (int i = 0; i < 4; ++i) {
                const uint8_t* q = k.q + 32 * l + i;  // element vector e: q[4e]
                int h = 0;
                for (int e = 0; e < 8; ++e) h |= (q[4 * e] >> 4) << e;
                qh[4 * l + i] = static_cast<uint8_t>(h);
            }
}

size_t k_block_bytes(GGMLType t) { return t == GGMLType::Q4_K ? 144 : t == GGMLType::Q5_K ? 176 : 210; }

template <bool Pack>
void k_convert(GGMLType base, const void* src, void* dst, int64_t n) {
    if (n < 0 || n % 256 != 0)
        throw Error(std::string(type_name(base)) + " repacking: " + std::to_string(n) + " elements is not a multiple of 256");
    const size_t bs = k_block_bytes(base);
    // what is not rearranged: d, dmin (q4_K/q5_K, bytes 0-3) or scales[16] and d (q6_K, bytes 192-209)
    const size_t keep_at = base == GGMLType::Q6_K ? 192 : 0, keep = base == GGMLType::Q6_K ? 18 : 4;
    const auto* s = static_cast<const uint8_t*>(src);
    auto* d = static_cast<uint8_t*>(dst);
    uint8_t in[210], out[210];
    KBlock k;
    for (int64_t b = 0; b < n / 256; ++b) {
        std::memcpy(in, s + b * bs, bs);
        if (Pack) {
            kget(base, in, k);
            krput(base, k, out);
        } else {
            krget(base, in, k);
            kput(base, k, out);
        }
        std::memcpy(out + keep_at, in + keep_at, keep);
        std::memcpy(d + b * bs, out, bs);
    }
}
}  // namespace

bool is_r16(GGMLType t) { return t == GGMLType::Q8_0_R16 || t == GGMLType::Q4_0_R16; }
bool is_kr(GGMLType t) { return t == GGMLType::Q4_K_R || t == GGMLType::Q5_K_R || t == GGMLType::Q6_K_R; }
GGMLType kr_type(GGMLType t) {
    if (t == GGMLType::Q4_K) return GGMLType::Q4_K_R;
    if (t == GGMLType::Q5_K) return GGMLType::Q5_K_R;
    if (t == GGMLType::Q6_K) return GGMLType::Q6_K_R;
    throw Error(std::string("no repacked K-quant type for ") + type_name(t));
}
GGMLType kr_base(GGMLType r) {
    if (r == GGMLType::Q4_K_R) return GGMLType::Q4_K;
    if (r == GGMLType::Q5_K_R) return GGMLType::Q5_K;
    if (r == GGMLType::Q6_K_R) return GGMLType::Q6_K;
    throw Error(std::string(type_name(r)) + " is not a repacked K-quant type");
}
void repack_k(GGMLType t, const void* src, void* dst, int64_t n) {
    kr_type(t);  // throws for other types
    k_convert<true>(t, src, dst, n);
}
void unpack_k(GGMLType r, const void* src, void* dst, int64_t n) { k_convert<false>(kr_base(r), src, dst, n); }

float fp16_to_fp32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {  // subnormal: normalise
            int e = -1;
            do { ++e; mant <<= 1; } while ((mant & 0x400u) == 0);
            mant &= 0x3ffu;
            bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | mant << 13;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | mant << 13;
    } else {
        bits = sign | (exp + 112) << 23 | mant << 13;
    }
    return std::bit_cast<float>(bits);
}

uint16_t fp32_to_fp16(float f) {
    const uint32_t x = std::bit_cast<uint32_t>(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) {  // inf or nan
        return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
    }
    if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
    if (absx < 0x38800000u) {  // below the smallest normal half: subnormal or zero
        if (absx < 0x33000000u) return static_cast<uint16_t>(sign);  // < 2^-25 rounds to 0
        const uint32_t e = absx >> 23;
        const uint32_t m = (absx & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126 - e;  // 14 + (113 - e) - ... yields the half subnormal
        uint32_t half = m >> (shift);
        const uint32_t rem = m & ((1u << shift) - 1);
        const uint32_t halfway = 1u << (shift - 1);
        if (rem > halfway || (rem == halfway && (half & 1u))) ++half;
        return static_cast<uint16_t>(sign | half);
    }
    uint32_t h = ((absx >> 23) - 112) << 10 | ((absx >> 13) & 0x3ffu);
    const uint32_t rem = absx & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent: correct
    return static_cast<uint16_t>(sign | h);
}

float bf16_to_fp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint16_t fp32_to_bf16(float f) {
    uint32_t x = std::bit_cast<uint32_t>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet nan
    x += 0x7fffu + ((x >> 16) & 1u);
    return static_cast<uint16_t>(x >> 16);
}

namespace {

// ---- K-quants (ggml's q4_K, q5_K, q6_K; layouts in latte/types.h) ------------------------------

// Q4_K (B5 false) / Q5_K (B5 true): per 64-element chunk c, sub-blocks 2c (low nibbles) and 2c+1
// (high), x = (d·sc)·q - (dmin·m) in f32 as ggml computes it.
template <bool B5, class Block>
void dequant_k45(const Block* b, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i) {
        const float d = fp16_to_fp32(b[i].d), dmin = fp16_to_fp32(b[i].dmin);
        for (int c = 0; c < 4; ++c) {
            uint8_t sc, m;
            k4_scale_min(2 * c, b[i].scales, sc, m);
            const float d1 = d * sc, m1 = dmin * m;
            k4_scale_min(2 * c + 1, b[i].scales, sc, m);
            const float d2 = d * sc, m2 = dmin * m;
            const uint8_t* q = b[i].qs + 32 * c;
            for (int l = 0; l < 32; ++l) {
                int lo = q[l] & 0x0F, hi = q[l] >> 4;
                if constexpr (B5) {
                    lo += ((b[i].qh[l] >> (2 * c)) & 1) << 4;
                    hi += ((b[i].qh[l] >> (2 * c + 1)) & 1) << 4;
                }
                y[64 * c + l] = d1 * static_cast<float>(lo) - m1;
                y[64 * c + 32 + l] = d2 * static_cast<float>(hi) - m2;
            }
        }
        y += kQK_K;
    }
}

void dequant_q6_k(const BlockQ6_K* b, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i) {
        const float d = fp16_to_fp32(b[i].d);
        for (int h = 0; h < 2; ++h) {
            const uint8_t* ql = b[i].ql + 64 * h;
            const uint8_t* qh = b[i].qh + 32 * h;
            const int8_t* sc = b[i].scales + 8 * h;
            float* o = y + 128 * h;
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                o[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
                o[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
                o[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
                o[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
            }
        }
        y += kQK_K;
    }
}

// The smallest positive fp16 whose value is >= v (v >= 0, finite, below the fp16 max): a super-block
// scale that never makes a sub-block's 6/8-bit scale overflow.
uint16_t fp16_at_least(float v) {
    uint16_t h = fp32_to_fp16(v);
    while (fp16_to_fp32(h) < v && h < 0x7bffu) ++h;
    return h;
}

// Q4_K / Q5_K reference quantiser (nmax 15 / 31): per sub-block j of 32, offset m_j = -min(0, min x),
// step s_j = (max x + m_j) / nmax; d = max s_j / 63 and dmin = max m_j / 63 (rounded up to fp16);
// the 6-bit min rounds to nearest, the 6-bit scale rounds up so that the step covers the range;
// q = round((x + dmin·m) / (d·sc)) clamped to [0, nmax].
template <bool B5, class Block>
void quant_k45(const float* x, Block* b, int64_t nb) {
    constexpr int nmax = B5 ? 31 : 15;
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        float stp[8], off[8];
        float smax = 0.0f, mmax = 0.0f;
        for (int j = 0; j < 8; ++j) {
            float mn = 0.0f, mx = 0.0f;
            for (int l = 0; l < 32; ++l) {
                mn = std::min(mn, x[32 * j + l]);
                mx = std::max(mx, x[32 * j + l]);
            }
            off[j] = -mn;
            stp[j] = (mx - mn) / nmax;
            smax = std::max(smax, stp[j]);
            mmax = std::max(mmax, off[j]);
        }
        Block& o = b[i];
        o.d = fp16_at_least(smax / 63.0f);
        o.dmin = fp16_at_least(mmax / 63.0f);
        const float d = fp16_to_fp32(o.d), dmin = fp16_to_fp32(o.dmin);
        uint8_t ls[8], lm[8];
        for (int j = 0; j < 8; ++j) {
            lm[j] = static_cast<uint8_t>(dmin > 0.0f ? std::min(63L, std::lround(off[j] / dmin)) : 0);
            float top = 0.0f;  // max x + the stored offset
            for (int l = 0; l < 32; ++l) top = std::max(top, x[32 * j + l] + dmin * lm[j]);
            ls[j] = static_cast<uint8_t>(d > 0.0f ? std::min(63.0f, std::ceil(top / (nmax * d))) : 0.0f);
        }
        std::memset(o.scales, 0, sizeof o.scales);
        for (int j = 0; j < 8; ++j) {
            if (j < 4) {
                o.scales[j] |= ls[j];
                o.scales[j + 4] |= lm[j];
            } else {
                o.scales[j + 4] = static_cast<uint8_t>((ls[j] & 0x0F) | ((lm[j] & 0x0F) << 4));
                o.scales[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
                o.scales[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
            }
        }
        std::memset(o.qs, 0, sizeof o.qs);
        if constexpr (B5) std::memset(o.qh, 0, sizeof o.qh);
        for (int j = 0; j < 8; ++j) {
            uint8_t sc, m;
            k4_scale_min(j, o.scales, sc, m);  // what dequantisation will read
            const float step = d * sc, mo = dmin * m;
            const float inv = step > 0.0f ? 1.0f / step : 0.0f;
            const int c = j / 2, hi = j % 2;
            for (int l = 0; l < 32; ++l) {
                const int q = std::clamp(static_cast<int>(std::lround((x[32 * j + l] + mo) * inv)), 0, nmax);
                o.qs[32 * c + l] |= static_cast<uint8_t>((q & 0x0F) << (4 * hi));
                if constexpr (B5) o.qh[l] |= static_cast<uint8_t>((q >> 4) << (2 * c + hi));
            }
        }
    }
}

// Q6_K reference quantiser: per sub-block k of 16, step s_k = amax / 31.5; d = max s_k / 127 (rounded up
// to fp16), scales[k] = ceil(s_k / d) (<= 127); q = round(x / (d·scales[k])) clamped to [-32, 31], + 32.
void quant_q6_k(const float* x, BlockQ6_K* b, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        float stp[16], smax = 0.0f;
        for (int k = 0; k < 16; ++k) {
            float amax = 0.0f;
            for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[16 * k + l]));
            stp[k] = amax / 31.5f;
            smax = std::max(smax, stp[k]);
        }
        BlockQ6_K& o = b[i];
        o.d = fp16_at_least(smax / 127.0f);
        const float d = fp16_to_fp32(o.d);
        for (int k = 0; k < 16; ++k)
            o.scales[k] = static_cast<int8_t>(d > 0.0f ? std::min(127.0f, std::ceil(stp[k] / d)) : 0.0f);
        uint8_t L[kQK_K];
        for (int e = 0; e < kQK_K; ++e) {
            const float step = d * o.scales[e / 16];
            const int q = step > 0.0f ? static_cast<int>(std::lround(x[e] / step)) : 0;
            L[e] = static_cast<uint8_t>(std::clamp(q, -32, 31) + 32);
        }
        for (int h = 0; h < 2; ++h) {
            const uint8_t* Lh = L + 128 * h;
            for (int l = 0; l < 32; ++l) {
                o.ql[64 * h + l] = static_cast<uint8_t>((Lh[l] & 0x0F) | ((Lh[l + 64] & 0x0F) << 4));
                o.ql[64 * h + l + 32] = static_cast<uint8_t>((Lh[l + 32] & 0x0F) | ((Lh[l + 96] & 0x0F) << 4));
                o.qh[32 * h + l] = static_cast<uint8_t>((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) |
                                                        ((Lh[l + 96] >> 4) << 6));
            }
        }
    }
}

}  // namespace

void dequantize_row(GGMLType t, const void* src, float* dst, int64_t n) {
    switch (t) {
        case GGMLType::F32:
            std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
            return;
        case GGMLType::F16: {
            const auto* s = static_cast<const uint16_t*>(src);
            for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(s[i]);
            return;
        }
        case GGMLType::BF16: {
            const auto* s = static_cast<const uint16_t*>(src);
            for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(s[i]);
            return;
        }
        case GGMLType::Q8_0: {
            row_bytes(t, n);
            const auto* b = static_cast<const BlockQ8_0*>(src);
            for (int64_t i = 0; i < n / 32; ++i) {
                const float d = fp16_to_fp32(b[i].d);
                for (int j = 0; j < 32; ++j) dst[i * 32 + j] = d * static_cast<float>(b[i].qs[j]);
            }
            return;
        }
        case GGMLType::Q4_0: {
            row_bytes(t, n);
            const auto* b = static_cast<const BlockQ4_0*>(src);
            for (int64_t i = 0; i < n / 32; ++i) {
                const float d = fp16_to_fp32(b[i].d);
                for (int j = 0; j < 16; ++j) {
                    dst[i * 32 + j] = d * static_cast<float>((b[i].qs[j] & 0x0f) - 8);
                    dst[i * 32 + j + 16] = d * static_cast<float>((b[i].qs[j] >> 4) - 8);
                }
            }
            return;
        }
        case GGMLType::Q4_K:
            row_bytes(t, n);
            return dequant_k45<false>(static_cast<const BlockQ4_K*>(src), dst, n / kQK_K);
        case GGMLType::Q5_K:
            row_bytes(t, n);
            return dequant_k45<true>(static_cast<const BlockQ5_K*>(src), dst, n / kQK_K);
        case GGMLType::Q6_K:
            row_bytes(t, n);
            return dequant_q6_k(static_cast<const BlockQ6_K*>(src), dst, n / kQK_K);
        case GGMLType::Q4_K_R: case GGMLType::Q5_K_R: case GGMLType::Q6_K_R: {
            const GGMLType base = kr_base(t);
            static thread_local std::vector<uint8_t> tmp;
            tmp.resize(row_bytes(base, n));
            unpack_k(t, src, tmp.data(), n);
            return dequantize_row(base, tmp.data(), dst, n);
        }
        case GGMLType::Q8_KV: {
            RowQ8KVHeader h;
            std::memcpy(&h, src, sizeof h);
            const auto* q = static_cast<const int8_t*>(src) + sizeof h;
            for (int64_t i = 0; i < n; ++i) dst[i] = h.d * static_cast<float>(q[i]);
            return;
        }
        default:
            throw Error(std::string("dequantize: type ") + type_name(t) + " is not supported");
    }
}

void quantize_row(GGMLType t, const float* src, void* dst, int64_t n) {
    switch (t) {
        case GGMLType::F32:
            std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
            return;
        case GGMLType::F16: {
            auto* d = static_cast<uint16_t*>(dst);
            for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_fp16(src[i]);
            return;
        }
        case GGMLType::BF16: {
            auto* d = static_cast<uint16_t*>(dst);
            for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_bf16(src[i]);
            return;
        }
        case GGMLType::Q8_0: {  // as ggml's quantize_row_q8_0_ref
            row_bytes(t, n);
            auto* b = static_cast<BlockQ8_0*>(dst);
            for (int64_t i = 0; i < n / 32; ++i) {
                float amax = 0.0f;
                for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(src[i * 32 + j]));
                const float d = amax / 127.0f;
                const float id = d != 0.0f ? 1.0f / d : 0.0f;
                b[i].d = fp32_to_fp16(d);
                for (int j = 0; j < 32; ++j) b[i].qs[j] = static_cast<int8_t>(std::lround(src[i * 32 + j] * id));
            }
            return;
        }
        case GGMLType::Q4_0: {  // as ggml's quantize_row_q4_0_ref
            row_bytes(t, n);
            auto* b = static_cast<BlockQ4_0*>(dst);
            for (int64_t i = 0; i < n / 32; ++i) {
                float amax = 0.0f, max = 0.0f;
                for (int j = 0; j < 32; ++j) {
                    const float v = src[i * 32 + j];
                    if (std::fabs(v) > amax) { amax = std::fabs(v); max = v; }
                }
                const float d = max / -8.0f;
                const float id = d != 0.0f ? 1.0f / d : 0.0f;
                b[i].d = fp32_to_fp16(d);
                for (int j = 0; j < 16; ++j) {
                    const float x0 = src[i * 32 + j] * id, x1 = src[i * 32 + 16 + j] * id;
                    const int q0 = std::min(15, static_cast<int>(x0 + 8.5f));
                    const int q1 = std::min(15, static_cast<int>(x1 + 8.5f));
                    b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
                }
            }
            return;
        }
        case GGMLType::Q4_K:
            row_bytes(t, n);
            return quant_k45<false>(src, static_cast<BlockQ4_K*>(dst), n / kQK_K);
        case GGMLType::Q5_K:
            row_bytes(t, n);
            return quant_k45<true>(src, static_cast<BlockQ5_K*>(dst), n / kQK_K);
        case GGMLType::Q6_K:
            row_bytes(t, n);
            return quant_q6_k(src, static_cast<BlockQ6_K*>(dst), n / kQK_K);
        case GGMLType::Q4_K_R: case GGMLType::Q5_K_R: case GGMLType::Q6_K_R:
            quantize_row(kr_base(t), src, dst, n);
            return repack_k(kr_base(t), dst, dst, n);
        case GGMLType::Q8_KV: {  // one scale per row, as ik_llama.cpp's q8_KV
            float amax = 0.0f;
            for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(src[i]));
            RowQ8KVHeader h{amax / 127.0f, 0};
            const float id = h.d != 0.0f ? 1.0f / h.d : 0.0f;
            auto* q = static_cast<int8_t*>(dst) + sizeof h;
            for (int64_t i = 0; i < n; ++i) {
                q[i] = static_cast<int8_t>(std::lround(src[i] * id));
                h.sum += q[i];
            }
            std::memcpy(dst, &h, sizeof h);
            return;
        }
        default:
            throw Error(std::string("quantize: type ") + type_name(t) + " is not supported");
    }
}

}  // namespace latte
