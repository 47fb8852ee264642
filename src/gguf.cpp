// GGUF v3 reader (mmap, every read bounds-checked) and streaming writer.
#include "latte/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <utility>

#include "latte/error.h"
#include "gguf_load.h"

namespace latte {

static_assert(std::endian::native == std::endian::little, "GGUF reader assumes a little-endian host");

namespace {

constexpr uint64_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;         // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 16;       // nested arrays deeper than this are rejected
constexpr uint32_t kMaxValueType = 12;   // FLOAT64
// Counts from the file are only trusted this far for up-front reservations; beyond it vectors
// grow as elements are actually parsed (each of which consumes file bytes).
constexpr uint64_t kMaxReserve = 1u << 16;
const char* const kAlignmentKey = "general.alignment";

// Encoded size of a scalar value type; 0 for STRING/ARRAY/unknown.
size_t scalar_size(GGUFType t) {
    switch (t) {
        case GGUFType::UINT8: case GGUFType::INT8: case GGUFType::BOOL: return 1;
        case GGUFType::UINT16: case GGUFType::INT16: return 2;
        case GGUFType::UINT32: case GGUFType::INT32: case GGUFType::FLOAT32: return 4;
        case GGUFType::UINT64: case GGUFType::INT64: case GGUFType::FLOAT64: return 8;
        default: return 0;
    }
}

// The fewest bytes one value of type `t` can occupy (used to bound counts before allocating).
size_t min_encoded_size(GGUFType t) {
    if (t == GGUFType::STRING) return 8;        // u64 length
    if (t == GGUFType::ARRAY) return 4 + 8;     // u32 elem type + u64 count
    return scalar_size(t);
}

bool is_signed_int(GGUFType t) {
    return t == GGUFType::INT8 || t == GGUFType::INT16 || t == GGUFType::INT32 || t == GGUFType::INT64;
}
bool is_unsigned_int(GGUFType t) {
    return t == GGUFType::UINT8 || t == GGUFType::UINT16 || t == GGUFType::UINT32 || t == GGUFType::UINT64;
}
bool is_int_type(GGUFType t) { return is_signed_int(t) || is_unsigned_int(t); }
bool is_float_type(GGUFType t) { return t == GGUFType::FLOAT32 || t == GGUFType::FLOAT64; }

std::string describe_type(const GGUFValue& v) {
    if (v.type == GGUFType::ARRAY) return std::string("array of ") + gguf_type_name(v.elem_type);
    return gguf_type_name(v.type);
}

std::string quote(const std::string& s) { return "'" + s + "'"; }

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }  // caller checks overflow

bool is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

std::string shape_string(const std::vector<int64_t>& ne) {
    std::string s = "{";
    for (size_t i = 0; i < ne.size(); ++i) {
        if (i) s += ", ";
        s += std::to_string(ne[i]);
    }
    return s + "}";
}

// Bounds-checked little-endian cursor over the image.
class Reader {
public:
    Reader(const uint8_t* p, size_t size, const std::string& name) : p_(p), size_(size), name_(name) {}

    size_t pos() const { return pos_; }
    size_t remaining() const { return size_ - pos_; }
    void set_context(std::string ctx) { ctx_ = std::move(ctx); }

    [[noreturn]] void fail(const std::string& msg) const {
        throw Error(name_ + ": " + (ctx_.empty() ? std::string() : ctx_ + ": ") + msg);
    }

    void need(size_t n, const char* what) const {
        if (n > remaining())
            fail(std::string("truncated file: ") + what + " at offset " + std::to_string(pos_) + " needs " +
                 std::to_string(n) + " bytes, but only " + std::to_string(remaining()) +
                 " remain (file size " + std::to_string(size_) + ")");
    }

