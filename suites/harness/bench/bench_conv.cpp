// `dlbench bench conv`: how close convolution gets to the matrix-multiply speed it is built on.
// For each distinct conv shape of a model and each algorithm the backend names (cpu: im2col +
// sgemm, and oneDNN): median time of forward, backward-data and backward-filter, as GFLOP/s and
// as a fraction of the machine's square-sgemm rate (the peak this backend reaches), beside a
// plain matmul of the forward's GEMM shape (M = out channels, N = batch x output pixels,
// K = in channels x kernel area), all in one process.
#include <fmt/format.h>

#include <chrono>
#include <functional>
#include <set>

#include "runtime/core/error.h"
#include "runtime/core/stats.h"
#include "runtime/nn/layers/conv2d.h"
#include "suites/harness/bench/bench_commands.h"
#include "suites/harness/core/environment.h"
#include "suites/harness/core/record.h"
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
  const std::vector<ConvAlgoChoice> algos = named_conv_algorithms(o.backend);
  std::vector<std::unique_ptr<Backend>> backends;
  for (ConvAlgoChoice a : algos) {
    BackendOptions bo;
    bo.conv_algo = a;
    backends.push_back(make_backend(o.backend, bo));
  }
  Backend& b = *backends.front();

  // Square sgemm as the machine's reference matmul rate: the peak each row is a fraction of.
  const int64_t n = 1024;
  Tensor a = filled(b, {n, n}, 0.5f), bb = filled(b, {n, n}, 0.25f), c = filled(b, {n, n}, 0);
  const double t_sq = median_seconds(
      b, o.repeat, [&] { b.matmul(Precision::kFp32, false, false, 1, a, bb, 0, c); });
  const double sq_gflops = 2.0 * n * n * n / t_sq / 1e9;
  fmt::print("{} batch {} at {}x{} on {}; sgemm {}^3: {:.1f} GFLOP/s (the peak below)\n", o.model,
             o.batch, o.image_size, o.image_size, b.name(), n, sq_gflops);
  fmt::print("{:<18} {:<10} {:>20} {:>14} {:>14} {:>14} {:>13}\n", "layer", "algorithm",
             "GEMM MxNxK", "fwd GF/s peak", "bwdD GF/s peak", "bwdF GF/s peak", "sgemm GF/s");

  nlohmann::json rows = nlohmann::json::array();
  std::set<std::string> seen;
  std::vector<double> conv_seconds(algos.size(), 0);
  double conv_flops = 0;
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
    const double flops = 2.0 * d.forward_macs();
    conv_flops += flops;
    Tensor ma = filled(b, {m, k}, 0.01f), mb = filled(b, {k, cols}, 0.1f),
           mc = filled(b, {m, cols}, 0);
    const double tm = median_seconds(
        b, o.repeat, [&] { b.matmul(Precision::kFp32, false, false, 1, ma, mb, 0, mc); });
    const double mm_gflops = 2.0 * m * cols * k / tm / 1e9;  // one group's GEMM
    for (size_t ai = 0; ai < algos.size(); ++ai) {
      Backend& be = *backends[ai];
      auto plan = be.make_conv_plan(d);
      Tensor x = filled(be, {d.batch, d.in_channels, d.height, d.width}, 0.1f);
      Tensor w =
          filled(be, {d.out_channels, d.in_channels / d.groups, d.kernel_h, d.kernel_w}, 0.01f);
      Tensor y = filled(be, {d.batch, d.out_channels, d.out_h(), d.out_w()}, 0);
      Tensor dx = filled(be, x.shape(), 0), dw = filled(be, w.shape(), 0);
      const double t[3] = {
          median_seconds(be, o.repeat, [&] { be.conv_forward(*plan, x, w, y); }),
          median_seconds(be, o.repeat, [&] { be.conv_backward_data(*plan, y, w, dx); }),
          median_seconds(be, o.repeat, [&] { be.conv_backward_filter(*plan, x, y, dw); })};
      conv_seconds[ai] += t[0] + t[1] + t[2];
      const auto rate = [&](int i) { return flops / t[i] / 1e9; };
      const auto cell = [&](int i) {
        return fmt::format("{:6.1f} {:5.0f}%", rate(i), 100 * rate(i) / sq_gflops);
      };
      fmt::print("{:<18} {:<10} {:>20} {:>14} {:>14} {:>14} {:>13.1f}\n", node.name,
                 conv_algo_choice_name(algos[ai]), fmt::format("{}x{}x{}", m, cols, k), cell(0),
                 cell(1), cell(2), mm_gflops);
      nlohmann::json passes = nlohmann::json::object();
      for (const PassAlgorithm& pa : plan->algorithms()) {
        const int i = static_cast<int>(pa.pass);
        passes[std::string(conv_pass_name(pa.pass))] = {{"algorithm", pa.algorithm},
                                                        {"workspace_bytes", pa.workspace_bytes},
                                                        {"seconds", t[i]},
                                                        {"gflops", rate(i)},
                                                        {"fraction_of_peak", rate(i) / sq_gflops}};
      }
      rows.push_back({{"layer", node.name},
                      {"conv_algo", conv_algo_choice_name(algos[ai])},
                      {"gemm_m", m},
                      {"gemm_n", cols},
                      {"gemm_k", k},
                      {"flops", flops},
                      {"passes", passes},
                      {"same_shape_sgemm_s", tm}});
    }
  }
  for (size_t ai = 0; ai < algos.size(); ++ai) {
    fmt::print("all distinct conv shapes, {}: {:.1f} GFLOP/s over the three passes\n",
               conv_algo_choice_name(algos[ai]), 3 * conv_flops / conv_seconds[ai] / 1e9);
  }
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
