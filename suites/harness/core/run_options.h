// The typed options of one training run. Strings from the command line and from suite files
// become these once, at the edge, through the option table (suites/harness/core/option_table.h).
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "runtime/backend/backend.h"
#include "runtime/comm/communicator.h"
#include "runtime/core/dtype.h"
#include "runtime/nn/memory_plan.h"
#include "runtime/nn/recompute.h"
#include "runtime/nn/swap.h"
#include "runtime/optim/lr_schedule.h"
#include "runtime/overlap/bucket_plan.h"
#include "runtime/overlap/strategy.h"
#include "runtime/train/step_spec.h"
#include "runtime/train/straggler.h"

namespace dlb {

// folder: JPEG files in ImageNet's layout; shards: WebDataset's tar shards of JPEGs; both decoded
// and augmented by the loader's threads (workloads/data/image_loader.h; docs/input.md).
enum class DataSource { kSynthetic, kDigits, kFolder, kShards };
inline constexpr DataSource kDataSources[] = {DataSource::kSynthetic, DataSource::kDigits,
                                              DataSource::kFolder, DataSource::kShards};
std::string_view data_source_name(DataSource d);

// Who trains a point: dlbench, or a peer that trains the same model with the same settings for
// a same-run comparison (suites/harness/core/peers.h; the peer programs are in reports/peers/).
enum class System { kDlbench, kPytorch };
inline constexpr System kSystems[] = {System::kDlbench, System::kPytorch};
std::string_view system_name(System s);
std::optional<System> parse_system(std::string_view s);

// Test-only: make the run crash, hang or run out of memory after setup; or make the last rank
// stop responding (SIGSTOP) or die (SIGKILL) between forward and backward of the first timed
// step, as a failed peer would. One name table for the option, the point file and the sweep's
// --inject-fault.
enum class InjectedFault { kNone, kCrash, kHang, kOom, kRankStops, kRankDies };
inline constexpr InjectedFault kInjectedFaults[] = {
    InjectedFault::kNone, InjectedFault::kCrash,     InjectedFault::kHang,
    InjectedFault::kOom,  InjectedFault::kRankStops, InjectedFault::kRankDies};
std::string_view fault_name(InjectedFault f);  // "none", "crash", ..., "rank-dies"
std::optional<InjectedFault> parse_fault_name(std::string_view s);

constexpr int64_t kDefaultBatch = 16;

struct RunOptions {
  System system = System::kDlbench;
  std::string model = "resnet18";
  std::optional<int64_t> batch;        // default kDefaultBatch; taken from --batch-file
  std::optional<int64_t> image_size;   // default: the model's; taken from --batch-file
  std::optional<int64_t> num_classes;  // default: the model's
  int64_t steps = 20, warmup = 5;
  double min_time_s = 0;          // each repetition's timed steps run at least this long
  int64_t repetitions = 1;        // timed phases, each of at least `steps` steps and `min_time_s`
  std::optional<int64_t> epochs;  // data=digits; with a target accuracy, the most
  std::optional<double> target_accuracy;  // --data=digits: stop once test accuracy >= it
  std::string mllog_path;                 // --data=digits: MLPerf :::MLLOG lines here
  std::string config_file;                // the suite file, for the MLPerf log
  BackendKind backend = BackendKind::kCpu;
  Precision precision = Precision::kFp32;
  DataSource data = DataSource::kSynthetic;
  std::string data_path;  // digits.csv.gz (empty: the default location); data=folder: its root
  // data=folder: decoding threads (0: this rank's share of the CPUs less its compute threads,
  // at least one: loader_threads_of), batches made ahead, and whether a file that does not
  // decode ends the run.
  int64_t loader_threads = 0, prefetch = 2;
  bool fail_on_bad_images = false;
  bool decode_on_device = false;  // --decode=gpu: the backend's image decoder, not the loader's
  SgdConfig sgd{0.01f, 0.9f, 0.f};
  LrPolicy lr;  // scaling, warm-up and schedule over sgd.lr
  std::optional<float> dropout;
  std::optional<float> loss_scale;  // fp16 only: fixed; unset: dynamic
  uint64_t seed = 0;
  std::optional<size_t> memory_budget;
  std::optional<size_t> max_batch_budget;  // also search the largest batch within it
  ConvAlgoChoice conv_algo = ConvAlgoChoice::kHeuristic;
  std::optional<size_t> workspace_limit;
  std::optional<ConvMath> conv_math;  // unset: conv_math_of's default
  bool cuda_graph = false;  // replay the step from a captured CUDA graph (StepSpec::capture)
  // runtime/nn/memory_plan.h; unset: memory_plan_of's default.
  std::optional<MemoryPlanKind> memory_plan;
  RecomputePolicy recompute;  // runtime/nn/recompute.h
  SwapPolicy swap;            // runtime/nn/swap.h
  bool memory_guard = false;  // red zones around every allocation (memory/memory_guard.h)
  std::string init_path, batch_file, save_path, json_path, dump_path;
  // Print the step's program (runtime/train/step_program.h) and its memory plan, and train nothing.
  bool print_step = false;
  int64_t ranks = 1;
  OverlapStrategy overlap = OverlapStrategy::kNone;
  SyncMode sync;  // sync, stale:K, async or independent (runtime/overlap/strategy.h)
  double bucket_mb = kDefaultBucketMb;
  std::optional<CommKind> comm;  // null: chosen from the ranks and the backend
  CommProgress comm_progress = CommProgress::kThread;  // measured: the mode that overlaps
  double comm_timeout_s = kDefaultCommTimeoutSeconds;  // a collective not done by then: CommError
  std::optional<StragglerSpec> straggler;  // one rank's compute slowed (runtime/train/straggler.h)
  // Tracing: a Chrome trace and a per-layer profile of `trace_steps` timed steps, the last of the
  // first timed phase's `steps` (never left out as warm-up: measure_throughput).
  int64_t trace_steps = 0;
  std::string trace_path, profile_path;
  using Fault = InjectedFault;
  Fault fault = Fault::kNone;
};

// Whether --conv-math means anything for the run: cuDNN's engines for 16-bit convolutions.
inline bool conv_math_applies(const RunOptions& o) {
  return o.backend == BackendKind::kCuda &&
         (o.precision == Precision::kFp16 || o.precision == Precision::kBf16);
}
// fast unless the run says strict: the engines PyTorch allows, so that the peer is like for like.
inline ConvMath conv_math_of(const RunOptions& o) {
  return o.conv_math.value_or(BackendOptions{}.conv_math);
}

// The run's memory plan: the one it names, else reuse (bit-identical to naive, and far smaller),
// but naive under --memory-guard (whose red zones sit around buffers, not inside an arena) and
// --dump (which reads every tensor after the step, when reuse has let later ones overwrite them).
inline MemoryPlanKind memory_plan_of(const RunOptions& o) {
  if (o.memory_plan) return *o.memory_plan;
  return o.memory_guard || !o.dump_path.empty() ? MemoryPlanKind::kNaive : MemoryPlanKind::kReuse;
}

// The choices of `o` that shape its step, for StepSpec::validate and the Trainer.
inline StepSpec step_spec_of(const RunOptions& o) {
  StepSpec s;
  s.precision = o.precision;
  s.memory_plan = memory_plan_of(o);
  s.recompute = o.recompute;
  s.swap = o.swap;
  s.sync = o.sync;
  s.overlap = o.overlap;
  s.bucket_mb = o.bucket_mb;
  s.ranks = o.ranks;
  s.capture = o.cuda_graph;
  s.memory_guard = o.memory_guard;
  s.memory_budget = o.memory_budget;
  return s;
}

// Throws what a run would for these options before building anything (InvalidArgument, or
// Unsupported): the data source's, the step's rules (StepSpec::validate), then the run's own
// (straggler, learning rate, files, batch file, loss scale, dump, max-batch search,
// --cuda-graph's backend, tracing). The harness checks a point with it before launching it.
void validate_run_options(const RunOptions& options);

// "t.trace.json" -> "t.trace.rank2.json": the trace file of rank `rank`.
std::string rank_file(const std::string& path, int rank);

}  // namespace dlb