    template <typename T>
    T read(const char* what) {
        need(sizeof(T), what);
        T x;
        std::memcpy(&x, p_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return x;
    }

    std::string read_string(const char* what) {
        const size_t at = pos_;
        const uint64_t len = read<uint64_t>(what);
        if (len > remaining())
            fail(std::string(what) + ": string length " + std::to_string(len) + " at offset " + std::to_string(at) +
                 " exceeds the " + std::to_string(remaining()) + " bytes left in the file (size " +
                 std::to_string(size_) + ")");
        std::string s(reinterpret_cast<const char*>(p_ + pos_), static_cast<size_t>(len));
        pos_ += static_cast<size_t>(len);
        return s;
    }

    GGUFType read_type(const char* what) {
        const size_t at = pos_;
        const uint32_t t = read<uint32_t>(what);
        if (t > kMaxValueType)
            fail(std::string("unknown ") + what + " " + std::to_string(t) + " at offset " + std::to_string(at) +
                 " (expected 0..12)");
        return static_cast<GGUFType>(t);
    }

    GGUFValue read_value(GGUFType t, int depth) {
        GGUFValue v;
        v.type = t;
        switch (t) {
            case GGUFType::UINT8: v.v = uint64_t{read<uint8_t>("uint8 value")}; break;
            case GGUFType::INT8: v.v = int64_t{read<int8_t>("int8 value")}; break;
            case GGUFType::UINT16: v.v = uint64_t{read<uint16_t>("uint16 value")}; break;
            case GGUFType::INT16: v.v = int64_t{read<int16_t>("int16 value")}; break;
            case GGUFType::UINT32: v.v = uint64_t{read<uint32_t>("uint32 value")}; break;
            case GGUFType::INT32: v.v = int64_t{read<int32_t>("int32 value")}; break;
            case GGUFType::UINT64: v.v = read<uint64_t>("uint64 value"); break;
            case GGUFType::INT64: v.v = read<int64_t>("int64 value"); break;
            case GGUFType::FLOAT32: v.v = double{read<float>("float32 value")}; break;
            case GGUFType::FLOAT64: v.v = read<double>("float64 value"); break;
            case GGUFType::BOOL: v.v = read<uint8_t>("bool value") != 0; break;
            case GGUFType::STRING: v.v = read_string("string value"); break;
            case GGUFType::ARRAY: {
                if (depth >= kMaxArrayDepth)
                    fail("arrays nested more than " + std::to_string(kMaxArrayDepth) + " deep at offset " +
                         std::to_string(pos_));
                v.elem_type = read_type("array element type");
                const size_t at = pos_;
                const uint64_t n = read<uint64_t>("array count");
                const size_t min = min_encoded_size(v.elem_type);
                if (n > remaining() / min)
                    fail("array count " + std::to_string(n) + " at offset " + std::to_string(at) + " of " +
                         gguf_type_name(v.elem_type) + " elements (at least " + std::to_string(min) +
                         " bytes each) exceeds the " + std::to_string(remaining()) + " bytes left in the file");
                std::vector<GGUFValue> elems;
                elems.reserve(static_cast<size_t>(std::min<uint64_t>(n, kMaxReserve)));
                for (uint64_t i = 0; i < n; ++i) elems.push_back(read_value(v.elem_type, depth + 1));
                v.v = std::move(elems);
                break;
            }
        }
        return v;
    }

private:
    const uint8_t* p_;
    size_t size_;
    size_t pos_ = 0;
    const std::string& name_;
    std::string ctx_;
};

// ---- integer conversion helpers for the getters ----

// Value of an integer GGUFValue as a 128-bit signed integer.
__int128 int_value(const GGUFValue& v) {
    if (const auto* u = std::get_if<uint64_t>(&v.v)) return static_cast<__int128>(*u);
    if (const auto* s = std::get_if<int64_t>(&v.v)) return static_cast<__int128>(*s);
    throw Error("GGUF: integer value holds a non-integer");  // only for hand-built inconsistent values
}

std::string int128_str(__int128 x) {
    if (x >= 0) return std::to_string(static_cast<uint64_t>(x));
    return std::to_string(static_cast<int64_t>(x));
}

double float_value(const GGUFValue& v) {
    if (const auto* d = std::get_if<double>(&v.v)) return *d;
    if (const auto* u = std::get_if<uint64_t>(&v.v)) return static_cast<double>(*u);
    if (const auto* s = std::get_if<int64_t>(&v.v)) return static_cast<double>(*s);
    throw Error("GGUF: numeric value holds a non-number");
}

// ---- writer helpers ----

struct Sink {
    uint64_t pos = 0;
    virtual ~Sink() = default;
    virtual void put_raw(const void* p, size_t n) = 0;
    void put(const void* p, size_t n) {
        if (n == 0) return;
        put_raw(p, n);
        pos += n;
    }
    template <typename T>
    void put_le(T x) { put(&x, sizeof(T)); }
    void put_str(const std::string& s) {
        put_le<uint64_t>(s.size());
        put(s.data(), s.size());
    }
    void pad_to(uint64_t alignment) {
        static const uint8_t zeros[256] = {};
        uint64_t n = align_up(pos, alignment) - pos;
        while (n > 0) {
            const size_t k = static_cast<size_t>(std::min<uint64_t>(n, sizeof(zeros)));
            put(zeros, k);
            n -= k;
        }
    }
};

struct VectorSink : Sink {
    std::vector<uint8_t> out;
    void put_raw(const void* p, size_t n) override {
        const auto* b = static_cast<const uint8_t*>(p);
        out.insert(out.end(), b, b + n);
    }
};

class FdSink : public Sink {
public:
    FdSink(int fd, const std::string& path) : fd_(fd), path_(path) { buf_.reserve(kBuf); }
    void put_raw(const void* p, size_t n) override {
        if (buf_.size() + n > kBuf) flush();
        if (n >= kBuf) {
            write_all(p, n);
        } else {
            const auto* b = static_cast<const uint8_t*>(p);
            buf_.insert(buf_.end(), b, b + n);
        }
    }
    void flush() {
        if (!buf_.empty()) write_all(buf_.data(), buf_.size());
        buf_.clear();
    }

private:
    static constexpr size_t kBuf = size_t{1} << 20;
    void write_all(const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        while (n > 0) {
            const ssize_t w = ::write(fd_, b, std::min<size_t>(n, size_t{1} << 30));
            if (w < 0) {
                if (errno == EINTR) continue;
                throw Error(path_ + ": write failed: " + std::strerror(errno));
            }
            if (w == 0) throw Error(path_ + ": write failed: short write (wrote 0 bytes)");
            b += w;
            n -= static_cast<size_t>(w);
        }
    }
    int fd_;
    const std::string& path_;
    std::vector<uint8_t> buf_;
};

[[noreturn]] void bad_value(const std::string& where, const GGUFValue& v, const char* why) {
    throw Error("GGUFWriter: " + where + ": value of type " + describe_type(v) + " " + why);
}

void put_value(Sink& s, const GGUFValue& v, const std::string& where) {
    auto as_u = [&](uint64_t max) -> uint64_t {
        const auto* u = std::get_if<uint64_t>(&v.v);
        if (!u) bad_value(where, v, "does not hold an unsigned integer");
        if (*u > max) bad_value(where, v, "holds an out-of-range value");
        return *u;
    };
    auto as_i = [&](int64_t min, int64_t max) -> int64_t {
        const auto* i = std::get_if<int64_t>(&v.v);
        if (!i) bad_value(where, v, "does not hold a signed integer");
        if (*i < min || *i > max) bad_value(where, v, "holds an out-of-range value");
        return *i;
    };
    auto as_d = [&]() -> double {
        const auto* d = std::get_if<double>(&v.v);
        if (!d) bad_value(where, v, "does not hold a floating-point number");
        return *d;
    };
    switch (v.type) {
        case GGUFType::UINT8: s.put_le(static_cast<uint8_t>(as_u(UINT8_MAX))); break;
        case GGUFType::UINT16: s.put_le(static_cast<uint16_t>(as_u(UINT16_MAX))); break;
        case GGUFType::UINT32: s.put_le(static_cast<uint32_t>(as_u(UINT32_MAX))); break;
        case GGUFType::UINT64: s.put_le(as_u(UINT64_MAX)); break;
        case GGUFType::INT8: s.put_le(static_cast<int8_t>(as_i(INT8_MIN, INT8_MAX))); break;
        case GGUFType::INT16: s.put_le(static_cast<int16_t>(as_i(INT16_MIN, INT16_MAX))); break;
        case GGUFType::INT32: s.put_le(static_cast<int32_t>(as_i(INT32_MIN, INT32_MAX))); break;
        case GGUFType::INT64: s.put_le(as_i(INT64_MIN, INT64_MAX)); break;
        case GGUFType::FLOAT32: s.put_le(static_cast<float>(as_d())); break;
        case GGUFType::FLOAT64: s.put_le(as_d()); break;
        case GGUFType::BOOL: {
            const auto* b = std::get_if<bool>(&v.v);
            if (!b) bad_value(where, v, "does not hold a bool");
            s.put_le<uint8_t>(*b ? 1 : 0);
            break;
        }
        case GGUFType::STRING: {
            const auto* str = std::get_if<std::string>(&v.v);
            if (!str) bad_value(where, v, "does not hold a string");
            s.put_str(*str);
            break;
        }
        case GGUFType::ARRAY: {
            const auto* a = std::get_if<std::vector<GGUFValue>>(&v.v);
            if (!a) bad_value(where, v, "does not hold an element vector");
            if (static_cast<uint32_t>(v.elem_type) > kMaxValueType) bad_value(where, v, "has an unknown element type");
            s.put_le<uint32_t>(static_cast<uint32_t>(v.elem_type));
            s.put_le<uint64_t>(a->size());
            for (size_t i = 0; i < a->size(); ++i) {
                if ((*a)[i].type != v.elem_type)
                    throw Error("GGUFWriter: " + where + ": array element " + std::to_string(i) + " has type " +
                                describe_type((*a)[i]) + ", expected " + gguf_type_name(v.elem_type));
                put_value(s, (*a)[i], where);
            }
            break;
        }
        default:
            throw Error("GGUFWriter: " + where + ": unknown value type " +
                        std::to_string(static_cast<uint32_t>(v.type)));
    }
}

// Validates a tensor shape for `type` and returns {row bytes, rows}. `who` prefixes errors.
std::pair<size_t, uint64_t> check_shape(const std::string& who, const std::vector<int64_t>& ne, GGMLType type) {
    if (!is_known_type(static_cast<uint32_t>(type)))
        throw Error(who + ": unknown ggml type id " + std::to_string(static_cast<uint32_t>(type)));
    if (ne.empty() || ne.size() > kMaxDims)
        throw Error(who + ": has " + std::to_string(ne.size()) + " dimensions, expected 1..4");
    for (size_t i = 0; i < ne.size(); ++i)
        if (ne[i] < 1) throw Error(who + ": ne[" + std::to_string(i) + "] = " + std::to_string(ne[i]) + ", expected >= 1");
    const TypeInfo& ti = type_info(type);
    if (ne[0] % ti.block_size != 0)
        throw Error(who + ": row length ne[0] = " + std::to_string(ne[0]) + " is not a multiple of the " + ti.name +
                    " block size " + std::to_string(ti.block_size));
    uint64_t rows = 1;
    int64_t nel = ne[0];
    for (size_t i = 1; i < ne.size(); ++i) {
        if (__builtin_mul_overflow(rows, static_cast<uint64_t>(ne[i]), &rows) ||
            __builtin_mul_overflow(nel, ne[i], &nel))
            throw Error(who + ": shape overflows the element count");
    }
    const size_t rb = row_bytes(type, ne[0]);
    size_t total;
    if (__builtin_mul_overflow(static_cast<uint64_t>(rb), rows, &total))
        throw Error(who + ": shape overflows the byte size");
    return {rb, rows};
}

// Serializes everything; templated on the containers so the writer's private types need not be named.
template <typename KV, typename Tensors>
void serialize(Sink& s, uint64_t alignment, const KV& kv, const Tensors& tensors) {
    bool has_align_key = false;
    for (const auto& [k, v] : kv) has_align_key |= (k == kAlignmentKey);
    const bool add_align = alignment != kDefaultAlignment && !has_align_key;

    s.put("GGUF", 4);
    s.put_le<uint32_t>(3);
    s.put_le<uint64_t>(tensors.size());
    s.put_le<uint64_t>(kv.size() + (add_align ? 1 : 0));
    for (const auto& [k, v] : kv) {
        s.put_str(k);
        s.put_le<uint32_t>(static_cast<uint32_t>(v.type));
        put_value(s, v, "key " + quote(k));
    }
    if (add_align) {
        s.put_str(kAlignmentKey);
        s.put_le<uint32_t>(static_cast<uint32_t>(GGUFType::UINT32));
        s.put_le<uint32_t>(static_cast<uint32_t>(alignment));
    }
    uint64_t off = 0;
    for (const auto& t : tensors) {
        s.put_str(t.name);
        s.put_le<uint32_t>(static_cast<uint32_t>(t.ne.size()));
        for (int64_t d : t.ne) s.put_le<int64_t>(d);
        s.put_le<uint32_t>(static_cast<uint32_t>(t.type));
        s.put_le<uint64_t>(off);
        off = align_up(off + t.nbytes, alignment);
    }
    s.pad_to(alignment);
    for (const auto& t : tensors) {
        if (t.produce) {
            uint64_t made = 0;
            t.produce([&](const void* p, size_t n) {
                made += n;
                if (made > t.nbytes)
                    throw Error("GGUFWriter: tensor " + quote(t.name) + ": producer made more than its " +
                                std::to_string(t.nbytes) + " bytes");
                s.put(p, n);
            });
            if (made != t.nbytes)
                throw Error("GGUFWriter: tensor " + quote(t.name) + ": producer made " + std::to_string(made) +
                            " bytes, expected " + std::to_string(t.nbytes));
        } else {
            s.put(t.data.data(), t.data.size());
        }
        s.pad_to(alignment);
    }
}

}  // namespace

// ================================ values ================================

const char* gguf_type_name(GGUFType t) {
    switch (t) {
        case GGUFType::UINT8: return "uint8";
        case GGUFType::INT8: return "int8";
        case GGUFType::UINT16: return "uint16";
        case GGUFType::INT16: return "int16";
        case GGUFType::UINT32: return "uint32";
        case GGUFType::INT32: return "int32";
        case GGUFType::FLOAT32: return "float32";
        case GGUFType::BOOL: return "bool";
        case GGUFType::STRING: return "string";
        case GGUFType::ARRAY: return "array";
        case GGUFType::UINT64: return "uint64";
        case GGUFType::INT64: return "int64";
        case GGUFType::FLOAT64: return "float64";
    }
    return "unknown";
}

namespace {
template <typename T>
GGUFValue make(GGUFType t, T x) {
    GGUFValue v;
    v.type = t;
    v.v = std::move(x);
    return v;
}
}  // namespace

GGUFValue GGUFValue::u8(uint8_t x) { return make(GGUFType::UINT8, uint64_t{x}); }
GGUFValue GGUFValue::i8(int8_t x) { return make(GGUFType::INT8, int64_t{x}); }
GGUFValue GGUFValue::u16(uint16_t x) { return make(GGUFType::UINT16, uint64_t{x}); }
GGUFValue GGUFValue::i16(int16_t x) { return make(GGUFType::INT16, int64_t{x}); }
GGUFValue GGUFValue::u32(uint32_t x) { return make(GGUFType::UINT32, uint64_t{x}); }
GGUFValue GGUFValue::i32(int32_t x) { return make(GGUFType::INT32, int64_t{x}); }
GGUFValue GGUFValue::u64(uint64_t x) { return make(GGUFType::UINT64, x); }
GGUFValue GGUFValue::i64(int64_t x) { return make(GGUFType::INT64, x); }
GGUFValue GGUFValue::f32(float x) { return make(GGUFType::FLOAT32, double{x}); }
GGUFValue GGUFValue::f64(double x) { return make(GGUFType::FLOAT64, x); }
GGUFValue GGUFValue::boolean(bool x) { return make(GGUFType::BOOL, x); }
GGUFValue GGUFValue::str(std::string x) { return make(GGUFType::STRING, std::move(x)); }

GGUFValue GGUFValue::array(GGUFType elem_type, std::vector<GGUFValue> elems) {
    GGUFValue v = make(GGUFType::ARRAY, std::move(elems));
    v.elem_type = elem_type;
    return v;
}

GGUFValue GGUFValue::str_array(const std::vector<std::string>& xs) {
    std::vector<GGUFValue> e;
    e.reserve(xs.size());
    for (const auto& x : xs) e.push_back(str(x));
    return array(GGUFType::STRING, std::move(e));
}

GGUFValue GGUFValue::i32_array(const std::vector<int32_t>& xs) {
    std::vector<GGUFValue> e;
    e.reserve(xs.size());
    for (int32_t x : xs) e.push_back(i32(x));
    return array(GGUFType::INT32, std::move(e));
}

GGUFValue GGUFValue::f32_array(const std::vector<float>& xs) {
    std::vector<GGUFValue> e;
    e.reserve(xs.size());
    for (float x : xs) e.push_back(f32(x));
    return array(GGUFType::FLOAT32, std::move(e));
}

bool GGUFValue::is_integer() const { return is_int_type(type); }
bool GGUFValue::is_float() const { return is_float_type(type); }

// ================================ tensor info ================================

int64_t GGUFTensorInfo::nelements() const {
    if (ne.empty()) return 0;
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    return n;
}

int64_t GGUFTensorInfo::nrows() const {
    if (ne.empty() || ne[0] == 0) return 0;
    return nelements() / ne[0];
}

std::string GGUFTensorInfo::shape_str() const { return shape_string(ne); }

// ================================ reader ================================

struct GGUFFile::Index {
    std::unordered_map<std::string, size_t> kv;
    std::unordered_map<std::string, size_t> tensors;
};

GGUFFile::~GGUFFile() {
    if (mapped_) detail::unwatch_mapping(base_);
    if (mapped_ && base_) ::munmap(const_cast<uint8_t*>(base_), map_size_ ? map_size_ : size_);
}

std::unique_ptr<GGUFFile> GGUFFile::open(const std::string& path, const GGUFOpenOptions& opt) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int e = errno;
        ::close(fd);
        throw Error(path + ": cannot stat: " + std::strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        ::close(fd);
        throw Error(path + ": is a directory, expected a GGUF file");
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        throw Error(path + ": not a regular file");
    }
    if (st.st_size == 0) {
        ::close(fd);
        throw Error(path + ": truncated file: the file is empty (expected a GGUF header)");
    }
    const size_t size = static_cast<size_t>(st.st_size);
    detail::LoadedFile m = detail::load_file(path, fd, size, opt);  // closes fd
    std::unique_ptr<GGUFFile> f(new GGUFFile());
    f->path_ = path;
    f->base_ = m.base;
    f->size_ = size;
    f->mapped_ = true;
    f->map_size_ = m.map_size;
    f->load_info_ = std::move(m.info);
    f->parse();
    return f;
}

