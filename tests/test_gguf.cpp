// GGUF reader/writer: round trips, malformed files, truncation sweep, byte-flip fuzz, getters.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "latte/error.h"
#include "latte/gguf.h"
#include "latte/types.h"

using namespace latte;
using Catch::Contains;

namespace {

// A temp file path removed when the object dies.
struct TempPath {
    std::string path;
    explicit TempPath(const std::string& tag) {
        static int counter = 0;
        path = (std::filesystem::temp_directory_path() /
                ("latte_gguf_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" + tag))
                   .string();
    }
    ~TempPath() {
        std::error_code ec;
        std::filesystem::remove(path, ec);
    }
};

void write_file(const std::string& path, const uint8_t* p, size_t n) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(p), static_cast<std::streamsize>(n));
    REQUIRE(f.good());
}

std::vector<uint8_t> read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Parses a copy of `img` in a heap buffer of exactly its size (so ASan sees over-reads).
std::unique_ptr<GGUFFile> parse_copy(const std::vector<uint8_t>& img, size_t n, const std::string& name,
                                     std::unique_ptr<uint8_t[]>& keep) {
    keep.reset(new uint8_t[n == 0 ? 1 : n]);
    if (n) std::memcpy(keep.get(), img.data(), n);
    return GGUFFile::from_memory(n ? keep.get() : nullptr, n, name);
}

std::unique_ptr<GGUFFile> parse(const std::vector<uint8_t>& img, const std::string& name = "test.gguf") {
    return GGUFFile::from_memory(img.data(), img.size(), name);
}

bool same_double(double a, double b) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    return a == b && std::signbit(a) == std::signbit(b);
}

bool same_value(const GGUFValue& a, const GGUFValue& b) {
    if (a.type != b.type) return false;
    if (a.type == GGUFType::ARRAY) {
        if (a.elem_type != b.elem_type) return false;
        const auto& x = std::get<std::vector<GGUFValue>>(a.v);
        const auto& y = std::get<std::vector<GGUFValue>>(b.v);
        if (x.size() != y.size()) return false;
        for (size_t i = 0; i < x.size(); ++i)
            if (!same_value(x[i], y[i])) return false;
        return true;
    }
    if (a.v.index() != b.v.index()) return false;
    if (const auto* d = std::get_if<double>(&a.v)) return same_double(*d, std::get<double>(b.v));
    if (const auto* u = std::get_if<uint64_t>(&a.v)) return *u == std::get<uint64_t>(b.v);
    if (const auto* i = std::get_if<int64_t>(&a.v)) return *i == std::get<int64_t>(b.v);
    if (const auto* x = std::get_if<bool>(&a.v)) return *x == std::get<bool>(b.v);
    if (const auto* s = std::get_if<std::string>(&a.v)) return *s == std::get<std::string>(b.v);
    return false;
}

// Offset just past the encoded string `s` (u64 length + bytes) in `img`; fails the test if absent.
size_t after_str(const std::vector<uint8_t>& img, const std::string& s) {
    const uint64_t n = s.size();
    std::vector<uint8_t> pat(reinterpret_cast<const uint8_t*>(&n), reinterpret_cast<const uint8_t*>(&n) + 8);
    pat.insert(pat.end(), s.begin(), s.end());
    auto it = std::search(img.begin(), img.end(), pat.begin(), pat.end());
    REQUIRE(it != img.end());
    return static_cast<size_t>(it - img.begin()) + pat.size();
}

template <typename T>
void poke(std::vector<uint8_t>& img, size_t off, T x) {
    REQUIRE(off + sizeof(T) <= img.size());
    std::memcpy(img.data() + off, &x, sizeof(T));
}

template <typename T>
T peek(const std::vector<uint8_t>& img, size_t off) {
    T x;
    std::memcpy(&x, img.data() + off, sizeof(T));
    return x;
}

std::vector<float> ramp(size_t n, float scale = 0.37f) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i) * scale) * (1.0f + static_cast<float>(i % 7));
    return v;
}

// A small valid file: strings, arrays, three tensors "ta" (q8_0 {64,2}), "tb" (f16 {6,3}),
// "tc" (f32 {8} = 32 bytes, so it ends exactly at EOF for alignments 16 and 32).
std::vector<uint8_t> small_image(uint32_t alignment = 32) {
    GGUFWriter w(alignment);
    w.set("general.architecture", GGUFValue::str("deepseek2"));
    w.set("k.u32", GGUFValue::u32(7));
    w.set("k.arr", GGUFValue::i32_array({1, -2, 3}));
    w.set("k.str", GGUFValue::str("hello"));
    w.set("k.sar", GGUFValue::str_array({"a", "", "bc"}));
    w.set("k.f32", GGUFValue::f32(0.5f));
    w.set("k.i8", GGUFValue::i8(-5));
    w.set("k.u64", GGUFValue::u64(1234567890123ull));
    w.set("k.nest", GGUFValue::array(GGUFType::ARRAY, {GGUFValue::i32_array({4, 5}), GGUFValue::str_array({"z"})}));
    auto a = ramp(128), b = ramp(18), c = ramp(8);
    w.add_tensor_f32("ta", {64, 2}, GGMLType::Q8_0, a.data());
    w.add_tensor_f32("tb", {6, 3}, GGMLType::F16, b.data());
    w.add_tensor_f32("tc", {8}, GGMLType::F32, c.data());
    return w.to_bytes();
}

