#include "runtime/overlap/sync_schedule.h"

#include <algorithm>

namespace dlb {

namespace {

struct BucketTensors {
  std::vector<int> grads, values;
};

std::vector<BucketTensors> bucket_tensors(const Graph& graph, const BucketPlan& plan) {
  std::vector<BucketTensors> out;
  const std::vector<Param*>& params = graph.flat_params();
  for (const Bucket& b : plan.buckets) {
    BucketTensors t;
    for (size_t i = b.first_param; i < b.first_param + b.num_params; ++i) {
      t.grads.push_back(graph.param_grad_id(params[i]));
      t.values.push_back(graph.param_id(params[i]));
    }
    out.push_back(std::move(t));
  }
  return out;
}

bool touches(const std::vector<int>& list, const std::vector<int>& any) {
  return std::any_of(any.begin(), any.end(),
                     [&](int t) { return std::find(list.begin(), list.end(), t) != list.end(); });
}

Step all_reduce_step(int bucket, const std::vector<int>& grads) {
  Step s;
  s.pass = Pass::kAllReduce;
  s.bucket = bucket;
  s.reads = s.writes = grads;
  return s;
}

Step update_step(int bucket, const BucketTensors& t, bool from_previous_step) {
  Step s;
  s.pass = Pass::kUpdate;
  s.bucket = bucket;
  s.from_previous_step = from_previous_step;
  s.reads = t.grads;
  s.reads.insert(s.reads.end(), t.values.begin(), t.values.end());
  s.writes = t.values;
  return s;
}

}  // namespace

void insert_sync(Schedule& schedule, const Graph& graph, const BucketPlan& plan,
                 OverlapStrategy strategy, bool distributed) {
  const std::vector<BucketTensors> buckets = bucket_tensors(graph, plan);
  const int nb = static_cast<int>(buckets.size());
  const bool per_bucket = distributed && strategy != OverlapStrategy::kNone;
  const bool deferred = distributed && strategy == OverlapStrategy::kForward;
  // The pass that writes each bucket's last gradient.
  std::vector<int> completes(nb, -1);
  for (int b = 0; b < nb; ++b) {
    for (size_t i = 0; i < schedule.steps.size(); ++i)
      if (touches(schedule.steps[i].writes, buckets[b].grads)) completes[b] = static_cast<int>(i);
  }
  std::vector<char> placed(nb, 0);
  std::vector<Step> out;
  for (size_t i = 0; i < schedule.steps.size(); ++i) {
    const Step& step = schedule.steps[i];
    if (deferred && step.pass == Pass::kForward) {
      for (int b = 0; b < nb; ++b) {
        if (!placed[b] && touches(step.reads, buckets[b].values)) {
          out.push_back(update_step(b, buckets[b], true));
          placed[b] = 1;
        }
      }
    }
    out.push_back(step);
    if (per_bucket) {
      for (int b = 0; b < nb; ++b)
        if (completes[b] == static_cast<int>(i))
          out.push_back(all_reduce_step(b, buckets[b].grads));
    }
  }
  if (distributed && strategy == OverlapStrategy::kNone) {
    std::vector<int> all;
    for (const BucketTensors& t : buckets) all.insert(all.end(), t.grads.begin(), t.grads.end());
    out.push_back(all_reduce_step(-1, all));
  }
  if (!deferred) {
    for (int b = 0; b < nb; ++b) out.push_back(update_step(b, buckets[b], false));
  }
  schedule.steps = std::move(out);
  link_dependencies(schedule, graph.tensor_infos());
}

}  // namespace dlb
