#include "runtime/overlap/bucket_plan.h"

#include <fmt/format.h>

#include <algorithm>

#include "runtime/core/error.h"

namespace dlb {

BucketPlan make_bucket_plan(const std::vector<int64_t>& offsets, const std::vector<int64_t>& numels,
                            size_t element_bytes, double bucket_mb, double first_mb) {
  if (offsets.size() != numels.size()) {
    throw InvalidArgument(
        fmt::format("bucket plan: {} offsets for {} parameters", offsets.size(), numels.size()));
  }
  BucketPlan plan;
  Bucket current;
  double cap_mb = std::min(first_mb, bucket_mb);
  for (size_t i = 0; i < numels.size(); ++i) {
    if (current.num_params == 0) {
      current.first_param = i;
      current.begin = offsets[i];
    }
    ++current.num_params;
    current.count = offsets[i] + numels[i] - current.begin;
    current.values += numels[i];
    plan.bucket_of.push_back(plan.buckets.size());
    if (static_cast<double>(current.count) * static_cast<double>(element_bytes) >=
        cap_mb * 1024 * 1024) {
      plan.buckets.push_back(current);
      current = Bucket{};
      cap_mb = bucket_mb;
    }
  }
  if (current.num_params > 0) plan.buckets.push_back(current);
  return plan;
}

BucketPlan make_bucket_plan(const std::vector<int64_t>& numels, size_t element_bytes,
                            double bucket_mb, double first_mb) {
  std::vector<int64_t> offsets;
  int64_t offset = 0;
  for (int64_t n : numels) {
    offsets.push_back(offset);
    offset += n;
  }
  return make_bucket_plan(offsets, numels, element_bytes, bucket_mb, first_mb);
}

}  // namespace dlb
