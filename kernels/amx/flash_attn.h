// AMX attention kernels: the contracts of kernels/scalar/flash_attn.h and the AttnFn/AttnPartFn
// entries of kernels/dispatch.h. Declarations only (no intrinsics): dispatch.cpp includes this;
// kernels/amx/flash_attn.cpp is compiled with the avx512 flags plus AMX-TILE/INT8/BF16.
#pragma once
#include <cstddef>
#include <cstdint>

#include "latte/types.h"

namespace latte::kernels::amx {

#include "kernels/attn_decls.inc"

}  // namespace latte::kernels::amx
