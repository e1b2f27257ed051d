#include "runtime/backend/cpu/cpu_backend.h"

#include <cblas.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "runtime/core/error.h"

namespace dlb {

CpuBackend::CpuBackend(const BackendOptions& options)
    : Backend(std::make_shared<Allocator>(make_host_memory_resource(), options.memory_budget)),
      workspace_limit_(options.workspace_limit) {}

// Strict f32 everywhere: no reduced-precision math and no 16-bit storage.
bool CpuBackend::supports(Op, const OpTypes& t) const {
  return t.math == Precision::kFp32 && t.data == DType::kF32 && t.params == DType::kF32;
}

std::map<std::string, std::string> CpuBackend::environment() const {
  return {{"device", "cpu"},
          {"cpu_threads", std::to_string(std::thread::hardware_concurrency())},
          {"blas", openblas_get_config()}};
}

void check_f32(const Tensor& t, std::string_view what) {
  if (!t.defined()) throw InvalidArgument(fmt::format("{}: tensor is not allocated", what));
  if (t.dtype() != DType::kF32) {
    throw Unsupported(
        fmt::format("the cpu backend computes in f32 only; {} is {}", what, dtype_name(t.dtype())));
  }
  if (t.layout() != Layout::kNCHW) {
    throw Unsupported(
        fmt::format("the cpu backend supports NCHW only; {} is {}", what, layout_name(t.layout())));
  }
}

void check_same_shape(const Tensor& a, const Tensor& b, std::string_view what) {
  if (a.shape() != b.shape()) {
    throw InvalidArgument(
        fmt::format("{}: shapes differ ({} vs {})", what, a.shape().str(), b.shape().str()));
  }
}

void CpuBackend::copy_from_host(const void* src, Tensor& dst) {
  std::memcpy(dst.raw(), src, dst.bytes());
}

void CpuBackend::copy_to_host(const Tensor& src, void* dst) {
  std::memcpy(dst, src.raw(), src.bytes());
}

void CpuBackend::copy(const Tensor& src, Tensor& dst) {
  if (src.bytes() != dst.bytes()) {
    throw InvalidArgument(fmt::format("copy: {} bytes into {} bytes", src.bytes(), dst.bytes()));
  }
  std::memmove(dst.raw(), src.raw(), src.bytes());
}

void CpuBackend::fill(Tensor& t, float value) {
  check_f32(t, "fill");
  float* p = t.data<float>();
  std::fill(p, p + t.numel(), value);
}

}  // namespace dlb
