// An injected straggler (--straggler=RANK:FACTOR): on that rank, each compute pass (the layers'
// passes and the loss) takes `factor` times as long as it ran, the extra spent spinning on the
// host after it, so the rank holds its core the whole time as a slower processor would. The
// pass's span in a trace includes the extra, so a rank's trace shows it slow. Host backends only:
// a GPU's passes are launches that return before their work has run.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "runtime/nn/schedule.h"

namespace dlb {

// Which rank is slowed, and by how much.
struct StragglerSpec {
  int64_t rank = 0;
  double factor = 1;
  bool operator==(const StragglerSpec& o) const { return rank == o.rank && factor == o.factor; }
};
// "RANK:FACTOR": a whole rank from 0 and a finite factor; nullopt for anything else (the factor's
// range is the caller's to check).
std::optional<StragglerSpec> parse_straggler(std::string_view text);
std::string straggler_name(const StragglerSpec& s);  // the text parse_straggler reads

class SlowedPasses final : public PassRunner {
 public:
  // `factor` >= 1.
  SlowedPasses(PassRunner& inner, double factor);
  void run_pass(const Step& step, const LayerContext* ctx) override;
  void begin_step(int64_t index) override { inner_.begin_step(index); }
  const std::string& label(const Step& step) const override { return inner_.label(step); }
  bool traced(const Step& step) const override { return inner_.traced(step); }
  const std::pair<Mark, Mark>* lane_marks(const Step& step) const override {
    return inner_.lane_marks(step);
  }

 private:
  PassRunner& inner_;
  double factor_;
};

}  // namespace dlb
