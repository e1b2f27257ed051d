// The allocator's accounting (current and peak per category, peak of the total) and budget.
#include "runtime/memory/allocator.h"

#include <gtest/gtest.h>

#include "runtime/core/error.h"

namespace dlb {
namespace {

TEST(Allocator, TracksPeaksPerCategoryAndTotal) {
  auto a = std::make_shared<Allocator>(make_host_memory_resource());
  {
    auto w = a->allocate(1000, MemCategory::kWeights, "w");
    auto x = a->allocate(500, MemCategory::kActivations, "x");
    EXPECT_EQ(a->stats().total_current, 1500u);
  }
  auto y = a->allocate(700, MemCategory::kActivations, "y");
  const MemoryStats s = a->stats();
  EXPECT_EQ(s.current[static_cast<size_t>(MemCategory::kWeights)], 0u);
  EXPECT_EQ(s.peak[static_cast<size_t>(MemCategory::kWeights)], 1000u);
  EXPECT_EQ(s.peak[static_cast<size_t>(MemCategory::kActivations)], 700u);
  EXPECT_EQ(s.total_peak, 1500u);  // the peak of the sum, not the sum of the peaks (1700)
  EXPECT_EQ(s.total_current, 700u);
}

TEST(Allocator, BudgetRaisesOutOfMemoryNamingTheAllocation) {
  auto a = std::make_shared<Allocator>(make_host_memory_resource(), 4096);
  auto first = a->allocate(3000, MemCategory::kWeights, "first");
  try {
    a->allocate(2000, MemCategory::kActivations, "output of conv1");
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("output of conv1"), std::string::npos) << m;
    EXPECT_NE(m.find("budget of 4.00 KiB"), std::string::npos) << m;
  }
  EXPECT_EQ(a->stats().total_current, 3000u);  // the failed request left no trace
  first.reset();
  EXPECT_NO_THROW(a->allocate(4096, MemCategory::kActivations, "fits now"));
}

TEST(Allocator, BuffersKeepTheirAllocatorAlive) {
  std::shared_ptr<Buffer> b;
  {
    auto a = std::make_shared<Allocator>(make_host_memory_resource());
    b = a->allocate(64, MemCategory::kData, "outlives its allocator's owner");
  }
  static_cast<char*>(b->data())[63] = 1;  // still valid; freed when b goes
  b.reset();
}

TEST(ParseBytes, UnitsAndErrors) {
  EXPECT_EQ(parse_bytes("4GiB"), 4ull << 30);
  EXPECT_EQ(parse_bytes("512MiB"), 512ull << 20);
  EXPECT_EQ(parse_bytes("1.5GB"), 1500000000ull);
  EXPECT_EQ(parse_bytes("1000"), 1000ull);
  for (const char* bad : {"", "GiB", "-1GiB", "0", "4 GiB", "4XB", "nan"}) {
    EXPECT_THROW(parse_bytes(bad), InvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace dlb
