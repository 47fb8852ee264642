// Bringing a GGUF file into memory (see gguf_load.h): mmap / read, huge pages, populate, mlock,
// NUMA interleave, and the load report read back from /proc/self/smaps.
#include "gguf_load.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "latte/error.h"

namespace latte::detail {
namespace {

constexpr size_t kChunk = size_t{64} << 20;  // populate / read granularity (progress steps)
constexpr size_t kHuge2M = size_t{2} << 20;

std::string mib(uint64_t b) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1 << 20));
    return buf;
}

std::string read_text(const char* path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

class Progress {
public:
    Progress(bool on, const std::string& what, size_t total)
        : on_(on && ::isatty(STDERR_FILENO)), what_(what), total_(total) {}
    void update(size_t done) {
        if (!on_) return;
        const int pct = total_ ? static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total_)) : 100;
        if (pct == last_) return;
        last_ = pct;
        constexpr int kWidth = 30;
        const int fill = pct * kWidth / 100;
        std::fprintf(stderr, "\r%s [%.*s%*s] %3d%% %s / %s", what_.c_str(), fill, "==============================",
                     kWidth - fill, "", pct, mib(done).c_str(), mib(total_).c_str());
        std::fflush(stderr);
    }
    ~Progress() {
        if (on_ && last_ >= 0) std::fprintf(stderr, "\n");
    }

private:
    bool on_;
    std::string what_;
    size_t total_;
    int last_ = -1;
};

// Unmaps on scope exit unless released (error paths).
struct MapGuard {
    void* p = nullptr;
    size_t n = 0;
    ~MapGuard() {
        if (p) unwatch_mapping(static_cast<const uint8_t*>(p));
        if (p) ::munmap(p, n);
    }
};

struct FdGuard {
    int fd;
    ~FdGuard() {
        if (fd >= 0) ::close(fd);
    }
};

std::vector<int> online_nodes() {
    std::vector<int> nodes;
    std::string s = read_text("/sys/devices/system/node/online");
    std::stringstream ss(s);
    std::string part;
    while (std::getline(ss, part, ',')) {
        if (part.empty() || part == "\n") continue;
        int a = 0, b = 0;
        if (std::sscanf(part.c_str(), "%d-%d", &a, &b) == 2) {
            for (int i = a; i <= b; ++i) nodes.push_back(i);
        } else if (std::sscanf(part.c_str(), "%d", &a) == 1) {
            nodes.push_back(a);
        }
    }
    if (nodes.empty()) nodes.push_back(0);
    return nodes;
}

void interleave(void* p, size_t n, bool file_backed, GGUFLoadInfo& info) {
    const std::vector<int> nodes = online_nodes();
    if (nodes.size() <= 1) {
        info.notes.push_back("numa: one NUMA node: interleaving the model's pages has no effect");
        return;
    }
    unsigned long mask[16] = {};
    int maxnode = 0;
    for (int nd : nodes) {
        if (nd >= 16 * 64) continue;
        mask[nd / 64] |= 1ul << (nd % 64);
        maxnode = std::max(maxnode, nd + 1);
    }
    constexpr int kMpolInterleave = 3;  // MPOL_INTERLEAVE
    constexpr unsigned kMfMove = 1u << 1;  // MPOL_MF_MOVE
    const long rc = syscall(SYS_mbind, p, n, kMpolInterleave, mask, static_cast<unsigned long>(maxnode + 1), kMfMove);
    if (rc != 0)
        info.notes.push_back(std::string("numa: interleaving the model's pages failed: ") + std::strerror(errno));
    else
        info.notes.push_back("numa: model pages interleaved over " + std::to_string(nodes.size()) + " nodes" +
                             (file_backed ? " (file pages already in the page cache stay where they are: "
                                            "--no-mmap places every page)"
                                          : ""));
}

// Reads the whole file into `dst` (pread in chunks, with progress).
void read_into(const std::string& path, int fd, uint8_t* dst, size_t size, bool progress) {
    Progress bar(progress, "reading " + path, size);
    size_t done = 0;
    while (done < size) {
        const size_t want = std::min(kChunk, size - done);
        const ssize_t got = ::pread(fd, dst + done, want, static_cast<off_t>(done));
        if (got < 0) {
            if (errno == EINTR) continue;
            throw Error(path + ": read failed at offset " + std::to_string(done) + ": " + std::strerror(errno));
        }
        if (got == 0) throw Error(path + ": file shrank while reading (at offset " + std::to_string(done) + ")");
        done += static_cast<size_t>(got);
        bar.update(done);
    }
}

