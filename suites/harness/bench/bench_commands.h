// `dlbench bench conv|peak|allreduce|input`. Each returns an exit code or throws dlb::Error.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/comm/communicator.h"

namespace dlb {

struct BenchConvOptions {
  std::string model = "resnet50";
  int64_t batch = 8, image_size = 64, repeat = 5;
  BackendKind backend = BackendKind::kCpu;
  std::vector<std::string> algos;  // the named algorithms to time; every one when empty or "all"
  std::string json_path;
};
// Times every distinct conv layer of a model (forward, backward-data, backward-filter) with each
// algorithm, beside a plain matrix multiply of the forward's GEMM shape, in the same run. A pass
// an algorithm cannot run (Winograd on a strided layer) is reported unsupported, with why.
int bench_conv_command(const BenchConvOptions& options);

// `dlbench bench peak`: measures this machine's peak (machine_peak.h) for each backend with a
// device here (cpu: fp32; cuda: every precision), prints it and keeps it in peak_file_path(),
// where training records and the micro-benchmarks find it.
int bench_peak_command();

struct BenchAllreduceOptions {
  int64_t ranks = 2;
  std::optional<CommKind> comm;  // unset: nccl when a GPU is visible, else mpi
  std::string min_bytes = "8", max_bytes = "256MiB";
  int64_t iterations = 20, warmup = 3;
  std::string launcher = "auto";
  std::string json_path;
  bool average = false;  // time averaging all-reduces (a training step's) instead of sums
};
// nccl-tests' all_reduce_perf for dlbench's communicator: size, time, algbw and busbw from
// min_bytes to max_bytes (doubling), with a correctness check and the library's own blocking
// all-reduce (MPI_Allreduce; ncclAllReduce with a stream sync per call) timed on the same
// buffers in the same run. Relaunches itself on `ranks` ranks unless already inside an MPI job.
int bench_allreduce_command(const BenchAllreduceOptions& options);

struct BenchInputOptions {
  std::string data_path;  // the data set's root: DIR/train/<class>/*.JPEG
  std::vector<int64_t> threads = {1, 2};
  int64_t batch = 64, image_size = 224, batches = 20, warmup = 2, rounds = 3;
  // dlbench; dlbench-full-decode (every image decoded whole, as PIL decodes); dlbench-gpu (the
  // loader reading files for nvJPEG and dlbench's kernels on the first GPU: --decode=gpu);
  // pytorch (its DataLoader); dali (DALI's CPU pipeline); dali-gpu (DALI's mixed decoder and
  // GPU pipeline)
  std::vector<std::string> systems = {"dlbench"};
  std::string json_path;
};
// The input pipeline alone, with no training: images/s decoded and augmented into batches at each
// thread count (PyTorch's DataLoader at as many worker processes beside it), `rounds` rounds of
// every system and thread count in turn, medians and ranges (docs/input.md).
int bench_input_command(const BenchInputOptions& options);

}  // namespace dlb
