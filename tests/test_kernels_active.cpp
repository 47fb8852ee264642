// Which kernel table this run uses, said once in the test output (ctest -V shows it), and, when
// LATTE_EXPECT_ISA names a level, a failure unless that level is available and (unless LATTE_ISA
// forces another) active: the NEON build run under qemu-aarch64 sets it to neon (tools/test.sh,
// cmake/kernels_only.cmake), so a build whose SIMD table went missing cannot pass by comparing the
// scalar reference with itself.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <iostream>
#include <string>

#include "kernels/dispatch.h"

using latte::kernels::Isa;

TEST_CASE("kernels: the active table is reported and is the expected one (LATTE_EXPECT_ISA)", "[kernels]") {
    const latte::kernels::KernelTable& t = latte::kernels::active();
    std::string avail;
    for (Isa isa : latte::kernels::available_isas()) avail += std::string(avail.empty() ? "" : " ") + latte::kernels::isa_name(isa);
    std::cout << "latte kernels: active table " << t.name << " (available: " << avail << ")" << std::endl;
    const char* expect = std::getenv("LATTE_EXPECT_ISA");
    if (expect == nullptr || *expect == '\0') return;
    const Isa want = latte::kernels::parse_isa(expect);
    INFO("LATTE_EXPECT_ISA=" << expect << ", available: " << avail);
    REQUIRE(latte::kernels::isa_available(want));
    const char* forced = std::getenv("LATTE_ISA");
    if (forced == nullptr || *forced == '\0') CHECK(t.isa == want);
}
