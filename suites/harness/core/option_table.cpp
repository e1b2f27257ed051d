#include "suites/harness/core/option_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/core/clock.h"
#include "runtime/core/error.h"
#include "runtime/core/parse_number.h"
#include "runtime/io/output_file.h"
#include "runtime/memory/allocator.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {
using json = nlohmann::json;

template <typename E, size_t N, typename NameFn>
std::vector<std::string> names(const E (&all)[N], NameFn name) {
  std::vector<std::string> out;
  for (E e : all) out.emplace_back(name(e));
  return out;
}

std::vector<std::string> model_names() {
  std::vector<std::string> out;
  for (const ModelInfo& m : model_registry()) out.push_back(m.name);
  return out;
}

// A float as the shortest decimal that reads back as it (0.01, not 0.009999999776).
double shortest(float f) { return std::stod(fmt::format("{}", f)); }

template <typename T>
json or_null(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

// A byte count as a size text that parse_bytes reads back exactly ("4GiB", "1000").
std::string bytes_text(size_t bytes) {
  for (auto [unit, scale] : {std::pair{"GiB", size_t{1} << 30}, std::pair{"MiB", size_t{1} << 20},
                             std::pair{"KiB", size_t{1} << 10}}) {
    if (bytes % scale == 0) return fmt::format("{}{}", bytes / scale, unit);
  }
  return std::to_string(bytes);
}

// The parse of an enumerated value: `parse` maps a name to the enum, as the runtime's name
// tables do. Only called with values that are in the option's list.
template <typename F>
auto parsed(const json& v, F parse) {
  return *parse(v.get<std::string>());
}

std::optional<DataSource> parse_data_source(std::string_view s) {
  for (DataSource d : kDataSources) {
    if (data_source_name(d) == s) return d;
  }
  return std::nullopt;
}

constexpr OptionScope kConfig = OptionScope::kConfig, kCli = OptionScope::kCommandLine;
const OptionRange kAtLeast0{0.0, std::nullopt};
const OptionRange kPositive{0.0, std::nullopt, true};
// A tensor dimension (batch, image side, classes) or an MPI rank count: 32-bit in cuDNN's,
// cuBLAS's and MPI's interfaces, and small enough that products of two never pass 2^62.
constexpr double kInt32Max = std::numeric_limits<int32_t>::max();
const OptionRange kDimension{1.0, kInt32Max};
const OptionRange kSeconds{0.0, kLongestWaitSeconds, true, false};
// Steps and epochs: 2^31 - 1, far past any run, so that sums and products of counts (the
// tracer's first + count, steps x batch) stay within 64 bits.
const OptionRange kStepCount{1.0, kInt32Max};
const OptionRange kStepCountOr0{0.0, kInt32Max};

// Who trains, and what.
void add_model_options(std::vector<Option>& t) {
  auto add = [&t](Option o) { t.push_back(std::move(o)); };
  add({"system",
       OptionType::kString,
       kConfig,
       "who trains the point: dlbench, or a peer on the same model and settings (a suite's "
       "system axis; --systems=dlbench,pytorch adds one)",
       names(kSystems, system_name),
       {},
       [](RunOptions& o, const json& v) { o.system = parsed(v, parse_system); },
       [](const RunOptions& o) { return json(system_name(o.system)); }});
  add({"model",
       OptionType::kString,
       kConfig,
       "reference model",
       model_names(),
       {},
       [](RunOptions& o, const json& v) { o.model = v.get<std::string>(); },
       [](const RunOptions& o) { return json(o.model); }});
  add({"batch",
       OptionType::kInteger,
       kConfig,
       fmt::format("images per step per rank (default {})", kDefaultBatch),
       {},
       kDimension,
       [](RunOptions& o, const json& v) { o.batch = v.get<int64_t>(); },
       [](const RunOptions& o) { return or_null(o.batch); }});
  add({"image_size",
       OptionType::kInteger,
       kConfig,
       "square image side in pixels (default: the model's)",
       {},
       kDimension,
       [](RunOptions& o, const json& v) { o.image_size = v.get<int64_t>(); },
       [](const RunOptions& o) { return or_null(o.image_size); }});
  add({"num_classes",
       OptionType::kInteger,
       kConfig,
       "classes (default: the model's)",
       {},
       kDimension,
       [](RunOptions& o, const json& v) { o.num_classes = v.get<int64_t>(); },
       [](const RunOptions& o) { return or_null(o.num_classes); }});
}

// The arithmetic, the backend and its convolutions.
void add_device_options(std::vector<Option>& t) {
  auto add = [&t](Option o) { t.push_back(std::move(o)); };
  add({"precision",
       OptionType::kString,
       kConfig,
       "training precision (docs/metrics.md)",
       names(kPrecisions, precision_name),
       {},
       [](RunOptions& o, const json& v) { o.precision = parsed(v, parse_precision); },
       [](const RunOptions& o) { return json(precision_name(o.precision)); }});
  add({"backend",
       OptionType::kString,
       kConfig,
       "where the ops run",
       names(kBackendKinds, backend_kind_name),
       {},
       [](RunOptions& o, const json& v) { o.backend = parsed(v, parse_backend_kind); },
       [](const RunOptions& o) { return json(backend_kind_name(o.backend)); }});

  add({"conv_algo",
       OptionType::kString,
       kConfig,
       "how each convolution pass picks its algorithm: the library's heuristic, timing every "
       "candidate once, (cpu) one algorithm by name: im2col, onednn (direct), winograd, "
       "auto (oneDNN's choice) or matmul (im2col + one oneDNN matrix product over the batch: "
       "channels-last bf16 layers, and NCHW layers' backward-filter passes), or (cuda) the "
       "heuristic within one class of cuDNN's engines by "
       "their notes: class:fft, class:winograd, class:tensor_core or class:other; a pass that "
       "the named algorithm or class cannot run takes the heuristic's",
       names(kConvAlgoChoices, conv_algo_choice_name),
       {},
       [](RunOptions& o, const json& v) { o.conv_algo = parsed(v, parse_conv_algo_choice); },
       [](const RunOptions& o) { return json(conv_algo_choice_name(o.conv_algo)); }});
  add({"conv_math",
       OptionType::kString,
       kConfig,
       "cuda, fp16 and bf16: which cuDNN engines a convolution may take: fast (as PyTorch: also "
       "engines that accumulate in 16 bits; the default) or strict (f32 accumulation only)",
       names(kConvMaths, conv_math_name),
       {},
       [](RunOptions& o, const json& v) { o.conv_math = parsed(v, parse_conv_math); },
       [](const RunOptions& o) {
         if (!o.conv_math && !conv_math_applies(o)) return json(nullptr);
         return json(conv_math_name(conv_math_of(o)));
       }});
  add({"workspace_limit",
       OptionType::kBytes,
       kConfig,
       "e.g. 64MiB: the most workspace one convolution pass may use (the plan picks the best "
       "algorithm within it)",
       {},
       {},
       [](RunOptions& o, const json& v) { o.workspace_limit = parse_bytes(v.get<std::string>()); },
       [](const RunOptions& o) {
         return o.workspace_limit ? json(bytes_text(*o.workspace_limit)) : json(nullptr);
       }});
}

// How the step is replayed and checked: a captured CUDA graph, red zones around buffers.
void add_replay_and_guard_options(std::vector<Option>& t) {
  auto add = [&t](Option o) { t.push_back(std::move(o)); };
  add({"cuda_graph",
       OptionType::kBoolean,
       kConfig,
       "capture the training step as a CUDA graph after one step op by op, and replay it "
       "(cuda backend, one rank; needs warmup >= 2)",
       {},
       {},
       [](RunOptions& o, const json& v) { o.cuda_graph = v.get<bool>(); },
       [](const RunOptions& o) { return json(o.cuda_graph); }});
  add({"memory_guard",
       OptionType::kBoolean,
       kConfig,
       "surround every allocation with red zones and check them after each pass of the step: a "
       "write outside a buffer fails the run naming the pass and the buffer (slow; a debugging "
       "mode)",
       {},
       {},
       [](RunOptions& o, const json& v) { o.memory_guard = v.get<bool>(); },
       [](const RunOptions& o) { return json(o.memory_guard); }});
}

// Data parallelism: ranks, and how gradients reach the weights.
void add_sync_options(std::vector<Option>& t) {
  auto add = [&t](Option o) { t.push_back(std::move(o)); };
  add({"ranks",
       OptionType::kInteger,
       kConfig,
       "data-parallel ranks (processes; `dlbench run` needs them started by mpirun or srun)",
       {},
       kDimension,
       [](RunOptions& o, const json& v) { o.ranks = v.get<int64_t>(); },
       [](const RunOptions& o) { return json(o.ranks); }});
  add({"overlap",
       OptionType::kString,
       kConfig,
       "gradient synchronisation strategy",
       names(kOverlapStrategies, overlap_name),
       {},
       [](RunOptions& o, const json& v) { o.overlap = parsed(v, parse_overlap); },
       [](const RunOptions& o) { return json(overlap_name(o.overlap)); }});
  add({"sync",
       OptionType::kString,
       kConfig,
       "sync (each step's own averaged gradients), stale:K (the averaged gradients of K steps "
       "before, so each all-reduce runs behind the next K steps), async (each rank's gradients "
       "applied alone by a parameter server on rank 0, which no rank waits for but it; fp32, 2 "
       "ranks or more) or independent (each rank's own gradients, none sent; the ranks still meet "
       "after backward: their compute in step without the traffic); stale, async and independent "
       "need overlap none (runtime/overlap/sync_schedule.h)",
       {},
       {},
       [](RunOptions& o, const json& v) {
         const std::string text = v.get<std::string>();
         const std::optional<SyncMode> m = parse_sync_mode(text);
         if (!m) {
           throw InvalidArgument(fmt::format(
               "unknown mode '{}' (expected sync, async, independent, or stale:K for a whole K "
               "from 0 to 1000)",
               text));
         }
         o.sync = *m;
       },
       [](const RunOptions& o) { return json(sync_mode_name(o.sync)); }});
}

// How the step's memory is planned: reuse, recomputation, swapping.
void add_memory_options(std::vector<Option>& t) {
  auto add = [&t](Option o) { t.push_back(std::move(o)); };
  add({"memory_plan",
       OptionType::kString,
       kConfig,
       "how the step's tensors are stored: naive (each in its own buffer), reuse (tensors that "
       "live within one step share bytes where their lifetimes do not meet; "
       "runtime/nn/memory_plan.h) or reorder (reuse over a backward that runs a layer's weights "
       "pass before its data pass where that frees its input sooner; runtime/nn/reorder.h); "
       "default reuse, or naive with --memory-guard or --dump",
       names(kMemoryPlanKinds, memory_plan_name),
       {},
       [](RunOptions& o, const json& v) { o.memory_plan = parsed(v, parse_memory_plan); },
       [](const RunOptions& o) { return json(memory_plan_name(memory_plan_of(o))); }});
  add({"recompute",
       OptionType::kString,
       kConfig,
       "none, sqrt or every:K: drop the activations between checkpoints (every K forward passes, "
       "or about sqrt of them) after their forward use and compute them again before backward "
       "(needs memory_plan reuse; runtime/nn/recompute.h)",
       {},
       {},
       [](RunOptions& o, const json& v) {
         const std::string text = v.get<std::string>();
         const std::optional<RecomputePolicy> p = parse_recompute(text);
         if (!p) {
           throw InvalidArgument(fmt::format(
               "unknown policy '{}' (expected none, sqrt or every:K with K >= 1)", text));
         }
         o.recompute = *p;
       },
       [](const RunOptions& o) { return json(recompute_name(o.recompute)); }});
  add({"swap",
       OptionType::kString,
       kConfig,
       "none, all, auto, or a comma-separated list of activations (tensor names, such as "
       "layer1.0.conv1): copy them to host memory after their last use in forward and back "
       "before the backward pass that reads them, each copy overlapping one pass of compute; all "
       "swaps every activation that can be, auto the largest until the plan's device peak fits "
       "memory_budget (needs memory_plan reuse; runtime/nn/swap.h)",
       {},
       {},
       [](RunOptions& o, const json& v) {
         const std::string text = v.get<std::string>();
         const std::optional<SwapPolicy> p = parse_swap(text);
         if (!p) {
           throw InvalidArgument(fmt::format(
               "'{}' is not none, all, auto or a list of tensor names (comma-separated, "
               "none empty or repeated)",
               text));
         }
         o.swap = *p;
       },
       [](const RunOptions& o) { return json(swap_name(o.swap)); }});
}

// The all-reduce: buckets, the communicator, its progress and timeout, a straggler.
void add_communication_options(std::vector<Option>& t) {
  auto add = [&t](Option o) { t.push_back(std::move(o)); };
  add({"bucket_mb",
       OptionType::kNumber,
       kConfig,
       "all-reduce bucket size in MiB",
       {},
       kPositive,
       [](RunOptions& o, const json& v) { o.bucket_mb = v.get<double>(); },
       [](const RunOptions& o) { return json(o.bucket_mb); }});
  add({"comm",
       OptionType::kString,
       kConfig,
       "the gradient communicator (default: local for one rank, else nccl with --backend=cuda "
       "and mpi with cpu)",
       names(kCommKinds, comm_kind_name),
       {},
       [](RunOptions& o, const json& v) { o.comm = parsed(v, parse_comm_kind); },
       [](const RunOptions& o) { return o.comm ? json(comm_kind_name(*o.comm)) : json(nullptr); }});
  add({"comm_progress",
       OptionType::kString,
       kConfig,
       "how MPI all-reduces progress during compute: poll (test calls between layers) or thread",
       names(kCommProgressModes, comm_progress_name),
       {},
       [](RunOptions& o, const json& v) { o.comm_progress = parsed(v, parse_comm_progress); },
       [](const RunOptions& o) { return json(comm_progress_name(o.comm_progress)); }});
  add({"comm_timeout",
       OptionType::kNumber,
       kConfig,
       "seconds before a collective is a CommError",
       {},
       kSeconds,
       [](RunOptions& o, const json& v) { o.comm_timeout_s = v.get<double>(); },
       [](const RunOptions& o) { return json(o.comm_timeout_s); }});
}

// An injected straggler (runtime/train/straggler.h).
void add_straggler_options(std::vector<Option>& t) {
  auto add = [&t](Option o) { t.push_back(std::move(o)); };
  add({"straggler",
       OptionType::kString,
       kConfig,
       "RANK:FACTOR: that rank's compute passes take FACTOR (>= 1) times as long, to measure what "
       "waiting for a slow rank costs (cpu backend; runtime/train/straggler.h)",
       {},
       {},
       [](RunOptions& o, const json& v) {
         const std::string text = v.get<std::string>();
         const std::optional<StragglerSpec> s = parse_straggler(text);
         if (!s) {
           throw InvalidArgument(
               fmt::format("'{}' is not RANK:FACTOR (a rank from 0 and how many times slower its "
                           "compute is, e.g. 1:2)",
                           text));
         }
         if (!(s->factor >= 1) || s->factor > 1000) {
           throw InvalidArgument(
               fmt::format("'{}': the factor is how many times slower the rank computes, from 1 "
                           "to 1000",
                           text));
         }
         o.straggler = *s;
       },
       [](const RunOptions& o) {
         return o.straggler ? json(straggler_name(*o.straggler)) : json(nullptr);
       }});
}

// How long: steps, warm-up, repetitions.
void add_length_options(std::vector<Option>& t) {
  auto add = [&t](Option o) { t.push_back(std::move(o)); };
  add({"steps",
       OptionType::kInteger,
       kConfig,
       "timed steps",
       {},
       kStepCount,
       [](RunOptions& o, const json& v) { o.steps = v.get<int64_t>(); },
       [](const RunOptions& o) { return json(o.steps); }});
  add({"warmup",
       OptionType::kInteger,
       kConfig,
       "untimed steps before them",
       {},
       kStepCountOr0,
       [](RunOptions& o, const json& v) { o.warmup = v.get<int64_t>(); },
       [](const RunOptions& o) { return json(o.warmup); }});
  add({"min_time",
       OptionType::kNumber,
       kConfig,
       "seconds each repetition's timed steps run at least: more steps are timed until both "
       "steps and min_time are done (google/benchmark's min_time)",
       {},
       OptionRange{0.0, kLongestWaitSeconds},
       [](RunOptions& o, const json& v) { o.min_time_s = v.get<double>(); },
       [](const RunOptions& o) { return json(o.min_time_s); }});
  add({"repetitions",
       OptionType::kInteger,
       kConfig,
       "timed phases, one after another: the record keeps each one's throughput and their "
       "median, mean, standard deviation and CV",
       {},
       OptionRange{1.0, 1000.0},
       [](RunOptions& o, const json& v) { o.repetitions = v.get<int64_t>(); },
       [](const RunOptions& o) { return json(o.repetitions); }});
}

// How JPEG files become batches (data=folder or shards).
void add_image_options(std::vector<Option>& t) {
  auto add = [&t](Option o) { t.push_back(std::move(o)); };
  add({"loader_threads",
       OptionType::kInteger,
       kConfig,
       "data=folder or shards: threads that decode and augment images (0: this rank's share of "
       "the CPUs its machine gave the run, less its compute threads, at least one)",
       {},
       OptionRange{0.0, 256.0},
       [](RunOptions& o, const json& v) { o.loader_threads = v.get<int64_t>(); },
       [](const RunOptions& o) { return json(o.loader_threads); }});
  add({"prefetch",
       OptionType::kInteger,
       kConfig,
       "data=folder or shards: batches decoded ahead of the step that needs them",
       {},
       OptionRange{1.0, 1024.0},
       [](RunOptions& o, const json& v) { o.prefetch = v.get<int64_t>(); },
       [](const RunOptions& o) { return json(o.prefetch); }});
  add({"bad_images",
       OptionType::kString,
       kConfig,
       "data=folder or shards: a file that does not decode is skipped (counted, named once; the "
       "next image takes its place) or ends the run",
       {"skip", "fail"},
       {},
       [](RunOptions& o, const json& v) { o.fail_on_bad_images = v.get<std::string>() == "fail"; },
       [](const RunOptions& o) { return json(o.fail_on_bad_images ? "fail" : "skip"); }});
  add({"decode",
       OptionType::kString,
       kConfig,
       "data=folder or shards: where the training images are decoded, cropped, resized and "
       "normalised: by the loader's threads, or (backend=cuda) by nvJPEG and dlbench's kernels on "
       "the GPU, the loader only reading files and drawing crops",
       {"cpu", "gpu"},
       {},
       [](RunOptions& o, const json& v) { o.decode_on_device = v.get<std::string>() == "gpu"; },
       [](const RunOptions& o) { return json(o.decode_on_device ? "gpu" : "cpu"); }});
}

// What the steps train on, and for how many epochs.
void add_data_options(std::vector<Option>& t) {
  auto add = [&t](Option o) { t.push_back(std::move(o)); };
  add({"data",
       OptionType::kString,
       kConfig,
       "synthetic images; scikit-learn's digits (a real data set with a held-out test split); "
       "folder: JPEG files in ImageNet's layout under --data-path (DIR/train/<class>/*.JPEG); or "
       "shards: WebDataset's tar shards of JPEGs that --data-path names (key.jpg, key.cls)",
       names(kDataSources, data_source_name),
       {},
       [](RunOptions& o, const json& v) { o.data = parsed(v, parse_data_source); },
       // The record says "batch-file" for a run on a fixed batch (--batch-file).
       [](const RunOptions& o) {
         return json(o.batch_file.empty() ? data_source_name(o.data)
                                          : std::string_view("batch-file"));
       }});
  add({"epochs",
       OptionType::kInteger,
       kConfig,
       "data=digits: epochs to train; with target_accuracy, the most",
       {},
       kStepCount,
       [](RunOptions& o, const json& v) { o.epochs = v.get<int64_t>(); },
       [](const RunOptions& o) { return or_null(o.epochs); }});
  add({"target_accuracy",
       OptionType::kNumber,
       kConfig,
       "data=digits: stop once test accuracy reaches this; the record gets time-to-accuracy",
       {},
       OptionRange{0.0, 1.0, true, false},
       [](RunOptions& o, const json& v) { o.target_accuracy = v.get<double>(); },
       [](const RunOptions& o) { return or_null(o.target_accuracy); }});
}

// The optimizer.
void add_optimizer_options(std::vector<Option>& t) {
  auto add = [&t](Option o) { t.push_back(std::move(o)); };
  add({"lr",
       OptionType::kFloat,
       kConfig,
       "SGD learning rate",
       {},
       kPositive,
       [](RunOptions& o, const json& v) { o.sgd.lr = v.get<float>(); },
       [](const RunOptions& o) { return json(shortest(o.sgd.lr)); }});
  add({"momentum",
       OptionType::kFloat,
       kConfig,
       "SGD momentum",
       {},
       kAtLeast0,
       [](RunOptions& o, const json& v) { o.sgd.momentum = v.get<float>(); },
       [](const RunOptions& o) { return json(shortest(o.sgd.momentum)); }});
  add({"weight_decay",
       OptionType::kFloat,
       kConfig,
       "added to the gradient, times the weight",
       {},
       kAtLeast0,
       [](RunOptions& o, const json& v) { o.sgd.weight_decay = v.get<float>(); },
       [](const RunOptions& o) { return json(shortest(o.sgd.weight_decay)); }});
}

// Learning-rate rules for large global batches (runtime/optim/lr_schedule.h).
void add_lr_rule_options(std::vector<Option>& t) {
  auto add = [&t](Option o) { t.push_back(std::move(o)); };
  add({"lr_scaling",
       OptionType::kString,
       kConfig,
       "linear: the learning rate times global batch / lr_reference_batch (Goyal et al.); none",
       names(kLrScalings, lr_scaling_name),
       {},
       [](RunOptions& o, const json& v) { o.lr.scaling = parsed(v, parse_lr_scaling); },
       [](const RunOptions& o) { return json(lr_scaling_name(o.lr.scaling)); }});
  add({"lr_reference_batch",
       OptionType::kInteger,
       kConfig,
       "the global batch at which lr is the rate (linear scaling and warm-up)",
       {},
       kDimension,
       [](RunOptions& o, const json& v) { o.lr.reference_batch = v.get<int64_t>(); },
       [](const RunOptions& o) { return json(o.lr.reference_batch); }});
  add({"lr_warmup",
       OptionType::kString,
       kConfig,
       "0, N (epochs), Nepochs or Nsteps: the rate rises linearly from lr/k to lr over them, "
       "k = global batch / lr_reference_batch (needs data digits)",
       {},
       {},
       [](RunOptions& o, const json& v) {
         const std::string text = v.get<std::string>();
         const std::optional<LrWarmup> w = parse_lr_warmup(text);
         if (!w) {
           throw InvalidArgument(
               fmt::format("'{}' is not a warm-up (expected 0, N or Nepochs for N >= 0 epochs, or "
                           "Nsteps for a whole N >= 1)",
                           text));
         }
         o.lr.warmup = *w;
       },
       [](const RunOptions& o) { return json(lr_warmup_name(o.lr.warmup)); }});
  add({"lr_schedule",
       OptionType::kString,
       kConfig,
       "constant, step:E1,E2,... (the rate divided by 10 after each of those epochs) or cosine "
       "(to 0 at the last epoch's end), after the warm-up (needs data digits)",
       {},
       {},
       [](RunOptions& o, const json& v) {
         const std::string text = v.get<std::string>();
         const std::optional<LrSchedule> s = parse_lr_schedule(text);
         if (!s) {
           throw InvalidArgument(
               fmt::format("unknown schedule '{}' (expected constant, cosine, or step:E1,E2,... "
                           "with epochs increasing from 1)",
                           text));
         }
         o.lr.schedule = *s;
       },
       [](const RunOptions& o) { return json(lr_schedule_name(o.lr.schedule)); }});
}

// The model's randomness and fp16's loss scale.
void add_numerics_options(std::vector<Option>& t) {
  auto add = [&t](Option o) { t.push_back(std::move(o)); };
  add({"dropout",
       OptionType::kFloat,
       kConfig,
       "dropout probability (default: the model's; 0 turns it off)",
       {},
       OptionRange{0.0, 1.0, false, true},
       [](RunOptions& o, const json& v) { o.dropout = v.get<float>(); },
       [](const RunOptions& o) { return o.dropout ? json(shortest(*o.dropout)) : json(nullptr); }});
  add({"loss_scale",
       OptionType::kFloat,
       kConfig,
       "precision fp16: a fixed loss scale (default: dynamic, from 2^16, as PyTorch's GradScaler)",
       {},
       kPositive,
       [](RunOptions& o, const json& v) { o.loss_scale = v.get<float>(); },
       [](const RunOptions& o) {
         return o.loss_scale ? json(shortest(*o.loss_scale)) : json(nullptr);
       }});
  add({"seed",
       OptionType::kUnsigned,
       kConfig,
       "seed of the weights and the data",
       {},
       kAtLeast0,
       [](RunOptions& o, const json& v) { o.seed = v.get<uint64_t>(); },
       [](const RunOptions& o) { return json(o.seed); }});
}

// Memory budgets: the step's, and a search for the largest batch within one.
void add_budget_options(std::vector<Option>& t) {
  auto add = [&t](Option o) { t.push_back(std::move(o)); };
  add({"memory_budget",
       OptionType::kBytes,
       kConfig,
       "e.g. 4GiB: an allocation beyond it is an out-of-memory failure",
       {},
       {},
       [](RunOptions& o, const json& v) { o.memory_budget = parse_bytes(v.get<std::string>()); },
       [](const RunOptions& o) {
         return o.memory_budget ? json(bytes_text(*o.memory_budget)) : json(nullptr);
       }});
  add({"max_batch_budget",
       OptionType::kBytes,
       kConfig,
       "e.g. 2GiB: after the timed steps, also find the largest batch whose step fits this budget "
       "(as dlbench maxbatch; one rank), recorded as metrics.max_batch",
       {},
       {},
       [](RunOptions& o, const json& v) { o.max_batch_budget = parse_bytes(v.get<std::string>()); },
       [](const RunOptions& o) {
         return o.max_batch_budget ? json(bytes_text(*o.max_batch_budget)) : json(nullptr);
       }});
}

// What a run shows of itself instead of training: a flag of `dlbench run` only.
void add_inspection_options(std::vector<Option>& t) {
  t.push_back(
      {"print_step",
       OptionType::kBoolean,
       kCli,
       "print the step's program (its transforms, passes on their lanes, tensors and memory "
       "plan) and exit without training",
       {},
       {},
       [](RunOptions& o, const json& v) { o.print_step = v.get<bool>(); },
       [](const RunOptions& o) { return json(o.print_step); }});
}

// Files of one run, and test hooks: flags of `dlbench run` only.
void add_file_options(std::vector<Option>& t) {
  auto add = [&t](Option o) { t.push_back(std::move(o)); };
  auto path = [&](const char* key, std::string RunOptions::*member, PathRole role,
                  const char* help) {
    Option o{key,
             OptionType::kPath,
             kCli,
             help,
             {},
             {},
             [member](RunOptions& r, const json& v) { r.*member = v.get<std::string>(); },
             [member](const RunOptions& r) { return json(r.*member); }};
    o.path_role = role;
    add(std::move(o));
  };
  const PathRole in = PathRole::kInput, out = PathRole::kOutputFile;
  path("data_path", &RunOptions::data_path, in,
       "digits.csv.gz (default: scikit-learn's); with --data=folder, the data set's root, which "
       "holds train/<class>/*.JPEG (as make-dataset writes); with --data=shards, a glob of tar "
       "files, or a folder of them");
  path("init", &RunOptions::init_path, in, "start from these weights (safetensors)");
  path("batch_file", &RunOptions::batch_file, in,
       "train on this fixed batch (safetensors: images f32 NCHW, labels int64)");
  path("save", &RunOptions::save_path, out, "write weights and buffers after the last step");
  path("dump", &RunOptions::dump_path, out,
       "write every tensor of the last step (activations, gradients, saved state) and the graph "
       "here, as safetensors (tests/parity/model_parity.py reads it)");
  path("json", &RunOptions::json_path, out, "write the result record here");
  path("mllog", &RunOptions::mllog_path, PathRole::kOutputStream,
       "data=digits: write MLPerf :::MLLOG lines here (as the run goes)");
  path("trace", &RunOptions::trace_path, out, "write a Chrome trace of the traced steps here");
  path("profile", &RunOptions::profile_path, out, "write the per-layer profile here");
  add({"trace_steps",
       OptionType::kInteger,
       kCli,
       "timed steps to trace, the last of the first phase's --steps (0: off)",
       {},
       kStepCountOr0,
       [](RunOptions& o, const json& v) { o.trace_steps = v.get<int64_t>(); },
       [](const RunOptions& o) { return json(o.trace_steps); }});
  std::vector<std::string> fault_names;
  for (InjectedFault f : kInjectedFaults) fault_names.emplace_back(fault_name(f));
  Option fault{"inject_fault",
               OptionType::kString,
               kCli,
               "test only",
               fault_names,
               {},
               [](RunOptions& o, const json& v) {
                 o.fault = parse_fault_name(v.get<std::string>()).value_or(InjectedFault::kNone);
               },
               [](const RunOptions& o) { return json(fault_name(o.fault)); }};
  fault.hidden = true;
  add(std::move(fault));
}

std::vector<Option> make_table() {
  std::vector<Option> t;
  add_model_options(t);
  add_device_options(t);
  add_replay_and_guard_options(t);
  add_sync_options(t);
  add_memory_options(t);
  add_communication_options(t);
  add_straggler_options(t);
  add_length_options(t);
  add_data_options(t);
  add_image_options(t);
  add_optimizer_options(t);
  add_lr_rule_options(t);
  add_numerics_options(t);
  add_budget_options(t);
  add_file_options(t);
  add_inspection_options(t);
  return t;
}

std::string number_text(double v) { return fmt::format("{}", v); }

// `v` as the 32-bit float the runtime keeps it in, or InvalidArgument: a value that would become
// infinite, or lose all or most of its digits as a subnormal or zero.
double as_float(const std::string& name, double v) {
  if (!std::isfinite(v))
    throw InvalidArgument(fmt::format("{}: expected a finite number, got {}", name, v));
  const float f = static_cast<float>(v);
  if (!std::isfinite(f)) {
    throw InvalidArgument(
        fmt::format("{}: {} is too large in magnitude for the 32-bit float the run keeps "
                    "(at most {})",
                    name, number_text(v), std::numeric_limits<float>::max()));
  }
  if (v != 0 && !std::isnormal(f)) {
    throw InvalidArgument(
        fmt::format("{}: {} is too small in magnitude for the 32-bit float the run keeps "
                    "(0, or at least {})",
                    name, number_text(v), std::numeric_limits<float>::min()));
  }
  return static_cast<double>(f);
}

// A size's or an output path's text, by the rules of what reads it: parse_bytes, and
// runtime/io/output_file.h's (a stream's target need only not be a directory, in a folder there).
void check_text_value(const Option& option, const json& v, const std::string& name) {
  if (option.type == OptionType::kBytes) {
    try {
      (void)parse_bytes(v.get<std::string>());
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(fmt::format("{}: {}", name, e.what()));
    }
  }
  if (option.type != OptionType::kPath || v.get<std::string>().empty()) return;
  const std::string path = v.get<std::string>();
  switch (option.path_role) {
    case PathRole::kInput:
      return;
    case PathRole::kOutputFile:
      return check_output_file(path, name);
    case PathRole::kOutputDir:
      return check_output_dir(path, name);
    case PathRole::kOutputStream:
      return check_output_stream(path, name);
  }
}

// The option's name as the value's origin spells it.
std::string named(const Option& option, OptionOrigin origin) {
  return origin == OptionOrigin::kCommandLine ? option.flag() : option.key;
}

}  // namespace

