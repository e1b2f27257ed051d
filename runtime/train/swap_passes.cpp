#include "runtime/train/swap_passes.h"

#include <fmt/format.h>

#include "runtime/core/error.h"

namespace dlb {

void SwapPasses::run_pass(const Step& step, const LayerContext* ctx) {
  (void)ctx;
  Tensor& device = step_.tensor(step.y);
  Tensor& host = step_.tensor(step.x.at(0));
  switch (step.pass) {
    case Pass::kSwapOut:
    case Pass::kSwapIn: {
      const Backend::CopyMarks m = step.pass == Pass::kSwapOut ? backend_.swap_copy(device, host)
                                                               : backend_.swap_copy(host, device);
      copies_[step.y] = {m.start, m.end};
      return;
    }
    case Pass::kSwapWait: {
      auto it = copies_.find(step.y);
      if (it == copies_.end()) {
        throw InvalidArgument(
            fmt::format("a swap wait for {} with no copy of it before", tensors_.at(step.y).name));
      }
      backend_.wait_for_copy(it->second.second);
      return;
    }
    default:
      throw InvalidArgument(
          fmt::format("the swap runner does not run {} passes", pass_name(step.pass)));
  }
}

const std::string& SwapPasses::label(const Step& step) const { return tensors_.at(step.y).name; }

const std::pair<Mark, Mark>* SwapPasses::lane_marks(const Step& step) const {
  if (step.pass == Pass::kSwapWait) return nullptr;
  auto it = copies_.find(step.y);
  return it == copies_.end() ? nullptr : &it->second;
}

}  // namespace dlb
