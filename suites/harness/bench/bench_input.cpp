// `dlbench bench input`: the input pipeline's rate alone (docs/input.md), dlbench's loader
// threads beside PyTorch's DataLoader workers on the same files.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>

#include "runtime/backend/backend.h"
#include "runtime/backend/image_decoder.h"
#include "runtime/core/error.h"
#include "runtime/core/stats.h"
#include "suites/harness/bench/bench_commands.h"
#include "suites/harness/core/launcher.h"
#include "suites/harness/core/peers.h"
#include "suites/harness/core/record.h"
#include "workloads/data/image_loader.h"

namespace dlb {
namespace {

void check(const BenchInputOptions& o) {
  if (o.data_path.empty())
    throw InvalidArgument("--data-path: the data set's root (DIR/train/...)");
  if (o.threads.empty() ||
      std::any_of(o.threads.begin(), o.threads.end(), [](int64_t t) { return t < 1 || t > 256; })) {
    throw InvalidArgument("--threads: thread counts in [1, 256]");
  }
  if (o.batch < 1 || o.image_size < 1 || o.image_size > 4096 || o.batches < 1 ||
      o.batches > 100000 || o.warmup < 0 || o.warmup > 1000 || o.rounds < 1 || o.rounds > 100) {
    throw InvalidArgument(
        "--batch >= 1, --image-size in [1, 4096], --batches in [1, 100000], --warmup in [0, "
        "1000], --rounds in [1, 100]");
  }
  for (const std::string& s : o.systems) {
    if (s != "dlbench" && s != "dlbench-full-decode" && s != "dlbench-gpu" && s != "pytorch" &&
        s != "dali" && s != "dali-gpu") {
      throw InvalidArgument(fmt::format(
          "--systems: dlbench, dlbench-full-decode, dlbench-gpu, pytorch, dali or dali-gpu, not "
          "'{}'",
          s));
    }
  }
}

// dlbench's loader for a round at `threads` threads (its seed: the round).
ImageLoaderOptions loader_options(const BenchInputOptions& o, int64_t threads, int64_t round) {
  ImageLoaderOptions lo;
  lo.batch = o.batch;
  lo.image_size = o.image_size;
  lo.threads = threads;
  lo.prefetch = std::max<int64_t>(2, threads);
  lo.seed = static_cast<uint64_t>(round);
  return lo;
}

// Images/s of `next_batch` over `o.batches` batches after `o.warmup`; `settle` runs after each
// phase (a device's queued work waited for) and inside the timed one.
double images_per_s(const BenchInputOptions& o, const std::function<void()>& next_batch,
                    const std::function<void()>& settle) {
  for (int64_t i = 0; i < o.warmup; ++i) next_batch();
  settle();
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < o.batches; ++i) next_batch();
  settle();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(o.batch * o.batches) / s;
}

// dlbench's loader at `threads` threads making decoded batches.
double dlbench_rate(const BenchInputOptions& o, const ImageFolderIndex& index, int64_t threads,
                    int64_t round, bool dct_scaling) {
  ImageLoaderOptions lo = loader_options(o, threads, round);
  lo.dct_scaling = dct_scaling;
  ImageLoader loader(index.samples, lo);
  return images_per_s(
      o, [&] { loader.next(); }, [] {});
}

// The GPU's decoder (--decode=gpu) fed by dlbench's loader at `threads` threads, which only read
// files and draw crops: batches decoded into a device tensor (f32, NCHW), the device's work
// waited for at both ends of the timed batches.
double dlbench_gpu_rate(const BenchInputOptions& o, const ImageFolderIndex& index, int64_t threads,
                        int64_t round, Backend& gpu, ImageDecoder& decoder) {
  ImageLoaderOptions lo = loader_options(o, threads, round);
  lo.encoded = true;
  ImageLoader loader(index.samples, lo);
  Tensor images = gpu.empty({o.batch, 3, o.image_size, o.image_size}, DType::kF32,
                            MemCategory::kActivations, "decoded images");
  const ImageNormalization norm{kImageNetMean, kImageNetStd};
  const auto decode = [&] {
    const ImageLoader::Batch& b = loader.next();
    const Backend::CopyMarks m =
        decoder.decode(encoded_images(b.encoded), norm, images, gpu.clock().mark());
    gpu.wait_for_input(m.end);
  };
  return images_per_s(o, decode, [&] { gpu.synchronize(); });
}

// A peer's input pipeline at `workers` workers or threads (input_peer_argv), its printed rate.
double peer_rate(const BenchInputOptions& o, const std::string& system, int64_t workers,
                 const std::string& log) {
  std::vector<std::string> argv = input_peer_argv(system);
  for (const std::string& a :
       {"--root=" + o.data_path + "/train", "--workers=" + std::to_string(workers),
        "--batch=" + std::to_string(o.batch), "--size=" + std::to_string(o.image_size),
        "--batches=" + std::to_string(o.batches), "--warmup=" + std::to_string(o.warmup)}) {
    argv.push_back(a);
  }
  std::filesystem::remove(log);
  const ProcessResult r = run_process({argv, {}}, 3600, log, [](double) {});
  const std::string out = tail_of_file(log, 4096);
  const size_t at = out.rfind("{\"images_per_s\"");
  if (r.exit_code != 0 || at == std::string::npos) {
    throw Error(ErrorKind::kIo,
                fmt::format("the {} input peer failed (exit {}): {}", system, r.exit_code,
                            out.substr(out.size() > 300 ? out.size() - 300 : 0)));
  }
  return nlohmann::json::parse(out.substr(at, out.find('\n', at) - at))["images_per_s"]
      .get<double>();
}

nlohmann::json summary_of(
    const std::map<std::pair<std::string, int64_t>, std::vector<double>>& rates) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [key, v] : rates) {
    rows.push_back({{"system", key.first},
                    {"threads", key.second},
                    {"median_img_s", percentile(v, 50)},
                    {"min_img_s", *std::min_element(v.begin(), v.end())},
                    {"max_img_s", *std::max_element(v.begin(), v.end())},
                    {"rounds", v}});
  }
  return rows;
}

