// The CPU's element-wise ops, batch norm and pooling read and write 16-bit data as stored: each
// element loaded into a float, the op's f32 arithmetic, one rounding on store. That must be the
// same bits as the op on f32 copies of the data, rounded back (what F32Views did before, and still
// does for tensors of mixed types): here every op, in bf16 and fp16, on values that include
// negatives, zeros of both signs, ties that round to even, a NaN and an infinity.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/core/half.h"
#include "runtime/core/rng.h"

namespace dlb {
namespace {

class StoredOps : public ::testing::TestWithParam<DType> {
 protected:
  // Values exact in the 16-bit type: random ones around zero, and the edge cases first.
  std::vector<float> values(int64_t n, uint64_t seed) const {
    Rng rng(seed);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = stored_value(rng.normal(0.f, 3.f), GetParam());
    const float edges[] = {0.f, -0.f, 1.f, -1.f, NAN, INFINITY, 0.5f, -2.5f};
    for (size_t i = 0; i < std::size(edges) && i < v.size(); ++i) v[i] = edges[i];
    return v;
  }
  Tensor tensor(const std::vector<float>& v, const Shape& s, DType t) {
    Tensor f = b.empty(s, DType::kF32, MemCategory::kActivations, "f32");
    b.copy_from_host(v.data(), f);
    if (t == DType::kF32) return f;
    Tensor out = b.empty(s, t, MemCategory::kActivations, "stored");
    b.cast(f, out);
    return out;
  }
  Tensor zeros(const Shape& s, DType t) {
    Tensor z = b.empty(s, t, MemCategory::kActivations, "result");
    b.fill(z, 0.f);
    return z;
  }
  // The bits of `t`'s elements as 16-bit storage holds them (an f32 tensor rounded to it).
  std::vector<uint16_t> bits(const Tensor& t) {
    std::vector<float> f(static_cast<size_t>(t.numel()));
    if (t.dtype() == DType::kF32) {
      b.copy_to_host(t, f.data());
    } else {
      std::vector<uint16_t> raw(f.size());
      b.copy_to_host(t, raw.data());
      return raw;
    }
    std::vector<uint16_t> out(f.size());
    floats_to_dtype(f.data(), t.numel(), GetParam(), out.data());
    return out;
  }
  CpuBackend b{BackendOptions{}};
};

// An op's output on the 16-bit tensors against the same op's on f32 ones of the same values,
// rounded: the same bits, element by element.
void expect_same_bits(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want,
                      const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], want[i]) << what << " element " << i;
  }
}

TEST_P(StoredOps, ReluAddAndAccumulateAreTheOpsOnF32CopiesRounded) {
  const DType t = GetParam();
  const Shape s{2, 3, 5, 7};
  const std::vector<float> x = values(s.numel(), 1), y = values(s.numel(), 2);
  std::vector<uint16_t> out[2][5];
  const DType both[] = {t, DType::kF32};
  for (int k = 0; k < 2; ++k) {
    const DType d = both[k];
    Tensor a = tensor(x, s, d), c = tensor(y, s, d), r = zeros(s, d), g = zeros(s, d);
    b.relu_forward(a, r);
    b.relu_backward(r, c, g);
    Tensor sum = zeros(s, d), acc = tensor(y, s, d), in_place = tensor(y, s, d);
    b.add(a, c, sum);
    b.accumulate(a, acc);
    b.relu_backward(r, in_place, in_place);  // dx may be dy
    out[k][0] = bits(r), out[k][1] = bits(g), out[k][2] = bits(sum), out[k][3] = bits(acc);
    out[k][4] = bits(in_place);
  }
  const char* names[] = {"relu", "relu backward", "add", "accumulate", "relu backward in place"};
  for (int i = 0; i < 5; ++i) expect_same_bits(out[0][i], out[1][i], names[i]);
  expect_same_bits(out[0][4], out[0][1], "relu backward in place, against apart");
}