std::unique_ptr<GGUFFile> GGUFFile::from_memory(const void* data, size_t size, const std::string& name) {
    if (!data && size != 0) throw Error(name + ": null buffer of " + std::to_string(size) + " bytes");
    std::unique_ptr<GGUFFile> f(new GGUFFile());
    f->path_ = name;
    f->base_ = static_cast<const uint8_t*>(data);
    f->size_ = size;
    f->mapped_ = false;
    f->parse();
    return f;
}

void GGUFFile::parse() {
    index_ = std::make_unique<Index>();
    Reader r(base_, size_, path_);

    // ---- header ----
    r.need(4, "magic");
    if (std::memcmp(base_, "GGUF", 4) != 0) {
        std::string found;
        for (int i = 0; i < 4; ++i) {
            const unsigned char c = base_[i];
            if (c >= 0x20 && c < 0x7f) {
                found += static_cast<char>(c);
            } else {
                static const char* hex = "0123456789abcdef";
                found += "\\x";
                found += hex[c >> 4];
                found += hex[c & 15];
            }
        }
        r.fail("bad magic '" + found + "' at offset 0, expected 'GGUF' (not a GGUF file)");
    }
    r.read<uint32_t>("magic");
    version_ = r.read<uint32_t>("version");
    if (version_ != 3 && version_ != 2)
        r.fail("unsupported GGUF version " + std::to_string(version_) + " at offset 4, expected 3 (or 2)");
    const size_t n_tensors_at = r.pos();
    const uint64_t n_tensors = r.read<uint64_t>("tensor count n_tensors");
    const size_t n_kv_at = r.pos();
    const uint64_t n_kv = r.read<uint64_t>("metadata count n_kv");

    // Minimum encoded sizes: kv = key length (8) + value type (4) + 1-byte value;
    // tensor info = name length (8) + n_dims (4) + one ne (8) + type (4) + offset (8).
    constexpr uint64_t kMinKv = 8 + 4 + 1, kMinTensor = 8 + 4 + 8 + 4 + 8;
    if (n_kv > r.remaining() / kMinKv)
        r.fail("metadata count n_kv = " + std::to_string(n_kv) + " at offset " + std::to_string(n_kv_at) +
               " is more than the " + std::to_string(r.remaining()) + " remaining bytes could hold");
    if (n_tensors > r.remaining() / kMinTensor)
        r.fail("tensor count n_tensors = " + std::to_string(n_tensors) + " at offset " + std::to_string(n_tensors_at) +
               " is more than the " + std::to_string(r.remaining()) + " remaining bytes could hold");

    // ---- metadata ----
    kv_.reserve(static_cast<size_t>(std::min<uint64_t>(n_kv, kMaxReserve)));
    for (uint64_t i = 0; i < n_kv; ++i) {
        const size_t key_at = r.pos();
        r.set_context("metadata entry " + std::to_string(i));
        std::string key = r.read_string("key");
        r.set_context("metadata key " + quote(key));
        if (index_->kv.count(key))
            r.fail("duplicate key (second definition at offset " + std::to_string(key_at) + ")");
        const GGUFType t = r.read_type("value type");
        GGUFValue v = r.read_value(t, 0);
        index_->kv.emplace(key, kv_.size());
        kv_.emplace_back(std::move(key), std::move(v));
    }
    r.set_context("");

    alignment_ = kDefaultAlignment;
    if (const GGUFValue* a = find(kAlignmentKey)) {
        if (a->type != GGUFType::UINT32)
            r.fail(std::string("metadata key '") + kAlignmentKey + "' has type " + describe_type(*a) +
                   ", expected uint32");
        const uint64_t al = std::get<uint64_t>(a->v);
        if (!is_pow2(al))
            r.fail(std::string("metadata key '") + kAlignmentKey + "' is " + std::to_string(al) +
                   ", expected a nonzero power of two");
        alignment_ = al;
    }

    // ---- tensor infos ----
    tensors_.reserve(static_cast<size_t>(std::min<uint64_t>(n_tensors, kMaxReserve)));
    for (uint64_t i = 0; i < n_tensors; ++i) {
        const size_t info_at = r.pos();
        r.set_context("tensor info " + std::to_string(i));
        GGUFTensorInfo ti;
        ti.name = r.read_string("tensor name");
        r.set_context("tensor " + quote(ti.name));
        if (index_->tensors.count(ti.name))
            r.fail("duplicate tensor name (second definition at offset " + std::to_string(info_at) + ")");
        const size_t nd_at = r.pos();
        const uint32_t n_dims = r.read<uint32_t>("n_dims");
        if (n_dims < 1 || n_dims > kMaxDims)
            r.fail("n_dims = " + std::to_string(n_dims) + " at offset " + std::to_string(nd_at) + ", expected 1.." +
                   std::to_string(kMaxDims));
        ti.ne.resize(n_dims);
        int64_t nel = 1;
        for (uint32_t d = 0; d < n_dims; ++d) {
            const size_t ne_at = r.pos();
            const int64_t x = r.read<int64_t>("dimension ne");
            if (x < 1)
                r.fail("ne[" + std::to_string(d) + "] = " + std::to_string(x) + " at offset " + std::to_string(ne_at) +
                       ", expected >= 1");
            ti.ne[d] = x;
            if (__builtin_mul_overflow(nel, x, &nel))
                r.fail("shape " + ti.shape_str() + " overflows the element count (int64)");
        }
        const size_t type_at = r.pos();
        const uint32_t type_id = r.read<uint32_t>("ggml type");
        if (!is_known_type(type_id))
            r.fail("unknown ggml type id " + std::to_string(type_id) + " at offset " + std::to_string(type_at));
        ti.type = static_cast<GGMLType>(type_id);
        const TypeInfo& tinfo = type_info(ti.type);
        if (ti.ne[0] % tinfo.block_size != 0)
            r.fail("row length ne[0] = " + std::to_string(ti.ne[0]) + " is not a multiple of the " + tinfo.name +
                   " block size " + std::to_string(tinfo.block_size));
        const uint64_t rb = static_cast<uint64_t>(ti.ne[0] / tinfo.block_size) * tinfo.type_size;
        const uint64_t rows = static_cast<uint64_t>(nel / ti.ne[0]);
        if (__builtin_mul_overflow(rb, rows, &ti.nbytes))
            r.fail("shape " + ti.shape_str() + " of type " + tinfo.name + " overflows the byte size");
        const size_t off_at = r.pos();
        ti.offset = r.read<uint64_t>("data offset");
        if (ti.offset % alignment_ != 0)
            r.fail("data offset " + std::to_string(ti.offset) + " at offset " + std::to_string(off_at) +
                   " is not aligned to " + std::to_string(alignment_) + " (general.alignment)");
        index_->tensors.emplace(ti.name, tensors_.size());
        tensors_.push_back(std::move(ti));
    }
    r.set_context("");

    // ---- data section ----
    const uint64_t end_infos = r.pos();
    if (end_infos > std::numeric_limits<uint64_t>::max() - (alignment_ - 1))
        r.fail("data section offset overflows");
    data_offset_ = align_up(end_infos, alignment_);
    if (!tensors_.empty() && data_offset_ > size_)
        r.fail("data section starts at offset " + std::to_string(data_offset_) + ", past the end of the file (size " +
               std::to_string(size_) + "): truncated file");
    const uint64_t avail = data_offset_ <= size_ ? size_ - data_offset_ : 0;
    for (auto& ti : tensors_) {
        if (ti.offset > avail || ti.nbytes > avail - ti.offset)
            throw Error(path_ + ": tensor " + quote(ti.name) + ": data [offset " + std::to_string(ti.offset) + ", " +
                        std::to_string(ti.nbytes) + " bytes] runs past the end of the file (size " +
                        std::to_string(size_) + ", data section at " + std::to_string(data_offset_) + ")");
        ti.data = base_ + data_offset_ + ti.offset;
    }
}