void check_output_paths(const RunOptions& o) {
  for (const Option& option : run_option_table()) {
    if (option.type == OptionType::kPath && option.path_role != PathRole::kInput) {
      check_option_value(option, option.get(o), OptionOrigin::kCommandLine);
    }
  }
}

bool Option::in_range(double v) const {
  const OptionRange& r = range;
  if (r.min && (r.min_exclusive ? !(v > *r.min) : !(v >= *r.min))) return false;
  if (r.max && (r.max_exclusive ? !(v < *r.max) : !(v <= *r.max))) return false;
  return true;
}

std::string_view system_name(System s) {
  switch (s) {
    case System::kDlbench:
      return "dlbench";
    case System::kPytorch:
      return "pytorch";
  }
  return "?";
}

std::optional<System> parse_system(std::string_view s) {
  for (System x : kSystems) {
    if (system_name(x) == s) return x;
  }
  return std::nullopt;
}

std::string_view fault_name(InjectedFault f) {
  switch (f) {
    case InjectedFault::kNone:
      return "none";
    case InjectedFault::kCrash:
      return "crash";
    case InjectedFault::kHang:
      return "hang";
    case InjectedFault::kOom:
      return "oom";
    case InjectedFault::kRankStops:
      return "rank-stops";
    case InjectedFault::kRankDies:
      return "rank-dies";
  }
  return "?";
}

