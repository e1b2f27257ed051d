// Gradient buckets (docs/architecture.md, overlap/): contiguous runs of parameters in the flat
// gradient buffer's order (the last layer's first), the first about 1 MiB (as PyTorch DDP, so the
// first all-reduce starts early) and the rest about bucket_mb. A pure function of the gradient
// sizes, so every rank computes the same plan.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dlb {

struct Bucket {
  size_t first_param = 0, num_params = 0;  // in flat order
  int64_t begin = 0, count = 0;            // elements of the flat buffer (gaps included)
  int64_t values = 0;                      // the parameters' values in it (no gaps)
};

struct BucketPlan {
  std::vector<Bucket> buckets;
  std::vector<size_t> bucket_of;  // per parameter (flat order)
};

constexpr double kFirstBucketMb = 1.0;
// The later buckets' size when a run does not say (PyTorch DDP's bucket_cap_mb).
constexpr double kDefaultBucketMb = 25.0;

// `offsets` and `numels`: where each parameter's gradient starts in the flat buffer, and its
// element count, in flat order (offsets increasing; gaps between parameters, for alignment, are
// inside the bucket that spans them). A bucket closes once it spans at least its cap (first_mb
// for the first, then bucket_mb) of element_bytes-sized elements.
BucketPlan make_bucket_plan(const std::vector<int64_t>& offsets, const std::vector<int64_t>& numels,
                            size_t element_bytes, double bucket_mb,
                            double first_mb = kFirstBucketMb);
// Parameters packed back to back.
BucketPlan make_bucket_plan(const std::vector<int64_t>& numels, size_t element_bytes,
                            double bucket_mb, double first_mb = kFirstBucketMb);

}  // namespace dlb
