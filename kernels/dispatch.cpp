#include "kernels/dispatch.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>
#include <string_view>

#include "kernels/scalar/flash_attn.h"
#include "kernels/scalar/gemm.h"
#include "latte/error.h"

#if defined(LATTE_KERNELS_X86)
#include <sys/syscall.h>
#include <unistd.h>

#include "kernels/amx/flash_attn.h"
#include "kernels/amx/gemm.h"
#include "kernels/avx2/flash_attn.h"
#include "kernels/avx2/gemm.h"
#include "kernels/avx512/flash_attn.h"
#include "kernels/avx512/gemm.h"
#endif
#if defined(LATTE_KERNELS_NEON)  // aarch64 builds that compile kernels/neon/ (CMake defines it)
#include <sys/auxv.h>

#include "kernels/neon/flash_attn.h"
#include "kernels/neon/gemm.h"
#endif

namespace latte::kernels {
namespace {

void scalar_quantize(GGMLType t, const float* src, void* dst, int64_t n) { latte::quantize_row(t, src, dst, n); }
void scalar_dequantize(GGMLType t, const void* src, float* dst, int64_t n) { latte::dequantize_row(t, src, dst, n); }

const KernelTable kScalar{Isa::Scalar,           "scalar",        scalar::attn_plain, scalar::attn_flash,
                          scalar::attn_flash_part, scalar_quantize, scalar_dequantize,
                          scalar::gemm_act_size, scalar::gemm_act_prep, scalar::gemm,
                          nullptr,               nullptr,               scalar::attn_combine};

#if defined(LATTE_KERNELS_X86)
const KernelTable kAvx2{Isa::Avx2,          "avx2",             avx2::attn_plain,   avx2::attn_flash,
                        avx2::attn_flash_part, avx2::quantize_row, avx2::dequantize_row,
                        avx2::gemm_act_size, avx2::gemm_act_prep, avx2::gemm,
                        nullptr,             nullptr,               avx2::attn_combine};
// avx2 on CPUs with AVX-VNNI: the same level with the attention kernels' integer dots as
// vpdpbusd/vpdpwssd (kernels/avx2/flash_attn_vnni.cpp; same results); the weight matmuls are avx2's.
const KernelTable kAvx2Vnni{Isa::Avx2,              "avx2-vnni",          avx2vnni::attn_plain, avx2vnni::attn_flash,
                            avx2vnni::attn_flash_part, avx2::quantize_row, avx2::dequantize_row,
                            avx2::gemm_act_size,    avx2::gemm_act_prep,  avx2::gemm,
                            nullptr,                nullptr,              avx2::attn_combine};
const KernelTable kAvx512{Isa::Avx512,          "avx512",             avx512::attn_plain,   avx512::attn_flash,
                          avx512::attn_flash_part, avx512::quantize_row, avx512::dequantize_row,
                          avx512::gemm_act_size, avx512::gemm_act_prep, avx512::gemm,
                          avx512::attn_quant_q, avx512::attn_flash_part_q, avx512::attn_combine};
// amx: the AMX attention kernels, int8 tiles for q8_KV caches and bf16 tiles for bf16 / q8_0 /
// f16 ones (kernels/amx/flash_attn.cpp, which hands every other type and shape to avx512's) and
// the bf16-tile weight matmul for q8_0_r16/q4_0_r16/q4_K_r/q5_K_r weights at 64 or more tokens
// (kernels/amx/gemm.cpp, avx512's otherwise); the row converters are avx512's.
const KernelTable kAmx{Isa::Amx,               "amx",                amx::attn_plain,      amx::attn_flash,
                       amx::attn_flash_part,    avx512::quantize_row, avx512::dequantize_row,
                       amx::gemm_act_size,      amx::gemm_act_prep,   amx::gemm,
                       amx::attn_quant_q,       amx::attn_flash_part_q, avx512::attn_combine,
                       amx::attn_pack_q};

bool cpu_avx2() {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}
// AVX-VNNI (CPUID.(EAX=7,ECX=1):EAX[4]); LATTE_AVX_VNNI=0 keeps the avx2 level on the plain kernels.
bool use_avx_vnni() {
    static const bool use = [] {
        const char* e = std::getenv("LATTE_AVX_VNNI");
        return cpu_avx2() && __builtin_cpu_supports("avxvnni") && !(e && std::string_view(e) == "0");
    }();
    return use;
}
bool cpu_avx512() {
    return cpu_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bf16");
}
bool cpu_amx_isa() {
    return cpu_avx512() && __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-int8") &&
           __builtin_cpu_supports("amx-bf16") && __builtin_cpu_supports("avx512vbmi");
}
// Linux hands out the AMX tile state (XTILEDATA, 8 KiB per thread) only on request, once per
// process (arch_prctl ARCH_REQ_XCOMP_PERM, kernel 5.16+); without it the first tile instruction
// kills the process with SIGILL. Asked once; a refusal makes the level unavailable.
bool os_grants_amx() {
    static const bool ok = [] {
        constexpr int kArchGetXcompPerm = 0x1022, kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
        if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
        unsigned long mask = 0;
        if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &mask) != 0) return false;
        return (mask & (1UL << kXfeatureXtiledata)) != 0;
    }();
    return ok;
}
bool cpu_amx() { return cpu_amx_isa() && os_grants_amx(); }
#endif