TEST_P(StoredOps, BatchNormEachWayIsTheOpOnF32CopiesRounded) {
  const DType t = GetParam();
  const Shape s{4, 3, 5, 6}, c{3};
  std::vector<float> x = values(s.numel(), 3), dy = values(s.numel(), 4);
  x[4] = dy[4] = 0.25f;  // batch statistics stay finite: no NaN or infinity in the data here
  x[5] = dy[5] = -0.75f;
  const std::vector<float> gamma = {1.5f, -0.5f, 2.f}, beta = {0.25f, 0.f, -1.f};
  std::vector<uint16_t> out[2][4];
  const DType both[] = {t, DType::kF32};
  for (int k = 0; k < 2; ++k) {
    const DType d = both[k];
    for (int relu = 0; relu < 2; ++relu) {
      Tensor xs = tensor(x, s, d), dys = tensor(dy, s, d), y = zeros(s, d), dx = zeros(s, d);
      Tensor g = tensor(gamma, c, DType::kF32), be = tensor(beta, c, DType::kF32);
      Tensor rm = zeros(c, DType::kF32), rv = zeros(c, DType::kF32), sm = zeros(c, DType::kF32),
             si = zeros(c, DType::kF32), dg = zeros(c, DType::kF32), db = zeros(c, DType::kF32);
      if (relu) {
        b.batch_norm_relu_train(xs, g, be, rm, rv, sm, si, y, 0.1f, 1e-5f);
        b.batch_norm_relu_backward(xs, y, dys, g, sm, si, dx, dg, db);
      } else {
        b.batch_norm_train(xs, g, be, rm, rv, sm, si, y, 0.1f, 1e-5f);
        b.batch_norm_backward(xs, dys, g, sm, si, dx, dg, db);
      }
      out[k][2 * relu] = bits(y);
      out[k][2 * relu + 1] = bits(dx);
    }
  }
  const char* names[] = {"batch norm", "batch norm backward", "batch norm + relu",
                         "batch norm + relu backward"};
  for (int i = 0; i < 4; ++i) expect_same_bits(out[0][i], out[1][i], names[i]);
}

// Inference from running statistics, NaN and infinities in the data included.
TEST_P(StoredOps, BatchNormInferenceIsTheOpOnF32CopiesRounded) {
  const Shape s{4, 3, 5, 6}, c{3};
  const std::vector<float> x = values(s.numel(), 5);
  const std::vector<float> gamma = {1.5f, -0.5f, 2.f}, beta = {0.25f, 0.f, -1.f},
                           mean = {0.1f, -2.f, 0.f}, var = {1.f, 0.3f, 4.5f};
  std::vector<uint16_t> out[2];
  const DType both[] = {GetParam(), DType::kF32};
  for (int k = 0; k < 2; ++k) {
    Tensor xs = tensor(x, s, both[k]), y = zeros(s, both[k]);
    b.batch_norm_infer(xs, tensor(gamma, c, DType::kF32), tensor(beta, c, DType::kF32),
                       tensor(mean, c, DType::kF32), tensor(var, c, DType::kF32), y, 1e-5f);
    out[k] = bits(y);
  }
  expect_same_bits(out[0], out[1], "batch norm inference");
}

// Max and average pooling, forward and backward, with overlapping windows (the ResNet stem's
// 3x3, stride 2, padding 1) and with padding counted or not: NaN, infinities and ties in the data.
TEST_P(StoredOps, PoolingEachWayIsTheOpOnF32CopiesRounded) {
  const Shape s{2, 3, 9, 8}, o{2, 3, 5, 4};
  std::vector<float> x = values(s.numel(), 6);
  x[20] = x[21] = x[28] = 1000.f;  // a tie for a window's maximum: the first takes the gradient
  const std::vector<float> dy = values(o.numel(), 7);
  PoolDesc max;
  max.kernel_h = max.kernel_w = 3;
  max.stride_h = max.stride_w = 2;
  max.pad_h = max.pad_w = 1;
  PoolDesc avg = max, avg_unpadded = max;
  avg.mode = avg_unpadded.mode = PoolMode::kAvg;
  avg_unpadded.count_include_pad = false;
  const PoolDesc descs[] = {max, avg, avg_unpadded};
  // As stored in the 16-bit type; on f32 tensors; and with the output's gradient in f32 (mixed
  // types: the op on F32Views of them).
  std::vector<uint16_t> out[3][6];
  const DType t = GetParam();
  const DType data[] = {t, DType::kF32, t}, grads[] = {t, DType::kF32, DType::kF32};
  for (int k = 0; k < 3; ++k) {
    for (int m = 0; m < 3; ++m) {
      Tensor xs = tensor(x, s, data[k]), dys = tensor(dy, o, grads[k]);
      Tensor y = zeros(o, data[k]), dx = tensor(x, s, data[k]);  // dx overwritten
      b.pool_forward(descs[m], xs, y);
      b.pool_backward(descs[m], xs, y, dys, dx);
      out[k][2 * m] = bits(y);
      out[k][2 * m + 1] = bits(dx);
    }
  }
  const char* names[] = {"max pool",
                         "max pool backward",
                         "avg pool",
                         "avg pool backward",
                         "avg pool (padding not counted)",
                         "its backward"};
  for (int i = 0; i < 6; ++i) {
    expect_same_bits(out[0][i], out[1][i], names[i]);
    expect_same_bits(out[2][i], out[1][i], names[i]);  // mixed types, on F32Views
  }
}

INSTANTIATE_TEST_SUITE_P(SixteenBit, StoredOps, ::testing::Values(DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace dlb
