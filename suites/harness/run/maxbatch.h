// `dlbench maxbatch`: the largest batch whose full training step (forward, loss, backward and
// the update, with every buffer the run allocates) fits --memory-budget, under the run's memory
// plan, precision and backend. Each probe is a real step under the budget; a probe that runs
// out of memory is a result of the search, not an error.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runtime/memory/allocator.h"
#include "suites/harness/core/run_options.h"

namespace dlb {

// One batch tried: whether its step fit, the allocator's peaks when it did, and the refusal
// (the allocation that would have passed the budget) when it did not.
struct BatchProbe {
  int64_t batch = 0;
  bool fits = false;
  std::optional<MemoryStats> memory;
  std::string message;
};

// The largest batch probed that fit (0: not even batch 1), every probe in the order made, and
// whether the search stopped at its limit with the limit still fitting.
struct MaxBatchSearch {
  int64_t batch = 0;
  std::vector<BatchProbe> probes;
  bool reached_limit = false;
  const BatchProbe* found() const;  // the probe of `batch`; null when it is 0
};

// The largest batch the search tries: beyond it, a budget is not what limits the batch.
constexpr int64_t kMaxBatchLimit = 65536;

// Doubles the batch from `first` while probes fit (up to `limit`), then bisects between the
// largest batch that fit and the smallest that did not: about 2 log2(answer) probes. It assumes
// that a step's memory grows with its batch (every tensor of the step is a multiple of it, or
// independent of it).
MaxBatchSearch search_max_batch(const std::function<BatchProbe(int64_t)>& probe, int64_t first = 1,
                                int64_t limit = kMaxBatchLimit);

// The smallest batch the model trains at: 1, or 2 where a batch norm would see a single value
// per channel at batch 1 (resnet18's last one at 32x32: 1x1 images), whose variance is undefined.
int64_t smallest_batch(const RunOptions& options);

// The search for the run `options` describe, within `budget` (its own batch and memory budget
// aside): each probe one warm-up step and one step, with no files written. `on_probe` sees each
// probe as it is made; `environment` receives the run's (when a probe fit).
MaxBatchSearch find_max_batch(const RunOptions& options, size_t budget,
                              const std::function<void(const BatchProbe&)>& on_probe = {},
                              nlohmann::json* environment = nullptr);

// What the options cannot be for a search: no --memory-budget; one of the batch (--batch,
// --batch-file); more than one rank; an option of a timed run or of its files (--steps,
// --trace-steps, --dump, ...), which a probe does not use. Throws InvalidArgument, or what
// validate_run_options would.
void validate_maxbatch_options(const RunOptions& options);

// The record (suites/schema/maxbatch.schema.json): the options, the batch found, its peaks by
// category, and every probe. A pure function.
nlohmann::json maxbatch_json(const RunOptions& options, const MaxBatchSearch& search,
                             const nlohmann::json& environment);

// Searches, prints each probe and the result, and writes the record (--json). Returns 0 when
// the smallest batch fits, 1 when it does not (the message names the allocation that failed).
int maxbatch_command(const RunOptions& options);

}  // namespace dlb