// Offset of the u32 n_dims field of tensor `name`.
size_t tensor_ndims_at(const std::vector<uint8_t>& img, const std::string& name) { return after_str(img, name); }
size_t tensor_ne_at(const std::vector<uint8_t>& img, const std::string& name, int d) {
    return after_str(img, name) + 4 + 8 * static_cast<size_t>(d);
}
size_t tensor_type_at(const std::vector<uint8_t>& img, const std::string& name) {
    const size_t nd = after_str(img, name);
    return nd + 4 + 8 * peek<uint32_t>(img, nd);
}
size_t tensor_offset_at(const std::vector<uint8_t>& img, const std::string& name) {
    return tensor_type_at(img, name) + 4;
}

}  // namespace

// ------------------------------------------------------------------------------------------------

TEST_CASE("gguf: value constructors, type names and tensor info helpers") {
    CHECK(GGUFValue::u8(3).is_integer());
    CHECK(GGUFValue::i64(-3).is_integer());
    CHECK_FALSE(GGUFValue::f32(1).is_integer());
    CHECK(GGUFValue::f32(1).is_float());
    CHECK(GGUFValue::f64(1).is_float());
    CHECK_FALSE(GGUFValue::boolean(true).is_float());
    CHECK_FALSE(GGUFValue::str("x").is_integer());
    CHECK(GGUFValue::i32_array({1}).type == GGUFType::ARRAY);
    CHECK(GGUFValue::i32_array({1}).elem_type == GGUFType::INT32);
    CHECK(std::string(gguf_type_name(GGUFType::UINT8)) == "uint8");
    CHECK(std::string(gguf_type_name(GGUFType::FLOAT64)) == "float64");
    CHECK(std::string(gguf_type_name(GGUFType::ARRAY)) == "array");
    CHECK(std::string(gguf_type_name(static_cast<GGUFType>(99))) == "unknown");

    GGUFTensorInfo ti;
    ti.ne = {2048, 512, 3};
    CHECK(ti.nelements() == 2048 * 512 * 3);
    CHECK(ti.nrows() == 512 * 3);
    CHECK(ti.shape_str() == "{2048, 512, 3}");
}

