// The CUDA backend's construction, environment, copies, streams and capture, and what the op
// families share (cuda_backend_impl.h lists the families' files).
#include "runtime/backend/cuda/cuda_backend.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <fmt/format.h>

#include "runtime/backend/cuda/cuda_backend_impl.h"
#include "runtime/backend/cuda/cuda_check.h"
#include "runtime/backend/cuda/cudnn_version.h"
#include "runtime/backend/cuda/library_check.h"
#include "runtime/backend/cuda/memory.h"
#include "runtime/backend/cuda/stream_capture.h"

static_assert(CUDNN_MAJOR >= 9, "the CUDA backend uses cuDNN 9's graph API and status codes");

namespace dlb::cuda {

LibraryHandles::LibraryHandles(cudaStream_t stream) {
  DLB_CUDNN_CHECK(cudnnCreate(&cudnn));
  DLB_CUDNN_CHECK(cudnnSetStream(cudnn, stream));
  DLB_CUBLAS_CHECK(cublasLtCreate(&lt));
}
LibraryHandles::~LibraryHandles() {
  if (lt) cublasLtDestroy(lt);
  if (cudnn) cudnnDestroy(cudnn);
}

void check_f32(const Tensor& t, std::string_view what) {
  if (t.dtype() != DType::kF32) {
    throw InvalidArgument(fmt::format("cuda: {} is {}, not f32", what, dtype_name(t.dtype())));
  }
}
void check_dtype(const Tensor& t, DType dtype, std::string_view what) {
  if (t.dtype() != dtype) {
    throw InvalidArgument(
        fmt::format("cuda: {} is {}, not {}", what, dtype_name(t.dtype()), dtype_name(dtype)));
  }
}
void check_numel(const Tensor& t, int64_t n, std::string_view what) {
  if (t.numel() != n) {
    throw InvalidArgument(fmt::format("cuda: {} has {} elements, expected {}", what, t.numel(), n));
  }
}

ToChannelsLast relayout(const Tensor& from, const Tensor& to, std::string_view what) {
  if (from.layout() == to.layout()) return {};
  if (from.layout() != Layout::kNCHW || from.shape().rank() != 4 || to.shape() != from.shape()) {
    throw Unsupported(fmt::format("cuda {}: from a {} {} into a {} {}", what,
                                  layout_name(from.layout()), from.shape().str(),
                                  layout_name(to.layout()), to.shape().str()));
  }
  return {from.dim(1), from.dim(2) * from.dim(3)};
}

CudaBackend::CudaBackend(const DeviceInfo& device, const BackendOptions& options)
    // Swapped-out activations wait in pinned host memory, which copy engines reach directly (a
    // parameter server's copies, the host's to compute on, stay ordinary memory: Allocator).
    : Backend(make_allocator(make_caching_device_memory_resource(device.index), options,
                             make_pinned_host_memory_resource())),
      device_(device),
      options_(options) {
  if (options.conv_algo != ConvAlgoChoice::kHeuristic &&
      options.conv_algo != ConvAlgoChoice::kAutotune && !restricted_class(options.conv_algo)) {
    throw InvalidArgument(fmt::format(
        "--conv-algo={} is a cpu backend algorithm; the cuda backend chooses cuDNN engines by "
        "heuristic, autotune or class:NAME",
        conv_algo_choice_name(options.conv_algo)));
  }
  if (const std::string why = cudnn_incompatibility(cudnn_version_from(cudnnGetVersion()),
                                                    cudnn_version_from(CUDNN_VERSION));
      !why.empty()) {
    throw Unsupported("--backend=cuda: " + why);
  }
  DLB_CUDA_CHECK(cudaSetDevice(device_.index));
  stream_ = std::make_unique<Stream>();
  clock_ = std::make_unique<EventClock>(stream_->get());
  inputs_ = std::make_unique<InputCopies>(stream_->get());
  swaps_ = std::make_unique<SwapCopies>(stream_->get());
  handles_ = std::make_shared<LibraryHandles>(stream_->get());
  cudnn_ = handles_->cudnn;
  lt_ = handles_->lt;
}

CudaBackend::~CudaBackend() {
  cudaStreamSynchronize(stream_->get());  // no throwing in a destructor
  // Plans first, while the handles they were made with still exist.
  matmuls_.clear();
  bn_by_shape_.clear();
  conv_graphs_.clear();
}

std::map<std::string, std::string> CudaBackend::environment() const {
  return {{"device", device_.name},
          {"device_index", std::to_string(device_.index)},
          {"compute_capability", fmt::format("{}.{}", device_.sm_major, device_.sm_minor)},
          // The machine's cuDNN (PyTorch's pip package's, on a GPU machine, may come first) and the
          // headers dlbench was built with: an older minor release was refused at start-up.
          {"cudnn", cudnn_version_from(cudnnGetVersion()).str()},
          {"cudnn_built_with", cudnn_version_from(CUDNN_VERSION).str()},
          {"cublaslt", std::to_string(cublasLtGetVersion())},
          {"conv_algo", std::string(conv_algo_choice_name(options_.conv_algo))},
          {"activation_layout", "NCHW for fp32 and tf32, NHWC (channels last) for fp16 and bf16"}};
}

bool CudaBackend::supports(Op, const OpTypes& t) const {
  const auto stored = [](DType d) {
    return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16;
  };
  return stored(t.data) && stored(t.params) &&
         (t.math != Precision::kTf32 || t.data == DType::kF32);
}

void CudaBackend::copy_from_host(const void* src, Tensor& dst) {
  if (dst.bytes() == 0) return;
  staging_.copy(src, dst.raw(), dst.bytes(), stream_->get());
}

Backend::CopyMarks CudaBackend::copy_in(const void* src, Tensor& dst, const Mark& free) {
  if (dst.bytes() == 0) return {clock_->mark(), clock_->mark()};
  // Without a mark of the compute stream (none yet, or a host clock's), the copy waits for
  // everything queued on it so far: `dst` may be memory that queued work still uses (the
  // caching allocator hands freed blocks back at once, and knows no streams but this one).
  const Mark queued = free.device ? free : clock_->mark();
  auto* after = static_cast<cudaEvent_t>(queued.device.get());
  const double now = clock_->now_us();
  auto [start, end] = inputs_->copy(src, dst.raw(), dst.bytes(), after);
  return {Mark{now, std::move(start)}, Mark{now, std::move(end)}};
}

void CudaBackend::wait_for_input(const Mark& copied) {
  if (copied.device) inputs_->wait(static_cast<cudaEvent_t>(copied.device.get()));
}

Backend::CopyMarks CudaBackend::swap_copy(const Tensor& src, Tensor& dst) {
  if (src.bytes() != dst.bytes()) {
    throw InvalidArgument(
        fmt::format("swap copy: {} bytes into {} bytes", src.bytes(), dst.bytes()));
  }
  if (src.bytes() == 0) return {clock_->mark(), clock_->mark()};
  const double now = clock_->now_us();
  auto [start, end] = swaps_->copy(src.raw(), dst.raw(), src.bytes());
  return {Mark{now, std::move(start)}, Mark{now, std::move(end)}};
}

void CudaBackend::wait_for_copy(const Mark& copied) {
  if (copied.device) swaps_->wait(static_cast<cudaEvent_t>(copied.device.get()));
}

void CudaBackend::copy_to_host(const Tensor& src, void* dst) {
  if (src.bytes() == 0) return;
  DLB_CUDA_CHECK(
      cudaMemcpyAsync(dst, src.raw(), src.bytes(), cudaMemcpyDeviceToHost, stream_->get()));
  stream_->synchronize();  // `dst` is pageable and read as soon as this returns
}

void CudaBackend::copy(const Tensor& src, Tensor& dst) {
  if (src.bytes() != dst.bytes()) {
    throw InvalidArgument(fmt::format("copy: {} bytes into {} bytes", src.bytes(), dst.bytes()));
  }
  if (src.bytes() == 0) return;
  DLB_CUDA_CHECK(
      cudaMemcpyAsync(dst.raw(), src.raw(), src.bytes(), cudaMemcpyDeviceToDevice, stream_->get()));
}

Layout CudaBackend::activation_layout(const OpTypes& types) const {
  return types.data == DType::kF16 || types.data == DType::kBF16 ? Layout::kNHWC : Layout::kNCHW;
}

void CudaBackend::synchronize() {
  stream_->synchronize();
  swaps_->synchronize();
  inputs_->synchronize();
}

void CudaBackend::begin_capture() { begin_stream_capture(stream_->get()); }
std::unique_ptr<CapturedWork> CudaBackend::end_capture() {
  return end_stream_capture(stream_->get());
}
void CudaBackend::abandon_capture() noexcept { abandon_stream_capture(stream_->get()); }

Nchw CudaBackend::nchw(const Tensor& t) {
  return {t.dim(1), t.dim(2), t.dim(3), t.layout() == Layout::kNHWC};
}

ChannelRows CudaBackend::channel_rows(const Tensor& t) {
  const int64_t n = t.dim(0), c = t.dim(1);
  return {c, t.numel() / (n * c), t.layout() == Layout::kNHWC};
}

void CudaBackend::same(const Tensor& a, const Tensor& b, std::string_view what) {
  check_dtype(b, a.dtype(), what);
  if (a.layout() != b.layout()) {
    throw InvalidArgument(fmt::format("cuda {}: one tensor is {}, the other {}", what,
                                      layout_name(a.layout()), layout_name(b.layout())));
  }
  if (a.numel() != b.numel()) {
    throw InvalidArgument(
        fmt::format("cuda {}: {} and {} differ", what, a.shape().str(), b.shape().str()));
  }
}

int64_t* CudaBackend::step_counter(const Tensor* counter) {
  if (!counter) return nullptr;
  check_dtype(*counter, DType::kI64, "counter");
  check_numel(*counter, 1, "counter");
  return counter->data<int64_t>();
}

std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& options) {
  const auto devices = query_devices();
  if (devices.empty()) {
    throw InvalidArgument(
        "--backend=cuda: no CUDA device is visible on this machine (no GPU, or no driver); run "
        "on a GPU machine or use --backend=cpu");
  }
  return std::make_unique<CudaBackend>(devices[options.device % static_cast<int>(devices.size())],
                                       options);
}

}  // namespace dlb::cuda
