// The readers of outside input refuse what they cannot represent, at the depth where it belongs:
// checked sizes, the JSON text guard, the digits CSV, the batch file. The fuzz targets
// (tests/fuzz) drive the same functions with mutated bytes; these are the cases by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "runtime/core/checked.h"
#include "runtime/core/error.h"
#include "runtime/core/shape.h"
#include "runtime/io/json_text.h"
#include "workloads/data/batch_file.h"
#include "workloads/data/dataset.h"

namespace dlb {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(Checked, RefusesWhatDoesNotFit64Bits) {
  EXPECT_EQ(checked_mul(int64_t{1} << 31, int64_t{1} << 31, "x"), int64_t{1} << 62);
  EXPECT_THROW(checked_mul(int64_t{1} << 32, int64_t{1} << 31, "x"), InvalidArgument);
  EXPECT_THROW(checked_add(kMax, int64_t{1}, "x"), InvalidArgument);
  EXPECT_EQ(checked_mul(uint64_t{1} << 32, uint64_t{1} << 31, "x"), uint64_t{1} << 63);
  EXPECT_THROW(checked_mul(uint64_t{1} << 32, uint64_t{1} << 32, "x"), InvalidArgument);
  EXPECT_THROW(checked_add(~uint64_t{0}, uint64_t{1}, "x"), InvalidArgument);
  try {
    checked_mul(uint64_t{1} << 40, uint64_t{1} << 40, "the sweep's points");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("the sweep's points"), std::string::npos) << e.what();
  }
}

TEST(Checked, ShapeNumelRefusesOverflowAndNamesTheShape) {
  EXPECT_EQ((Shape{int64_t{1} << 31, int64_t{1} << 31}).numel(), int64_t{1} << 62);
  EXPECT_EQ((Shape{0, kMax, kMax}).numel(), 0);
  try {
    Shape{int64_t{1} << 40, int64_t{1} << 40}.numel();
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("[1099511627776, 1099511627776]"), std::string::npos)
        << e.what();
  }
}

TEST(JsonText, RefusesDeepNestingWithoutRecursingAndNulBytes) {
  const std::string deep = std::string(5000, '[') + std::string(5000, ']');
  EXPECT_THROW(check_json_text(deep, "f"), InvalidArgument);
  EXPECT_THROW(parse_json(deep, "f"), InvalidArgument);
  // 64 levels is the limit; brackets inside strings do not count, escaped quotes do not end one.
  const std::string ok64 = std::string(64, '[') + std::string(64, ']');
  EXPECT_NO_THROW(parse_json(ok64, "f"));
  EXPECT_THROW(parse_json("[" + ok64 + "]", "f"), InvalidArgument);
  EXPECT_NO_THROW(parse_json("{\"a\": \"\\\"" + std::string(100, '[') + "\"}", "f"));
  try {
    parse_json(std::string("{\"a\": 1}\0garbage", 16), "weights.safetensors");
    FAIL() << "nlohmann stops at NUL; the guard must not";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("NUL byte at offset 8"), std::string::npos) << e.what();
  }
  try {
    parse_json("{\"a\": ", "suite.json");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("suite.json: not valid JSON", 0), 0u) << e.what();
  }
}

std::string digits_line(const std::string& first_pixel, const std::string& label) {
  std::string line = first_pixel;
  for (int i = 1; i < 64; ++i) line += "," + std::to_string(i % 17);
  return line + "," + label + "\n";
}

// A file's name is bytes: those that are not UTF-8 become \xNN before the name goes into a
// record (JSON text); valid UTF-8, however many bytes a character takes, comes through.
TEST(JsonText, NamesThatAreNotUtf8AreEscapedByteByByte) {
  EXPECT_EQ(escape_non_utf8("class_001/img.JPEG"), "class_001/img.JPEG");
  EXPECT_EQ(escape_non_utf8("caf\xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x98\x80"),
            "caf\xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x98\x80");       // e acute, a kanji, an emoji
  EXPECT_EQ(escape_non_utf8("caf\xE9.JPEG"), "caf\\xE9.JPEG");  // Latin-1
  EXPECT_EQ(escape_non_utf8("bad\xFF"), "bad\\xFF");
  EXPECT_EQ(escape_non_utf8("\xC0\xAF"), "\\xC0\\xAF");                    // an overlong '/'
  EXPECT_EQ(escape_non_utf8("\xED\xA0\x80"), "\\xED\\xA0\\x80");           // a surrogate
  EXPECT_EQ(escape_non_utf8("\xE6\x97"), "\\xE6\\x97");                    // cut short
  EXPECT_EQ(escape_non_utf8("\xF4\x90\x80\x80"), "\\xF4\\x90\\x80\\x80");  // past U+10FFFF
  for (const char* name : {"caf\xE9", "bad\xFF", "\xC0\xAF", "\xE6\x97"}) {
    EXPECT_NO_THROW((void)nlohmann::json(escape_non_utf8(name)).dump()) << name;
  }
}

TEST(DigitsCsv, ReadsStrictLinesAndScalesPixels) {
  const Dataset d =
      parse_digits_csv(digits_line("16", "3") + "\n" + digits_line("0", "9") + "\r\n", "d.csv");
  ASSERT_EQ(d.size(), 2);
  EXPECT_EQ(d.labels, (std::vector<int64_t>{3, 9}));
  EXPECT_EQ(d.images[0], 1.f);
  EXPECT_EQ(d.images[64], 0.f);
  EXPECT_EQ(d.images[5], 5.f / 16);
}