const GGUFValue* GGUFFile::find(const std::string& key) const {
    auto it = index_->kv.find(key);
    return it == index_->kv.end() ? nullptr : &kv_[it->second].second;
}

const GGUFTensorInfo* GGUFFile::find_tensor(const std::string& name) const {
    auto it = index_->tensors.find(name);
    return it == index_->tensors.end() ? nullptr : &tensors_[it->second];
}

const GGUFTensorInfo& GGUFFile::tensor(const std::string& name) const {
    const GGUFTensorInfo* t = find_tensor(name);
    if (!t) throw Error(path_ + ": tensor " + quote(name) + " is missing");
    return *t;
}

// ---- typed getters ----

namespace {

const GGUFValue& need_key(const GGUFFile& f, const std::string& key) {
    const GGUFValue* v = f.find(key);
    if (!v) throw Error(f.path() + ": metadata key " + quote(key) + " is missing");
    return *v;
}

[[noreturn]] void wrong_type(const GGUFFile& f, const std::string& key, const GGUFValue& v, const char* expected) {
    throw Error(f.path() + ": metadata key " + quote(key) + " has type " + describe_type(v) + ", expected " + expected);
}

template <typename T>
T get_int(const GGUFFile& f, const std::string& key, const GGUFValue& v, const char* tname) {
    if (!v.is_integer()) wrong_type(f, key, v, "an integer");
    const __int128 x = int_value(v);
    if (x < static_cast<__int128>(std::numeric_limits<T>::min()) ||
        x > static_cast<__int128>(std::numeric_limits<T>::max()))
        throw Error(f.path() + ": metadata key " + quote(key) + " value " + int128_str(x) + " (" +
                    gguf_type_name(v.type) + ") is out of range for " + tname);
    return static_cast<T>(x);
}

double get_float(const GGUFFile& f, const std::string& key, const GGUFValue& v) {
    if (!v.is_integer() && !v.is_float()) wrong_type(f, key, v, "a number");
    return float_value(v);
}

const std::vector<GGUFValue>& get_array(const GGUFFile& f, const std::string& key, const GGUFValue& v,
                                        bool (*elem_ok)(GGUFType), const char* expected) {
    if (v.type != GGUFType::ARRAY || !elem_ok(v.elem_type)) wrong_type(f, key, v, expected);
    const auto* a = std::get_if<std::vector<GGUFValue>>(&v.v);
    if (!a) wrong_type(f, key, v, expected);
    return *a;
}

}  // namespace

