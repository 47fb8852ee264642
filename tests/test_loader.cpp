// The loader's options (mmap, --no-mmap, --hugepages, --populate, --mlock, --numa interleave) on
// the tiny model give bit-identical logits, the load report says what was obtained, and the bad
// cases fail with an error that names the fix.
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf_load.h"
#include "latte/gguf.h"
#include "latte/latte.h"

using namespace latte;
namespace fs = std::filesystem;

namespace {

std::vector<float> run_logits(const ModelParams& mp) {
    auto m = Model::load(LATTE_TINY_MODEL, mp);
    ContextParams cp;
    cp.n_ctx = 64;
    cp.n_threads = 2;
    Context ctx(m, cp);
    std::vector<float> all;
    std::vector<int32_t> toks = {1, 17, 42, 99, 7};
    ctx.decode(toks, true);
    const int32_t V = static_cast<int32_t>(m->hparams().n_vocab);
    for (int i = 0; i < static_cast<int>(toks.size()); ++i) all.insert(all.end(), ctx.logits(i), ctx.logits(i) + V);
    ctx.decode({5});
    all.insert(all.end(), ctx.logits(), ctx.logits() + V);
    return all;
}

}  // namespace

TEST_CASE("loader: every option gives identical logits", "[loader]") {
    const std::vector<float> ref = run_logits({});
    struct Case { const char* name; ModelParams mp; };
    std::vector<Case> cases;
    { ModelParams p; p.use_mmap = false; cases.push_back({"no-mmap", p}); }
    { ModelParams p; p.hugepages = "thp"; cases.push_back({"hugepages thp", p}); }
    { ModelParams p; p.populate = true; p.progress = false; cases.push_back({"populate", p}); }
    { ModelParams p; p.numa_interleave = true; cases.push_back({"numa interleave", p}); }
    { ModelParams p; p.use_mmap = false; p.numa_interleave = true; cases.push_back({"no-mmap + interleave", p}); }
    for (const Case& c : cases) {
        INFO(c.name);
        const std::vector<float> got = run_logits(c.mp);
        REQUIRE(got.size() == ref.size());
        CHECK(std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)) == 0);
    }
    // --mlock: identical logits when the limit allows it, else the error names ulimit -l.
    ModelParams lk;
    lk.mlock = true;
    try {
        const std::vector<float> got = run_logits(lk);
        CHECK(std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)) == 0);
    } catch (const Error& e) {
        CHECK_THAT(e.what(), Catch::Contains("ulimit -l"));
    }
}

TEST_CASE("loader: the load report", "[loader]") {
    {
        auto m = Model::load(LATTE_TINY_MODEL);
        const std::string r = m->load_report();
        CHECK_THAT(r, Catch::Contains("tensors"));
        CHECK_THAT(r, Catch::Contains("MiB"));
        CHECK_THAT(r, Catch::Contains("mmap"));
        CHECK_THAT(r, Catch::Contains("huge pages"));
        CHECK_THAT(r, Catch::Contains("locked"));
    }
    {
        GGUFOpenOptions o;
        o.use_mmap = false;
        auto f = GGUFFile::open(LATTE_TINY_MODEL, o);
        CHECK(f->load_info().mode == "read");
        CHECK(f->load_info().resident_bytes >= f->file_size());  // read in: every page resident
    }
    {
        GGUFOpenOptions o;
        o.mlock = true;
        try {
            auto f = GGUFFile::open(LATTE_TINY_MODEL, o);
            // ASan's mlock interceptor does nothing (tools/sanitize.sh sets LATTE_SANITIZER).
            if (!std::getenv("LATTE_SANITIZER")) CHECK(f->load_info().locked_bytes >= f->file_size() / 4096 * 4096);
        } catch (const Error& e) {
            CHECK_THAT(e.what(), Catch::Contains("RLIMIT_MEMLOCK"));
        }
    }
    {
        GGUFOpenOptions o;
        o.hugepages = HugePages::Thp;
        auto f = GGUFFile::open(LATTE_TINY_MODEL, o);
        CHECK(f->load_info().mode == "read + THP");
        // The tiny model is 21.7 MiB: THP (madvise or always) normally backs most of it; when the
        // kernel gives none, the report must say so.
        if (f->load_info().huge_bytes == 0) {
            bool said = false;
            for (const auto& n : f->load_info().notes) said = said || n.find("gave none") != std::string::npos;
            CHECK(said);
        }
    }
}

