// dlbench maxbatch's search (suites/harness/run/maxbatch.h) on made-up probes, where the answer and
// the probes it takes are known; tests/integration/maxbatch.sh runs it on real steps.
#include "suites/harness/run/maxbatch.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace dlb {
namespace {

// A probe that fits every batch up to `largest`, and records the batches asked.
struct Fake {
  int64_t largest;
  std::vector<int64_t> asked;
  BatchProbe operator()(int64_t batch) {
    asked.push_back(batch);
    BatchProbe p;
    p.batch = batch;
    p.fits = batch <= largest;
    return p;
  }
};

MaxBatchSearch search(Fake& fake, int64_t first = 1, int64_t limit = kMaxBatchLimit) {
  return search_max_batch([&](int64_t b) { return fake(b); }, first, limit);
}

TEST(MaxBatchSearch, DoublesThenBisects) {
  Fake fake{42, {}};
  const MaxBatchSearch s = search(fake);
  EXPECT_EQ(s.batch, 42);
  EXPECT_FALSE(s.reached_limit);
  // 1..64 doubling (64 fails), then 48 (fails), 40, 44 (fails), 42, 43 (fails).
  EXPECT_EQ(fake.asked, (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 48, 40, 44, 42, 43}));
  ASSERT_EQ(s.probes.size(), fake.asked.size());
  EXPECT_TRUE(s.probes[5].fits);
  EXPECT_FALSE(s.probes[6].fits);
}

TEST(MaxBatchSearch, FindsEveryAnswerExactly) {
  for (int64_t largest = 0; largest <= 300; ++largest) {
    for (int64_t first : {1, 2}) {
      Fake fake{largest, {}};
      const MaxBatchSearch s = search(fake, first);
      EXPECT_EQ(s.batch, largest < first ? 0 : largest) << largest << " from " << first;
      // No batch is probed twice, and the answer's neighbour above was probed and failed.
      std::vector<int64_t> sorted = fake.asked;
      std::sort(sorted.begin(), sorted.end());
      EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << largest;
      const int64_t above = std::max(largest, first - 1) + 1;
      EXPECT_NE(std::find(sorted.begin(), sorted.end(), above), sorted.end()) << largest;
    }
  }
}

TEST(MaxBatchSearch, NothingFitsAfterOneProbe) {
  Fake fake{0, {}};
  const MaxBatchSearch s = search(fake);
  EXPECT_EQ(s.batch, 0);
  EXPECT_EQ(fake.asked, std::vector<int64_t>{1});
}

TEST(MaxBatchSearch, StopsAtItsLimitAndSaysSo) {
  Fake fake{1000, {}};
  const MaxBatchSearch s = search(fake, 1, 100);
  EXPECT_EQ(s.batch, 100);
  EXPECT_TRUE(s.reached_limit);
  EXPECT_EQ(fake.asked.back(), 100);
  // Below the limit, the search stops at the first batch that fails.
  Fake below{99, {}};
  const MaxBatchSearch t = search(below, 1, 100);
  EXPECT_EQ(t.batch, 99);
  EXPECT_FALSE(t.reached_limit);
}

// Batch 1 gives resnet18's last batch norm a single value per channel at 32x32 (1x1 images),
// not at 64x64 (2x2); models without batch norm take 1.
TEST(MaxBatchSearch, SmallestBatchIsTwoWhereABatchNormWouldSeeOneValue) {
  RunOptions o;
  o.model = "resnet18";
  o.image_size = 32;
  EXPECT_EQ(smallest_batch(o), 2);
  o.image_size = 64;
  EXPECT_EQ(smallest_batch(o), 1);
  o.model = "vgg16";
  o.image_size = 32;
  EXPECT_EQ(smallest_batch(o), 1);
}

}  // namespace
}  // namespace dlb