struct BadDigits {
  const char* name;
  std::string text;
  const char* message;
};
void PrintTo(const BadDigits& b, std::ostream* os) { *os << b.name; }

class DigitsCsvRejects : public ::testing::TestWithParam<BadDigits> {};

TEST_P(DigitsCsvRejects, NamingTheLine) {
  const BadDigits& b = GetParam();
  try {
    parse_digits_csv(digits_line("0", "1") + b.text, "d.csv");
    FAIL() << "accepted " << b.text;
  } catch (const InvalidArgument& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("d.csv:2: ", 0), 0u) << m;
    EXPECT_NE(m.find(b.message), std::string::npos) << m;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Lines, DigitsCsvRejects,
    ::testing::Values(BadDigits{"fractional_label", digits_line("0", "3.7"), "label is '3.7'"},
                      BadDigits{"two_numbers", digits_line("0", "1 2"), "label is '1 2'"},
                      BadDigits{"nan_label", digits_line("0", "nan"), "label is 'nan'"},
                      BadDigits{"label_10", digits_line("0", "10"), "not an integer 0-9"},
                      BadDigits{"negative_label", digits_line("0", "-1"), "not an integer 0-9"},
                      BadDigits{"nan_pixel", digits_line("nan", "1"), "pixel 0 is 'nan'"},
                      BadDigits{"inf_pixel", digits_line("inf", "1"), "pixel 0 is 'inf'"},
                      BadDigits{"huge_pixel", digits_line("3e38", "1"), "pixel 0 is '3e38'"},
                      BadDigits{"negative_pixel", digits_line("-1", "1"), "pixel 0 is '-1'"},
                      BadDigits{"empty_field", digits_line("", "1"), "pixel 0 is ''"},
                      BadDigits{"short_line", "1,2,3\n", "found 3 fields"},
                      BadDigits{"long_line", digits_line("0", "1,2"), "found 66 fields"}),
    [](const auto& info) { return std::string(info.param.name); });

HostTensor tensor(DType dtype, Shape shape, const void* data) {
  HostTensor t{dtype, shape, {}};
  t.bytes.resize(static_cast<size_t>(shape.numel()) * dtype_size(dtype));
  if (!t.bytes.empty()) std::memcpy(t.bytes.data(), data, t.bytes.size());
  return t;
}

StateDict batch(int64_t n, int64_t side, std::vector<float> images, std::vector<int64_t> labels) {
  StateDict t;
  t.emplace("images", tensor(DType::kF32, {n, 3, side, side}, images.data()));
  t.emplace("labels", tensor(DType::kI64, {n}, labels.data()));
  return t;
}

std::string refusal(const StateDict& t, BatchFileShape want = {3, 10, 0, 1}) {
  try {
    batch_from_tensors(t, "b.safetensors", want);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(BatchFile, EachRankTakesItsSlice) {
  std::vector<float> px(4 * 3 * 2 * 2);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<float>(i);
  const StateDict t = batch(4, 2, px, {0, 1, 2, 3});
  const Dataset r1 = batch_from_tensors(t, "b", {3, 10, 1, 2});
  EXPECT_EQ(r1.labels, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(r1.images.front(), 24.f);
  EXPECT_EQ(r1.images.back(), 47.f);
  EXPECT_EQ(r1.num_classes, 10);
}

TEST(BatchFile, RefusesWhatCannotTrain) {
  const std::vector<float> px(2 * 3 * 2 * 2, 0.5f);
  EXPECT_NE(refusal(batch(0, 2, {}, {})).find("holds no image"), std::string::npos);
  EXPECT_NE(refusal(batch(2, 0, {}, {0, 1})).find("holds no image"), std::string::npos);
  StateDict extra = batch(2, 2, px, {0, 1});
  extra.emplace("extra", tensor(DType::kF32, {1}, px.data()));
  EXPECT_NE(refusal(extra).find("found 'extra', 'images', 'labels'"), std::string::npos)
      << refusal(extra);
  std::vector<float> nan = px;
  nan[13] = std::nanf("");
  EXPECT_NE(refusal(batch(2, 2, nan, {0, 1})).find("image 1 holds a non-finite value"),
            std::string::npos);
  std::vector<float> inf = px;
  inf[0] = -INFINITY;
  EXPECT_NE(refusal(batch(2, 2, inf, {0, 1})).find("image 0 holds a non-finite"),
            std::string::npos);
  EXPECT_NE(refusal(batch(2, 2, px, {0, 10})).find("label 1 is 10, outside [0, 10)"),
            std::string::npos)
      << refusal(batch(2, 2, px, {0, 10}));
  EXPECT_NE(refusal(batch(2, 2, px, {-1, 0})).find("label 0 is -1"), std::string::npos);
  EXPECT_NE(refusal(batch(2, 2, px, {0, 1}), {1, 10, 0, 1}).find("the model takes 1"),
            std::string::npos);
  EXPECT_NE(refusal(batch(2, 2, px, {0, 1}), {3, 10, 0, 4}).find("do not split evenly"),
            std::string::npos);
  EXPECT_EQ(refusal(batch(2, 2, px, {0, 9})), "(accepted)");
}

}  // namespace
}  // namespace dlb
