// Seeded random numbers with a fixed algorithm (xoshiro256** and Box-Muller), so the same seed
// gives the same weights and data with any standard library.
#pragma once
#include <cstdint>

namespace dlb {

class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next_u64();
  float uniform();                    // [0, 1)
  float uniform(float lo, float hi);  // [lo, hi)
  float normal(float mean, float stddev);
  int64_t below(int64_t n);   // [0, n)
  Rng fork(uint64_t stream);  // an independent generator, e.g. per rank or layer

 private:
  uint64_t s_[4];
  bool has_spare_ = false;
  float spare_ = 0.f;
};

}  // namespace dlb