void populate(const std::string& path, const uint8_t* p, size_t size, bool progress) {
    Progress bar(progress, "loading " + path, size);
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    for (size_t off = 0; off < size; off += kChunk) {
        const size_t n = std::min(kChunk, size - off);
#ifdef MADV_POPULATE_READ
        if (::madvise(const_cast<uint8_t*>(p + off), n, MADV_POPULATE_READ) != 0)
#endif
        {
            volatile uint8_t sink = 0;
            for (size_t i = 0; i < n; i += page) sink = sink + p[off + i];
            (void)sink;
        }
        bar.update(off + n);
    }
}

void check_memory(const std::string& path, size_t size, const char* why) {
    const int64_t avail = meminfo("MemAvailable");
    if (avail >= 0 && static_cast<uint64_t>(avail) < size)
        throw Error(path + ": the file is " + mib(size) + " but only " + mib(static_cast<uint64_t>(avail)) +
                    " of memory is available (MemAvailable): " + why +
                    " reads the whole file into memory; drop it to mmap the file instead");
}

// Anonymous memory of at least `size` bytes, 2 MiB aligned (so THP can back all of it).
std::pair<uint8_t*, size_t> anon_aligned(const std::string& path, size_t size) {
    const size_t len = (size + kHuge2M - 1) / kHuge2M * kHuge2M;
    void* raw = ::mmap(nullptr, len + kHuge2M, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        throw Error(path + ": cannot allocate " + mib(size) + " of memory for the file: " + std::strerror(errno));
    const uintptr_t a = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t al = (a + kHuge2M - 1) / kHuge2M * kHuge2M;
    if (al > a) ::munmap(raw, al - a);
    const size_t tail = (a + len + kHuge2M) - (al + len);
    if (tail) ::munmap(reinterpret_cast<void*>(al + len), tail);
    return {reinterpret_cast<uint8_t*>(al), len};
}

// ---- SIGBUS on a mapped model file that shrank (see gguf_load.h) ----------------------------
// A fixed table read by the signal handler: slots are claimed with a CAS on `base`, and a slot's
// size/path are written before its base is published (release), read after (acquire).
struct Watched {
    std::atomic<const uint8_t*> base{nullptr};
    std::atomic<size_t> size{0};
    char path[512] = {};
};
constexpr int kMaxWatched = 64;
Watched g_watched[kMaxWatched];
std::atomic<const uint8_t*> g_claiming{reinterpret_cast<const uint8_t*>(1)};  // placeholder while a slot is filled
struct sigaction g_prev_bus {};
std::atomic<bool> g_bus_installed{false};

void put_err(const char* s) {
    size_t n = 0;
    while (s[n]) ++n;
    while (n > 0) {
        const ssize_t w = ::write(STDERR_FILENO, s, n);
        if (w <= 0) return;
        s += w;
        n -= static_cast<size_t>(w);
    }
}
void put_num(uint64_t v) {
    char buf[24];
    int i = sizeof buf - 1;
    buf[i] = 0;
    do {
        buf[--i] = static_cast<char>('0' + v % 10);
        v /= 10;
    } while (v && i > 0);
    put_err(buf + i);
}

void on_sigbus(int sig, siginfo_t* si, void* uctx) {
    const uint8_t* addr = static_cast<const uint8_t*>(si ? si->si_addr : nullptr);
    for (Watched& w : g_watched) {
        const uint8_t* b = w.base.load(std::memory_order_acquire);
        if (b == nullptr || b == g_claiming.load(std::memory_order_relaxed)) continue;
        const size_t n = w.size.load(std::memory_order_relaxed);
        if (addr >= b && addr < b + n) {
            put_err("latte: error: ");
            put_err(w.path);
            put_err(": the model file changed while mapped (a read at file offset ");
            put_num(static_cast<uint64_t>(addr - b));
            put_err(" is past its end now: truncated or rewritten in place); do not modify a model file "
                    "while it is in use, or load it with --no-mmap (a private copy)\n");
            ::_exit(kMappedFileChangedExit);
        }
    }
    // Not ours: hand it to whoever was there before.
    if (g_prev_bus.sa_flags & SA_SIGINFO) {
        if (g_prev_bus.sa_sigaction) {
            g_prev_bus.sa_sigaction(sig, si, uctx);
            return;
        }
    } else if (g_prev_bus.sa_handler != SIG_DFL && g_prev_bus.sa_handler != SIG_IGN) {
        g_prev_bus.sa_handler(sig);
        return;
    }
    // Default action: restore it and raise again (pending until this handler returns, then fatal,
    // for a fault and for a SIGBUS sent with kill/raise alike).
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(SIGBUS, &dfl, nullptr);
    ::raise(SIGBUS);
}

void install_sigbus_handler() {
    bool expected = false;
    if (!g_bus_installed.compare_exchange_strong(expected, true)) return;
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, &g_prev_bus);
}

}  // namespace