#if defined(LATTE_KERNELS_NEON)
const KernelTable kNeon{Isa::Neon,             "neon",             neon::attn_plain,   neon::attn_flash,
                        neon::attn_flash_part, neon::quantize_row, neon::dequantize_row,
                        neon::gemm_act_size, neon::gemm_act_prep, neon::gemm,
                        nullptr,             nullptr,             neon::attn_combine};

// Advanced SIMD is part of every aarch64 CPU; the q8 kernels also need the dot-product extension
// (SDOT, ARMv8.2-A optional, ARMv8.4-A mandatory).
bool cpu_neon() {
#if defined(HWCAP_ASIMDDP)
    return (getauxval(AT_HWCAP) & HWCAP_ASIMD) && (getauxval(AT_HWCAP) & HWCAP_ASIMDDP);
#else
    return (getauxval(AT_HWCAP) & (1UL << 1)) && (getauxval(AT_HWCAP) & (1UL << 20));  // ASIMD, ASIMDDP
#endif
}
#endif

}  // namespace

const char* isa_name(Isa isa) {
    switch (isa) {
        case Isa::Scalar: return "scalar";
        case Isa::Avx2: return "avx2";
        case Isa::Avx512: return "avx512";
        case Isa::Amx: return "amx";
        case Isa::Neon: return "neon";
    }
    return "unknown";
}

Isa parse_isa(std::string_view s) {
    std::string l(s);
    std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Amx, Isa::Neon})
        if (l == isa_name(isa)) return isa;
    throw Error("LATTE_ISA='" + std::string(s) + "' is not a kernel level: expected scalar, avx2, avx512, amx or neon");
}

bool isa_available(Isa isa) {
    switch (isa) {
        case Isa::Scalar: return true;
#if defined(LATTE_KERNELS_X86)
        case Isa::Avx2: return cpu_avx2();
        case Isa::Avx512: return cpu_avx512();
        case Isa::Amx: return cpu_amx();
#endif
#if defined(LATTE_KERNELS_NEON)
        case Isa::Neon: return cpu_neon();
#endif
        default: return false;
    }
}

Isa best_isa() {
    // amx = avx512 + the AMX attention kernels (q8_KV, bf16, q8_0, f16 caches) and matmul, faster
    // at all but two of the shapes measured (docs/PERFORMANCE.md, "AMX attention", "AMX bf16 tiles").
    for (Isa isa : {Isa::Amx, Isa::Avx512, Isa::Avx2, Isa::Neon})
        if (isa_available(isa)) return isa;
    return Isa::Scalar;
}

std::vector<Isa> available_isas() {
    std::vector<Isa> v;
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Amx, Isa::Neon})
        if (isa_available(isa)) v.push_back(isa);
    return v;
}

const KernelTable& table_for(Isa isa) {
    if (!isa_available(isa)) {
        const bool built =
#if defined(LATTE_KERNELS_X86)
            isa != Isa::Neon;
#elif defined(LATTE_KERNELS_NEON)
            isa == Isa::Neon;
#else
            isa == Isa::Scalar;
#endif
        const char* why = built ? "this CPU lacks its instructions" : "this build has no kernels for it";
#if defined(LATTE_KERNELS_X86)
        if (isa == Isa::Amx && cpu_amx_isa()) why = "the OS refused the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM)";
#endif
        throw Error(std::string("kernel level '") + isa_name(isa) + "' (LATTE_ISA) is not available: " + why);
    }
    switch (isa) {
#if defined(LATTE_KERNELS_X86)
        case Isa::Avx2: return use_avx_vnni() ? kAvx2Vnni : kAvx2;
        case Isa::Avx512: return kAvx512;
        case Isa::Amx: return kAmx;
#endif
#if defined(LATTE_KERNELS_NEON)
        case Isa::Neon: return kNeon;
#endif
        default: return kScalar;
    }
}

const KernelTable& resolve_table(std::string_view request) {
    if (request.empty() || request == "auto" || request == "AUTO") return table_for(best_isa());
    return table_for(parse_isa(request));
}

const KernelTable& active() {
    static const KernelTable& t = [] () -> const KernelTable& {
        const char* e = std::getenv("LATTE_ISA");
        return resolve_table(e ? std::string_view(e) : std::string_view());
    }();
    return t;
}

}  // namespace latte::kernels
