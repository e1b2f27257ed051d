// The allocator's accounting (current and peak per category, peak of the total) and budget.
#include "runtime/memory/allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "runtime/core/error.h"
#include "runtime/memory/caching_resource.h"
#include "runtime/memory/host_memory.h"

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

// A resource that counts what it hands out: which one an allocation came from.
class TallyResource final : public MemoryResource {
 public:
  explicit TallyResource(size_t& allocated) : allocated_(allocated) {}
  void* allocate(size_t bytes) override {
    allocated_ += bytes;
    return inner_->allocate(bytes);
  }
  void deallocate(void* p, size_t bytes) override {
    allocated_ -= bytes;
    inner_->deallocate(p, bytes);
  }
  std::string_view name() const override { return "counting"; }

 private:
  size_t& allocated_;
  std::unique_ptr<MemoryResource> inner_ = make_host_memory_resource();
};

// Swapped activations (host_swap) are host memory: from the host resource, outside the device's
// budget and total, with a peak of their own; and a guard puts no zones around them (it reaches
// zones through the device's resource).
TEST(Allocator, HostSwapMemoryIsTheHostsOutsideTheBudgetAndTheTotal) {
  size_t device = 0, host = 0;
  auto a = std::make_shared<Allocator>(std::make_unique<TallyResource>(device), 4096,
                                       std::make_unique<TallyResource>(host));
  a->enable_guard();
  auto w = a->allocate(3000, MemCategory::kWeights, "w");
  auto swapped = a->allocate(10000, MemCategory::kHostSwap, "a host copy");
  EXPECT_EQ(host, 10000u) << "no guard zones around host memory";
  EXPECT_GT(device, 3000u) << "guard zones around device memory";
  const MemoryStats s = a->stats();
  EXPECT_EQ(s.total_current, 3000u);
  EXPECT_EQ(s.total_peak, 3000u);
  EXPECT_EQ(s.peak[static_cast<size_t>(MemCategory::kHostSwap)], 10000u);
  EXPECT_THROW(a->allocate(2000, MemCategory::kActivations, "x"), OutOfMemory);
  a->check_guards("the test");
  swapped.reset();
  EXPECT_EQ(host, 0u);
  EXPECT_EQ(a->stats().current[static_cast<size_t>(MemCategory::kHostSwap)], 0u);
  EXPECT_EQ(a->stats().total_current, 3000u);
}

// A parameter server's copies (host_comm) are host memory too, outside the budget and the
// total; but not the host resource's (pinned on a GPU, for copy engines): ordinary memory.
TEST(Allocator, HostCommMemoryIsOrdinaryHostMemoryNotTheHostResources) {
  size_t device = 0, host = 0;
  auto a = std::make_shared<Allocator>(std::make_unique<TallyResource>(device), 4096,
                                       std::make_unique<TallyResource>(host));
  auto copies = a->allocate(100000, MemCategory::kHostComm, "async: master weights");
  EXPECT_EQ(device, 0u);
  EXPECT_EQ(host, 0u);
  const MemoryStats s = a->stats();
  EXPECT_EQ(s.total_current, 0u);
  EXPECT_EQ(s.current[static_cast<size_t>(MemCategory::kHostComm)], 100000u);
  std::memset(copies->data(), 0, 100000);  // the host's to write
  copies.reset();
  EXPECT_EQ(a->stats().current[static_cast<size_t>(MemCategory::kHostComm)], 0u);
}

// A resource of a known size: require_room refuses an estimate past what is left of it, with the
// estimate, before anything is allocated; an unknown size (0) refuses nothing.
class SizedResource final : public MemoryResource {
 public:
  explicit SizedResource(size_t capacity) : capacity_(capacity) {}
  void* allocate(size_t bytes) override { return inner_->allocate(bytes); }
  void deallocate(void* p, size_t bytes) override { inner_->deallocate(p, bytes); }
  std::string_view name() const override { return "sized memory"; }
  size_t capacity() const override { return capacity_; }

 private:
  size_t capacity_;
  std::unique_ptr<MemoryResource> inner_ = make_host_memory_resource();
};

TEST(Allocator, RequireRoomRefusesAnEstimatePastTheDevicesMemoryBesideWhatIsHeld) {
  auto a = std::make_shared<Allocator>(std::make_unique<SizedResource>(10 << 20));
  EXPECT_NO_THROW(a->require_room(10 << 20, "all of it"));
  auto held = a->allocate(4 << 20, MemCategory::kWeights, "w");
  EXPECT_NO_THROW(a->require_room(6 << 20, "the rest"));
  try {
    a->require_room((6 << 20) + 1, "the step's tensors");
    ADD_FAILURE() << "no refusal";
  } catch (const OutOfMemory& e) {
    EXPECT_STREQ(e.what(),
                 "the step's tensors would take about 6.00 MiB, more than the sized memory here "
                 "less the 4.00 MiB in use (6.00 MiB)");
  }
  EXPECT_EQ(a->stats().total_current, size_t{4} << 20) << "nothing allocated";
  auto unknown = std::make_shared<Allocator>(std::make_unique<SizedResource>(0));
  EXPECT_NO_THROW(unknown->require_room(SIZE_MAX, "anything"));
}

