// How GGUFFile::open brings a file into memory: mmap (default), or read into anonymous memory
// (--no-mmap), on transparent or hugetlbfs huge pages, populated with a progress bar, locked,
// interleaved over NUMA nodes; and what it got (read back from /proc/self/smaps).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "latte/gguf.h"

namespace latte::detail {

struct LoadedFile {
    const uint8_t* base = nullptr;
    size_t map_size = 0;  // what to munmap
    GGUFLoadInfo info;
};

// Maps or reads `fd` (size bytes, > 0) per `opt`; always closes fd. Throws latte::Error naming the
// file and the fix on every failure.
LoadedFile load_file(const std::string& path, int fd, size_t size, const GGUFOpenOptions& opt);

// The smaps fields of the mapping that starts at `addr` (0 when not found).
struct SmapsInfo {
    uint64_t rss = 0, huge = 0, locked = 0;
};
SmapsInfo smaps_of(const void* addr);

// /proc/meminfo field in bytes (e.g. "MemAvailable", "HugePages_Free" is a count), -1 if absent.
int64_t meminfo(const std::string& key);

}  // namespace latte::detail
