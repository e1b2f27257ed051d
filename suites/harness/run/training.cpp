#include "suites/harness/run/training.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "runtime/comm/communicator.h"
#include "runtime/core/error.h"
#include "runtime/core/stats.h"
#include "runtime/io/output_file.h"
#include "runtime/io/safetensors.h"
#include "runtime/trace/comm_metrics.h"
#include "runtime/trace/phase_metrics.h"
#include "runtime/train/profile.h"
#include "runtime/train/trainer.h"
#include "suites/harness/core/environment.h"
#include "suites/harness/core/host_share.h"
#include "suites/harness/core/machine_peak.h"
#include "suites/harness/core/record.h"
#include "suites/harness/core/timed_phase.h"
#include "suites/harness/run/convergence.h"
#include "suites/harness/run/epochs.h"
#include "suites/harness/run/image_input.h"
#include "suites/harness/run/step_dump.h"
#include "workloads/data/batch_file.h"
#include "workloads/data/dataset.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

void inject_fault(RunOptions::Fault fault) {
  switch (fault) {
    case RunOptions::Fault::kNone:
      return;
    case RunOptions::Fault::kCrash:
      std::abort();
    case RunOptions::Fault::kHang:
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(60));
    case RunOptions::Fault::kOom:
      throw OutOfMemory("injected out-of-memory fault");
    case RunOptions::Fault::kRankStops:
    case RunOptions::Fault::kRankDies:
      return;  // these act mid-step, through the trainer's hook
  }
}

}  // namespace

