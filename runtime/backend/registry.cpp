// The backend registry: the one place that knows which backends this build has.
#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "runtime/backend/backend.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/device_queue.h"
#include "runtime/backend/image_decoder.h"
#include "runtime/core/error.h"
#if DLB_HAVE_CUDA
#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/backend/cuda/cuda_memory.h"
#include "runtime/backend/cuda/device.h"
#include "runtime/backend/cuda/device_queue.h"
#endif
#if defined(DLB_HAVE_NVJPEG)
#include "runtime/backend/cuda/jpeg_decoder.h"
#endif

namespace dlb {

bool backend_compiled(BackendKind kind) {
  if (kind == BackendKind::kCpu) return true;
  return DLB_HAVE_CUDA != 0;
}

std::vector<ConvAlgoChoice> named_conv_algorithms(BackendKind kind) {
  if (kind == BackendKind::kCpu) {
    return {ConvAlgoChoice::kIm2col, ConvAlgoChoice::kOnednn, ConvAlgoChoice::kWinograd,
            ConvAlgoChoice::kMatmul};
  }
  return {ConvAlgoChoice::kHeuristic, ConvAlgoChoice::kClassTensorCore, ConvAlgoChoice::kClassOther,
          ConvAlgoChoice::kClassWinograd, ConvAlgoChoice::kClassFft};
}

std::vector<ConvAlgoChoice> parse_named_conv_algorithms(BackendKind kind,
                                                        const std::vector<std::string>& names,
                                                        std::string_view flag) {
  const std::vector<ConvAlgoChoice> named = named_conv_algorithms(kind);
  if (names.empty() || names == std::vector<std::string>{"all"}) return named;
  std::string known;
  for (ConvAlgoChoice c : named)
    known += (known.empty() ? "" : ", ") + std::string(conv_algo_choice_name(c));
  std::vector<ConvAlgoChoice> out;
  for (const std::string& name : names) {
    const std::optional<ConvAlgoChoice> c = parse_conv_algo_choice(name);
    if (!c || std::find(named.begin(), named.end(), *c) == named.end()) {
      throw InvalidArgument(fmt::format("{}: the {} backend has no algorithm '{}' (it has: {})",
                                        flag, backend_kind_name(kind), name, known));
    }
    out.push_back(*c);
  }
  return out;
}

std::unique_ptr<Backend> make_backend(BackendKind kind, const BackendOptions& options) {
  if (kind == BackendKind::kCpu) return std::make_unique<CpuBackend>(options);
#if DLB_HAVE_CUDA
  return cuda::make_cuda_backend(options);
#else
  throw Unsupported("--backend=cuda: this build has no CUDA backend (no nvcc at configure time)");
#endif
}

int visible_device_count() {
#if DLB_HAVE_CUDA
  return static_cast<int>(cuda::query_devices().size());
#else
  return 0;
#endif
}

std::unique_ptr<DeviceQueue> make_device_queue(int device) {
#if DLB_HAVE_CUDA
  return cuda::make_cuda_device_queue(device);
#else
  (void)device;
  throw Unsupported("a device queue: this build has no CUDA (no nvcc at configure time)");
#endif
}

std::unique_ptr<ImageDecoder> make_image_decoder(Backend& backend) {
  if (!backend.stream().on_device()) {
    throw Unsupported(fmt::format(
        "--decode=gpu: the {} backend has no device decoder (its loader threads decode)",
        backend.name()));
  }
#if defined(DLB_HAVE_NVJPEG)
  return cuda::make_nvjpeg_decoder(backend);
#else
  throw Unsupported(
      "--decode=gpu: this build has no nvJPEG (scripts/install-deps.sh installs it; then build "
      "again)");
#endif
}

std::unique_ptr<DeviceMemory> make_device_memory(BackendKind kind, const BackendOptions& options) {
  if (kind == BackendKind::kCpu) return std::make_unique<CpuBackend>(options);
#if DLB_HAVE_CUDA
  return cuda::make_cuda_device_memory(options);
#else
  throw Unsupported("cuda: this build has no CUDA backend (no nvcc at configure time)");
#endif
}

std::map<std::string, std::string> accelerator_versions() {
  std::map<std::string, std::string> v{{"driver", "none"}, {"cuda", "none"}};
#if DLB_HAVE_CUDA
  auto dotted = [](int x) { return fmt::format("{}.{}", x / 1000, (x % 1000) / 10); };
  if (const int d = cuda::driver_version()) v["driver"] = dotted(d);
  v["cuda"] = dotted(cuda::runtime_version());
#endif
  return v;
}

bool gpu_available() {
#if DLB_HAVE_CUDA
  return !cuda::query_devices().empty();
#else
  return false;
#endif
}

std::vector<std::string> list_devices() {
  std::vector<std::string> out{
      fmt::format("cpu: {} hardware threads", std::thread::hardware_concurrency())};
#if DLB_HAVE_CUDA
  const auto devices = cuda::query_devices();
  if (devices.empty()) out.push_back("cuda: no device visible (no GPU or no driver)");
  for (const auto& d : devices) {
    out.push_back(fmt::format("cuda:{} {} (sm_{}{}, {:.1f} GiB, {} SMs)", d.index, d.name,
                              d.sm_major, d.sm_minor, d.total_memory / (1024.0 * 1024 * 1024),
                              d.multiprocessors));
  }
#else
  out.push_back("cuda: not compiled into this build");
#endif
  return out;
}

}  // namespace dlb