void watch_mapping(const uint8_t* base, size_t size, const std::string& path) {
    install_sigbus_handler();
    const uint8_t* claim = g_claiming.load(std::memory_order_relaxed);
    for (Watched& w : g_watched) {
        const uint8_t* expected = nullptr;
        if (!w.base.compare_exchange_strong(expected, claim, std::memory_order_acq_rel)) continue;
        w.size.store(size, std::memory_order_relaxed);
        const size_t n = std::min(path.size(), sizeof w.path - 1);
        std::memcpy(w.path, path.data(), n);
        w.path[n] = 0;
        w.base.store(base, std::memory_order_release);
        return;
    }
    // More than kMaxWatched files mapped at once: this one faults as plain SIGBUS (documented).
}

void unwatch_mapping(const uint8_t* base) {
    if (!base) return;
    for (Watched& w : g_watched) {
        const uint8_t* expected = base;
        if (w.base.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel)) return;
    }
}

int64_t meminfo(const std::string& key) {
    std::ifstream f("/proc/meminfo");
    std::string line;
    while (std::getline(f, line)) {
        if (line.compare(0, key.size() + 1, key + ":") != 0) continue;
        std::stringstream ss(line.substr(key.size() + 1));
        int64_t v = -1;
        std::string unit;
        ss >> v >> unit;
        return unit == "kB" ? v * 1024 : v;
    }
    return -1;
}

// Sums every mapping (VMA) of [addr, addr + size): the kernel may split one mmap into several
// (a neighbour's madvise/mlock, THP collapse) — reading only the VMA that starts at addr once
// reported 18.9 of 22.8 MiB locked after a successful mlock. A VMA that reaches outside the range
// counts at most its overlap.
SmapsInfo smaps_of(const void* addr, size_t size) {
    SmapsInfo r;
    std::ifstream f("/proc/self/smaps");
    std::string line;
    const uintptr_t want = reinterpret_cast<uintptr_t>(addr), want_end = want + size;
    uint64_t cap = 0;      // bytes of the current VMA inside the range (0: outside)
    uint64_t vma_rss = 0;  // its resident bytes inside the range
    while (std::getline(f, line)) {
        uintptr_t lo = 0, hi = 0;
        if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
            const uintptr_t b = std::max(lo, want), e = std::min(hi, want_end);
            cap = e > b ? e - b : 0;
            vma_rss = 0;
            continue;
        }
        if (cap == 0) continue;
        // Locked memory: the resident bytes of the VMAs mlock marked ("lo" in VmFlags). smaps' own
        // "Locked:" is weighted like Pss, so file pages another process maps at the same time (a
        // second test process, another server on the same model) count only in part.
        if (line.rfind("VmFlags:", 0) == 0) {
            if ((line + " ").find(" lo ") != std::string::npos) r.locked += vma_rss;
            continue;
        }
        char key[64];
        unsigned long long kb = 0;
        if (std::sscanf(line.c_str(), "%63[^:]: %llu kB", key, &kb) != 2) continue;
        const std::string k = key;
        const uint64_t b = std::min<uint64_t>(kb * 1024ull, cap);
        if (k == "Rss") {
            r.rss += b;
            vma_rss = b;
        } else if (k == "AnonHugePages" || k == "FilePmdMapped" || k == "Private_Hugetlb" || k == "Shared_Hugetlb") {
            r.huge += b;
        }
    }
    return r;
}