namespace {

// MLPerf's names for the lowest precision used in matrix products: ours, but "bfloat16".
std::string mllog_precision(Precision p) {
  return p == Precision::kBf16 ? "bfloat16" : std::string(precision_name(p));
}

// The communicator a run asked for, or by default: none for one rank, else where the backend
// keeps its gradients (host buffers over MPI, device buffers over NCCL).
CommKind comm_kind(const RunOptions& o) {
  // Asynchronous SGD's messages go between host copies, over MPI, on every backend.
  const bool async = o.sync.kind == SyncMode::Kind::kAsync;
  const CommKind kind =
      o.comm.value_or(o.ranks == 1                                ? CommKind::kLocal
                      : o.backend == BackendKind::kCuda && !async ? CommKind::kNccl
                                                                  : CommKind::kMpi);
  if (kind == CommKind::kLocal && o.ranks != 1) {
    throw InvalidArgument(fmt::format(
        "--comm=local serves one rank; --ranks={} needs mpi (cpu) or nccl (cuda)", o.ranks));
  }
  if (kind == CommKind::kNccl && o.backend != BackendKind::kCuda) {
    throw InvalidArgument("--comm=nccl reduces device buffers: it needs --backend=cuda");
  }
  if (async && kind != CommKind::kMpi) {
    throw InvalidArgument(fmt::format(
        "--sync=async sends host copies of weights and gradients over MPI: it needs --comm=mpi, "
        "not {}",
        comm_kind_name(kind)));
  }
  if (kind == CommKind::kMpi && o.backend == BackendKind::kCuda && !async) {
    throw InvalidArgument(
        "--comm=mpi reduces host buffers; the cuda backend's gradients are on the device: use "
        "--comm=nccl");
  }
  return kind;
}

std::unique_ptr<Communicator> open_communicator(const RunOptions& o) {
  const CommKind kind = comm_kind(o);
  if (kind == CommKind::kLocal) return make_communicator(CommKind::kLocal);
  if (o.ranks > 1 && !launched_under_mpi()) {
    throw InvalidArgument(
        fmt::format("ranks={} needs {} processes started by mpirun or srun "
                    "(e.g. mpirun -np {} dlbench run --ranks={} ...); "
                    "dlbench --suite starts them itself",
                    o.ranks, o.ranks, o.ranks, o.ranks));
  }
  CommOptions co;
  co.timeout = std::chrono::duration<double>(o.comm_timeout_s);
  co.progress = o.comm_progress;
  auto comm = make_communicator(kind, co);
  if (comm->size() != o.ranks) {
    throw InvalidArgument(
        fmt::format("--ranks={} but the launcher started {} ranks", o.ranks, comm->size()));
  }
  return comm;
}

// What the run trains on: synthetic images, a fixed batch file, or the digits. Resolves the
// model's batch, image size and classes in `mc` (a batch file decides the first two).
struct RunData {
  Dataset batch;  // synthetic or from --batch-file: loaded once, stays on the device
  DigitsSplit digits;
  std::unique_ptr<ImageInput> folder;  // --data=folder: a batch per step from its loader
  std::unique_ptr<EpochData> epochs;   // --epochs: the digits', or the folder's
};

RunData load_data(const RunOptions& o, const ModelInfo& info, const Communicator& comm,
                  const HostShare& host, ModelConfig& mc) {
  RunData d;
  if (!o.batch_file.empty()) {
    d.batch =
        load_batch_file(o.batch_file, {info.in_channels, mc.num_classes, comm.rank(), comm.size()});
    const int64_t n = d.batch.size(), s = d.batch.height;
    if ((o.batch && *o.batch != n) || (o.image_size && *o.image_size != s)) {
      throw InvalidArgument(fmt::format(
          "{} holds {} images of {}x{}; --batch/--image-size disagree", o.batch_file, n, s, s));
    }
    mc.batch = n;
    mc.image_size = s;
  } else if (o.data == DataSource::kDigits) {
    if (mc.num_classes != 10) throw InvalidArgument("digits have 10 classes; set --num-classes=10");
  } else if (o.data == DataSource::kFolder || o.data == DataSource::kShards) {
    if (info.in_channels != 3) {
      throw InvalidArgument(fmt::format("--data={} gives RGB images, and {} takes {} channel(s)",
                                        data_source_name(o.data), o.model, info.in_channels));
    }
    const int64_t compute = o.backend == BackendKind::kCpu ? pool_threads() : 1;
    d.folder =
        open_image_input(o, comm.rank(), comm.size(), loader_threads_of(o, host, compute), mc);
  }
  return d;
}

// With --inject-fault=rank-stops or rank-dies, the last rank stops or dies between forward and
// backward of the first timed step.
void add_rank_fault(const RunOptions& o, const Communicator& comm, TrainConfig& tc) {
  if (o.fault != RunOptions::Fault::kRankStops && o.fault != RunOptions::Fault::kRankDies) return;
  if (comm.size() == 1) return;  // no peer to lose
  const bool last = comm.rank() == comm.size() - 1;
  const int signal = o.fault == RunOptions::Fault::kRankStops ? SIGSTOP : SIGKILL;
  tc.mid_step_hook = [last, signal, first_timed = o.warmup](int64_t step) {
    if (last && step == first_timed) raise(signal);
  };
}

// `more` timed steps after `s` (or `s` itself, `first`): their times and losses appended.
void append_timed(RunStats& s, RunStats more, bool first = false) {
  if (first) {
    s = std::move(more);
    return;
  }
  s.timed_steps += more.timed_steps;
  s.timed_seconds += more.timed_seconds;
  s.step_seconds.insert(s.step_seconds.end(), more.step_seconds.begin(), more.step_seconds.end());
  s.losses.insert(s.losses.end(), more.losses.begin(), more.losses.end());
}

// The first `k` timed steps become warm-up: out of the timed steps, their time and their count.
void discard_leading(RunStats& s, int64_t k) {
  if (k <= 0) return;
  const auto end = s.step_seconds.begin() + k;
  for (auto it = s.step_seconds.begin(); it != end; ++it) s.timed_seconds -= *it;
  s.step_seconds.erase(s.step_seconds.begin(), end);
  s.timed_steps -= k;
  s.warmup_steps += k;
}

// Steps traced: --trace-steps, or on several ranks 3 (for the communication metrics).
int64_t trace_window(const RunOptions& o, int ranks) {
  return o.trace_steps > 0 ? o.trace_steps : ranks > 1 ? std::min<int64_t>(3, o.steps) : 0;
}

// Timed steps on one fixed batch: `repetitions` timed phases, each of at least `steps` steps and
// `min_time` seconds; the first one's unsettled steps discarded (timed_phase.h), but never a
// traced one (the trace shows the last `window` of the first `steps`): what a trace and its
// metrics show is always timed.
void measure_throughput(const RunOptions& o, const ModelInfo& info, const ModelConfig& mc,
                        RunData& data, Trainer& trainer, Communicator& comm, int64_t window,
                        RunResult& r) {
  std::function<void(int64_t, int64_t)> load;  // --data=folder: each timed step's batch
  if (data.folder) {
    load = [&trainer, &in = *data.folder](int64_t, int64_t) { load_next_batch(in, trainer); };
    load(0, 0);  // the warm-up steps' batch
    data.folder->at_timed_start = data.folder->loader->stats();
    data.folder->decodes_at_timed_start = trainer.decoded_batches();
    data.folder->decode_s_at_timed_start = trainer.decode_seconds();
  } else {
    const Dataset batch =
        o.batch_file.empty()
            ? make_synthetic(mc.batch, info.in_channels, mc.image_size, mc.num_classes, o.seed + 7)
            : std::move(data.batch);
    trainer.load_batch(batch.images.data(), batch.labels.data());
  }
  r.host_before = sample_host();
  RunStats all;
  std::vector<double> repetitions;
  for (int64_t rep = 0; rep < o.repetitions; ++rep) {
    RunStats s = trainer.run(rep == 0 ? o.warmup : 0, o.steps, load);
    // --min-time: more steps at the pace measured; every rank runs as many (the slowest's ask).
    const int64_t more = static_cast<int64_t>(comm.max_across_ranks(static_cast<double>(
        extra_steps(o.steps, comm.max_across_ranks(s.timed_seconds), o.min_time_s))));
    if (more > 0) append_timed(s, trainer.run(0, more, load));
    if (rep == 0 && o.warmup > 0) {  // the warm-up judged from the data (timed_phase.h)
      r.discarded_steps = static_cast<int64_t>(comm.max_across_ranks(
          static_cast<double>(unsettled_steps(s.step_seconds, o.steps - window))));
      discard_leading(s, r.discarded_steps);
    }
    const double seconds = comm.max_across_ranks(s.timed_seconds);
    repetitions.push_back(static_cast<double>(s.images_per_step * comm.size() * s.timed_steps) /
                          seconds);
    append_timed(all, std::move(s), rep == 0);
  }
  r.host_after = sample_host();
  if (o.repetitions > 1) r.repetitions = repetition_json(repetitions);
  // Global throughput: every rank's images over the slowest rank's time.
  all.timed_seconds = comm.max_across_ranks(all.timed_seconds);
  all.images_per_step *= comm.size();
  r.stats = std::move(all);
  if (comm.size() > 1) r.buckets = static_cast<int64_t>(trainer.bucket_plan().buckets.size());
  if (data.folder) r.input = image_input_json(*data.folder, o, trainer);
}

// Epochs to a target accuracy, with an MLPerf log when asked.
void measure_convergence(const RunOptions& o, const ModelConfig& mc, RunData& data,
                         const LrRule& lr, Trainer& trainer, Communicator& comm,
                         std::optional<MlLog>& mllog, RunResult& r) {
  if (mllog) {
    const std::string device = r.environment["device"].get<std::string>();
    const std::string platform =
        device == "cpu" ? fmt::format("cpu: {}", r.environment.value("cpu", "unknown")) : device;
    log_submission(*mllog, {o.model, platform, mllog_precision(o.precision),
                            o.config_file.empty() ? "command line" : o.config_file, mc.batch,
                            comm.size(), data.epochs->train_samples(), data.epochs->test_samples(),
                            o.seed, static_cast<float>(lr.base()), o.sgd.momentum,
                            o.sgd.weight_decay, lr.warmup_epochs(), o.lr.schedule});
    mllog->end("init_stop");
  }
  r.convergence =
      train_to_accuracy(trainer, comm, *data.epochs, {*o.epochs, o.target_accuracy, o.seed, &lr},
                        mllog ? &*mllog : nullptr);
  if (data.folder) r.input = image_input_json(*data.folder, o, trainer);
}

// A run whose loss became inf or NaN diverged: its record says so, and its throughput is not a
// result (the arithmetic of non-finite values may run at any speed).
void mark_divergence(RunResult& r) {
  if (r.stats) {
    const std::vector<float>& losses = r.stats->losses;
    for (size_t i = 0; i < losses.size(); ++i) {
      if (std::isfinite(losses[i])) continue;
      r.status = RunStatus::kDiverged;
      r.message = fmt::format(
          "the loss became {} at step {} of {} (warm-up included); the throughput of a diverged "
          "run is not a result",
          std::isnan(losses[i]) ? "NaN"
          : losses[i] > 0       ? "inf"
                                : "-inf",
          i + 1, losses.size());
      return;
    }
  }
  if (r.convergence.is_object() && r.convergence.contains("diverged_at_epoch")) {
    r.status = RunStatus::kDiverged;
    r.message = fmt::format("the mean training loss of epoch {} is not finite",
                            r.convergence["diverged_at_epoch"].get<int64_t>());
  }
}

// Every rank writes its own trace (pid = rank); rank 0 writes the profile and the weights, and
// its record lists every rank's trace.
void write_run_files(const RunOptions& o, Backend& backend, Graph& graph, const Trainer& trainer,
                     Tracer& tracer, RunResult& r) {
  const auto trace_of = [&](int rank) {
    return rank == 0 ? o.trace_path : rank_file(o.trace_path, rank);
  };
  if (o.trace_steps > 0) {
    tracer.end_window();
    if (!o.trace_path.empty()) write_json_atomically(trace_of(r.rank), tracer.chrome_trace(r.rank));
  }
  if (r.rank != 0) return;
  if (o.trace_steps > 0) {
    if (!o.profile_path.empty()) {
      write_json_atomically(o.profile_path, layer_profile(graph, tracer));
    }
    r.paths["trace"] = o.trace_path;
    r.paths["profile"] = o.profile_path;
    if (!o.trace_path.empty()) {
      for (int rank = 0; rank < r.ranks; ++rank) r.paths["traces"].push_back(trace_of(rank));
    }
  }
  if (!o.mllog_path.empty()) r.paths["mllog"] = o.mllog_path;
  if (!o.save_path.empty()) save_safetensors(o.save_path, graph.state_dict());
  if (!o.dump_path.empty())
    dump_step(o.dump_path, backend, graph, trainer.bound(), trainer.tensors());
}

// The Trainer's configuration: the run's step (step_spec_of), its optimizer at the first rate
// `lr`, its loss scale, this rank's straggler and its injected fault.
TrainConfig train_config_of(const RunOptions& o, Communicator& comm, float lr) {
  TrainConfig tc;
  tc.sgd = o.sgd;
  tc.sgd.lr = lr;
  tc.seed = o.seed;
  tc.comm = &comm;
  tc.step = step_spec_of(o);
  if (o.loss_scale) {  // fixed: no growth, no backoff (overflowing steps are still skipped)
    tc.loss_scaling = LossScaleConfig{*o.loss_scale, 1.f, 1.f, 1};
  }
  if (o.straggler && o.straggler->rank == comm.rank()) tc.compute_slowdown = o.straggler->factor;
  add_rank_fault(o, comm, tc);
  return tc;
}

// What the record says of the run before its steps: the convolutions' engines, the backend, the
// machine, the model.
void describe_run(const Backend& backend, const Communicator& comm, const Graph& graph,
                  const ModelConfig& mc, RunResult& r) {
  const std::vector<EngineUse> uses = engine_uses(graph);
  if (EngineSummary e = summarize_engines(uses, r.options.precision); e.passes > 0) {
    r.engines = std::move(e);
  }
  r.convolutions = summarize_conv_passes(uses);
  const OpTypes types = OpTypes::of(PrecisionPolicy::for_precision(r.options.precision));
  r.arithmetic = summarize_arithmetic(uses, types.data, backend.matmul_arithmetic(types).operands);
  require_named_algorithm_ran(*r.convolutions, conv_algo_choice_name(r.options.conv_algo));
  r.backend_name = backend.name();
  r.environment = collect_environment(backend);
  for (const auto& [k, v] : comm.environment()) r.environment[k] = v;
  r.params = graph.num_params();
  r.forward_flops_per_image = graph.forward_flops() / mc.batch;
  r.flops_per_step = graph.training_flops();
}

// What the record reads back after the steps: whether the ranks' weights agree, async's
// staleness, the loss scale, the captured graphs, the memory.
void read_after_steps(const RunOptions& o, const Communicator& comm, Trainer& trainer,
                      Backend& backend, RunResult& r) {
  if (comm.size() > 1) r.weights_identical_across_ranks = trainer.weights_identical_across_ranks();
  if (o.sync.kind == SyncMode::Kind::kAsync) r.async_staleness = trainer.async_staleness();
  if (LossScaler* scaler = trainer.loss_scaler()) {
    r.loss_scale = scaler->scale();
    r.skipped_steps = scaler->skipped_steps();
  }
  if (o.cuda_graph) r.step_graphs = trainer.step_graphs();
  r.memory = backend.allocator().stats();
  r.memory_budget = backend.allocator().budget();
}

// The MLPerf log (rank 0's), started at init_start, before the model and the data are built.
std::optional<MlLog> start_mllog(const RunOptions& o, int rank) {
  std::optional<MlLog> mllog;
  if (rank == 0 && !o.mllog_path.empty()) {
    mllog.emplace(o.mllog_path);
    mllog->start("init_start");
  }
  return mllog;
}

// --epochs: the digits loaded, and the epochs over them or the folder, in `data` where it stays
// (the epochs hold references into it).
void open_epochs(const RunOptions& o, const ModelInfo& info, const ModelConfig& mc, Shard shard,
                 RunData& data) {
  if (o.data == DataSource::kDigits) {
    // The grey channel is repeated for models that take colour images (resnet18: 3).
    data.digits = load_digits(o.data_path.empty() ? default_digits_path() : o.data_path,
                              mc.image_size, info.in_channels);
    data.epochs = digits_epochs(data.digits, mc.batch, shard, o.seed);
  } else if (o.epochs) {
    data.epochs = folder_epochs(*data.folder, o, shard, mc.image_size);
  }
}

// Epochs take a rate per step, whose warm-up and boundaries are checked against the run's length
// before anything is built; timed steps take one rate, scaled to the global batch (nullopt).
std::optional<LrRule> lr_rule_of(const RunOptions& o, const RunData& data, int64_t global_batch) {
  if (!data.epochs) return std::nullopt;
  return LrRule(o.lr, o.sgd.lr, global_batch, data.epochs->steps(), *o.epochs);
}

}  // namespace

