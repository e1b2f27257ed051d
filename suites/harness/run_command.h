// `dlbench run`: train one configuration and write one result record.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "runtime/backend/backend.h"
#include "runtime/comm/communicator.h"
#include "runtime/core/dtype.h"
#include "runtime/overlap/strategy.h"

namespace dlb {

enum class DataSource { kSynthetic, kDigits };

// Typed options: strings from the command line become these once, at the edge.
constexpr int64_t kDefaultBatch = 16;

struct RunOptions {
  std::string model = "resnet18";
  std::optional<int64_t> batch;                // default kDefaultBatch; taken from --batch-file
  std::optional<int64_t> image_size;           // default: the model's; taken from --batch-file
  int64_t num_classes = 0;                     // 0: the model's default
  int64_t steps = 20, warmup = 5, epochs = 0;  // epochs: the most, with a target accuracy
  std::optional<double> target_accuracy;       // --data=digits: stop once test accuracy >= it
  std::string mllog_path;                      // --data=digits: MLPerf :::MLLOG lines here
  std::string config_file;                     // the suite file, for the MLPerf log
  BackendKind backend = BackendKind::kCpu;
  Precision precision = Precision::kFp32;
  DataSource data = DataSource::kSynthetic;
  std::string data_path;  // digits.csv.gz; empty: the default location
  SgdConfig sgd{0.01f, 0.9f, 0.f};
  std::optional<float> dropout;
  uint64_t seed = 0;
  std::optional<size_t> memory_budget;
  std::string init_path, batch_file, save_path, json_path;
  // Data parallelism: ranks > 1 needs the MPI/NCCL communicator, which this version lacks.
  int64_t ranks = 1;
  OverlapStrategy overlap = OverlapStrategy::kNone;
  double bucket_mb = 25;
  CommProgress comm_progress = CommProgress::kThread;  // measured: the mode that overlaps
  double comm_timeout_s = 300;  // a collective not done by then is a CommError
  // Tracing: a Chrome trace and a per-layer profile of the first `trace_steps` timed steps.
  int64_t trace_steps = 0;
  std::string trace_path, profile_path;
  // Test-only: make the run crash, hang or run out of memory after setup; or make the last rank
  // stop responding (SIGSTOP) or die (SIGKILL) between forward and backward of the first timed
  // step, as a failed peer would.
  enum class Fault { kNone, kCrash, kHang, kOom, kRankStops, kRankDies } fault = Fault::kNone;
};

// A point's config as suite files write it ({"model": "resnet18", "batch": 16, ...}) -> typed
// options. Throws InvalidArgument naming the key.
RunOptions options_from_json(const nlohmann::json& config);

// Throws what run_command would for these options before building anything (InvalidArgument,
// or Unsupported for ranks > 1), so the harness can record a point without launching it.
void validate_run_options(const RunOptions& options);

// Runs and returns the process exit code; throws dlb::Error on failure.
int run_command(const RunOptions& options);

}  // namespace dlb