uint64_t GGUFFile::get_u64(const std::string& key) const {
    return get_int<uint64_t>(*this, key, need_key(*this, key), "uint64");
}
uint32_t GGUFFile::get_u32(const std::string& key) const {
    return get_int<uint32_t>(*this, key, need_key(*this, key), "uint32");
}
int64_t GGUFFile::get_i64(const std::string& key) const {
    return get_int<int64_t>(*this, key, need_key(*this, key), "int64");
}
double GGUFFile::get_f64(const std::string& key) const { return get_float(*this, key, need_key(*this, key)); }

bool GGUFFile::get_bool(const std::string& key) const {
    const GGUFValue& v = need_key(*this, key);
    const auto* b = std::get_if<bool>(&v.v);
    if (v.type != GGUFType::BOOL || !b) wrong_type(*this, key, v, "bool");
    return *b;
}

std::string GGUFFile::get_str(const std::string& key) const {
    const GGUFValue& v = need_key(*this, key);
    const auto* s = std::get_if<std::string>(&v.v);
    if (v.type != GGUFType::STRING || !s) wrong_type(*this, key, v, "string");
    return *s;
}

std::vector<std::string> GGUFFile::get_str_array(const std::string& key) const {
    const auto& a = get_array(*this, key, need_key(*this, key), [](GGUFType t) { return t == GGUFType::STRING; },
                              "array of string");
    std::vector<std::string> out;
    out.reserve(a.size());
    for (const auto& e : a) {
        const auto* s = std::get_if<std::string>(&e.v);
        if (!s) wrong_type(*this, key, e, "string elements");
        out.push_back(*s);
    }
    return out;
}