TEST_CASE("gguf: metadata round trip of every value type") {
    const float fnan = std::numeric_limits<float>::quiet_NaN();
    std::vector<std::pair<std::string, GGUFValue>> kv = {
        {"u8.min", GGUFValue::u8(0)},
        {"u8.max", GGUFValue::u8(255)},
        {"i8.min", GGUFValue::i8(-128)},
        {"i8.max", GGUFValue::i8(127)},
        {"u16.max", GGUFValue::u16(65535)},
        {"i16.min", GGUFValue::i16(-32768)},
        {"i16.max", GGUFValue::i16(32767)},
        {"u32.max", GGUFValue::u32(UINT32_MAX)},
        {"i32.min", GGUFValue::i32(INT32_MIN)},
        {"i32.max", GGUFValue::i32(INT32_MAX)},
        {"u64.max", GGUFValue::u64(UINT64_MAX)},
        {"i64.min", GGUFValue::i64(INT64_MIN)},
        {"i64.max", GGUFValue::i64(INT64_MAX)},
        {"f32.max", GGUFValue::f32(FLT_MAX)},
        {"f32.negzero", GGUFValue::f32(-0.0f)},
        {"f32.denorm", GGUFValue::f32(std::numeric_limits<float>::denorm_min())},
        {"f32.inf", GGUFValue::f32(-std::numeric_limits<float>::infinity())},
        {"f32.nan", GGUFValue::f32(fnan)},
        {"f64.min", GGUFValue::f64(DBL_MIN)},
        {"f64.max", GGUFValue::f64(-DBL_MAX)},
        {"f64.pi", GGUFValue::f64(3.141592653589793)},
        {"bool.t", GGUFValue::boolean(true)},
        {"bool.f", GGUFValue::boolean(false)},
        {"str.empty", GGUFValue::str("")},
        {"str.utf8", GGUFValue::str("h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\xa6\x99")},
        {"str.nul", GGUFValue::str(std::string("a\0b", 3))},
        {"arr.u8", GGUFValue::array(GGUFType::UINT8, {GGUFValue::u8(0), GGUFValue::u8(255)})},
        {"arr.i8", GGUFValue::array(GGUFType::INT8, {GGUFValue::i8(-128), GGUFValue::i8(127)})},
        {"arr.u16", GGUFValue::array(GGUFType::UINT16, {GGUFValue::u16(1), GGUFValue::u16(65535)})},
        {"arr.i16", GGUFValue::array(GGUFType::INT16, {GGUFValue::i16(-32768)})},
        {"arr.u32", GGUFValue::array(GGUFType::UINT32, {GGUFValue::u32(UINT32_MAX), GGUFValue::u32(0)})},
        {"arr.i32", GGUFValue::i32_array({INT32_MIN, 0, INT32_MAX})},
        {"arr.u64", GGUFValue::array(GGUFType::UINT64, {GGUFValue::u64(UINT64_MAX)})},
        {"arr.i64", GGUFValue::array(GGUFType::INT64, {GGUFValue::i64(INT64_MIN), GGUFValue::i64(-1)})},
        {"arr.f32", GGUFValue::f32_array({1.5f, -0.0f, FLT_MIN})},
        {"arr.f64", GGUFValue::array(GGUFType::FLOAT64, {GGUFValue::f64(1e300), GGUFValue::f64(-2.5)})},
        {"arr.bool", GGUFValue::array(GGUFType::BOOL, {GGUFValue::boolean(true), GGUFValue::boolean(false)})},
        {"arr.str", GGUFValue::str_array({"", "a", "\xe2\x96\x81the", std::string(300, 'x')})},
        {"arr.empty.f64", GGUFValue::array(GGUFType::FLOAT64, {})},
        {"arr.empty.str", GGUFValue::array(GGUFType::STRING, {})},
        {"arr.empty.arr", GGUFValue::array(GGUFType::ARRAY, {})},
        {"arr.nested",
         GGUFValue::array(GGUFType::ARRAY,
                          {GGUFValue::i32_array({1, 2}), GGUFValue::str_array({"x", "yz"}),
                           GGUFValue::array(GGUFType::UINT8, {}),
                           GGUFValue::array(GGUFType::ARRAY, {GGUFValue::f32_array({0.25f})})})},
    };

    for (uint32_t alignment : {32u, 64u}) {
        GGUFWriter w(alignment);
        for (const auto& [k, v] : kv) w.set(k, v);
        const auto img = w.to_bytes();
        TempPath tmp("meta.gguf");
        w.write(tmp.path);
        CHECK(read_file(tmp.path) == img);

        std::unique_ptr<GGUFFile> files[2] = {parse(img, "meta.gguf"), GGUFFile::open(tmp.path)};
        for (const auto& f : files) {
            CHECK(f->version() == 3);
            CHECK(f->alignment() == alignment);
            CHECK(f->has("general.alignment") == (alignment != 32));
            CHECK(f->tensors().empty());
            CHECK(f->metadata().size() == kv.size() + (alignment != 32 ? 1 : 0));
            for (size_t i = 0; i < kv.size(); ++i) {
                INFO("key " << kv[i].first);
                CHECK(f->metadata()[i].first == kv[i].first);  // order is preserved
                const GGUFValue* v = f->find(kv[i].first);
                REQUIRE(v != nullptr);
                CHECK(same_value(*v, kv[i].second));
            }
            CHECK(f->find("absent") == nullptr);
            // typed getters on the round-tripped values
            CHECK(f->get_u64("u64.max") == UINT64_MAX);
            CHECK(f->get_i64("i64.min") == INT64_MIN);
            CHECK(f->get_u32("u32.max") == UINT32_MAX);
            CHECK(f->get_i64("i8.min") == -128);
            CHECK(f->get_u32("u8.max") == 255);
            CHECK(f->get_f32("f32.max") == FLT_MAX);
            CHECK(std::isnan(f->get_f32("f32.nan")));
            CHECK(f->get_f64("f64.pi") == 3.141592653589793);
            CHECK(f->get_f64("i16.min") == -32768.0);
            CHECK(f->get_bool("bool.t"));
            CHECK_FALSE(f->get_bool("bool.f"));
            CHECK(f->get_str("str.empty").empty());
            CHECK(f->get_str("str.nul") == std::string("a\0b", 3));
            CHECK(f->get_str_array("arr.str").size() == 4);
            CHECK(f->get_str_array("arr.str")[3] == std::string(300, 'x'));
            CHECK(f->get_str_array("arr.empty.str").empty());
            CHECK(f->get_int_array("arr.i32") == std::vector<int64_t>{INT32_MIN, 0, INT32_MAX});
            CHECK(f->get_int_array("arr.u8") == std::vector<int64_t>{0, 255});
            CHECK(f->get_float_array("arr.f64") == std::vector<double>{1e300, -2.5});
            CHECK(f->get_float_array("arr.empty.f64").empty());
            CHECK(f->get_u32_or("absent", 9) == 9);
            CHECK(f->get_u64_or("u16.max", 9) == 65535);
            CHECK(f->get_f32_or("absent", 1.25f) == 1.25f);
            CHECK(f->get_bool_or("absent", true));
            CHECK(f->get_str_or("absent", "dflt") == "dflt");
            CHECK(f->get_str_or("str.utf8", "dflt") == std::get<std::string>(f->find("str.utf8")->v));
        }
    }
}

TEST_CASE("gguf: writer set() replaces an existing key") {
    GGUFWriter w;
    w.set("a", GGUFValue::u32(1));
    w.set("b", GGUFValue::str("x"));
    w.set("a", GGUFValue::str("replaced"));
    auto f = parse(w.to_bytes());
    REQUIRE(f->metadata().size() == 2);
    CHECK(f->metadata()[0].first == "a");
    CHECK(f->get_str("a") == "replaced");
}