std::optional<InjectedFault> parse_fault_name(std::string_view s) {
  for (InjectedFault f : kInjectedFaults)
    if (fault_name(f) == s) return f;
  return std::nullopt;
}

std::string_view data_source_name(DataSource d) {
  switch (d) {
    case DataSource::kDigits:
      return "digits";
    case DataSource::kFolder:
      return "folder";
    case DataSource::kShards:
      return "shards";
    case DataSource::kSynthetic:
      break;
  }
  return "synthetic";
}

std::string Option::flag() const {
  std::string f = "--" + key;
  for (char& c : f) c = c == '_' ? '-' : c;
  return f;
}

std::string Option::metavar() const {
  if (!values.empty()) return fmt::format("{}", fmt::join(values, "|"));
  switch (type) {
    case OptionType::kInteger:
    case OptionType::kUnsigned:
      return "INT";
    case OptionType::kNumber:
    case OptionType::kFloat:
      return "NUMBER";
    case OptionType::kBytes:
      return "SIZE";
    case OptionType::kPath:
      return "PATH";
    case OptionType::kString:
      return "TEXT";
    case OptionType::kBoolean:
      return "BOOL";
  }
  return "TEXT";
}

std::string Option::range_text() const {
  const OptionRange& r = range;
  if (r.min && r.max) {
    return fmt::format("in {}{}, {}{}", r.min_exclusive ? '(' : '[', number_text(*r.min),
                       number_text(*r.max), r.max_exclusive ? ')' : ']');
  }
  if (r.min && *r.min == 0 && r.min_exclusive) return "positive";
  if (r.min) return fmt::format("{} {}", r.min_exclusive ? ">" : ">=", number_text(*r.min));
  if (r.max) return fmt::format("{} {}", r.max_exclusive ? "<" : "<=", number_text(*r.max));
  return "";
}

