// `dlbench bench allreduce`: the communicator's all-reduce against the wire, as nccl-tests
// reports it. busbw = algbw x 2(n-1)/n, the bandwidth each link must carry in a ring, which makes
// results comparable across rank counts.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/comm/communicator.h"
#include "runtime/core/allreduce_share.h"
#include "runtime/core/error.h"
#include "runtime/core/stats.h"
#include "runtime/memory/host_memory.h"
#include "suites/harness/bench/bench_commands.h"
#include "suites/harness/core/environment.h"
#include "suites/harness/core/launcher.h"
#include "suites/harness/core/record.h"

namespace dlb {
namespace {

// Timed all-reduces per size: far more than any stable figure needs, and an int's worth of
// iterations is never reached.
constexpr int64_t kMaxIterations = int64_t{1} << 20;

// The largest mpi buffer must be one MPI count (an int of f32 elements), and, when the ranks are
// started here (not inside a job that may span hosts), every rank's buffer and its host copy
// must fit this host's memory: refused before the sweep allocates its way up to it.
void check_host_buffer_fits(size_t max_bytes, int64_t ranks) {
  const size_t mpi_limit = size_t{4} * static_cast<size_t>(std::numeric_limits<int>::max());
  if (max_bytes > mpi_limit) {
    throw InvalidArgument(fmt::format(
        "--max-bytes={}: an mpi all-reduce takes at most {} bytes (MPI counts f32 elements in an "
        "int)",
        max_bytes, mpi_limit));
  }
  if (launched_under_mpi()) return;
  const auto host = static_cast<double>(host_memory_bytes());
  const double need = 2.0 * static_cast<double>(max_bytes) * static_cast<double>(ranks);
  if (host > 0 && need > host) {
    throw InvalidArgument(fmt::format(
        "--max-bytes={}: {} ranks' buffers of that size, and their host copies, need more than "
        "this host's {:.1f} GiB",
        max_bytes, ranks, host / (1u << 30)));
  }
}

// min_bytes, twice that, and so on while within max_bytes.
std::vector<size_t> doubling_sizes(size_t min_bytes, size_t max_bytes) {
  std::vector<size_t> sizes;
  for (size_t bytes = min_bytes;; bytes *= 2) {
    sizes.push_back(bytes);
    if (bytes > max_bytes / 2) return sizes;
  }
}

// The options' sizes, counts and ranks, checked; the communicator they ask for.
CommKind checked_bench(const BenchAllreduceOptions& o, size_t min_bytes, size_t max_bytes) {
  if (min_bytes < 4 || min_bytes > max_bytes) {
    throw InvalidArgument("--min-bytes must be >= 4 and <= --max-bytes");
  }
  if (o.iterations < 1 || o.iterations > kMaxIterations || o.warmup < 0 ||
      o.warmup > kMaxIterations) {
    throw InvalidArgument(
        fmt::format("--iters must be in [1, {0}] and --warmup in [0, {0}]", kMaxIterations));
  }
  // nccl on device buffers when a GPU is visible, else mpi on host buffers.
  const CommKind kind = o.comm.value_or(gpu_available() ? CommKind::kNccl : CommKind::kMpi);
  if (o.ranks < 1 || o.ranks > std::numeric_limits<int>::max()) {
    throw InvalidArgument(
        fmt::format("--ranks must be in [1, {}]", std::numeric_limits<int>::max()));
  }
  if (kind == CommKind::kMpi) check_host_buffer_fits(max_bytes, o.ranks);
  if (kind == CommKind::kNccl && !gpu_available()) {
    throw Unsupported(
        "--comm=nccl reduces device buffers, and no CUDA device is visible here (or this build "
        "has no CUDA); use --comm=mpi");
  }
  return kind;
}

// Outside an MPI job, several ranks: this process becomes the launcher of `o.ranks` of itself.
// One rank is allowed, as nccl-tests allows one GPU: algbw then times the library's local path
// and busbw is 0 (nothing crosses a link). It is the only nccl run a one-GPU node has, and it
// runs in this process (an MPI singleton). Inside an MPI job the job's size rules.
void relaunch_on_ranks(const BenchAllreduceOptions& o, CommKind kind) {
  if (launched_under_mpi() || o.ranks <= 1) return;
  std::vector<std::string> argv = {self_executable(),
                                   "bench",
                                   "allreduce",
                                   "--comm=" + std::string(comm_kind_name(kind)),
                                   "--min-bytes=" + o.min_bytes,
                                   "--max-bytes=" + o.max_bytes,
                                   "--iters=" + std::to_string(o.iterations),
                                   "--warmup=" + std::to_string(o.warmup)};
  if (o.average) argv.push_back("--average");
  if (!o.json_path.empty()) argv.push_back("--json=" + o.json_path);
  const auto launcher = parse_launcher(o.launcher);
  if (!launcher) throw InvalidArgument("--launcher must be auto, mpirun or srun");
  exec_command(launch_command_here(*launcher, o.ranks, argv));
}

void print_header(const BenchAllreduceOptions& o, Communicator& comm, const DeviceMemory& memory) {
  fmt::print(
      "# all-reduce, float sum, in place, {} ranks, {} on {} buffers, {} iterations "
      "after {} warm-up\n",
      comm.size(), comm.name(), memory.name(), o.iterations, o.warmup);
  for (const auto& [k, v] : comm.environment()) fmt::print("#   {}: {}\n", k, v);
  fmt::print("# ref: {}\n", comm.reference_name());
  fmt::print("# {:>12} {:>11}  {:>10} {:>9} {:>9} {:>7}  {:>10} {:>9}  {:>7}\n", "size (B)",
             "count", "time (us)", "algbw", "busbw", "#wrong", "ref (us)", "ref busbw", "work");
  fmt::print("# {:>12} {:>11}  {:>10} {:>9} {:>9} {:>7}  {:>10} {:>9}  {:>7}\n", "", "", "dlbench",
             "(GB/s)", "(GB/s)", "", "", "(GB/s)", "lost");
}

// Elements that are not n(n+1)/2 after every rank contributed rank + 1, on the worst rank.
int64_t wrong_elements(Communicator& comm, DeviceMemory& memory, Tensor& buf, StreamRef stream) {
  const int n = comm.size();
  memory.fill(buf, static_cast<float>(comm.rank() + 1));
  comm.allreduce(buf, ReduceOp::kSum, stream);
  std::vector<float> host(static_cast<size_t>(buf.numel()));
  memory.copy_to_host(buf, host.data());
  int64_t wrong = 0;
  const float want = static_cast<float>(n * (n + 1) / 2);
  for (float v : host) wrong += v != want;
  return static_cast<int64_t>(comm.max_across_ranks(static_cast<double>(wrong)));
}

// A fixed piece of host arithmetic, a few tens of microseconds on one core (a small layer pass):
// a 32 KiB array updated in place, in the L1 cache, so that what slows it beside an all-reduce is
// the all-reduce's use of the core, not a share of memory bandwidth.
class HostWork {
 public:
  void chunk() {
    for (int r = 0; r < kRounds; ++r) {
      for (float& x : data_) x = x * 0.999f + 0.001f;
    }
    sink_ = data_[0];
  }