ModelConfig model_config_of(const RunOptions& o) {
  const ModelInfo& info = find_model(o.model);
  return {o.batch.value_or(kDefaultBatch), o.image_size.value_or(info.default_image_size),
          o.num_classes.value_or(info.default_classes), o.dropout};
}

// The backend a run's options ask for, on this rank's GPU (one per rank on each node).
BackendOptions backend_options_of(const RunOptions& o, int rank) {
  BackendOptions bo;
  bo.memory_budget = o.memory_budget;
  bo.conv_algo = o.conv_algo;
  bo.workspace_limit = o.workspace_limit;
  bo.conv_math = conv_math_of(o);
  bo.memory_guard = o.memory_guard;
  bo.device = local_rank(rank);
  return bo;
}

RunResult run_training(const RunOptions& o) {
  validate_run_options(o);
  std::unique_ptr<Communicator> comm = open_communicator(o);
  RunResult r;
  r.rank = comm->rank();
  r.ranks = comm->size();
  r.host = measure_host_share(*comm);
  const ModelInfo& info = find_model(o.model);
  ModelConfig mc = model_config_of(o);
  RunData data = load_data(o, info, *comm, r.host, mc);
  r.options = o;
  r.options.batch = mc.batch;
  r.options.image_size = mc.image_size;
  r.options.num_classes = mc.num_classes;
  std::optional<MlLog> mllog = start_mllog(o, r.rank);
  open_epochs(o, info, mc, Shard{r.rank, r.ranks}, data);
  const int64_t global_batch = mc.batch * comm->size();
  // The batch one update averages, which --lr-scaling=linear scales the rate to: independent
  // ranks each update from their own.
  const int64_t update_batch =
      o.sync.kind == SyncMode::Kind::kIndependent ? mc.batch : global_batch;
  const std::optional<LrRule> lr_rule = lr_rule_of(o, data, update_batch);

  Graph graph = build_model(o.model, mc);
  auto backend = make_backend(o.backend, backend_options_of(o, r.rank));
  Rng rng(o.seed);
  if (!o.dump_path.empty()) graph.keep_gradients_distinct();
  graph.declare_for(*backend, PrecisionPolicy::for_precision(o.precision));
  const float lr =
      static_cast<float>(lr_rule ? lr_rule->at(0) : scaled_lr(o.lr, o.sgd.lr, update_batch));
  Trainer trainer(*backend, graph, train_config_of(o, *comm, lr), rng);
  r.plan_bytes =
      RunResult::PlanBytes{trainer.memory_plan().device_bytes(), trainer.naive_plan_bytes()};
  if (!o.init_path.empty()) graph.load_state_dict(load_safetensors(o.init_path));
  trainer.broadcast_weights();
  // The window covers the last `window` of the first timed phase's `steps` steps, which the
  // timed phase never leaves out as warm-up (measure_throughput); or the first epochs' steps.
  // With several ranks it is always on, for the communication metrics.
  const int64_t window = trace_window(o, comm->size());
  // Spans on the backend's clock: CUDA events with the CUDA backend.
  Tracer tracer(o.epochs ? 0 : o.warmup + o.steps - window, window, &backend->clock());
  if (window > 0) trainer.set_tracer(&tracer);
  inject_fault(o.fault);

  describe_run(*backend, *comm, graph, mc, r);
  if (o.epochs) {
    measure_convergence(o, mc, data, *lr_rule, trainer, *comm, mllog, r);
  } else {
    measure_throughput(o, info, mc, data, trainer, *comm, window, r);
    if (window > 0 && data.folder) trace_loader(tracer, *data.folder->loader);
    if (comm->size() > 1) r.comm = comm_metrics(tracer, comm->size());
    if (window > 0) r.phases = phase_metrics(tracer);
  }
  read_after_steps(o, *comm, trainer, *backend, r);
  mark_divergence(r);
  write_run_files(o, *backend, graph, trainer, tracer, r);
  return r;
}

