#include "runtime/check/operands.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "runtime/backend/cpu/parallel.h"
#include "runtime/core/counter_hash.h"
#include "runtime/core/error.h"
#include "runtime/core/half.h"
#include "runtime/core/hash.h"
#include "runtime/core/layout_order.h"
#include "runtime/core/rng.h"

namespace dlb {
namespace {

// Stored otherwise than in logical order.
bool reordered(const Tensor& t) { return t.layout() != Layout::kNCHW && t.shape().rank() == 4; }

}  // namespace

void round_to(HostArray& values, DType dtype) {
  for (double& v : values.v) v = stored_value(static_cast<float>(v), dtype);
}

Operands::Operands(Backend& backend, uint64_t seed, const std::string& instance,
                   OperandCache& cache)
    : backend_(backend), seed_(seed), instance_(instance), cache_(cache) {}

uint64_t Operands::stream(const std::string& name) const {
  const uint64_t h = fnv1a(instance_.data(), instance_.size());
  return fnv1a(name.data(), name.size(), h) ^ (seed_ * 0x9E3779B97F4A7C15ull);
}

HostArray Operands::draw(const std::string& name, const Shape& shape, DType dtype, double mean,
                         double stddev) const {
  const double half_width = stddev * std::sqrt(3.0);
  return uniform(name, shape, dtype, mean - half_width, mean + half_width);
}

const std::vector<float>& Operands::drawn(const std::string& name, const Shape& shape, double lo,
                                          double hi) const {
  const std::string key = fmt::format("{} {} [{}, {})", name, shape.str(), lo, hi);
  std::vector<float>& drawn = cache_.drawn[key];
  const int64_t n = shape.numel();
  if (drawn.empty() && n > 0) {
    drawn.resize(static_cast<size_t>(n));
    const uint64_t s = stream(name);
    float* d = drawn.data();
    parallel_blocks(n, kParallelElements, [=](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        d[i] = static_cast<float>(lo + (hi - lo) * counter_uniform(s, static_cast<uint64_t>(i)));
      }
    });
  }
  return drawn;
}

namespace {
// Elements [begin, begin + count) of `drawn`, rounded to `dtype`, into `out`.
void rounded(const std::vector<float>& drawn, DType dtype, int64_t begin, int64_t count,
             double* out) {
  const float* d = drawn.data() + begin;
  parallel_blocks(count, kParallelElements, [=](int64_t b, int64_t e) {
    switch (dtype) {
      case DType::kBF16:
        for (int64_t i = b; i < e; ++i) out[i] = bf16_to_float(float_to_bf16(d[i]));
        return;
      case DType::kF16:
        for (int64_t i = b; i < e; ++i) out[i] = f16_to_float(float_to_f16(d[i]));
        return;
      default:
        for (int64_t i = b; i < e; ++i) out[i] = d[i];
    }
  });
}
constexpr int64_t kSlice = int64_t{1} << 22;  // elements uploaded at a time
}  // namespace

HostArray Operands::uniform(const std::string& name, const Shape& shape, DType dtype, double lo,
                            double hi) const {
  HostArray a(shape);
  rounded(drawn(name, shape, lo, hi), dtype, 0, a.numel(), a.v.data());
  return a;
}

HostArray Operands::draw_slice(const std::string& name, const Shape& shape, DType dtype,
                               double mean, double stddev, int64_t begin, int64_t count) const {
  const double half_width = stddev * std::sqrt(3.0);
  HostArray a(Shape{count});
  rounded(drawn(name, shape, mean - half_width, mean + half_width), dtype, begin, count,
          a.v.data());
  return a;
}

Tensor Operands::upload_drawn(const std::string& name, const Shape& shape, DType dtype, double mean,
                              double stddev) {
  Tensor t = backend_.empty(shape, dtype, MemCategory::kActivations, "checked operand");
  const int64_t n = shape.numel();
  for (int64_t begin = 0; begin < n; begin += kSlice) {
    const int64_t count = std::min(kSlice, n - begin);
    Tensor part = t.slice_flat(begin, count);
    const HostArray values = draw_slice(name, shape, dtype, mean, stddev, begin, count);
    upload_into(values, part);
  }
  return t;
}

std::vector<int64_t> Operands::labels(const std::string& name, int64_t n, int64_t classes) const {
  Rng rng(stream(name));
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int64_t& l : out) l = rng.below(classes);
  return out;
}

Tensor Operands::upload(const HostArray& values, DType dtype, Layout layout) {
  Tensor t =
      backend_.empty(values.shape, dtype, MemCategory::kActivations, "checked operand", layout);
  upload_into(values, t);
  return t;
}

void Operands::upload_into(const HostArray& values, Tensor& t) {
  if (values.numel() != t.numel()) {
    throw InvalidArgument(fmt::format("{} values for a tensor of {}", values.numel(), t.numel()));
  }
  std::vector<float> f(values.v.size());
  for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(values.v[i]);
  if (reordered(t)) {  // NHWC, or a weight's oneDNN blocks
    std::vector<float> logical = std::move(f);
    f.resize(logical.size());
    relayout_floats(values.shape, Layout::kNCHW, logical.data(), t.layout(), f.data());
  }
  if (t.dtype() == DType::kF32) {
    backend_.copy_from_host(f.data(), t);
    return;
  }
  std::vector<uint8_t> bytes(t.bytes());
  floats_to_dtype(f.data(), static_cast<int64_t>(f.size()), t.dtype(), bytes.data());
  backend_.copy_from_host(bytes.data(), t);
}

Tensor Operands::upload_labels(const std::vector<int64_t>& labels) {
  Tensor t = backend_.empty(Shape{static_cast<int64_t>(labels.size())}, DType::kI64,
                            MemCategory::kData, "checked labels");
  backend_.copy_from_host(labels.data(), t);
  return t;
}

Tensor Operands::poisoned(const Shape& shape, DType dtype, Layout layout) {
  Tensor t = backend_.empty(shape, dtype, MemCategory::kActivations, "checked output", layout);
  backend_.fill(t, std::numeric_limits<float>::quiet_NaN());
  return t;
}

HostArray Operands::download_slice(const Tensor& t, int64_t begin, int64_t count) const {
  if (reordered(t)) {  // a flat slice of it would be in storage order, not logical
    throw InvalidArgument("the checker reads slices of NCHW tensors only");
  }
  HostArray a = download(t.slice_flat(begin, count));
  a.shape = Shape{count};
  return a;
}

HostArray Operands::download(const Tensor& t) const {
  if (t.dtype() == DType::kI64) {
    throw InvalidArgument("the checker reads back floating-point tensors only");
  }
  std::vector<float> f(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::kF32) {
    backend_.copy_to_host(t, f.data());
  } else {
    std::vector<uint8_t> bytes(t.bytes());
    backend_.copy_to_host(t, bytes.data());
    dtype_to_floats(bytes.data(), t.numel(), t.dtype(), f.data());
  }
  HostArray a(t.shape());
  if (reordered(t)) {  // NHWC, or a weight's oneDNN blocks: into logical order
    std::vector<float> stored = std::move(f);
    f.resize(stored.size());
    relayout_floats(t.shape(), t.layout(), stored.data(), Layout::kNCHW, f.data());
  }
  double* out = a.v.data();
  const float* in = f.data();
  parallel_blocks(a.numel(), kParallelElements, [=](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = in[i];
  });
  return a;
}

}  // namespace dlb
