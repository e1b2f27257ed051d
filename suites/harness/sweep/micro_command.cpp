// `dlbench --suite=micro`: the micro-benchmarks. Runs build/suites/dlbench_micro (Google
// Benchmark: GEMM, convolutions, host-to-device copies; suites/micro/micro.h) into
// OUT/micro.json, each communicator's all-reduce sweep (`dlbench bench allreduce`) into
// OUT/allreduce-<comm>.json, then renders OUT/micro.md and its plots
// (reports/dlbench_reports/micro.py).
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/core/error.h"
#include "suites/harness/core/launcher.h"
#include "suites/harness/core/report_hook.h"
#include "suites/harness/sweep/sweep_command.h"

namespace dlb {
namespace fs = std::filesystem;

namespace {

// Google Benchmark's least time per row: enough for a stable median on rows of milliseconds,
// and the whole suite stays within minutes on two cores.
constexpr const char* kMinTime = "0.05";

std::string elapsed_line(const std::string& what, double s) {
  return fmt::format("\r\033[K{}: {:.0f} s", what, s);
}

// A terminal's line of how long `what` has run.
std::function<void(double)> ticker(bool tty, const char* what) {
  return [tty, what](double s) {
    if (tty) fmt::print("{}", elapsed_line(what, s)), std::fflush(stdout);
  };
}

// What the micro suite refuses before it runs: sweep flags it has no use for, results already in
// `out`, a missing dlbench_micro. The binary.
fs::path checked_micro_run(const SweepOptions& opt, const std::string& out,
                           const std::string& json) {
  validate_sweep_options(opt);
  if (!opt.systems.empty()) {
    throw InvalidArgument("--systems applies to training suites; the micro suite times kernels");
  }
  if (opt.resume) {
    throw InvalidArgument("--resume: the micro suite has no points to resume; it runs whole");
  }
  if (fs::exists(json)) {
    throw InvalidArgument(
        fmt::format("{} already holds micro-benchmark results; pass --out=DIR for a new run", out));
  }
  const fs::path bin = fs::path(self_executable()).parent_path() / "suites" / "dlbench_micro";
  if (!fs::exists(bin)) {
    throw InvalidArgument(fmt::format("{} is missing: build it (scripts/build.sh)", bin.string()));
  }
  return bin;
}

// GEMM, convolutions and copies (Google Benchmark) into `json`, whole or not at all.
void run_micro_rows(const SweepOptions& opt, const std::vector<std::string>& micro_argv,
                    const std::string& out, const std::string& json, bool tty) {
  fmt::print("suite micro: GEMM, convolutions and copies (Google Benchmark), then all-reduce\n");
  const std::string log = out + "/logs/dlbench_micro.log";
  fs::remove(log);
  const ProcessResult micro =
      run_process({micro_argv, {}}, opt.timeout_s, log, ticker(tty, "dlbench_micro"));
  if (tty) fmt::print("\n");
  if (micro.exit_code != 0 || micro.timed_out || micro.signal) {
    throw DeviceError(
        fmt::format("dlbench_micro failed ({}); its output is in {}:\n{}",
                    micro.timed_out ? "timed out" : "exit " + std::to_string(micro.exit_code), log,
                    tail_of_file(log, 2000)));
  }
  fs::rename(json + ".tmp", json);  // complete: a failed run leaves no micro.json to refuse
  fmt::print("micro: {} rows in {:.0f} s -> {}\n", "GEMM, conv and copy", micro.seconds, json);
}

// All-reduce, for each communicator here: over MPI on host buffers (two ranks on a CPU machine),
// and over NCCL on device buffers with a rank per GPU. A failed one is printed, not thrown.
void run_allreduce_rows(const SweepOptions& opt, const std::string& out, bool tty) {
  int64_t gpus = 0;  // list_devices() has a line "cuda:N <name>" per GPU
  if (gpu_available()) {
    for (const std::string& d : list_devices()) gpus += d.rfind("cuda:", 0) == 0;
  }
  std::vector<std::pair<std::string, int64_t>> comms = {{"mpi", std::max<int64_t>(gpus, 2)}};
  if (gpus > 0) comms.insert(comms.begin(), {"nccl", gpus});
  for (const auto& [comm, ranks] : comms) {
    const std::string file = out + "/allreduce-" + comm + ".json";
    const std::string ar_log = out + "/logs/allreduce-" + comm + ".log";
    fs::remove(ar_log);
    const ProcessResult ar =
        run_process({{self_executable(), "bench", "allreduce", "--comm=" + comm,
                      "--ranks=" + std::to_string(ranks),
                      "--max-bytes=" + std::string(comm == "nccl" ? "1GiB" : "64MiB"), "--iters=10",
                      "--warmup=2", "--json=" + file},
                     {}},
                    opt.timeout_s, ar_log, ticker(tty, "allreduce"));
    if (tty) fmt::print("\n");
    if (ar.exit_code == 0 && !ar.timed_out && ar.signal == 0) {
      fmt::print("micro: all-reduce over {}, {} ranks, in {:.0f} s -> {}\n", comm, ranks,
                 ar.seconds, file);
    } else {
      fmt::print("micro: no {} all-reduce rows: `dlbench bench allreduce` failed ({}):\n{}", comm,
                 ar_log, tail_of_file(ar_log, 1500));
    }
  }
}

}  // namespace

int micro_command(const SweepOptions& opt) {
  const std::string out = opt.out_dir.empty() ? "out/micro" : opt.out_dir;
  const std::string json = out + "/micro.json";
  const fs::path bin = checked_micro_run(opt, out, json);
  const std::vector<std::string> micro_argv = {
      bin.string(), "--benchmark_filter=^(gemm|conv|copy)/",
      std::string("--benchmark_min_time=") + kMinTime, "--benchmark_out=" + json + ".tmp",
      "--benchmark_out_format=json"};
  if (opt.dry_run) {
    fmt::print(
        "suite micro: would run\n  {}\n  {} bench allreduce --comm=... --json={}/allreduce-"
        "<comm>.json\n",
        fmt::join(micro_argv, " "), self_executable(), out);
    return 0;
  }
  fs::create_directories(out + "/logs");
  const bool tty = isatty(STDOUT_FILENO);
  run_micro_rows(opt, micro_argv, out, json, tty);
  run_allreduce_rows(opt, out, tty);
  if (opt.report) render_micro_report(out);
  return 0;
}

}  // namespace dlb
