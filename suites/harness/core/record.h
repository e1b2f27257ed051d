// One run's result, and the record it becomes. The runner (run/training.h, run_training) returns a
// RunResult; record_json, a pure function, turns it into the JSON record
// (suites/schema/result.schema.json); print_result is the console's view of the same result.
#pragma once
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "runtime/core/error.h"
#include "runtime/memory/allocator.h"
#include "runtime/train/engines.h"
#include "runtime/train/trainer.h"
#include "suites/harness/core/host_share.h"
#include "suites/harness/core/noise.h"
#include "suites/harness/core/run_options.h"

namespace dlb {

constexpr int kResultSchemaVersion = 1;
// A step that waits for its batch longer than this share of its median time is input-bound.
constexpr double kInputBoundShare = 0.05;

// What became of a point. ok; diverged (the loss became inf or NaN: the metrics stay, but are not
// a result); oom, unsupported or failed (a run's error, status_for); timeout and crashed (the
// harness's, for a worker it had to kill or that died). suites/schema/result.schema.json exports
// the names.
enum class RunStatus { kOk, kDiverged, kOom, kUnsupported, kTimeout, kCrashed, kFailed };
inline constexpr RunStatus kRunStatuses[] = {
    RunStatus::kOk,      RunStatus::kDiverged, RunStatus::kOom,   RunStatus::kUnsupported,
    RunStatus::kTimeout, RunStatus::kCrashed,  RunStatus::kFailed};
std::string_view run_status_name(RunStatus status);
std::optional<RunStatus> parse_run_status(std::string_view name);
// A point that went wrong: not ok, and not the system's saying it cannot run it.
bool is_failure(RunStatus status);

// How a record's figures were obtained: measured by running the step, or simulated by replaying
// it on a virtual clock. suites/schema/result.schema.json exports the names.
enum class RunMode { kMeasured, kSimulated };
inline constexpr RunMode kRunModes[] = {RunMode::kMeasured, RunMode::kSimulated};
std::string_view run_mode_name(RunMode mode);

struct RunResult {
  // The options as the run resolved them: batch, image size and classes filled in from the model
  // or the batch file (left unset when the run failed before it got that far).
  RunOptions options;
  RunStatus status = RunStatus::kOk;
  std::string message;
  RunMode mode = RunMode::kMeasured;
  int rank = 0, ranks = 1;  // this process, and how many ran
  std::string backend_name;
  nlohmann::json environment = nlohmann::json::object();

  // The model's arithmetic.
  int64_t params = 0;
  double forward_flops_per_image = 0, flops_per_step = 0;
  // Synthetic data: the timed steps of all ranks (every rank's images over the slowest rank's
  // time).
  std::optional<RunStats> stats;
  // data=digits: the metrics train_to_accuracy returned.
  nlohmann::json convergence;
  // Several ranks: communication per traced step, buckets, whether the weights agree.
  nlohmann::json comm;
  std::optional<int64_t> buckets;
  std::optional<bool> weights_identical_across_ranks;
  // --sync=async: the staleness of each update the parameter server applied (rank 0's).
  std::optional<std::vector<int64_t>> async_staleness;
  nlohmann::json phases;  // traced synthetic runs: seconds per phase per traced step
  // data=folder or shards: the loader over the timed steps (suites/harness/run/image_input.h); the
  // record adds the wait per step, its share of the step, the loader's rate and the verdict.
  nlohmann::json input;
  // fp16: the loss scale at the end, and the steps skipped for inf or NaN gradients (warm-up
  // and timed, or every epoch's).
  std::optional<float> loss_scale;
  int64_t skipped_steps = 0;
  // The convolution passes' engines, where the backend declares them (runtime/train/engines.h).
  std::optional<EngineSummary> engines;
  // How the convolution passes compute, on every backend (runtime/train/engines.h).
  std::optional<ConvPassSummary> convolutions;
  // What the products read: 16-bit data natively, or f32 copies (runtime/train/engines.h).
  std::optional<ArithmeticSummary> arithmetic;
  // --cuda-graph: what was captured and replayed (Trainer::step_graphs).
  std::optional<StepGraphStats> step_graphs;
  // The machine's measured peak (machine_peak.h) for this device, when one was measured:
  // flops_per_s, how, and ranks_sharing_it (CPU ranks on one host share its peak).
  nlohmann::json peak;
  std::optional<MemoryStats> memory;
  // The step's memory plan: what it allocates for the step's tensors, and what naive_plan would.
  struct PlanBytes {
    size_t planned = 0, naive = 0;
  };
  std::optional<PlanBytes> plan_bytes;
  std::optional<size_t> memory_budget;
  // --max-batch-budget: the largest batch whose step fit it (0: none), the probes it took, and
  // that batch's peak.
  struct MaxBatch {
    size_t budget = 0;
    int64_t batch = 0, probes = 0;
    bool reached_limit = false;
    size_t peak_bytes_total = 0;
  };
  std::optional<MaxBatch> max_batch;
  nlohmann::json paths = nlohmann::json::object();  // trace(s), profile, mllog
  // The first timed steps judged still warming up and discarded, and with --repetitions > 1
  // each repetition's throughput and their aggregates (timed_phase.h).
  int64_t discarded_steps = 0;
  nlohmann::json repetitions;
  // The host around the timed steps (synthetic data), and the verdict from it (noise.h).
  std::optional<HostSample> host_before, host_after;
  HostShare host;  // this run's ranks on this rank's machine and their CPUs (host_share.h)
  nlohmann::json noise;
};

// The record's status for a run that threw an Error of this kind.
RunStatus status_for(ErrorKind kind);
// A run that failed before it produced a result.
RunResult failed_run(const RunOptions& options, RunStatus status, std::string message);

// The record of a result (suites/schema/result.schema.json). Pure: same result, same record.
nlohmann::json record_json(const RunResult& result);
// The console's lines for a result: throughput, step time, loss and peak memory.
void print_result(const RunResult& result, std::FILE* out);

nlohmann::json memory_json(const MemoryStats& stats);
// Writes the JSON whole or not at all (runtime/io/output_file.h), so a crash never leaves half a
// record, and a device or FIFO named as the path is refused, never replaced. A string that is
// not UTF-8 is written with U+FFFD for its bad bytes, not refused.
void write_json_atomically(const std::string& path, const nlohmann::json& j);

}  // namespace dlb