std::vector<int64_t> GGUFFile::get_int_array(const std::string& key) const {
    const GGUFValue& v = need_key(*this, key);
    const auto& a = get_array(*this, key, v, is_int_type, "array of integers");
    std::vector<int64_t> out;
    out.reserve(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
        const __int128 x = int_value(a[i]);
        if (x > static_cast<__int128>(std::numeric_limits<int64_t>::max()))
            throw Error(path_ + ": metadata key " + quote(key) + " element " + std::to_string(i) + " value " +
                        int128_str(x) + " is out of range for int64");
        out.push_back(static_cast<int64_t>(x));
    }
    return out;
}

std::vector<double> GGUFFile::get_float_array(const std::string& key) const {
    const auto& a = get_array(*this, key, need_key(*this, key),
                              [](GGUFType t) { return is_float_type(t) || is_int_type(t); }, "array of floats");
    std::vector<double> out;
    out.reserve(a.size());
    for (const auto& e : a) out.push_back(float_value(e));
    return out;
}

uint32_t GGUFFile::get_u32_or(const std::string& key, uint32_t def) const { return has(key) ? get_u32(key) : def; }
uint64_t GGUFFile::get_u64_or(const std::string& key, uint64_t def) const { return has(key) ? get_u64(key) : def; }
float GGUFFile::get_f32_or(const std::string& key, float def) const { return has(key) ? get_f32(key) : def; }
bool GGUFFile::get_bool_or(const std::string& key, bool def) const { return has(key) ? get_bool(key) : def; }
std::string GGUFFile::get_str_or(const std::string& key, const std::string& def) const {
    return has(key) ? get_str(key) : def;
}