TEST_CASE("loader: bad cases are clear errors", "[loader]") {
    // hugetlb without reserved pages
    if (detail::meminfo("HugePages_Free") <= 0) {
        GGUFOpenOptions o;
        o.hugepages = HugePages::HugeTlb;
        CHECK_THROWS_WITH(GGUFFile::open(LATTE_TINY_MODEL, o), Catch::Contains("vm.nr_hugepages") && Catch::Contains("--hugetlb"));
    }
    // --no-mmap of a file larger than memory: a sparse file costs no disk.
    const fs::path big = fs::path(LATTE_BUILD_DIR) / "test-models" / "bigger-than-memory.gguf";
    fs::create_directories(big.parent_path());
    {
        const int fd = ::open(big.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
        REQUIRE(fd >= 0);
        const int64_t avail = detail::meminfo("MemAvailable");
        REQUIRE(avail > 0);
        REQUIRE(::ftruncate(fd, static_cast<off_t>(avail) * 2 + (off_t{1} << 30)) == 0);
        ::close(fd);
    }
    GGUFOpenOptions o;
    o.use_mmap = false;
    CHECK_THROWS_WITH(GGUFFile::open(big.string(), o), Catch::Contains("MemAvailable") && Catch::Contains("--no-mmap"));
    o.use_mmap = true;
    o.hugepages = HugePages::Thp;
    CHECK_THROWS_WITH(GGUFFile::open(big.string(), o), Catch::Contains("MemAvailable"));
    fs::remove(big);
    // bad hugepages name in ModelParams
    ModelParams mp;
    mp.hugepages = "giant";
    CHECK_THROWS_WITH(Model::load(LATTE_TINY_MODEL, mp), Catch::Contains("thp"));
}

TEST_CASE("loader: the context's thread pool options", "[loader]") {
    auto m = Model::load(LATTE_TINY_MODEL);
    ContextParams cp;
    cp.n_ctx = 16;
    cp.cpu_range = "0";
    {
        Context ctx(m, cp);
        CHECK(ctx.params().n_threads == 1);
        CHECK_THAT(ctx.threads_report(), Catch::Contains("threads: 1"));
    }
    cp.cpu_range = "";
    cp.numa = "distribute";
    {
        Context ctx(m, cp);
        CHECK(ctx.params().n_threads >= 1);
        CHECK_THAT(ctx.threads_report(), Catch::Contains("numa"));
    }
    cp.numa = "bogus";
    CHECK_THROWS_AS(Context(m, cp), Error);
}

TEST_CASE("loader: contexts can share the process pool", "[loader]") {
    auto m = Model::load(LATTE_TINY_MODEL);
    ContextParams cp;
    cp.n_ctx = 32;
    cp.shared_pool = true;
    Context a(m, cp), b(m, cp);
    CHECK(a.params().n_threads == b.params().n_threads);
    a.decode({1, 2, 3});
    b.decode({1, 2, 3});
    const int32_t V = static_cast<int32_t>(m->hparams().n_vocab);
    CHECK(std::memcmp(a.logits(), b.logits(), static_cast<size_t>(V) * sizeof(float)) == 0);
    ContextParams own = cp;
    own.shared_pool = false;
    own.n_threads = 3;
    Context c(m, own);
    c.decode({1, 2, 3});
    CHECK(std::memcmp(a.logits(), c.logits(), static_cast<size_t>(V) * sizeof(float)) == 0);
}
