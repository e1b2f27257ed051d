// Each CPU convolution algorithm (im2col + sgemm, and oneDNN) against a direct seven-loop
// convolution in double precision: forward, backward-data and backward-filter, exactly (up to
// float rounding), over resnet, vgg and alexnet layer shapes and edge cases.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/core/rng.h"

namespace dlb {
namespace {

struct Case {
  int64_t n, cin, h, w, cout, k, stride, pad, groups;
};
// "n2_c3x8x8_to4_k3_s1_p1_g1": readable in test names and failure messages.
std::string case_name(const Case& c) {
  return "n" + std::to_string(c.n) + "_c" + std::to_string(c.cin) + "x" + std::to_string(c.h) +
         "x" + std::to_string(c.w) + "_to" + std::to_string(c.cout) + "_k" + std::to_string(c.k) +
         "_s" + std::to_string(c.stride) + "_p" + std::to_string(c.pad) + "_g" +
         std::to_string(c.groups);
}
void PrintTo(const Case& c, std::ostream* os) { *os << case_name(c); }

std::vector<float> random_vec(int64_t n, Rng& rng) {
  std::vector<float> v(n);
  for (float& x : v) x = rng.normal(0.f, 1.f);
  return v;
}

double max_rel_diff(const std::vector<float>& got, const std::vector<double>& want) {
  double scale = 1e-12, diff = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::abs(want[i]));
    diff = std::max(diff, std::abs(got[i] - want[i]));
  }
  return diff / scale;
}

class ConvReference : public ::testing::TestWithParam<std::tuple<Case, ConvAlgoChoice>> {};

TEST_P(ConvReference, MatchesDirectConvolution) {
  const auto [c, algo] = GetParam();
  ConvDesc d;
  d.batch = c.n, d.in_channels = c.cin, d.height = c.h, d.width = c.w, d.out_channels = c.cout;
  d.kernel_h = d.kernel_w = c.k, d.stride_h = d.stride_w = c.stride, d.pad_h = d.pad_w = c.pad;
  d.groups = c.groups;
  const int64_t oh = d.out_h(), ow = d.out_w(), cin_g = c.cin / c.groups,
                cout_g = c.cout / c.groups;
  BackendOptions options;
  options.conv_algo = algo;
  CpuBackend b(options);
  Rng rng(7);
  const Shape xs{c.n, c.cin, c.h, c.w}, ws{c.cout, cin_g, c.k, c.k}, ys{c.n, c.cout, oh, ow};
  auto xv = random_vec(xs.numel(), rng), wv = random_vec(ws.numel(), rng),
       dyv = random_vec(ys.numel(), rng);
  Tensor x = b.empty(xs, DType::kF32, MemCategory::kActivations, "x");
  Tensor w = b.empty(ws, DType::kF32, MemCategory::kWeights, "w");
  Tensor y = b.empty(ys, DType::kF32, MemCategory::kActivations, "y");
  Tensor dy = b.empty(ys, DType::kF32, MemCategory::kActivations, "dy");
  Tensor dx = b.empty(xs, DType::kF32, MemCategory::kActivations, "dx");
  Tensor dw = b.empty(ws, DType::kF32, MemCategory::kGradients, "dw");
  b.copy_from_host(xv.data(), x);
  b.copy_from_host(wv.data(), w);
  b.copy_from_host(dyv.data(), dy);
  // Garbage in the outputs: every op must overwrite, never accumulate into, its result.
  b.fill(y, 1e3f);
  b.fill(dx, 1e3f);
  b.fill(dw, 1e3f);
  auto plan = b.make_conv_plan(d);
  const std::string name(conv_algo_choice_name(algo));
  for (const PassAlgorithm& a : plan->algorithms()) {
    if (algo != ConvAlgoChoice::kWinograd) {
      EXPECT_EQ(a.algorithm.substr(0, name.size()), name) << conv_pass_name(a.pass);
    } else if (a.refused.empty()) {  // oneDNN's Winograd ran; elsewhere the heuristic's choice
      EXPECT_EQ(a.arithmetic, ConvArithmetic::kWinogradF4x3) << a.algorithm;
    }
  }
  b.conv_forward(*plan, x, w, y);
  b.conv_backward_data(*plan, dy, w, dx);
  b.conv_backward_filter(*plan, x, dy, dw);

  std::vector<double> ry(ys.numel(), 0), rdx(xs.numel(), 0), rdw(ws.numel(), 0);
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t co = 0; co < c.cout; ++co) {
      const int64_t g = co / cout_g;
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          const int64_t yi = ((n * c.cout + co) * oh + i) * ow + j;
          for (int64_t ci = 0; ci < cin_g; ++ci)
            for (int64_t ki = 0; ki < c.k; ++ki)
              for (int64_t kj = 0; kj < c.k; ++kj) {
                const int64_t ih = i * c.stride - c.pad + ki, iw = j * c.stride - c.pad + kj;
                if (ih < 0 || ih >= c.h || iw < 0 || iw >= c.w) continue;
                const int64_t xi = ((n * c.cin + g * cin_g + ci) * c.h + ih) * c.w + iw;
                const int64_t wi = ((co * cin_g + ci) * c.k + ki) * c.k + kj;
                ry[yi] += double(xv[xi]) * wv[wi];
                rdx[xi] += double(dyv[yi]) * wv[wi];
                rdw[wi] += double(dyv[yi]) * xv[xi];
              }
        }
    }
  std::vector<float> gy(ys.numel()), gdx(xs.numel()), gdw(ws.numel());
  b.copy_to_host(y, gy.data());
  b.copy_to_host(dx, gdx.data());
  b.copy_to_host(dw, gdw.data());
  EXPECT_LT(max_rel_diff(gy, ry), 1e-5) << "forward";
  EXPECT_LT(max_rel_diff(gdx, rdx), 1e-5) << "backward data";
  EXPECT_LT(max_rel_diff(gdw, rdw), 1e-5) << "backward filter";
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ConvReference,
    ::testing::Combine(
        ::testing::Values(Case{2, 3, 8, 8, 4, 3, 1, 1, 1}, Case{3, 5, 9, 7, 6, 3, 2, 1, 1},
                          Case{2, 4, 9, 9, 6, 3, 2, 0, 2}, Case{2, 64, 16, 16, 128, 3, 2, 1, 1},
                          Case{2, 64, 16, 16, 128, 1, 2, 0, 1}, Case{2, 256, 4, 4, 512, 3, 2, 1, 1},
                          Case{2, 256, 4, 4, 512, 1, 2, 0, 1}, Case{2, 512, 2, 2, 512, 3, 1, 1, 1},
                          Case{1, 3, 32, 32, 64, 7, 2, 3, 1}, Case{2, 3, 67, 67, 64, 11, 4, 2, 1},
                          Case{1, 8, 1, 1, 4, 3, 1, 1, 1}, Case{2, 3, 10, 10, 4, 3, 2, 0, 1}),
        ::testing::Values(ConvAlgoChoice::kIm2col, ConvAlgoChoice::kOnednn,
                          ConvAlgoChoice::kWinograd)),
    [](const auto& info) {
      return case_name(std::get<0>(info.param)) + "_" +
             std::string(conv_algo_choice_name(std::get<1>(info.param)));
    });

}  // namespace
}  // namespace dlb
