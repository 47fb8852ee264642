// Model loading (issue 4): Model::load of LATTE_BENCH_MODEL (default: the build's tiny model),
// cold (the file's pages dropped from the page cache with posix_fadvise(DONTNEED) before each
// load; clean pages only, no root needed) and warm, for each way of bringing it into memory.
//   BM_Load/mode:M/cold:C   M: 0 mmap (lazy), 1 mmap + populate, 2 --no-mmap, 3 --hugepages (THP)
// Counters: bytes/s of the file, huge_MiB obtained.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "latte/gguf.h"
#include "latte/latte.h"

namespace {

std::string load_model_path() {
    const char* p = std::getenv("LATTE_BENCH_MODEL");
    return p && *p ? p : LATTE_TINY_MODEL;
}

void drop_cache(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) return;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
}

void BM_Load(benchmark::State& state) {
    const int mode = static_cast<int>(state.range(0));
    const bool cold = state.range(1) != 0;
    const std::string path = load_model_path();
    latte::ModelParams mp;
    mp.progress = false;
    if (mode == 1) mp.populate = true;
    if (mode == 2) mp.use_mmap = false;
    if (mode == 3) mp.hugepages = "thp";
    uint64_t size = 0, huge = 0;
    for (auto _ : state) {
        if (cold) {
            state.PauseTiming();
            drop_cache(path);
            state.ResumeTiming();
        }
        auto m = latte::Model::load(path, mp);
        size = m->file_size();
        benchmark::DoNotOptimize(m.get());
        state.PauseTiming();
        m.reset();  // unmapping is not part of the load
        state.ResumeTiming();
    }
    {  // what this mode obtains (huge pages), outside the timing
        latte::GGUFOpenOptions o;
        o.populate = mp.populate;
        o.use_mmap = mp.use_mmap;
        o.hugepages = mode == 3 ? latte::HugePages::Thp : latte::HugePages::Off;
        huge = latte::GGUFFile::open(path, o)->load_info().huge_bytes;
    }
    state.counters["bytes/s"] = benchmark::Counter(static_cast<double>(size) * state.iterations(), benchmark::Counter::kIsRate);
    state.counters["huge_MiB"] = static_cast<double>(huge) / (1 << 20);
    static const char* names[] = {"mmap", "mmap+populate", "no-mmap", "thp"};
    state.SetLabel(std::string(names[mode]) + (cold ? " cold" : " warm"));
}

}  // namespace

BENCHMARK(BM_Load)->ArgNames({"mode", "cold"})->ArgsProduct({{0, 1, 2, 3}, {1, 0}})->UseRealTime()->Unit(benchmark::kMillisecond);
