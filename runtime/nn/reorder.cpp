#include "runtime/nn/reorder.h"

#include <algorithm>
#include <utility>

namespace dlb {
Schedule reorder_backward(const Schedule& schedule, const std::vector<TensorInfo>& tensors,
                          const std::vector<int>& kept) {
  const std::vector<Step>& steps = schedule.steps;
  // The last pass that reads each stored tensor.
  std::vector<size_t> last_read(tensors.size(), 0);
  std::vector<char> keep(tensors.size(), 0);
  for (int t : kept) keep[storage_of(t, tensors)] = 1;
  for (size_t i = 0; i < steps.size(); ++i)
    for (int t : steps[i].reads) last_read[storage_of(t, tensors)] = i;

  std::vector<Step> out(steps.begin(), steps.end());
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].pass != Pass::kBackwardData) continue;
    // The same node's weights pass, after the data pass and its accumulations.
    size_t w = i + 1;
    while (w < out.size() && out[w].pass == Pass::kAccumulate) ++w;
    if (w >= out.size() || out[w].pass != Pass::kBackwardWeights || out[w].node != out[i].node) {
      continue;
    }
    // What the weights pass frees by going first: what it reads last and the data pass does not.
    bool frees = false;
    for (int t : out[w].reads) {
      const int s = storage_of(t, tensors);
      if (!keep[s] && last_read[s] == w && !reads_storage(out[i], s, tensors)) frees = true;
    }
    // It may go first only if it reads nothing that the passes it overtakes write.
    bool independent = true;
    for (size_t k = i; k < w; ++k)
      for (int t : out[k].writes)
        if (reads_storage(out[w], storage_of(t, tensors), tensors)) independent = false;
    if (!frees || !independent) continue;
    std::rotate(out.begin() + static_cast<std::ptrdiff_t>(i),
                out.begin() + static_cast<std::ptrdiff_t>(w),
                out.begin() + static_cast<std::ptrdiff_t>(w + 1));
    // Last reads at [i, w] moved one place on; the weights pass is now at i.
    for (size_t& r : last_read) {
      if (r == w) {
        r = i;
      } else if (r >= i && r < w) {
        ++r;
      }
    }
    i = w;  // the data pass and its accumulations are at [i + 1, w]
  }
  Schedule reordered{std::move(out)};
  link_dependencies(reordered, tensors);
  return reordered;
}

}  // namespace dlb
