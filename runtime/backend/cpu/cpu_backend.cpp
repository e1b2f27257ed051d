#include "runtime/backend/cpu/cpu_backend.h"

#include <cblas.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "runtime/backend/cpu/conv_onednn.h"
#include "runtime/backend/cpu/f32_views.h"
#include "runtime/backend/cpu/isa.h"
#include "runtime/backend/cpu/onednn_engine.h"
#include "runtime/backend/cpu/parallel.h"
#include "runtime/backend/cpu/pointwise_loops.h"
#include "runtime/core/error.h"
#include "runtime/core/half.h"
#include "runtime/core/layout_order.h"

namespace dlb {

CpuBackend::CpuBackend(const BackendOptions& options)
    : Backend(make_allocator(make_host_memory_resource(), options)),
      conv_algo_(options.conv_algo),
      workspace_limit_(options.workspace_limit) {
  if (restricted_class(conv_algo_)) {
    throw InvalidArgument(fmt::format(
        "--conv-algo={} names a class of cuDNN engines (the cuda backend's); the cpu backend "
        "takes heuristic, autotune, im2col, onednn, winograd, auto or matmul",
        conv_algo_choice_name(conv_algo_)));
  }
}

// Every op computes in f32 (no TF32: products are strict). Tensors may hold f32, f16 or bf16:
// 16-bit ones are widened to f32 for the op and rounded back on store (f32_views.h), so fp16
// math means 16-bit storage here. bf16 convolutions and matrix products multiply bf16 natively
// where oneDNN can (conv.cpp, matmul.cpp), accumulating in f32.
namespace {

// An f32 tensor in kOIhw16i16o rounded into a 16-bit one in kOIhw8i16o2i, by whole blocks.
void narrow_into_pairs(const Tensor& src, Tensor& dst) {
  constexpr int64_t kBlock = kWeightBlock * kWeightBlock;
  with_stored_float(dst.dtype(), "cast", [&](auto t) {
    using T = decltype(t);
    const auto narrow = pointwise_loops<T>(host_cpu_isa()).narrow_into_pairs;
    const float* from = src.data<float>();
    T* to = dst.data<T>();
    parallel_blocks(src.numel() / kBlock, kParallelElements / kBlock,
                    [=](int64_t begin, int64_t end) {
                      narrow(from + begin * kBlock, to + begin * kBlock, end - begin);
                    });
  });
}

}  // namespace

bool CpuBackend::supports(Op, const OpTypes& t) const {
  const auto stored = [](DType d) { return d == DType::kF32 || is_16bit(d); };
  return t.math != Precision::kTf32 && stored(t.data) && stored(t.params);
}

std::map<std::string, std::string> CpuBackend::environment() const {
  return {{"device", "cpu"},
          {"cpu_threads", std::to_string(std::thread::hardware_concurrency())},
          {"blas", openblas_get_config()},
          {"onednn", onednn_version()},
          {"conv_algo", std::string(conv_algo_choice_name(conv_algo_))},
          {"cpu_loops", cpu_isa_name(host_cpu_isa())}};
}

void check_f32_data(const Tensor& t, std::string_view what) {
  if (!t.defined()) throw InvalidArgument(fmt::format("{}: tensor is not allocated", what));
  if (t.dtype() != DType::kF32) {
    throw Unsupported(
        fmt::format("the cpu backend computes in f32 only; {} is {}", what, dtype_name(t.dtype())));
  }
}

void check_f32(const Tensor& t, std::string_view what) {
  check_f32_data(t, what);
  if (t.layout() != Layout::kNCHW) {
    throw Unsupported(
        fmt::format("{} is {}: this cpu op reads NCHW only", what, layout_name(t.layout())));
  }
}

bool one_float_type(std::initializer_list<const Tensor*> tensors, std::string_view what) {
  const DType first = (*tensors.begin())->dtype();
  bool one = first == DType::kF32 || is_16bit(first);
  for (const Tensor* t : tensors) {
    if (!t->defined()) throw InvalidArgument(fmt::format("{}: tensor is not allocated", what));
    one = one && t->dtype() == first;
  }
  return one;
}

bool one_layout(std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors) {
    if (t->layout() != (*tensors.begin())->layout()) return false;
  }
  return true;
}

