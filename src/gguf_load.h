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

// The model file shrinking under a mapping (issue 8, docs/RELIABILITY.md): a read of a mapped page
// past the file's new end raises SIGBUS. Every mmap'd GGUF is registered here; a SIGBUS handler
// (installed with the first registration, chaining to the previous handler for any other address)
// turns a fault inside a registered mapping into one line on stderr naming the file and the offset
// and _exit(kMappedFileChangedExit), instead of a core dump. It cannot be a latte::Error: the fault
// comes from a load deep inside a kernel, where no exception may be thrown. --no-mmap (a private
// copy) is the prevention.
constexpr int kMappedFileChangedExit = 74;  // EX_IOERR
void watch_mapping(const uint8_t* base, size_t size, const std::string& path);
void unwatch_mapping(const uint8_t* base);  // no-op when not watched

// The smaps fields of the mappings that cover [addr, addr + size) (0 when none).
struct SmapsInfo {
    uint64_t rss = 0, huge = 0, locked = 0;
};
SmapsInfo smaps_of(const void* addr, size_t size);

// /proc/meminfo field in bytes (e.g. "MemAvailable", "HugePages_Free" is a count), -1 if absent.
int64_t meminfo(const std::string& key);

}  // namespace latte::detail