const std::vector<Option>& run_option_table() {
  static const std::vector<Option> table = make_table();
  return table;
}

const Option* find_option(std::string_view key) {
  for (const Option& o : run_option_table()) {
    if (o.key == key) return &o;
  }
  return nullptr;
}

void apply_option(RunOptions& o, const Option& option, const json& v, OptionOrigin origin) {
  check_option_value(option, v, origin);
  // A setter's refusal says what is wrong with the value; the name is the one the user gave
  // (the flag on the command line, the key in a suite), added here once.
  try {
    option.set(o, v);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("{}: {}", named(option, origin), e.what()));
  }
}

void check_option_value(const Option& option, const json& v, OptionOrigin origin) {
  const std::string name = named(option, origin);
  auto wrong_type = [&](const char* expected) {
    return InvalidArgument(fmt::format("{}: expected {}, got {}", name, expected, v.dump()));
  };
  double number = 0;
  switch (option.type) {
    case OptionType::kInteger:
      if (!v.is_number_integer()) throw wrong_type("an integer");
      if (v.is_number_unsigned() &&
          v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        throw InvalidArgument(fmt::format("{}: {} is too large", name, v.dump()));
      }
      number = static_cast<double>(v.get<int64_t>());
      break;
    case OptionType::kUnsigned:
      if (!v.is_number_integer()) throw wrong_type("an integer");
      number = v.is_number_unsigned() ? static_cast<double>(v.get<uint64_t>())
                                      : static_cast<double>(v.get<int64_t>());
      break;
    case OptionType::kNumber:
      if (!v.is_number()) throw wrong_type("a number");
      number = v.get<double>();
      if (!std::isfinite(number)) throw wrong_type("a finite number");
      break;
    case OptionType::kFloat:
      if (!v.is_number()) throw wrong_type("a number");
      number = as_float(name, v.get<double>());
      break;
    case OptionType::kString:
    case OptionType::kBytes:
    case OptionType::kPath:
      if (!v.is_string()) throw wrong_type("a string");
      break;
    case OptionType::kBoolean:
      if (!v.is_boolean()) throw wrong_type("true or false");
      break;
  }
  check_text_value(option, v, name);
  if (!option.values.empty() && std::find(option.values.begin(), option.values.end(),
                                          v.get<std::string>()) == option.values.end()) {
    std::string what = option.key;
    std::replace(what.begin(), what.end(), '_', ' ');
    throw InvalidArgument(fmt::format("{}: unknown {} '{}' (expected {})", name, what,
                                      v.get<std::string>(), fmt::join(option.values, ", ")));
  }
  if (v.is_number() && !option.in_range(number)) {
    const bool rounded = option.type == OptionType::kFloat && number != v.get<double>();
    throw InvalidArgument(fmt::format(
        "{} must be {} (got {}{})", name, option.range_text(),
        v.is_number_float() ? number_text(v.get<double>()) : v.dump(),
        rounded
            ? fmt::format(", which is {} as the 32-bit float the run keeps", number_text(number))
            : ""));
  }
}