LoadedFile load_file(const std::string& path, int fd, size_t size, const GGUFOpenOptions& opt) {
    FdGuard fdg{fd};
    const auto t0 = std::chrono::steady_clock::now();
    LoadedFile out;
    GGUFLoadInfo& info = out.info;
    MapGuard guard;
    uint8_t* base = nullptr;

    if (opt.hugepages == HugePages::HugeTlb) {
        const int64_t hps = meminfo("Hugepagesize");
        const int64_t free_pages = meminfo("HugePages_Free"), total = meminfo("HugePages_Total");
        const uint64_t page = hps > 0 ? static_cast<uint64_t>(hps) : kHuge2M;
        const uint64_t need = (size + page - 1) / page;
        const bool mounted = read_text("/proc/mounts").find(" hugetlbfs ") != std::string::npos;
        const std::string how = "reserve them with `sudo sysctl vm.nr_hugepages=" +
                                std::to_string(need + static_cast<uint64_t>(std::max<int64_t>(0, total - free_pages))) +
                                "` (hugetlbfs is " + (mounted ? "mounted" : "not mounted, which MAP_HUGETLB does not need") +
                                "), or use --hugepages (transparent huge pages) instead";
        if (free_pages < 0 || static_cast<uint64_t>(free_pages) < need)
            throw Error(path + ": --hugetlb needs " + std::to_string(need) + " huge pages of " + mib(page) + " but " +
                        (free_pages <= 0 ? std::string("none are") : std::to_string(free_pages) + " are") +
                        " free (HugePages_Total " + std::to_string(std::max<int64_t>(0, total)) + "): " + how);
        const size_t len = need * page;
        void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
        if (p == MAP_FAILED)
            throw Error(path + ": --hugetlb: mmap(MAP_HUGETLB) of " + mib(len) + " failed: " + std::strerror(errno) + "; " + how);
        guard.p = p;
        guard.n = len;
        base = static_cast<uint8_t*>(p);
        if (opt.numa_interleave) interleave(base, len, false, info);
        read_into(path, fd, base, size, opt.progress);
        info.mode = "read + hugetlb";
        out.map_size = len;
    } else if (opt.hugepages == HugePages::Thp || !opt.use_mmap) {
        const bool thp = opt.hugepages == HugePages::Thp;
        if (thp) {
            const std::string en = read_text("/sys/kernel/mm/transparent_hugepage/enabled");
            if (en.find("[never]") != std::string::npos)
                throw Error(path + ": --hugepages: transparent huge pages are disabled (/sys/kernel/mm/transparent_hugepage/enabled "
                                   "is 'never'): enable them (echo madvise | sudo tee /sys/kernel/mm/transparent_hugepage/enabled) "
                                   "or use --hugetlb with reserved pages");
        }
        check_memory(path, size, thp ? "--hugepages" : "--no-mmap");
        auto [p, len] = anon_aligned(path, size);
        guard.p = p;
        guard.n = len;
        base = p;
        if (thp && ::madvise(base, len, MADV_HUGEPAGE) != 0)
            info.notes.push_back(std::string("hugepages: madvise(MADV_HUGEPAGE) failed: ") + std::strerror(errno));
        if (opt.numa_interleave) interleave(base, len, false, info);
        read_into(path, fd, base, size, opt.progress);
        info.mode = thp ? "read + THP" : "read";
        out.map_size = len;
        if (thp && size < kHuge2M) info.notes.push_back("hugepages: the file is smaller than one 2 MiB huge page");
    } else {
        void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            const int e = errno;
            if (e == ENODEV || e == EACCES || e == EINVAL)
                throw Error(path + ": the filesystem holding this file cannot mmap it (" + std::strerror(e) +
                            "): use --no-mmap to read it into memory");
            throw Error(path + ": mmap of " + std::to_string(size) + " bytes failed: " + std::strerror(e));
        }
        guard.p = p;
        guard.n = size;
        base = static_cast<uint8_t*>(p);
        watch_mapping(base, size, path);  // from here on, a shrinking file is a clear error, not a core dump
        if (opt.numa_interleave) interleave(base, size, true, info);
        if (opt.populate && !opt.mlock) populate(path, base, size, opt.progress);
        info.mode = "mmap";
        out.map_size = size;
    }

    if (opt.mlock) {
        if (info.mode == "mmap" && opt.progress) populate(path, base, size, opt.progress);
        if (::mlock(base, size) != 0) {
            const int e = errno;
            rlimit rl{};
            ::getrlimit(RLIMIT_MEMLOCK, &rl);
            const std::string lim = rl.rlim_cur == RLIM_INFINITY ? "unlimited" : std::to_string(rl.rlim_cur / 1024) + " KiB";
            throw Error(path + ": --mlock: cannot lock " + mib(size) + " (" + std::strerror(e) +
                        "): the locked-memory limit RLIMIT_MEMLOCK (`ulimit -l`) is " + lim +
                        "; raise it (`ulimit -l unlimited`, or memlock in /etc/security/limits.conf, or "
                        "LimitMEMLOCK= for a systemd service) or drop --mlock");
        }
    }

    guard.p = nullptr;  // success: GGUFFile owns the memory now
    out.base = base;
    const SmapsInfo sm = smaps_of(base, size);
    info.huge_bytes = sm.huge;
    info.locked_bytes = sm.locked;
    info.resident_bytes = sm.rss;
    if (opt.hugepages == HugePages::Thp && sm.huge == 0 && size >= kHuge2M)
        info.notes.push_back("hugepages: asked for transparent huge pages but the kernel gave none (see "
                             "/sys/kernel/mm/transparent_hugepage/defrag; memory may be fragmented)");
    info.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

}  // namespace latte::detail
