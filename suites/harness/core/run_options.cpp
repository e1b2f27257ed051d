#include "suites/harness/core/run_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "runtime/core/checked.h"
#include "runtime/core/error.h"
#include "runtime/io/output_file.h"
#include "suites/harness/core/option_table.h"

namespace dlb {
namespace {

// Asynchronous SGD's ranks each take their own number of steps in an epoch (the step's own
// rules are StepSpec::validate's).
void validate_async_lr(const RunOptions& o) {
  if (o.sync.kind == SyncMode::Kind::kAsync && o.lr.varies()) {
    throw InvalidArgument(
        "--sync=async with --lr-warmup or --lr-schedule: each rank takes its own number of "
        "steps in an epoch, so a rule by step would give the ranks different rates");
  }
}

// Independent ranks train models of their own: an evaluation over the ranks' shares of the test
// set would mix them.
void validate_independent_epochs(const RunOptions& o) {
  if (o.sync.kind == SyncMode::Kind::kIndependent && o.epochs && o.ranks > 1) {
    throw InvalidArgument(
        "--sync=independent with --epochs: each rank trains a model of its own, and the "
        "evaluation adds up the ranks' shares of the test set as one model's; time "
        "--sync=independent by steps (--steps)");
  }
}

// --straggler: a rank of the run, slowed on the host.
void validate_straggler(const RunOptions& o) {
  if (o.straggler && o.straggler->rank >= o.ranks) {
    throw InvalidArgument(
        fmt::format("--straggler={}: rank {} is beyond the {} ranks (they count from 0)",
                    straggler_name(*o.straggler), o.straggler->rank, o.ranks));
  }
  if (o.straggler && o.backend != BackendKind::kCpu) {
    throw InvalidArgument(
        "--straggler slows a rank's passes on the host: it needs --backend=cpu (a GPU's passes "
        "return before their work has run)");
  }
}

// The learning-rate rules that change the rate step by step (runtime/optim/lr_schedule.h).
// --conv-math chooses among cuDNN's engines for 16-bit convolutions: refused where it means
// nothing.
void validate_conv_math(const RunOptions& o) {
  if (o.conv_math && !conv_math_applies(o)) {
    throw InvalidArgument(fmt::format(
        "--conv-math chooses among cuDNN's engines for fp16 and bf16 convolutions, and means "
        "nothing with --backend={} --precision={}",
        backend_kind_name(o.backend), precision_name(o.precision)));
  }
}

void validate_lr_rules(const RunOptions& o) {
  if (o.lr.varies() && !o.epochs) {
    throw InvalidArgument(
        "--lr-warmup and --lr-schedule need --epochs (they count epochs of a data set)");
  }
  // The scaled rate, checked before any work (scaled_lr refuses one a float cannot hold).
  (void)scaled_lr(o.lr, o.sgd.lr,
                  checked_mul(o.batch.value_or(kDefaultBatch), o.ranks, "the global batch"));
  if (o.lr.varies() && o.cuda_graph) {
    throw InvalidArgument(
        "--lr-warmup and --lr-schedule change the learning rate each step, which a captured step "
        "(--cuda-graph) bakes in");
  }
}

}  // namespace

std::string rank_file(const std::string& path, int rank) {
  const size_t dot = path.rfind(".json");
  const std::string tag = fmt::format(".rank{}", rank);
  return dot == std::string::npos ? path + tag : path.substr(0, dot) + tag + path.substr(dot);
}

namespace {

// Every rank writes its own trace: the last rank's name is the longest, and checked with rank
// 0's before any work, so that no rank's trace fails after the run (a name past NAME_MAX).
void check_rank_trace_paths(const RunOptions& o) {
  if (o.trace_path.empty() || o.ranks < 2) return;
  const int last = static_cast<int>(std::min<int64_t>(o.ranks, INT32_MAX) - 1);
  check_output_file(rank_file(o.trace_path, last), fmt::format("--trace (rank {}'s file)", last));
}

}  // namespace

namespace {

// What the data source takes: digits train epochs (and log them); synthetic batches, timed steps.
// (A batch file and the digits exclude each other: checked after the step's rules.)
void validate_data(const RunOptions& o) {
  if (o.data == DataSource::kDigits && !o.epochs) {
    throw InvalidArgument("--data=digits needs --epochs (the most epochs to train)");
  }
  if (!o.epochs) {
    const char* needs = "needs --epochs over --data=digits or folder";
    if (o.target_accuracy) throw InvalidArgument(fmt::format("--target-accuracy {}", needs));
    if (!o.mllog_path.empty()) {
      throw InvalidArgument(fmt::format("--mllog {} (an MLPerf log records evaluations)", needs));
    }
  }
  if (o.data == DataSource::kSynthetic && o.epochs) {
    throw InvalidArgument("--epochs needs --data=digits or folder (a data set to evaluate on)");
  }
  if (o.data == DataSource::kFolder && o.data_path.empty()) {
    throw InvalidArgument(
        "--data=folder needs --data-path=DIR, the data set's root: DIR/train/<class>/*.JPEG (as "
        "dlbench make-dataset writes)");
  }
  if (o.data == DataSource::kShards && o.data_path.empty()) {
    throw InvalidArgument(
        "--data=shards needs --data-path=GLOB: the tar shards (DIR/shards/shard-*.tar, as "
        "dlbench make-dataset writes), or a folder of them");
  }
  const bool images = o.data == DataSource::kFolder || o.data == DataSource::kShards;
  if (images && o.sync.kind == SyncMode::Kind::kAsync) {
    throw Unsupported(fmt::format(
        "--sync=async with --data={}: each rank takes as many steps as its pace allows, and the "
        "loader's epochs are shared by the ranks; not built yet",
        data_source_name(o.data)));
  }
  if (o.data == DataSource::kShards && o.epochs) {
    throw InvalidArgument(
        "--epochs with --data=shards: shards hold no evaluation set yet; evaluate with "
        "--data=folder (DIR/val)");
  }
  if (o.decode_on_device && !images) {
    throw InvalidArgument(fmt::format(
        "--decode=gpu decodes JPEG files, and --data={} has none: use --data=folder or shards",
        data_source_name(o.data)));
  }
  if (o.decode_on_device && o.backend != BackendKind::kCuda) {
    throw Unsupported(fmt::format(
        "--decode=gpu needs --backend=cuda: the {} backend's images are decoded by the loader's "
        "threads (--decode=cpu)",
        backend_kind_name(o.backend)));
  }
}

// --dump reads every tensor after the last step: the naive plan's, which no later tensor reused.
void validate_dump(const RunOptions& o) {
  if (!o.dump_path.empty() && memory_plan_of(o) != MemoryPlanKind::kNaive) {
    throw Unsupported(fmt::format(
        "--dump writes every activation and gradient after the last step, and --memory-plan={} "
        "has let later tensors reuse most of their bytes by then: dump with --memory-plan=naive",
        memory_plan_name(memory_plan_of(o))));
  }
}

// --max-batch-budget: after the run, a search over synthetic batches of one rank's step.
void validate_max_batch(const RunOptions& o) {
  if (!o.max_batch_budget) return;
  if (o.ranks > 1) {
    throw Unsupported(fmt::format(
        "--max-batch-budget searches one rank's step, and --ranks={}: search with --ranks=1",
        o.ranks));
  }
  if (!o.batch_file.empty()) {
    throw InvalidArgument(
        "--max-batch-budget probes synthetic batches of its own sizes, and --batch-file fixes the "
        "batch: search without --batch-file");
  }
  if (o.data != DataSource::kSynthetic) {
    throw InvalidArgument(
        "--max-batch-budget probes steps on synthetic batches: it needs --data=synthetic");
  }
}

// --cuda-graph, before anything is built (the trainer asks the backend too).
void validate_cuda_graph(const RunOptions& o) {
  if (!o.cuda_graph) return;
  if (o.backend != BackendKind::kCuda) {
    throw Unsupported(fmt::format(
        "--cuda-graph needs --backend=cuda: the {} backend runs each op as it is called, so "
        "there is no queued work to capture",
        backend_kind_name(o.backend)));
  }
  if (o.trace_steps > 0) {
    throw Unsupported(
        "--cuda-graph replays the step as one launch, so there are no spans of its passes to "
        "trace: trace without --cuda-graph");
  }
  if (o.data == DataSource::kSynthetic && o.warmup < 2) {
    throw InvalidArgument(fmt::format(
        "--cuda-graph needs --warmup of at least 2 (got {}): the first step runs op by op and "
        "the second is captured, so that the timed steps only replay",
        o.warmup));
  }
}

// The traced steps, and the profile read from them.
void validate_tracing(const RunOptions& o) {
  if (o.trace_steps > o.steps) {
    throw InvalidArgument(
        fmt::format("--trace-steps must be in [0, --steps={}] (got {})", o.steps, o.trace_steps));
  }
  // The profile is read from the traced steps: without any it would silently not be written.
  if (!o.profile_path.empty() && o.trace_steps == 0) {
    throw InvalidArgument(
        "--profile is read from traced steps: give --trace-steps=N (N >= 1) with it");
  }
}

}  // namespace

// What the option table cannot check alone: options that go together. Each option's own type
// and range were checked when it was set (suites/harness/core/option_table.cpp).
void validate_run_options(const RunOptions& o) {
  validate_data(o);
  step_spec_of(o).validate();
  validate_async_lr(o);
  validate_independent_epochs(o);
  validate_straggler(o);
  validate_lr_rules(o);
  check_output_paths(o);
  check_rank_trace_paths(o);
  validate_conv_math(o);
  if (!o.batch_file.empty() && o.data != DataSource::kSynthetic) {
    throw InvalidArgument(
        fmt::format("--batch-file and --data={} exclude each other", data_source_name(o.data)));
  }
  if (o.loss_scale && o.precision != Precision::kFp16) {
    throw InvalidArgument(fmt::format(
        "--loss-scale applies to precision fp16 only (got {}; bf16 needs no loss scaling)",
        precision_name(o.precision)));
  }
  validate_dump(o);
  validate_max_batch(o);
  validate_cuda_graph(o);
  validate_tracing(o);
}

}  // namespace dlb
