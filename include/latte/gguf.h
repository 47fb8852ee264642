// GGUF v3 reader (mmap, read-only, every offset checked) and writer.
//
// File layout (little endian): "GGUF", u32 version (3; 2 is read too), u64 n_tensors, u64 n_kv,
// n_kv × {string key, u32 value type, value}, n_tensors × {string name, u32 n_dims, u64 ne[n_dims],
// u32 ggml type, u64 offset}, padding to `general.alignment` (default 32), tensor data.
// Strings are u64 length + bytes (no terminator). Arrays are u32 element type, u64 count, elements.
// ne[0] is the fastest-varying dimension (the row length).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "latte/types.h"

namespace latte {

enum class GGUFType : uint32_t {
    UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
    BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
const char* gguf_type_name(GGUFType t);

// One metadata value. Scalars keep their declared type in `type`; arrays hold their element
// type in `elem_type` and elements in `arr` (nested arrays are allowed by the format).
struct GGUFValue {
    GGUFType type = GGUFType::UINT32;
    GGUFType elem_type = GGUFType::UINT32;  // only for ARRAY
    std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<GGUFValue>> v;

    // constructors for each declared type
    static GGUFValue u8(uint8_t x);
    static GGUFValue i8(int8_t x);
    static GGUFValue u16(uint16_t x);
    static GGUFValue i16(int16_t x);
    static GGUFValue u32(uint32_t x);
    static GGUFValue i32(int32_t x);
    static GGUFValue u64(uint64_t x);
    static GGUFValue i64(int64_t x);
    static GGUFValue f32(float x);
    static GGUFValue f64(double x);
    static GGUFValue boolean(bool x);
    static GGUFValue str(std::string x);
    static GGUFValue array(GGUFType elem_type, std::vector<GGUFValue> elems);
    static GGUFValue str_array(const std::vector<std::string>& xs);
    static GGUFValue i32_array(const std::vector<int32_t>& xs);
    static GGUFValue f32_array(const std::vector<float>& xs);

    bool is_integer() const;  // any of the 8 integer types
    bool is_float() const;    // FLOAT32 / FLOAT64
};

struct GGUFTensorInfo {
    std::string name;
    std::vector<int64_t> ne;  // ne[0] = row length
    GGMLType type = GGMLType::F32;
    uint64_t offset = 0;      // relative to the start of the data section
    uint64_t nbytes = 0;      // checked: nelements/block_size*type_size, no overflow
    const uint8_t* data = nullptr;  // inside the mapping, checked to lie inside the file

    int64_t nelements() const;
    int64_t nrows() const;  // nelements / ne[0]
    std::string shape_str() const;  // "{2048, 512}"
};

// How open() brings the file into memory (src/gguf_load.cpp; DESIGN.md §4, issue 4).
enum class HugePages {
    Off,
    Thp,      // anonymous memory with madvise(MADV_HUGEPAGE), the file read into it
    HugeTlb,  // MAP_HUGETLB from the reserved pool (vm.nr_hugepages), the file read into it
};

struct GGUFOpenOptions {
    bool populate = false;   // fault every page in at open (with a progress bar when `progress`)
    bool use_mmap = true;    // false: read the file into anonymous memory (checked against MemAvailable)
    HugePages hugepages = HugePages::Off;  // Thp / HugeTlb imply reading into anonymous memory
    bool mlock = false;      // lock the pages (error naming RLIMIT_MEMLOCK / ulimit -l when too low)
    bool progress = false;   // progress bar on stderr while populating/reading, only if stderr is a TTY
    bool numa_interleave = false;  // interleave the pages across NUMA nodes (no-op on one node, said so)
};

// What open() did, for the load report.
struct GGUFLoadInfo {
    std::string mode;             // "mmap", "read", "read + THP", "read + hugetlb"
    uint64_t huge_bytes = 0;      // bytes on huge pages (the mapping's AnonHugePages/FilePmdMapped/Hugetlb in smaps)
    uint64_t locked_bytes = 0;    // the mapping's Locked: in smaps
    uint64_t resident_bytes = 0;  // the mapping's Rss: in smaps
    double ms = 0;                // time to map/read/populate/lock
    std::vector<std::string> notes;  // one line each: no-ops, fallbacks
};

class GGUFFile {
public:
    // Maps and parses `path`. Every failure throws latte::Error naming the file and what was
    // wrong (key, tensor, offset, expected vs found). Never reads outside the file.
    static std::unique_ptr<GGUFFile> open(const std::string& path, const GGUFOpenOptions& opt = {});
    // Parses an in-memory image (not copied: must outlive the GGUFFile). `name` is used in errors.
    static std::unique_ptr<GGUFFile> from_memory(const void* data, size_t size, const std::string& name);
    ~GGUFFile();
    GGUFFile(const GGUFFile&) = delete;
    GGUFFile& operator=(const GGUFFile&) = delete;

