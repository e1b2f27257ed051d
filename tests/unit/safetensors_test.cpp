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

INSTANTIATE_TEST_SUITE_P(
    Files, SafetensorsMalformed,
    ::testing::Values(Malformed{"len", "{}", "", 1 << 20, "header length"},
                      Malformed{"json", "{not json", "", -1, "not JSON"},
                      Malformed{"array", "[1,2]", "", -1, "not a JSON object"},
                      Malformed{"dtype",
                                R"({"x":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})",
                                std::string(8, '\0'), -1, "F64"},
                      Malformed{"offsets",
                                R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
                                std::string(8, '\0'), -1, "outside the file"},
                      Malformed{"size", R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
                                std::string(8, '\0'), -1, "disagree"},
                      Malformed{"missing", R"({"x":{"dtype":"F32","shape":[2]}})",
                                std::string(8, '\0'), -1, "malformed"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Safetensors, ShortAndMissingFiles) {
  const std::string path = temp_path("short");
  std::ofstream(path, std::ios::binary) << "abc";
  EXPECT_THROW(load_safetensors(path), InvalidArgument);
  EXPECT_THROW(load_safetensors(temp_path("does_not_exist")), IoError);
}

}  // namespace
}  // namespace dlb