void print_summary(const nlohmann::json& rows, const BenchInputOptions& o) {
  fmt::print("# input pipeline, {} px, batch {}, {} batches a round, medians of {} rounds\n",
             o.image_size, o.batch, o.batches, o.rounds);
  fmt::print("# {:>19} {:>8} {:>12} {:>12} {:>12}\n", "system", "threads", "img/s", "min", "max");
  for (const auto& r : rows) {
    fmt::print("  {:>19} {:>8} {:>12.1f} {:>12.1f} {:>12.1f}\n", r["system"].get<std::string>(),
               r["threads"].get<int64_t>(), r["median_img_s"].get<double>(),
               r["min_img_s"].get<double>(), r["max_img_s"].get<double>());
  }
}

}  // namespace

int bench_input_command(const BenchInputOptions& o) {
  check(o);
  const ImageFolderIndex index = scan_image_folder(o.data_path + "/train");
  std::map<std::pair<std::string, int64_t>, std::vector<double>> rates;
  const std::string log =
      (std::filesystem::temp_directory_path() / fmt::format("dlbench-input-peer-{}.log", getpid()))
          .string();
  // dlbench-gpu: the first CUDA device and its decoder, made once.
  std::unique_ptr<Backend> gpu;
  std::unique_ptr<ImageDecoder> decoder;
  if (std::count(o.systems.begin(), o.systems.end(), "dlbench-gpu") > 0) {
    try {
      gpu = make_backend(BackendKind::kCuda, {});
      decoder = make_image_decoder(*gpu);
    } catch (const Error& e) {
      throw Error(e.kind(), fmt::format("--systems=dlbench-gpu decodes on a GPU: {}", e.what()));
    }
  }
  // Round by round, every system and thread count in turn: a drift of the host falls on all.
  for (int64_t round = 0; round < o.rounds; ++round) {
    for (int64_t threads : o.threads) {
      for (const std::string& system : o.systems) {
        double rate = 0;
        if (system == "pytorch" || system == "dali" || system == "dali-gpu") {
          rate = peer_rate(o, system, threads, log);
        } else if (system == "dlbench-gpu") {
          rate = dlbench_gpu_rate(o, index, threads, round, *gpu, *decoder);
        } else {
          rate = dlbench_rate(o, index, threads, round, system == "dlbench");
        }
        rates[{system, threads}].push_back(rate);
      }
    }
  }
  std::filesystem::remove(log);
  const nlohmann::json rows = summary_of(rates);
  print_summary(rows, o);
  if (!o.json_path.empty()) {
    write_json_atomically(o.json_path, {{"schema_version", kResultSchemaVersion},
                                        {"kind", "bench_input"},
                                        {"data_path", o.data_path},
                                        {"images_in_folder", index.samples.size()},
                                        {"image_size", o.image_size},
                                        {"batch", o.batch},
                                        {"batches", o.batches},
                                        {"rounds", o.rounds},
                                        {"rows", rows}});
  }
  return 0;
}

}  // namespace dlb