 private:
  static constexpr int kRounds = 64;
  std::vector<float> data_ = std::vector<float>(8192, 1.0f);
  volatile float sink_ = 0;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// `chunks` chunks of host work on every rank at once, an all-reduce of `buf` launched as they
// begin where `buf` is given and tested between chunks, as a training step tests its buckets
// between layers: the slowest rank's seconds of work, and (`buf`) of its all-reduce.
std::pair<double, double> timed_work(Communicator& comm, HostWork& work, int64_t chunks,
                                     Tensor* buf, ReduceOp op) {
  comm.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<CommHandle> handle = buf ? comm.allreduce_async(*buf, op, {}) : nullptr;
  for (int64_t i = 0; i < chunks; ++i) {
    work.chunk();
    if (handle) handle->test();
  }
  const double work_s = seconds_since(t0);
  double allreduce_s = 0;
  if (handle) {
    handle->wait();
    allreduce_s = std::chrono::duration<double>(handle->completed_at() - t0).count();
  }
  return {comm.max_across_ranks(work_s), comm.max_across_ranks(allreduce_s)};
}

// How much an all-reduce taking `allreduce_s` alone slows host compute beside it on the ranks'
// own cores: work that outlasts it (twice its time, at least 2 ms), alone and beside it, 3 rounds
// alternated, medians. blocks_compute = (beside - alone) / allreduce_s, at least 0: 1 where a
// rank computes nothing for the reduction's time alone, 0 where the reduction takes nothing from
// it; over 1 where the reduction beside the work outlasts its time alone and slows the work by
// more (the caches and memory they share). allreduce_beside_s: the reduction's time beside it.
nlohmann::json beside_compute(Communicator& comm, Tensor& buf, ReduceOp op, double allreduce_s) {
  HostWork work;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) work.chunk();
  const double chunk_s = comm.max_across_ranks(seconds_since(t0) / 3);
  const auto chunks = static_cast<int64_t>(std::ceil(std::max(2 * allreduce_s, 2e-3) / chunk_s));
  std::vector<double> alone, beside, reduced;
  for (int round = 0; round < 3; ++round) {
    alone.push_back(timed_work(comm, work, chunks, nullptr, op).first);
    const auto [work_s, reduce_s] = timed_work(comm, work, chunks, &buf, op);
    beside.push_back(work_s);
    reduced.push_back(reduce_s);
  }
  const double blocked = (percentile(beside, 50) - percentile(alone, 50)) / allreduce_s;
  return {{"work_chunks", chunks},
          {"work_alone_s", percentile(alone, 50)},
          {"work_beside_s", percentile(beside, 50)},
          {"allreduce_beside_s", percentile(reduced, 50)},
          {"blocks_compute", std::max(blocked, 0.0)}};
}

// One size's row: its correctness, then `iters` all-reduces timed (each ordered after the
// previous one through the stream, as a training step orders them: on the host that waits for
// each; on a GPU they queue back to back and the host waits once, at the end, as nccl-tests
// times them), and the library's own all-reduce timed on the same buffer.
nlohmann::json bench_size(const BenchAllreduceOptions& o, Communicator& comm, DeviceMemory& memory,
                          size_t bytes) {
  const StreamRef stream = memory.stream();
  const int64_t count = static_cast<int64_t>(bytes / 4);
  Tensor buf = memory.empty({count}, DType::kF32, MemCategory::kComm, "all-reduce buffer");
  const int64_t wrong = wrong_elements(comm, memory, buf, stream);
  const int iters = static_cast<int>(bytes >= (64u << 20) ? std::max<int64_t>(o.iterations / 4, 2)
                                                          : o.iterations);
  // The timed reductions: sums (nccl-tests'), or averages (what a training step's gradients get:
  // the sum, then the division by the rank count).
  const ReduceOp op = o.average ? ReduceOp::kAverage : ReduceOp::kSum;
  for (int64_t i = 0; i < o.warmup; ++i) comm.allreduce(buf, op, stream);
  memory.synchronize();
  comm.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<CommHandle> last;
  for (int i = 0; i < iters; ++i) {
    last = comm.allreduce_async(buf, op, stream);
    last->order_before(stream);
  }
  last->wait();
  memory.synchronize();
  const double t = comm.max_across_ranks(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters);
  const double t_ref = comm.time_reference_allreduce(buf, iters);
  const double bus_factor = allreduce_share(comm.size());
  const double algbw = static_cast<double>(bytes) / t / 1e9;
  const double ref_busbw = static_cast<double>(bytes) / t_ref / 1e9 * bus_factor;
  // On host buffers the reduction shares the cores that compute: how much it takes from them.
  const nlohmann::json beside =
      stream.on_device() ? nlohmann::json(nullptr) : beside_compute(comm, buf, op, t);
  if (comm.rank() == 0) {
    fmt::print("  {:>12} {:>11}  {:>10.1f} {:>9.3f} {:>9.3f} {:>7}  {:>10.1f} {:>9.3f}  {:>7}\n",
               bytes, count, t * 1e6, algbw, algbw * bus_factor, wrong, t_ref * 1e6, ref_busbw,
               beside.is_null() ? std::string("-")
                                : fmt::format("{:.2f}x", beside["blocks_compute"].get<double>()));
  }
  nlohmann::json row = {{"bytes", bytes},
                        {"count", count},
                        {"time_s", t},
                        {"algbw_gbs", algbw},
                        {"busbw_gbs", algbw * bus_factor},
                        {"wrong", wrong},
                        {"reference_time_s", t_ref},
                        {"reference_busbw_gbs", ref_busbw}};
  if (!beside.is_null()) row["beside_compute"] = beside;
  return row;
}

}  // namespace

int bench_allreduce_command(const BenchAllreduceOptions& o) {
  const size_t min_bytes = parse_bytes(o.min_bytes), max_bytes = parse_bytes(o.max_bytes);
  const CommKind kind = checked_bench(o, min_bytes, max_bytes);
  relaunch_on_ranks(o, kind);
  auto comm = make_communicator(kind);
  BackendOptions bo;
  bo.device = local_rank(comm->rank());  // one GPU per rank, as the nccl communicator picks
  auto memory =
      make_device_memory(kind == CommKind::kNccl ? BackendKind::kCuda : BackendKind::kCpu, bo);
  const bool root = comm->rank() == 0;
  if (root) print_header(o, *comm, *memory);
  nlohmann::json rows = nlohmann::json::array();
  // Sizes double from min_bytes while they stay within max_bytes (sizes() never wraps past 2^64).
  for (const size_t bytes : doubling_sizes(min_bytes, max_bytes)) {
    rows.push_back(bench_size(o, *comm, *memory, bytes));
  }
  if (root && !o.json_path.empty()) {
    nlohmann::json env = collect_environment(*memory);
    for (const auto& [k, v] : comm->environment()) env[k] = v;
    write_json_atomically(o.json_path, {{"schema_version", kResultSchemaVersion},
                                        {"kind", "bench_allreduce"},
                                        {"ranks", comm->size()},
                                        {"op", o.average ? "average" : "sum"},
                                        {"comm", comm->name()},
                                        {"buffers", memory->name()},
                                        {"reference", comm->reference_name()},
                                        {"environment", env},
                                        {"rows", rows}});
  }
  return 0;
}

}  // namespace dlb