namespace {

// Ranks that share this host's device: on the CPU, every rank of this run on this machine (as
// the ranks counted themselves, host_share.h); a GPU rank has a device of its own.
int64_t ranks_sharing_the_device(const RunResult& r) {
  return r.environment.value("device", "") == "cpu" ? r.host.ranks : 1;
}

}  // namespace

// The machine's measured peak (machine_peak.h), when one was measured here for this device:
// the record then says what fraction of it the run reached. A peak file that cannot be read
// costs the record its fraction, never the run.
void attach_peak(RunResult& r) {
  if (r.status != RunStatus::kOk || !r.stats) return;
  const std::string path = peak_file_path();
  std::vector<MachinePeak> peaks;
  try {
    peaks = read_peaks(path);
  } catch (const InvalidArgument& e) {
    fmt::print(stderr, "dlbench: no fraction of peak in the record: {}\n", e.what());
    return;
  }
  const std::string device = r.environment.value("device", "") == "cpu"
                                 ? r.environment.value("cpu", "")
                                 : r.environment.value("device", "");
  const auto peak = find_peak(peaks, host_name(), device, r.backend_name,
                              std::string(precision_name(r.options.precision)));
  if (!peak) return;
  r.peak = {{"flops_per_s", peak->flops_per_s},
            {"bytes_per_s", peak->bytes_per_s},
            {"precision", peak->precision},
            {"threads", peak->threads},
            {"flops_method", peak->flops_method},
            {"measured_at", peak->measured_at},
            {"file", path},
            {"ranks_sharing_it", ranks_sharing_the_device(r)}};
}

// The record's noise (noise.h): the host around the timed steps, how this run sat on it, and the
// step times' spread.
void attach_noise(RunResult& r) {
  if (!r.stats || !r.host_before || !r.host_after) return;
  NoiseInputs in;
  in.before = *r.host_before;
  in.after = *r.host_after;
  in.ticks_per_s = static_cast<double>(sysconf(_SC_CLK_TCK));
  in.hardware_threads = std::max<int64_t>(std::thread::hardware_concurrency(), 1);
  in.cpu_device = r.environment.value("device", "") == "cpu";
  in.host = r.host;  // GPU ranks use the host's CPU too (polls, NCCL)
  in.threads_per_rank = in.cpu_device ? pool_threads() : 1;
  in.governor = cpu_governor();
  in.step_seconds = r.stats->step_seconds;
  r.noise = noise_json(in);
}

}  // namespace dlb
