// An injected straggler (runtime/train/straggler.h): its passes last at least the factor times
// what they ran, whatever the machine's speed, and its text is read as RANK:FACTOR.
#include "runtime/train/straggler.h"

#include <gtest/gtest.h>

#include <chrono>

#include "runtime/core/error.h"

namespace dlb {
namespace {

using Clock = std::chrono::steady_clock;

// A pass that spins for about 2 ms and measures itself.
class Spinner final : public PassRunner {
 public:
  void run_pass(const Step&, const LayerContext*) override {
    const Clock::time_point start = Clock::now();
    while (Clock::now() - start < std::chrono::milliseconds(2)) {
    }
    ran = Clock::now() - start;
  }
  const std::string& label(const Step&) const override { return name; }
  Clock::duration ran{};
  std::string name = "spinner";
};

TEST(Straggler, APassLastsAtLeastTheFactorTimesWhatItRan) {
  Spinner inner;
  SlowedPasses slowed(inner, 3);
  const Clock::time_point start = Clock::now();
  slowed.run_pass(Step{}, nullptr);
  const Clock::duration total = Clock::now() - start;
  // A lower bound only: the machine may add to it, never take from it.
  EXPECT_GE(total, inner.ran * 3);
  EXPECT_EQ(slowed.label(Step{}), "spinner");
  EXPECT_THROW(SlowedPasses(inner, 0.5), InvalidArgument);
}

TEST(Straggler, ItsTextIsRankColonFactor) {
  EXPECT_EQ(parse_straggler("3:2.5"), (StragglerSpec{3, 2.5}));
  EXPECT_EQ(straggler_name(*parse_straggler("0:2")), "0:2");
  for (const char* bad : {"", "3", ":2", "3:", "-1:2", "a:2", "3:x", "3:2:1", "3:nan", "3:inf",
                          "3:1e999", "1234567890:2"}) {
    EXPECT_FALSE(parse_straggler(bad)) << bad;
  }
}

}  // namespace
}  // namespace dlb