TEST_CASE("gguf: tensor round trip for every convertible type and 1-D..4-D shapes") {
    struct Spec { std::string name; std::vector<int64_t> ne; GGMLType type; };
    const std::vector<Spec> specs = {
        {"f32.1d", {5}, GGMLType::F32},
        {"f32.4d", {3, 2, 2, 2}, GGMLType::F32},
        {"f16.2d", {7, 3}, GGMLType::F16},
        {"bf16.3d", {4, 3, 2}, GGMLType::BF16},
        {"q8_0.1d", {32}, GGMLType::Q8_0},
        {"q8_0.4d", {64, 2, 1, 3}, GGMLType::Q8_0},
        {"q4_0.2d", {96, 3}, GGMLType::Q4_0},
        {"q4_0.3d", {32, 1, 5}, GGMLType::Q4_0},
    };
    for (uint32_t alignment : {32u, 64u, 8u}) {
        GGUFWriter w(alignment);
        w.set("general.name", GGUFValue::str("tensors"));
        std::vector<std::vector<float>> src;
        std::vector<std::vector<uint8_t>> expect;
        for (const auto& s : specs) {
            int64_t n = 1;
            for (int64_t d : s.ne) n *= d;
            src.push_back(ramp(static_cast<size_t>(n), 0.11f + static_cast<float>(src.size())));
            const size_t rb = row_bytes(s.type, s.ne[0]);
            std::vector<uint8_t> bytes(rb * static_cast<size_t>(n / s.ne[0]));
            for (int64_t r = 0; r < n / s.ne[0]; ++r)
                quantize_row(s.type, src.back().data() + r * s.ne[0], bytes.data() + r * rb, s.ne[0]);
            expect.push_back(bytes);
            w.add_tensor_f32(s.name, s.ne, s.type, src.back().data());
        }
        // a raw tensor of a type we cannot convert (q6_K) through add_tensor
        std::vector<uint8_t> raw(210 * 2);
        for (size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<uint8_t>(i * 31 + 7);
        w.add_tensor("q6_k.raw", {256, 2}, GGMLType::Q6_K, raw);

        const auto img = w.to_bytes();
        TempPath tmp("tensors.gguf");
        w.write(tmp.path);
        CHECK(read_file(tmp.path) == img);

        std::unique_ptr<GGUFFile> files[2] = {parse(img, "tensors.gguf"), GGUFFile::open(tmp.path, {true})};
        for (const auto& f : files) {
            INFO("alignment " << alignment);
            CHECK(f->alignment() == alignment);
            CHECK(f->data_offset() % alignment == 0);
            CHECK(f->file_size() == img.size());
            REQUIRE(f->tensors().size() == specs.size() + 1);
            for (size_t i = 0; i < specs.size(); ++i) {
                const auto& s = specs[i];
                INFO("tensor " << s.name);
                const GGUFTensorInfo& ti = f->tensor(s.name);
                CHECK(&ti == &f->tensors()[i]);
                CHECK(ti.ne == s.ne);
                CHECK(ti.type == s.type);
                CHECK(ti.nbytes == expect[i].size());
                CHECK(ti.offset % alignment == 0);
                REQUIRE(ti.data != nullptr);
                CHECK(std::memcmp(ti.data, expect[i].data(), expect[i].size()) == 0);
                if (s.type == GGMLType::F32)
                    CHECK(std::memcmp(ti.data, src[i].data(), src[i].size() * 4) == 0);
                // the values come back approximately
                std::vector<float> back(static_cast<size_t>(ti.nelements()));
                const size_t rb = row_bytes(ti.type, ti.ne[0]);
                for (int64_t r = 0; r < ti.nrows(); ++r)
                    dequantize_row(ti.type, ti.data + r * rb, back.data() + r * ti.ne[0], ti.ne[0]);
                float max_err = 0.0f;
                for (size_t j = 0; j < back.size(); ++j) max_err = std::max(max_err, std::fabs(back[j] - src[i][j]));
                // |values| <= 7: tolerances are about one quantization step
                const float tol = s.type == GGMLType::F32    ? 0.0f
                                  : s.type == GGMLType::F16  ? 0.005f
                                  : s.type == GGMLType::BF16 ? 0.03f
                                  : s.type == GGMLType::Q8_0 ? 0.03f
                                                             : 0.9f;
                CHECK(max_err <= tol);
            }
            const GGUFTensorInfo& q6 = f->tensor("q6_k.raw");
            CHECK(q6.type == GGMLType::Q6_K);
            CHECK(q6.shape_str() == "{256, 2}");
            CHECK(q6.nbytes == raw.size());
            CHECK(std::memcmp(q6.data, raw.data(), raw.size()) == 0);
            CHECK(f->find_tensor("nope") == nullptr);
            REQUIRE_THROWS_WITH(f->tensor("nope"), Contains("tensor 'nope' is missing"));
        }
        // the mapped file's data pointers are aligned in memory too (the mapping is page aligned)
        for (const auto& ti : files[1]->tensors())
            CHECK(reinterpret_cast<uintptr_t>(ti.data) % alignment == 0);
    }
}

TEST_CASE("gguf: writer rejects bad tensors and bad alignment") {
    GGUFWriter w;
    std::vector<float> v(64, 1.0f);
    w.add_tensor_f32("a", {32, 2}, GGMLType::Q8_0, v.data());
    REQUIRE_THROWS_WITH(w.add_tensor_f32("a", {32}, GGMLType::F32, v.data()), Contains("duplicate"));
    REQUIRE_THROWS_WITH(w.add_tensor("a", {4}, GGMLType::F32, std::vector<uint8_t>(16)), Contains("duplicate"));
    REQUIRE_THROWS_WITH(w.add_tensor("b", {4}, GGMLType::F32, std::vector<uint8_t>(15)),
                        Contains("15 bytes, expected 16"));
    REQUIRE_THROWS_WITH(w.add_tensor_f32("c", {33}, GGMLType::Q8_0, v.data()), Contains("block size"));
    REQUIRE_THROWS_WITH(w.add_tensor_f32("d", {32, 0}, GGMLType::F32, v.data()), Contains("ne[1]"));
    REQUIRE_THROWS_WITH(w.add_tensor_f32("e", {}, GGMLType::F32, v.data()), Contains("dimensions"));
    REQUIRE_THROWS_WITH(w.add_tensor_f32("e", {1, 1, 1, 1, 1}, GGMLType::F32, v.data()), Contains("dimensions"));
    REQUIRE_THROWS_WITH(w.add_tensor_f32("f", {256}, GGMLType::Q2_K, v.data()), Contains("cannot convert"));
    REQUIRE_THROWS_WITH(w.add_tensor("g", {4}, static_cast<GGMLType>(4), std::vector<uint8_t>(16)),
                        Contains("unknown ggml type"));
    REQUIRE_THROWS_AS(GGUFWriter(3), Error);
    REQUIRE_THROWS_AS(GGUFWriter(0), Error);
    REQUIRE_THROWS_AS(w.set("general.alignment", GGUFValue::u32(48)), Error);
    // an array whose element does not match its declared element type
    GGUFWriter w2;
    w2.set("bad", GGUFValue::array(GGUFType::INT32, {GGUFValue::u8(1)}));
    REQUIRE_THROWS_WITH(w2.to_bytes(), Contains("'bad'"));
    // explicit general.alignment sets the alignment used for the layout
    GGUFWriter w3;
    w3.set("general.alignment", GGUFValue::u32(128));
    w3.add_tensor_f32("t", {32}, GGMLType::F32, v.data());
    auto f = parse(w3.to_bytes());
    CHECK(f->alignment() == 128);
    CHECK(f->data_offset() % 128 == 0);
}

TEST_CASE("gguf: write() errors name the path") {
    GGUFWriter w;
    w.set("a", GGUFValue::u32(1));
    const std::string bad = "/nonexistent_dir_latte/x.gguf";
    REQUIRE_THROWS_WITH(w.write(bad), Contains(bad) && Contains("No such file"));
    if (std::filesystem::exists("/dev/full")) {
        std::vector<float> v(1 << 19, 1.0f);  // 2 MiB: larger than the write buffer
        w.add_tensor_f32("t", {1 << 19}, GGMLType::F32, v.data());
        REQUIRE_THROWS_WITH(w.write("/dev/full"), Contains("/dev/full") && Contains("No space"));
    }
}

TEST_CASE("gguf: open() on a missing path, a directory and an empty file") {
    REQUIRE_THROWS_WITH(GGUFFile::open("/nonexistent_latte/model.gguf"),
                        Contains("/nonexistent_latte/model.gguf") && Contains("No such file"));
    const std::string dir = std::filesystem::temp_directory_path().string();
    REQUIRE_THROWS_WITH(GGUFFile::open(dir), Contains(dir) && Contains("directory"));
    TempPath tmp("empty.gguf");
    write_file(tmp.path, nullptr, 0);
    REQUIRE_THROWS_WITH(GGUFFile::open(tmp.path), Contains(tmp.path) && Contains("empty"));
}

TEST_CASE("gguf: malformed files are rejected with specific messages") {
    const auto good = small_image();
    REQUIRE_NOTHROW(parse(good));
    const std::string nm = "bad.gguf";
    auto check = [&](std::vector<uint8_t> img, const std::string& phrase) {
        INFO("expected phrase: " << phrase);
        std::unique_ptr<uint8_t[]> keep;
        REQUIRE_THROWS_AS(parse_copy(img, img.size(), nm, keep), Error);
        REQUIRE_THROWS_WITH(parse_copy(img, img.size(), nm, keep), Contains(nm + ": ") && Contains(phrase));
    };

    SECTION("wrong magic") {
        auto img = good;
        img[0] = 'X';
        check(img, "magic");
        check(img, "'XGUF'");
    }
    SECTION("version 1 and 4") {
        auto img = good;
        poke<uint32_t>(img, 4, 1);
        check(img, "version 1");
        poke<uint32_t>(img, 4, 4);
        check(img, "version 4");
        poke<uint32_t>(img, 4, 2);  // v2 is accepted
        CHECK(parse(img)->version() == 2);
    }
    SECTION("truncated header") {
        check(std::vector<uint8_t>(good.begin(), good.begin() + 10), "truncated");
        check(std::vector<uint8_t>(good.begin(), good.begin() + 20), "n_kv");
        check(std::vector<uint8_t>(good.begin(), good.begin() + 2), "magic");
        check({}, "truncated");
    }
    SECTION("n_kv huge") {
        auto img = good;
        poke<uint64_t>(img, 16, uint64_t{1} << 60);
        check(img, "n_kv");
        poke<uint64_t>(img, 16, UINT64_MAX);
        check(img, "n_kv");
    }
    SECTION("n_tensors huge") {
        auto img = good;
        poke<uint64_t>(img, 8, uint64_t{1} << 59);
        check(img, "n_tensors");
    }
    SECTION("string length huge") {
        auto img = good;
        poke<uint64_t>(img, after_str(img, "k.str") + 4, uint64_t{1} << 40);
        check(img, "string length 1099511627776");
        check(img, "'k.str'");
        poke<uint64_t>(img, after_str(img, "k.str") + 4, UINT64_MAX);
        check(img, "string length");
        // a key's own length
        auto img2 = good;
        const size_t key_len_at = after_str(img2, "k.u32") - 5 - 8;
        poke<uint64_t>(img2, key_len_at, UINT64_MAX - 3);
        check(img2, "string length");
    }
    SECTION("array count huge") {
        auto img = good;
        poke<uint64_t>(img, after_str(img, "k.arr") + 4 + 4, uint64_t{1} << 40);
        check(img, "array count");
        check(img, "'k.arr'");
        auto img2 = good;  // array of strings: each needs at least 8 bytes
        poke<uint64_t>(img2, after_str(img2, "k.sar") + 4 + 4, img2.size() / 8 + 1);
        check(img2, "array count");
    }
    SECTION("unknown value type") {
        auto img = good;
        poke<uint32_t>(img, after_str(img, "k.u32"), 13);
        check(img, "unknown value type 13");
        auto img2 = good;  // unknown array element type
        poke<uint32_t>(img2, after_str(img2, "k.arr") + 4, 0xffffffffu);
        check(img2, "unknown array element type 4294967295");
    }
    SECTION("unknown tensor type id") {
        auto img = good;
        poke<uint32_t>(img, tensor_type_at(img, "tc"), 4);
        check(img, "unknown ggml type id 4");
        check(img, "tensor 'tc'");
        poke<uint32_t>(img, tensor_type_at(img, "tc"), 1000);
        check(img, "unknown ggml type id 1000");
    }
    SECTION("n_dims 0 and 5") {
        auto img = good;
        poke<uint32_t>(img, tensor_ndims_at(img, "tb"), 0);
        check(img, "n_dims = 0");
        check(img, "tensor 'tb'");
        poke<uint32_t>(img, tensor_ndims_at(img, "tb"), 5);
        check(img, "n_dims = 5");
    }
    SECTION("ne zero or negative") {
        auto img = good;
        poke<int64_t>(img, tensor_ne_at(img, "tb", 1), 0);
        check(img, "ne[1] = 0");
        poke<int64_t>(img, tensor_ne_at(img, "tb", 1), -3);
        check(img, "ne[1] = -3");
    }
    SECTION("ne overflow") {
        auto img = good;
        poke<int64_t>(img, tensor_ne_at(img, "ta", 0), int64_t{1} << 62);
        poke<int64_t>(img, tensor_ne_at(img, "ta", 1), int64_t{1} << 62);
        check(img, "overflow");
        check(img, "tensor 'ta'");
        // element count fits int64 but the byte size of f32 does not
        auto img2 = good;
        poke<int64_t>(img2, tensor_ne_at(img2, "tb", 0), int64_t{1} << 31);
        poke<int64_t>(img2, tensor_ne_at(img2, "tb", 1), int64_t{1} << 31);
        poke<uint32_t>(img2, tensor_type_at(img2, "tb"), 27);  // i64: 8 bytes per element
        check(img2, "overflows the byte size");  // 2^62 elements fit, 2^62 * 8 bytes do not
    }
    SECTION("ne[0] not a multiple of the block size") {
        auto img = good;
        poke<int64_t>(img, tensor_ne_at(img, "ta", 0), 33);
        check(img, "block size 32");
        check(img, "ne[0] = 33");
    }
    SECTION("data past the end") {
        auto img = good;
        poke<int64_t>(img, tensor_ne_at(img, "tc", 0), 9);
        check(img, "tensor 'tc': data [offset");
        check(img, "runs past the end of the file");
        auto img2 = good;
        poke<uint64_t>(img2, tensor_offset_at(img2, "ta"), uint64_t{1} << 63);
        check(img2, "runs past the end");
        poke<uint64_t>(img2, tensor_offset_at(img2, "ta"), UINT64_MAX - 31);
        check(img2, "runs past the end");
    }
    SECTION("offset not aligned") {
        auto img = good;
        poke<uint64_t>(img, tensor_offset_at(img, "tb"), peek<uint64_t>(img, tensor_offset_at(img, "tb")) + 4);
        check(img, "not aligned to 32");
        check(img, "tensor 'tb'");
    }
    SECTION("duplicate key") {
        auto img = good;
        const size_t at = after_str(img, "k.arr") - 5;
        std::memcpy(img.data() + at, "k.u32", 5);
        check(img, "duplicate key");
        check(img, "'k.u32'");
    }
    SECTION("duplicate tensor name") {
        auto img = good;
        const size_t at = after_str(img, "tb") - 2;
        std::memcpy(img.data() + at, "ta", 2);
        check(img, "duplicate tensor name");
        check(img, "'ta'");
    }
    SECTION("bad alignment 3 and 0, and of the wrong type") {
        auto img = small_image(64);
        REQUIRE(parse(img)->alignment() == 64);
        const size_t val = after_str(img, "general.alignment") + 4;
        poke<uint32_t>(img, val, 3);
        check(img, "general.alignment");
        check(img, "power of two");
        poke<uint32_t>(img, val, 0);
        check(img, "power of two");
        poke<uint32_t>(img, val, 64);
        poke<uint32_t>(img, val - 4, static_cast<uint32_t>(GGUFType::INT32));
        check(img, "expected uint32");
    }
}

TEST_CASE("gguf: truncation at every byte offset throws latte::Error") {
    for (uint32_t alignment : {32u, 16u}) {
        const auto img = small_image(alignment);
        {
            auto f = parse(img);  // the last tensor ends exactly at EOF
            const auto& tc = f->tensor("tc");
            REQUIRE(f->data_offset() + tc.offset + tc.nbytes == img.size());
        }
        for (size_t n = 0; n < img.size(); ++n) {
            std::unique_ptr<uint8_t[]> keep;
            try {
                parse_copy(img, n, "trunc.gguf", keep);
                FAIL("truncation at " << n << " of " << img.size() << " bytes was accepted");
            } catch (const Error& e) {
                const std::string msg = e.what();
                if (msg.rfind("trunc.gguf: ", 0) != 0) FAIL("message without the file name: " << msg);
            }
        }
    }
    // open() on truncated files
    const auto img = small_image();
    for (size_t n : {size_t{1}, size_t{4}, size_t{23}, size_t{24}, size_t{100}, img.size() / 2, img.size() - 33,
                     img.size() - 1}) {
        TempPath tmp("trunc.gguf");
        write_file(tmp.path, img.data(), n);
        REQUIRE_THROWS_WITH(GGUFFile::open(tmp.path), Contains(tmp.path + ": "));
    }
    TempPath tmp("full.gguf");
    write_file(tmp.path, img.data(), img.size());
    CHECK(GGUFFile::open(tmp.path)->tensors().size() == 3);
}

TEST_CASE("gguf: random byte flips either parse or throw latte::Error") {
    const auto good = small_image();
    std::mt19937_64 rng(0x1a77e5eedULL);
    int ok = 0, rejected = 0;
    for (int it = 0; it < 20000; ++it) {
        std::vector<uint8_t> img = good;
        const int flips = 1 + static_cast<int>(rng() % 4);
        for (int k = 0; k < flips; ++k) {
            const size_t pos = rng() % img.size();
            switch (rng() % 3) {
                case 0: img[pos] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
                case 1: img[pos] = static_cast<uint8_t>(rng()); break;
                default: img[pos] = (rng() & 1) ? 0xff : 0x00; break;
            }
        }
        std::unique_ptr<uint8_t[]> keep;
        try {
            auto f = parse_copy(img, img.size(), "fuzz.gguf", keep);
            ++ok;
            // everything the parser hands out must be readable
            unsigned sum = 0;
            for (const auto& ti : f->tensors()) {
                for (uint64_t b = 0; b < ti.nbytes; ++b) sum += ti.data[b];
                (void)ti.shape_str();
                CHECK(ti.nelements() > 0);
            }
            for (const auto& [k, v] : f->metadata()) {
                try { (void)f->get_i64(k); } catch (const Error&) {}
                try { (void)f->get_str_array(k); } catch (const Error&) {}
            }
            (void)sum;
        } catch (const Error& e) {
            ++rejected;
            const std::string msg = e.what();
            if (msg.rfind("fuzz.gguf: ", 0) != 0) FAIL("message without the file name: " << msg);
        }
    }
    INFO("accepted " << ok << ", rejected " << rejected);
    CHECK(ok + rejected == 20000);
    CHECK(ok > 0);
    CHECK(rejected > 0);
}

TEST_CASE("gguf: typed getter errors") {
    GGUFWriter w;
    w.set("u32", GGUFValue::u32(7));
    w.set("neg", GGUFValue::i32(-1));
    w.set("big", GGUFValue::u64(uint64_t{1} << 40));
    w.set("huge", GGUFValue::u64(UINT64_MAX));
    w.set("s", GGUFValue::str("x"));
    w.set("f", GGUFValue::f32(2.5f));
    w.set("b", GGUFValue::boolean(true));
    w.set("ia", GGUFValue::i32_array({1, 2}));
    w.set("sa", GGUFValue::str_array({"a"}));
    w.set("ua", GGUFValue::array(GGUFType::UINT64, {GGUFValue::u64(UINT64_MAX)}));
    auto f = parse(w.to_bytes(), "getters.gguf");

    REQUIRE_THROWS_WITH(f->get_u32("nope"), Contains("getters.gguf: metadata key 'nope' is missing"));
    REQUIRE_THROWS_WITH(f->get_str("nope"), Contains("'nope' is missing"));
    REQUIRE_THROWS_WITH(f->get_str("u32"), Contains("getters.gguf: metadata key 'u32' has type uint32, expected string"));
    REQUIRE_THROWS_WITH(f->get_u32("s"), Contains("'s' has type string, expected an integer"));
    REQUIRE_THROWS_WITH(f->get_u64("f"), Contains("'f' has type float32"));
    REQUIRE_THROWS_WITH(f->get_bool("u32"), Contains("expected bool"));
    REQUIRE_THROWS_WITH(f->get_f64("s"), Contains("'s' has type string"));
    REQUIRE_THROWS_WITH(f->get_u32("neg"), Contains("'neg'") && Contains("-1") && Contains("out of range for uint32"));
    REQUIRE_THROWS_WITH(f->get_u64("neg"), Contains("out of range for uint64"));
    REQUIRE_THROWS_WITH(f->get_u32("big"), Contains("1099511627776") && Contains("out of range for uint32"));
    REQUIRE_THROWS_WITH(f->get_i64("huge"), Contains("out of range for int64"));
    CHECK(f->get_i64("neg") == -1);
    CHECK(f->get_u64("big") == (uint64_t{1} << 40));
    CHECK(f->get_i64("u32") == 7);
    CHECK(f->get_f64("u32") == 7.0);
    CHECK(f->get_f32("f") == 2.5f);

    REQUIRE_THROWS_WITH(f->get_str_array("ia"), Contains("'ia' has type array of int32, expected array of string"));
    REQUIRE_THROWS_WITH(f->get_str_array("s"), Contains("'s' has type string"));
    REQUIRE_THROWS_WITH(f->get_int_array("sa"), Contains("array of string, expected array of integers"));
    REQUIRE_THROWS_WITH(f->get_int_array("u32"), Contains("has type uint32"));
    REQUIRE_THROWS_WITH(f->get_int_array("ua"), Contains("out of range for int64"));
    REQUIRE_THROWS_WITH(f->get_float_array("sa"), Contains("expected array of floats"));
    REQUIRE_THROWS_WITH(f->get_float_array("f"), Contains("has type float32"));
    CHECK(f->get_float_array("ia") == std::vector<double>{1.0, 2.0});

    // the _or variants: default when absent, but a present key of the wrong type still throws
    CHECK(f->get_u32_or("absent", 3) == 3);
    CHECK(f->get_u32_or("u32", 3) == 7);
    REQUIRE_THROWS_WITH(f->get_u32_or("s", 3), Contains("'s' has type string"));
    REQUIRE_THROWS_WITH(f->get_u32_or("neg", 3), Contains("out of range"));
    REQUIRE_THROWS_WITH(f->get_str_or("u32", "d"), Contains("expected string"));
    REQUIRE_THROWS_WITH(f->get_bool_or("s", false), Contains("expected bool"));
    REQUIRE_THROWS_WITH(f->get_f32_or("s", 1.0f), Contains("'s'"));
    REQUIRE_THROWS_WITH(f->get_u64_or("neg", 1), Contains("out of range"));
    CHECK(f->get_bool_or("b", false));
}

TEST_CASE("gguf: deeply nested arrays are rejected, not recursed into without bound") {
    // Hand-built: one key whose value is ARRAY of ARRAY of ... (1000 levels), each with count 1.
    std::vector<uint8_t> img;
    auto put = [&](const void* p, size_t n) {
        img.insert(img.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
    };
    auto u32 = [&](uint32_t x) { put(&x, 4); };
    auto u64 = [&](uint64_t x) { put(&x, 8); };
    put("GGUF", 4);
    u32(3);
    u64(0);
    u64(1);
    u64(4);
    put("deep", 4);
    u32(9);
    for (int i = 0; i < 1000; ++i) {
        u32(9);
        u64(1);
    }
    u32(0);
    u64(0);
    REQUIRE_THROWS_WITH(parse(img, "deep.gguf"), Contains("deep.gguf: ") && Contains("nested"));
}

TEST_CASE("gguf: write() streams tensors larger than its buffer, and errors on a directory") {
    GGUFWriter w(64);
    w.set("general.name", GGUFValue::str("big"));
    std::vector<float> v(3 << 18);  // 3 MiB of f32
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
    w.add_tensor_f32("small", {8}, GGMLType::F32, v.data());
    w.add_tensor_f32("big", {1024, 3 << 8}, GGMLType::F32, v.data());
    w.add_tensor_f32("after", {32, 2}, GGMLType::Q8_0, v.data());
    TempPath tmp("big.gguf");
    w.write(tmp.path);
    CHECK(read_file(tmp.path) == w.to_bytes());
    auto f = GGUFFile::open(tmp.path);
    const auto& big = f->tensor("big");
    REQUIRE(big.nbytes == v.size() * 4);
    CHECK(std::memcmp(big.data, v.data(), big.nbytes) == 0);
    CHECK(f->tensor("after").offset % 64 == 0);

    const std::string dir = std::filesystem::temp_directory_path().string();
    REQUIRE_THROWS_WITH(w.write(dir), Contains(dir) && Contains("directory"));
}

TEST_CASE("gguf: a metadata-only file may end right after its key/value pairs") {
    GGUFWriter w;
    w.set("a", GGUFValue::str("xyz"));
    auto img = w.to_bytes();
    const size_t unpadded = 24 + 8 + 1 + 4 + 8 + 3;
    REQUIRE(img.size() == 64);  // padded to the alignment
    std::unique_ptr<uint8_t[]> keep;
    auto f = parse_copy(img, unpadded, "meta_only.gguf", keep);
    CHECK(f->get_str("a") == "xyz");
    CHECK(f->tensors().empty());
    for (size_t n = 0; n < unpadded; ++n) REQUIRE_THROWS_AS(parse_copy(img, n, "meta_only.gguf", keep), Error);
}

TEST_CASE("gguf: streamed tensors are written in order and their size is enforced", "[gguf]") {
    const std::string path = (std::filesystem::temp_directory_path() / "latte_streamed.gguf").string();
    latte::GGUFWriter w;
    w.set("k", latte::GGUFValue::u32(7));
    std::vector<float> vals(64 * 3);
    for (size_t i = 0; i < vals.size(); ++i) vals[i] = static_cast<float>(i) * 0.5f - 3.0f;
    w.add_tensor_streamed("s", {64, 3}, latte::GGMLType::F32, [&](const latte::GGUFWriter::Emit& emit) {
        for (int r = 0; r < 3; ++r) emit(&vals[static_cast<size_t>(r) * 64], 64 * sizeof(float));
    });
    w.add_tensor_f32("plain", {32}, latte::GGMLType::F32, vals.data());
    REQUIRE_THROWS_WITH(w.to_bytes(), Catch::Contains("streamed"));
    w.write(path);
    const auto f = latte::GGUFFile::open(path);
    const auto& t = f->tensor("s");
    REQUIRE(t.nbytes == vals.size() * sizeof(float));
    CHECK(std::memcmp(t.data, vals.data(), t.nbytes) == 0);
    CHECK(std::memcmp(f->tensor("plain").data, vals.data(), 32 * sizeof(float)) == 0);

    latte::GGUFWriter shortw;
    shortw.add_tensor_streamed("s", {64}, latte::GGMLType::F32,
                               [&](const latte::GGUFWriter::Emit& emit) { emit(vals.data(), 63 * sizeof(float)); });
    REQUIRE_THROWS_WITH(shortw.write(path), Catch::Contains("expected 256"));
    latte::GGUFWriter longw;
    longw.add_tensor_streamed("s", {64}, latte::GGMLType::F32,
                              [&](const latte::GGUFWriter::Emit& emit) { emit(vals.data(), 65 * sizeof(float)); });
    REQUIRE_THROWS_WITH(longw.write(path), Catch::Contains("more than"));
    std::filesystem::remove(path);
}