json value_from_text(const Option& option, const std::string& text) {
  const auto wrong = [&](const char* expected) {
    return InvalidArgument(fmt::format("{}: expected {}, got '{}'", option.flag(), expected, text));
  };
  const char* end = text.data() + text.size();
  switch (option.type) {
    case OptionType::kInteger: {
      int64_t i = 0;
      const auto r = std::from_chars(text.data(), end, i);
      if (r.ec == std::errc::result_out_of_range) throw wrong("an integer of 64 bits");
      if (r.ec != std::errc() || r.ptr != end) throw wrong("an integer");
      return i;
    }
    case OptionType::kUnsigned: {
      uint64_t u = 0;
      const auto r = std::from_chars(text.data(), end, u);
      if (r.ec != std::errc() || r.ptr != end) throw wrong("an integer of 0 to 2^64 - 1");
      return u;
    }
    case OptionType::kNumber:
    case OptionType::kFloat: {
      const std::optional<double> d = parse_finite(text);
      if (!d) throw wrong("a number (decimal, finite)");
      return *d;
    }
    case OptionType::kString:
    case OptionType::kBytes:
    case OptionType::kPath:
      return text;
    case OptionType::kBoolean:
      if (text.empty() || text == "true") return true;
      if (text == "false") return false;
      throw wrong("true or false");
  }
  return text;
}

