// `dlbench bench conv`: how close convolution gets to the matrix-multiply speed it is built on.
// For each distinct conv shape of a model: median time of forward, backward-data and
// backward-filter, and of a plain matmul with the forward's GEMM shape (M = out channels,
// N = batch x output pixels, K = in channels x kernel area), all in one process.
#include <fmt/format.h>

#include <chrono>
#include <functional>
#include <set>

#include "runtime/core/error.h"
#include "runtime/core/stats.h"
#include "runtime/nn/layers/conv2d.h"
#include "suites/harness/commands.h"
#include "suites/harness/environment.h"
#include "suites/harness/record.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

double median_seconds(Backend& backend, int64_t repeat, const std::function<void()>& fn) {
  fn();  // warm-up: first-touch of buffers, BLAS thread start
  backend.synchronize();
  std::vector<double> t;
  for (int64_t i = 0; i < repeat; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    backend.synchronize();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return percentile(t, 50);
}

Tensor filled(Backend& b, const Shape& s, float v) {
  Tensor t = b.empty(s, DType::kF32, MemCategory::kWorkspace, "benchmark operand");
  b.fill(t, v);
  return t;
}

}  // namespace

int bench_conv_command(const BenchConvOptions& o) {
  if (o.repeat < 1) throw InvalidArgument("--repeat must be at least 1");
  Graph g = build_model(o.model, ModelConfig{o.batch, o.image_size, 0, {}});
  auto backend = make_backend(o.backend, {});
  Backend& b = *backend;

  // Square sgemm as the machine's reference matmul rate.
  const int64_t n = 1024;
  Tensor a = filled(b, {n, n}, 0.5f), bb = filled(b, {n, n}, 0.25f), c = filled(b, {n, n}, 0);
  const double t_sq = median_seconds(
      b, o.repeat, [&] { b.matmul(Precision::kFp32, false, false, 1, a, bb, 0, c); });
  const double sq_gflops = 2.0 * n * n * n / t_sq / 1e9;
  fmt::print("{} batch {} at {}x{} on {}; sgemm {}^3: {:.1f} GFLOP/s\n", o.model, o.batch,
             o.image_size, o.image_size, b.name(), n, sq_gflops);
  fmt::print("{:<24} {:>22} {:>9} {:>9} {:>9} {:>9} {:>7}\n", "layer", "GEMM MxNxK", "fwd GF/s",
             "bwdD GF/s", "bwdF GF/s", "sgemm", "fwd/mm");

  nlohmann::json rows = nlohmann::json::array();
  std::set<std::string> seen;
  double conv_flops = 0, conv_seconds = 0;
  for (const auto& node : g.nodes()) {
    auto* conv = dynamic_cast<const Conv2d*>(node.layer.get());
    if (!conv) continue;
    ConvDesc d = conv->describe(g.shape(node.inputs[0]));
    d.bias = false;  // the convolution alone is timed
    const int64_t m = d.out_channels / d.groups,
                  k = d.in_channels / d.groups * d.kernel_h * d.kernel_w;
    const int64_t cols = d.batch * d.out_h() * d.out_w();
    const std::string key = fmt::format("{}x{}x{}/{}", m, cols, k, d.stride_h);
    if (!seen.insert(key).second) continue;
    auto plan = b.make_conv_plan(d);
    Tensor x = filled(b, {d.batch, d.in_channels, d.height, d.width}, 0.1f);
    Tensor w = filled(b, {d.out_channels, d.in_channels / d.groups, d.kernel_h, d.kernel_w}, 0.01f);
    Tensor y = filled(b, {d.batch, d.out_channels, d.out_h(), d.out_w()}, 0);
    Tensor dx = filled(b, x.shape(), 0), dw = filled(b, w.shape(), 0);
    const double flops = 2.0 * d.forward_macs();
    const double tf = median_seconds(b, o.repeat, [&] { b.conv_forward(*plan, x, w, y); });
    const double td = median_seconds(b, o.repeat, [&] { b.conv_backward_data(*plan, y, w, dx); });
    const double tw = median_seconds(b, o.repeat, [&] { b.conv_backward_filter(*plan, x, y, dw); });
    Tensor ma = filled(b, {m, k}, 0.01f), mb = filled(b, {k, cols}, 0.1f),
           mc = filled(b, {m, cols}, 0);
    const double tm = median_seconds(
        b, o.repeat, [&] { b.matmul(Precision::kFp32, false, false, 1, ma, mb, 0, mc); });
    const double mm_flops = 2.0 * m * cols * k;  // one group's GEMM
    conv_flops += flops;
    conv_seconds += tf;
    fmt::print("{:<24} {:>22} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f} {:>6.0f}%\n", node.name,
               fmt::format("{}x{}x{}", m, cols, k), flops / tf / 1e9, flops / td / 1e9,
               flops / tw / 1e9, mm_flops / tm / 1e9, 100 * (flops / tf) / (mm_flops / tm));
    rows.push_back({{"layer", node.name},
                    {"gemm_m", m},
                    {"gemm_n", cols},
                    {"gemm_k", k},
                    {"flops", flops},
                    {"forward_s", tf},
                    {"backward_data_s", td},
                    {"backward_filter_s", tw},
                    {"same_shape_sgemm_s", tm}});
  }
  fmt::print("all distinct conv shapes, forward: {:.1f} GFLOP/s\n",
             conv_flops / conv_seconds / 1e9);
  if (!o.json_path.empty()) {
    write_json_atomically(o.json_path, {{"schema_version", kResultSchemaVersion},
                                        {"kind", "bench_conv"},
                                        {"config",
                                         {{"model", o.model},
                                          {"batch", o.batch},
                                          {"image_size", o.image_size},
                                          {"repeat", o.repeat}}},
                                        {"environment", collect_environment(b)},
                                        {"square_sgemm", {{"n", n}, {"gflops", sq_gflops}}},
                                        {"layers", rows}});
  }
  return 0;
}

}  // namespace dlb