// The machine's memory: DLBENCH_HOST_MEMORY replaces what the system says, and is read by the
// one grammar of sizes; the host resource's capacity is it.
TEST(HostMemory, TheEnvironmentReplacesTheMachinesMemory) {
  const size_t machine = host_memory_bytes();
  EXPECT_GT(machine, size_t{1} << 20);
  ASSERT_EQ(setenv("DLBENCH_HOST_MEMORY", "3GiB", 1), 0);
  EXPECT_EQ(host_memory_bytes(), size_t{3} << 30);
  EXPECT_EQ(make_host_memory_resource()->capacity(), size_t{3} << 30);
  ASSERT_EQ(setenv("DLBENCH_HOST_MEMORY", "0x10", 1), 0);
  EXPECT_THROW(host_memory_bytes(), InvalidArgument);
  ASSERT_EQ(unsetenv("DLBENCH_HOST_MEMORY"), 0);
  EXPECT_EQ(host_memory_bytes(), machine);
  EXPECT_THROW(require_memory(2e19, 1 << 30, "x", "y"), OutOfMemory);
  EXPECT_NO_THROW(require_memory(1 << 30, 1 << 30, "x", "y"));
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

// Whole bytes, by the one number grammar: a fraction of a byte rounds to the nearest, less than
// one is refused, and hex, leading spaces, inf and underflow are no size.
TEST(ParseBytes, WholeBytesByTheOneGrammar) {
  EXPECT_EQ(parse_bytes("1.5KiB"), 1536ull);
  EXPECT_EQ(parse_bytes("1.4"), 1ull);
  EXPECT_EQ(parse_bytes("1.6"), 2ull);
  EXPECT_EQ(parse_bytes("1e3"), 1000ull);
  for (const char* bad :
       {"0.5", "0.99B", "1e-300", "1e-400", "0x10", "0x1p30", " 4GiB", "+4GiB", "inf", "1e20GiB"}) {
    EXPECT_THROW(parse_bytes(bad), InvalidArgument) << bad;
  }
}

// A resource that counts its calls and can be told to fail, under the cache.
class CountingResource final : public MemoryResource {
 public:
  void* allocate(size_t bytes) override {
    ++allocations;
    if (fail_above && live + bytes > fail_above) return nullptr;
    live += bytes;
    return ::operator new(bytes);
  }
  void deallocate(void* p, size_t bytes) override {
    ++deallocations;
    live -= bytes;
    ::operator delete(p);
  }
  std::string_view name() const override { return "counting"; }
  size_t allocations = 0, deallocations = 0, live = 0, fail_above = 0;
};

TEST(CachingResource, BlockSizesRoundUp) {
  EXPECT_EQ(caching_block_size(0), 512u);
  EXPECT_EQ(caching_block_size(1), 512u);
  EXPECT_EQ(caching_block_size(513), 1024u);
  EXPECT_EQ(caching_block_size((1u << 20) - 1), 1u << 20);
  EXPECT_EQ(caching_block_size(1u << 20), 2u << 20);
  EXPECT_EQ(caching_block_size((2u << 20) + 1), 4u << 20);
}

TEST(CachingResource, ASecondStepOfTheSameSizesReachesTheDeviceNever) {
  auto counting = std::make_unique<CountingResource>();
  CountingResource* up = counting.get();
  auto cache = std::make_unique<CachingMemoryResource>(std::move(counting));
  CachingMemoryResource* c = cache.get();
  auto a = std::make_shared<Allocator>(std::move(cache), size_t{1} << 30);
  auto step = [&] {
    auto x = a->allocate(3000, MemCategory::kActivations, "x");
    auto y = a->allocate(5u << 20, MemCategory::kActivations, "y");
    auto z = a->allocate(3000, MemCategory::kWorkspace, "z");
  };
  step();
  EXPECT_EQ(up->allocations, 3u);
  step();
  step();
  EXPECT_EQ(up->allocations, 3u);
  EXPECT_EQ(c->stats().reuses, 6u);
  EXPECT_EQ(up->deallocations, 0u);
  // The allocator's accounting sees requested bytes, not the cache's blocks.
  EXPECT_EQ(a->stats().total_current, 0u);
  EXPECT_EQ(a->stats().total_peak, 3000u + (5u << 20) + 3000u);
}

TEST(CachingResource, AFailedRequestReleasesTheCacheAndRetriesOnce) {
  auto counting = std::make_unique<CountingResource>();
  CountingResource* up = counting.get();
  CachingMemoryResource cache(std::move(counting));
  void* p = cache.allocate(4u << 20);
  cache.deallocate(p, 4u << 20);       // cached: 4 MiB held upstream
  up->fail_above = 6u << 20;           // the device has 6 MiB
  void* q = cache.allocate(6u << 20);  // fails while the cache holds 4 MiB, then fits
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(cache.stats().flushes, 1u);
  EXPECT_EQ(cache.stats().cached_bytes, 0u);
  EXPECT_EQ(cache.allocate(2u << 20), nullptr);  // truly out of memory: nullptr, no loop
  cache.deallocate(q, 6u << 20);
}

TEST(CachingResource, AFreeOfABlockNotHandedOutIsRefused) {
  CachingMemoryResource cache(std::make_unique<CountingResource>());
  void* p = cache.allocate(1000);
  cache.deallocate(p, 1000);
  // Twice: the block would be handed out twice. Freeing runs in destructors, so it aborts.
  EXPECT_DEATH(cache.deallocate(p, 1000), "that it did not hand out");
  int on_stack = 0;
  EXPECT_DEATH(cache.deallocate(&on_stack, 4), "that it did not hand out");
}

}  // namespace
}  // namespace dlb