// ================================ writer ================================

GGUFWriter::GGUFWriter(uint32_t alignment) : alignment_(alignment) {
    if (!is_pow2(alignment))
        throw Error("GGUFWriter: alignment " + std::to_string(alignment) + " is not a nonzero power of two");
}

void GGUFWriter::set(const std::string& key, GGUFValue value) {
    if (key == kAlignmentKey) {
        const auto* u = std::get_if<uint64_t>(&value.v);
        if (value.type != GGUFType::UINT32 || !u || !is_pow2(*u) || *u > UINT32_MAX)
            throw Error(std::string("GGUFWriter: key '") + kAlignmentKey + "' must be a uint32 nonzero power of two");
        alignment_ = static_cast<uint32_t>(*u);
    }
    for (auto& [k, v] : kv_) {
        if (k == key) {
            v = std::move(value);
            return;
        }
    }
    kv_.emplace_back(key, std::move(value));
}

uint64_t GGUFWriter::checked_new_tensor(const std::string& name, const std::vector<int64_t>& ne, GGMLType type) const {
    const std::string who = "GGUFWriter: tensor " + quote(name);
    for (const auto& t : tensors_)
        if (t.name == name) throw Error(who + ": duplicate tensor name");
    const auto [rb, rows] = check_shape(who, ne, type);
    return static_cast<uint64_t>(rb) * rows;
}