bool stored_as_one(std::initializer_list<const Tensor*> tensors, std::string_view what) {
  return one_float_type(tensors, what) && one_layout(tensors);
}

void check_same_shape(const Tensor& a, const Tensor& b, std::string_view what) {
  if (a.shape() != b.shape()) {
    throw InvalidArgument(
        fmt::format("{}: shapes differ ({} vs {})", what, a.shape().str(), b.shape().str()));
  }
}

// An empty tensor copies nothing (its host side may be a null pointer: memcpy may not take one).
void CpuBackend::copy_from_host(const void* src, Tensor& dst) {
  if (dst.bytes() == 0) return;
  std::memcpy(dst.raw(), src, dst.bytes());
}

void CpuBackend::copy_to_host(const Tensor& src, void* dst) {
  if (src.bytes() == 0) return;
  std::memcpy(dst, src.raw(), src.bytes());
}

void CpuBackend::copy(const Tensor& src, Tensor& dst) {
  if (src.bytes() != dst.bytes()) {
    throw InvalidArgument(fmt::format("copy: {} bytes into {} bytes", src.bytes(), dst.bytes()));
  }
  std::memmove(dst.raw(), src.raw(), src.bytes());
}

// Element for element where both store their elements in one order. An f32 master in
// kOIhw16i16o into its 16-bit compute copy in pairs (conv_weight_copy_layout: at set-up and
// after a load) block by block, in place; one type in another order moved bit for bit, with no
// allocation; any other pair of orders through f32 copies.
void CpuBackend::cast(const Tensor& src, Tensor& dst) {
  if (src.layout() == dst.layout() || src.shape().rank() != 4) return convert(src, dst);
  check_same_shape(src, dst, "cast");
  if (src.dtype() == dst.dtype()) {
    return relayout_elements(src.shape(), dtype_size(src.dtype()), src.layout(), src.raw(),
                             dst.layout(), dst.raw());
  }
  if (src.dtype() == DType::kF32 && src.layout() == Layout::kOIhw16i16o &&
      dst.layout() == Layout::kOIhw8i16o2i && is_16bit(dst.dtype())) {
    return narrow_into_pairs(src, dst);
  }
  Tensor wide = empty(src.shape(), DType::kF32, MemCategory::kWorkspace, "cast", src.layout());
  Tensor moved = empty(src.shape(), DType::kF32, MemCategory::kWorkspace, "cast", dst.layout());
  convert(src, wide);
  relayout_floats(src.shape(), src.layout(), wide.data<float>(), dst.layout(), moved.data<float>());
  convert(moved, dst);
}

bool CpuBackend::blocks_conv_weights(const OpTypes&) const {
  return conv_algo_ != ConvAlgoChoice::kIm2col && cpu_blocks_channels_by_16();
}

Layout CpuBackend::activation_layout(const OpTypes& types) const {
  const bool amx = native_bf16(types) && cpu_has_amx();
  return amx && conv_algo_ != ConvAlgoChoice::kIm2col ? Layout::kNHWC : Layout::kNCHW;
}

// oneDNN's bf16 convolutions read weights with pairs of input channels side by side (its
// OIhw8i16o2i, as AVX-512 BF16's dot products take them): a native bf16 run's compute copies of
// blocked weights are kept so, and its forward passes reorder none. The update writes them so
// (sgd_update_with_copy), and cast.
Layout CpuBackend::conv_weight_copy_layout(const OpTypes& types, Layout stored) const {
  return stored == Layout::kOIhw16i16o && native_bf16(types) ? Layout::kOIhw8i16o2i : stored;
}

void CpuBackend::fill(Tensor& t, float value) {
  if (is_16bit(t.dtype())) {  // the stored pattern, without an f32 copy of the tensor
    uint16_t bits = 0;
    floats_to_dtype(&value, 1, t.dtype(), &bits);
    std::fill(t.data<uint16_t>(), t.data<uint16_t>() + t.numel(), bits);
    return;
  }
  check_f32_data(t, "fill");  // any layout: every element
  float* p = t.data<float>();
  std::fill(p, p + t.numel(), value);
}

}  // namespace dlb