    const std::string& path() const { return path_; }
    uint32_t version() const { return version_; }
    uint64_t alignment() const { return alignment_; }
    size_t file_size() const { return size_; }
    uint64_t data_offset() const { return data_offset_; }
    const GGUFLoadInfo& load_info() const { return load_info_; }

    const std::vector<std::pair<std::string, GGUFValue>>& metadata() const { return kv_; }
    const GGUFValue* find(const std::string& key) const;  // nullptr if absent
    bool has(const std::string& key) const { return find(key) != nullptr; }

    // Typed getters: throw latte::Error "FILE: metadata key 'K' is missing" or
    // "FILE: metadata key 'K' has type T, expected ..." (any integer type converts to any other
    // when the value fits; float getters accept FLOAT32/FLOAT64 and integers).
    uint64_t get_u64(const std::string& key) const;
    uint32_t get_u32(const std::string& key) const;
    int64_t get_i64(const std::string& key) const;
    double get_f64(const std::string& key) const;
    float get_f32(const std::string& key) const { return static_cast<float>(get_f64(key)); }
    bool get_bool(const std::string& key) const;
    std::string get_str(const std::string& key) const;
    std::vector<std::string> get_str_array(const std::string& key) const;
    std::vector<int64_t> get_int_array(const std::string& key) const;
    std::vector<double> get_float_array(const std::string& key) const;
    // The same with a default when the key is absent (a present key of the wrong type still throws).
    uint32_t get_u32_or(const std::string& key, uint32_t def) const;
    uint64_t get_u64_or(const std::string& key, uint64_t def) const;
    float get_f32_or(const std::string& key, float def) const;
    bool get_bool_or(const std::string& key, bool def) const;
    std::string get_str_or(const std::string& key, const std::string& def) const;

    const std::vector<GGUFTensorInfo>& tensors() const { return tensors_; }
    const GGUFTensorInfo* find_tensor(const std::string& name) const;  // nullptr if absent
    // Throws "FILE: tensor 'NAME' is missing".
    const GGUFTensorInfo& tensor(const std::string& name) const;

private:
    GGUFFile() = default;
    void parse();

    std::string path_;
    const uint8_t* base_ = nullptr;
    size_t size_ = 0;
    bool mapped_ = false;
    size_t map_size_ = 0;  // length to munmap (a huge-page multiple for anonymous memory); 0: size_
    GGUFLoadInfo load_info_;
    uint32_t version_ = 0;
    uint64_t alignment_ = 32;
    uint64_t data_offset_ = 0;
    std::vector<std::pair<std::string, GGUFValue>> kv_;
    std::vector<GGUFTensorInfo> tensors_;
    struct Index;
    std::unique_ptr<Index> index_;  // name -> position maps
};

// Builds a GGUF file in memory and writes it. Keys and tensor names must be unique (throws).
class GGUFWriter {
public:
    explicit GGUFWriter(uint32_t alignment = 32);
    void set(const std::string& key, GGUFValue value);  // replaces a key set before
    // `data` must hold exactly row_bytes(type, ne[0]) * nrows bytes (throws otherwise).
    void add_tensor(const std::string& name, std::vector<int64_t> ne, GGMLType type, std::vector<uint8_t> data);
    // Convenience: converts f32 values to `type` row by row.
    void add_tensor_f32(const std::string& name, std::vector<int64_t> ne, GGMLType type, const float* values);
    // A tensor whose bytes are made at write time, in file order, so that a file larger than
    // memory can be written: `produce(emit)` calls emit(bytes, n) as often as it likes; the total
    // must be exactly the tensor's size (write() throws otherwise). Not allowed with to_bytes().
    using Emit = std::function<void(const void* bytes, size_t n)>;
    using Producer = std::function<void(const Emit& emit)>;
    void add_tensor_streamed(const std::string& name, std::vector<int64_t> ne, GGMLType type, Producer produce);
    std::vector<uint8_t> to_bytes() const;
    void write(const std::string& path) const;  // throws latte::Error on I/O failure

private:
    uint32_t alignment_;
    std::vector<std::pair<std::string, GGUFValue>> kv_;
    struct Tensor {
        std::string name;
        std::vector<int64_t> ne;
        GGMLType type;
        uint64_t nbytes;
        std::vector<uint8_t> data;  // empty when `produce` makes the bytes
        Producer produce;
    };
    uint64_t checked_new_tensor(const std::string& name, const std::vector<int64_t>& ne, GGMLType type) const;
    std::vector<Tensor> tensors_;
};

}  // namespace latte