void GGUFWriter::add_tensor(const std::string& name, std::vector<int64_t> ne, GGMLType type,
                            std::vector<uint8_t> data) {
    const uint64_t expect = checked_new_tensor(name, ne, type);
    if (data.size() != expect)
        throw Error("GGUFWriter: tensor " + quote(name) + ": data has " + std::to_string(data.size()) +
                    " bytes, expected " + std::to_string(expect) + " for shape " + shape_string(ne) + " of type " +
                    type_name(type));
    tensors_.push_back(Tensor{name, std::move(ne), type, expect, std::move(data), nullptr});
}

void GGUFWriter::add_tensor_f32(const std::string& name, std::vector<int64_t> ne, GGMLType type,
                                const float* values) {
    const uint64_t bytes = checked_new_tensor(name, ne, type);
    if (!type_info(type).convertible)
        throw Error("GGUFWriter: tensor " + quote(name) + ": cannot convert f32 to type " + type_name(type));
    std::vector<uint8_t> data(bytes);
    const int64_t n = ne[0];
    const size_t rb = row_bytes(type, n);
    for (uint64_t r = 0; r < bytes / rb; ++r)
        quantize_row(type, values + r * static_cast<uint64_t>(n), data.data() + r * rb, n);
    tensors_.push_back(Tensor{name, std::move(ne), type, bytes, std::move(data), nullptr});
}

void GGUFWriter::add_tensor_streamed(const std::string& name, std::vector<int64_t> ne, GGMLType type,
                                     Producer produce) {
    if (!produce) throw Error("GGUFWriter: tensor " + quote(name) + ": no producer");
    const uint64_t bytes = checked_new_tensor(name, ne, type);
    tensors_.push_back(Tensor{name, std::move(ne), type, bytes, {}, std::move(produce)});
}

std::vector<uint8_t> GGUFWriter::to_bytes() const {
    for (const auto& t : tensors_)
        if (t.produce) throw Error("GGUFWriter: to_bytes() with the streamed tensor " + quote(t.name) + ": use write()");
    VectorSink s;
    serialize(s, alignment_, kv_, tensors_);
    return std::move(s.out);
}

void GGUFWriter::write(const std::string& path) const {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw Error(path + ": cannot open for writing: " + std::strerror(errno));
    try {
        FdSink s(fd, path);
        serialize(s, alignment_, kv_, tensors_);
        s.flush();
    } catch (...) {
        ::close(fd);
        ::unlink(path.c_str());
        throw;
    }
    if (::close(fd) != 0) {
        const int e = errno;
        ::unlink(path.c_str());
        throw Error(path + ": close after writing failed: " + std::strerror(e));
    }
}

}  // namespace latte
