// `dlbench bench allreduce`: the communicator's all-reduce against the wire, as nccl-tests
// reports it. busbw = algbw x 2(n-1)/n, the bandwidth each link must carry in a ring, which makes
// results comparable across rank counts.
#include <fmt/format.h>

#include <chrono>

#include "runtime/backend/backend.h"
#include "runtime/comm/communicator.h"
#include "runtime/core/error.h"
#include "suites/harness/commands.h"
#include "suites/harness/environment.h"
#include "suites/harness/launcher.h"
#include "suites/harness/record.h"

namespace dlb {

int bench_allreduce_command(const BenchAllreduceOptions& o) {
  const size_t min_bytes = parse_bytes(o.min_bytes), max_bytes = parse_bytes(o.max_bytes);
  if (min_bytes < 4 || min_bytes > max_bytes) {
    throw InvalidArgument("--min-bytes must be >= 4 and <= --max-bytes");
  }
  if (o.iterations < 1 || o.warmup < 0) throw InvalidArgument("--iters >= 1 and --warmup >= 0");
  if (!launched_under_mpi()) {
    if (o.ranks < 2)
      throw InvalidArgument("--ranks must be at least 2 for an all-reduce benchmark");
    std::vector<std::string> argv = {self_executable(),
                                     "bench",
                                     "allreduce",
                                     "--min-bytes=" + o.min_bytes,
                                     "--max-bytes=" + o.max_bytes,
                                     "--iters=" + std::to_string(o.iterations),
                                     "--warmup=" + std::to_string(o.warmup)};
    if (!o.json_path.empty()) argv.push_back("--json=" + o.json_path);
    const auto kind = parse_launcher(o.launcher);
    if (!kind) throw InvalidArgument("--launcher must be auto, mpirun or srun");
    exec_command(launch_command_here(*kind, o.ranks, argv));
  }
  auto comm = make_communicator(CommKind::kMpi);
  auto backend = make_backend(BackendKind::kCpu, {});
  const int n = comm->size();
  const bool root = comm->rank() == 0;
  const double bus_factor = 2.0 * (n - 1) / n;
  if (root) {
    fmt::print("# all-reduce, float sum, in place, {} ranks ({}), {} iterations after {} warm-up\n",
               n, comm->environment()["mpi"], o.iterations, o.warmup);
    fmt::print("# {:>12} {:>11}  {:>10} {:>9} {:>9} {:>7}  {:>10} {:>9}\n", "size (B)", "count",
               "time (us)", "algbw", "busbw", "#wrong", "MPI (us)", "MPI busbw");
    fmt::print("# {:>12} {:>11}  {:>10} {:>9} {:>9} {:>7}  {:>10} {:>9}\n", "", "", "dlbench",
               "(GB/s)", "(GB/s)", "", "Allreduce", "(GB/s)");
  }
  nlohmann::json rows = nlohmann::json::array();
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    const int64_t count = static_cast<int64_t>(bytes / 4);
    Tensor buf = backend->empty({count}, DType::kF32, MemCategory::kComm, "all-reduce buffer");
    // Correctness: every rank contributes rank + 1, so each element must sum to n(n+1)/2.
    backend->fill(buf, static_cast<float>(comm->rank() + 1));
    comm->allreduce(buf, ReduceOp::kSum);
    int64_t wrong = 0;
    const float want = static_cast<float>(n * (n + 1) / 2);
    for (int64_t i = 0; i < count; ++i) wrong += buf.data<float>()[i] != want;
    wrong = static_cast<int64_t>(comm->max_across_ranks(static_cast<double>(wrong)));
    const int iters = static_cast<int>(bytes >= (64u << 20) ? std::max<int64_t>(o.iterations / 4, 2)
                                                            : o.iterations);
    for (int64_t i = 0; i < o.warmup; ++i) comm->allreduce(buf, ReduceOp::kSum);
    comm->barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) comm->allreduce_async(buf, ReduceOp::kSum)->wait();
    const double t = comm->max_across_ranks(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters);
    const double t_mpi = comm->time_reference_allreduce(buf, iters);
    const double algbw = static_cast<double>(bytes) / t / 1e9;
    const double mpi_busbw = static_cast<double>(bytes) / t_mpi / 1e9 * bus_factor;
    if (root) {
      fmt::print("  {:>12} {:>11}  {:>10.1f} {:>9.3f} {:>9.3f} {:>7}  {:>10.1f} {:>9.3f}\n", bytes,
                 count, t * 1e6, algbw, algbw * bus_factor, wrong, t_mpi * 1e6, mpi_busbw);
    }
    rows.push_back({{"bytes", bytes},
                    {"count", count},
                    {"time_s", t},
                    {"algbw_gbs", algbw},
                    {"busbw_gbs", algbw * bus_factor},
                    {"wrong", wrong},
                    {"mpi_allreduce_time_s", t_mpi},
                    {"mpi_allreduce_busbw_gbs", mpi_busbw}});
  }
  if (root && !o.json_path.empty()) {
    nlohmann::json env = collect_environment(*backend);
    for (const auto& [k, v] : comm->environment()) env[k] = v;
    write_json_atomically(o.json_path, {{"schema_version", kResultSchemaVersion},
                                        {"kind", "bench_allreduce"},
                                        {"ranks", n},
                                        {"environment", env},
                                        {"rows", rows}});
  }
  return 0;
}

}  // namespace dlb
