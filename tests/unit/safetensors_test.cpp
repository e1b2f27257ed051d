// safetensors: bit-exact round trips, and clear errors for every kind of malformed file.
#include "runtime/io/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include "runtime/core/error.h"

namespace dlb {
namespace {

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "dlb_" + name + ".safetensors";
}

HostTensor f32(Shape s, std::vector<float> v) {
  HostTensor t{DType::kF32, std::move(s), std::vector<uint8_t>(v.size() * 4)};
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

TEST(Safetensors, RoundTripIsBitExact) {
  StateDict in;
  const float nan_payload = [] {
    uint32_t bits = 0x7fc01234u;  // a NaN with a payload
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }();
  in["a.weight"] = f32(
      {2, 3}, {1.f, -0.f, nan_payload, std::numeric_limits<float>::infinity(), 1e-45f, 3.4e38f});
  in["b.scalar"] = HostTensor{DType::kI64, Shape{}, std::vector<uint8_t>(8, 0xAB)};
  in["c.half"] = HostTensor{DType::kF16, Shape{3}, {1, 2, 3, 4, 5, 6}};
  in["d.bf16"] = HostTensor{DType::kBF16, Shape{1, 1}, {0x80, 0x3f}};
  in["e.empty"] = HostTensor{DType::kF32, Shape{0, 4}, {}};
  const std::string path = temp_path("roundtrip");
  save_safetensors(path, in, {{"format", "pt"}});
  const StateDict out = load_safetensors(path);
  ASSERT_EQ(out.size(), in.size());
  for (const auto& [name, t] : in) {
    ASSERT_TRUE(out.count(name)) << name;
    EXPECT_EQ(out.at(name).dtype, t.dtype) << name;
    EXPECT_EQ(out.at(name).shape, t.shape) << name;
    EXPECT_EQ(out.at(name).bytes, t.bytes) << name;
  }
}

void write_raw(const std::string& path, const std::string& header, const std::string& data,
               int64_t declared_len = -1) {
  std::ofstream f(path, std::ios::binary);
  uint64_t n = declared_len < 0 ? header.size() : static_cast<uint64_t>(declared_len);
  for (int i = 0; i < 8; ++i) f.put(static_cast<char>(n >> (8 * i)));
  f << header << data;
}

struct Malformed {
  const char* name;
  std::string header;
  std::string data;
  int64_t declared_len;
  const char* message;
};
void PrintTo(const Malformed& m, std::ostream* os) {
  *os << m.name << ": header " << m.header.substr(0, 60) << ", " << m.data.size()
      << " data bytes, expecting '" << m.message << "'";
}

class SafetensorsMalformed : public ::testing::TestWithParam<Malformed> {};

TEST_P(SafetensorsMalformed, IsRejectedWithAMessage) {
  const Malformed m = GetParam();
  const std::string path = temp_path(m.name);
  write_raw(path, m.header, m.data, m.declared_len);
  try {
    load_safetensors(path);
    FAIL() << "loaded a malformed file";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(m.message), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << "names the file";
  }
}

const std::string kTwo =  // two f32[2] tensors, "a" at bytes [0, 8) and "b" at [8, 16)
    R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  return s.replace(s.find(from), from.size(), to);
}

// What the reference implementation refuses (safetensors' Metadata::validate and read_metadata),
// and what fuzzing found accepted before.
INSTANTIATE_TEST_SUITE_P(
    Files, SafetensorsMalformed,
    ::testing::Values(
        Malformed{"len", "{}", "", 1 << 20, "header length"},
        Malformed{"len_over_limit", "{}", "", 100'000'001, "over the format's limit"},
        Malformed{"json", "{not json", "", -1, "not valid JSON"},
        Malformed{"array", "[1,2]", "", -1, "does not start with '{'"},
        Malformed{"dtype", R"({"x":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})",
                  std::string(8, '\0'), -1, "F64"},
        Malformed{"offsets", R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
                  std::string(8, '\0'), -1, "past the data's 8 bytes"},
        Malformed{"size", R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
                  std::string(8, '\0'), -1, "take 12 bytes, but its data_offsets are [0, 8]"},
        Malformed{"missing", R"({"x":{"dtype":"F32","shape":[2]}})", std::string(8, '\0'), -1,
                  "needs 'data_offsets'"},
        Malformed{"overlapping", replaced(kTwo, "[8,16]", "[4,12]"), std::string(16, '\0'), -1,
                  "starts at byte 4 of the data, not at 8"},
        Malformed{"shifted", replaced(replaced(kTwo, "[8,16]", "[9,17]"), "[0,8]", "[1,9]"),
                  std::string(17, '\0'), -1, "starts at byte 1 of the data, not at 0"},
        Malformed{"gap_at_the_end", kTwo, std::string(17, '\0'), -1,
                  "the tensors cover 16 bytes of the data, but it holds 17"},
        Malformed{"header_one_byte_short", kTwo + " ", std::string(16, '\0'),
                  static_cast<int64_t>(kTwo.size()), "cover 16 bytes of the data, but it holds 17"},
        Malformed{"nul_after_header", kTwo + std::string("\0\0garbage", 9), std::string(16, '\0'),
                  -1, "NUL byte"},
        Malformed{"garbage_after_header", kTwo + "xyz", std::string(16, '\0'), -1,
                  "not valid JSON"},
        Malformed{"float_offsets", replaced(kTwo, "[0,8]", "[0.0,8.0]"), std::string(16, '\0'), -1,
                  "data_offsets must be an unsigned integer"},
        Malformed{"negative_dim",
                  replaced(kTwo, "[2],\"data_offsets\":[0,8]", "[-2],\"data_offsets\":[0,8]"),
                  std::string(16, '\0'), -1, "dimensions must be an unsigned integer"},
        Malformed{
            "shape_overflow",
            R"({"x":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,0]}})",
            "", -1, "does not fit 64 bits"},
        Malformed{"metadata_not_strings", R"({"__metadata__":{"x":[1,2]}})", "", -1,
                  "__metadata__ 'x' is not a string"},
        Malformed{"metadata_not_object", R"({"__metadata__":"pt"})", "", -1,
                  "__metadata__ is not an object"},
        Malformed{"unknown_key",
                  replaced(kTwo, "\"shape\":[2],\"data", "\"shape\":[2],\"x\":1,\"data"),
                  std::string(16, '\0'), -1, "unknown key 'x'"},
        Malformed{"deep", "{\"x\":" + std::string(5000, '[') + std::string(5000, ']') + "}", "", -1,
                  "nested deeper than 64 levels"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Safetensors, AcceptsEmptyTensorsPaddingAndAnyOffsetOrder) {
  // Entries may come in any order in the header; tiling is checked in offset order. An empty
  // tensor takes no bytes; spaces may pad the header (save_safetensors aligns to 8).
  const std::string header =
      R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
      R"("e":{"dtype":"F32","shape":[0,3],"data_offsets":[4,4]},)"
      R"("a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"__metadata__":{"f":"pt"}}   )";
  std::string file(8, '\0');
  file[0] = static_cast<char>(header.size());
  file += header + std::string(8, '\1');
  const StateDict t = parse_safetensors(file, "mem");
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t.at("e").shape, (Shape{0, 3}));
  EXPECT_TRUE(t.at("e").bytes.empty());
  EXPECT_EQ(t.at("a").shape, Shape{});
  EXPECT_EQ(t.at("b").bytes, std::vector<uint8_t>(4, 1));
}

TEST(Safetensors, ShortAndMissingFiles) {
  const std::string path = temp_path("short");
  std::ofstream(path, std::ios::binary) << "abc";
  EXPECT_THROW(load_safetensors(path), InvalidArgument);
  EXPECT_THROW(load_safetensors(temp_path("does_not_exist")), InvalidArgument);
}

}  // namespace
}  // namespace dlb