RunOptions options_from_json(const json& config) {
  if (!config.is_object()) {
    throw InvalidArgument(fmt::format("a config must be an object, got {}", config.dump()));
  }
  RunOptions o;
  for (const auto& [key, value] : config.items()) {
    const Option* option = find_option(key);
    if (!option || option->scope != OptionScope::kConfig) {
      throw InvalidArgument(fmt::format("unknown config key '{}'", key));
    }
    apply_option(o, *option, value, OptionOrigin::kConfig);
  }
  return o;
}

json config_json(const RunOptions& o) {
  json c = json::object();
  for (const Option& option : run_option_table()) {
    if (option.scope == OptionScope::kConfig) c[option.key] = option.get(o);
  }
  return c;
}

std::string shell_word(const std::string& text) {
  const bool safe = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_.,:/=+-@%", c);
  });
  if (safe) return text;
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string reproduce_command(const RunOptions& o) {
  const RunOptions defaults;
  // Several ranks need a launcher: mpirun here (srun inside Slurm starts the same ranks).
  std::string cmd =
      o.ranks > 1 ? fmt::format("mpirun -np {} dlbench run", o.ranks) : std::string("dlbench run");
  for (const Option& option : run_option_table()) {
    if (option.scope != OptionScope::kConfig) continue;
    const json v = option.get(o);
    if (v.is_null() || v == option.get(defaults)) continue;
    if (v.is_boolean()) {
      cmd += v.get<bool>() ? " " + option.flag() : " " + option.flag() + "=false";
    } else {
      cmd +=
          " " + shell_word(option.flag() + "=" + (v.is_string() ? v.get<std::string>() : v.dump()));
    }
  }
  // The files a run reads are not config, but the run cannot be made again without them.
  if (!o.data_path.empty()) cmd += " " + shell_word("--data-path=" + o.data_path);
  return cmd;
}

}  // namespace dlb
