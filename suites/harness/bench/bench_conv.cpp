// `dlbench bench conv`: how close convolution gets to the matrix-multiply speed it is built on.
// For each distinct conv shape of a model and each algorithm the backend names (cpu: im2col +
// sgemm, oneDNN's direct convolution and its Winograd): median time of forward, backward-data and
// backward-filter, as GFLOP/s (a direct convolution's FLOPs over the time, so Winograd's rate is
// effective) and as a fraction of the machine's square-sgemm rate (the peak this backend
// reaches), its workspace, beside a plain matmul of the forward's GEMM shape (M = out channels,
// N = batch x output pixels, K = in channels x kernel area), all in one process. "sgemm" is an
// f32 product by Backend::matmul (the CPU's: oneDNN's, or OpenBLAS's where oneDNN has only its
// reference loops).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

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

// Square sgemm as the machine's reference matmul rate: the peak each row is a fraction of.
constexpr int64_t kSquare = 1024;
double square_sgemm_gflops(Backend& b, int64_t repeat) {
  const int64_t n = kSquare;
  Tensor a = filled(b, {n, n}, 0.5f), bb = filled(b, {n, n}, 0.25f), c = filled(b, {n, n}, 0);
  const double t =
      median_seconds(b, repeat, [&] { b.matmul(Precision::kFp32, false, false, 1, a, bb, 0, c); });
  return 2.0 * n * n * n / t / 1e9;
}

// A conv layer's shape, as the GEMM of its forward pass per group: M = out channels, N = batch x
// output pixels, K = in channels x kernel area; and that GEMM's own time, as a plain matmul
// (same_shape_sgemm_seconds).
struct ConvCase {
  std::string layer;
  ConvDesc desc;
  int64_t m = 0, n = 0, k = 0;
  double flops = 0;          // the forward's
  double sgemm_seconds = 0;  // the same-shape matmul's
  double sgemm_gflops() const { return 2.0 * m * n * k / sgemm_seconds / 1e9; }
};

ConvCase conv_case(const std::string& layer, ConvDesc d) {
  d.bias = false;  // the convolution alone is timed
  ConvCase c{layer, d};
  c.m = d.out_channels / d.groups;
  c.k = d.in_channels / d.groups * d.kernel_h * d.kernel_w;
  c.n = d.batch * d.out_h() * d.out_w();
  c.flops = 2.0 * d.forward_macs();
  return c;
}

double same_shape_sgemm_seconds(Backend& b, const ConvCase& c, int64_t repeat) {
  Tensor ma = filled(b, {c.m, c.k}, 0.01f), mb = filled(b, {c.k, c.n}, 0.1f),
         mc = filled(b, {c.m, c.n}, 0);
  return median_seconds(b, repeat,
                        [&] { b.matmul(Precision::kFp32, false, false, 1, ma, mb, 0, mc); });
}

// What one algorithm did on one layer: the seconds of the passes it ran (the sum, and how many
// of the three), for the totals.
struct AlgorithmTotals {
  double seconds = 0, flops = 0;
  int64_t passes = 0, unsupported = 0;
};

// One timed pass's cell: GFLOP/s (the direct convolution's FLOPs over the time: Winograd's
// effective rate) and the fraction of peak.
std::string pass_cell(double seconds, double flops, double peak) {
  const double rate = flops / seconds / 1e9;
  return fmt::format("{:6.1f} {:5.0f}%", rate, 100 * rate / peak);
}

// The three passes of `c` with `algo` on `be`: its printed line and its row. A pass the
// algorithm cannot run (PassAlgorithm::refused) is not timed: the heuristic's choice would be.
nlohmann::json bench_algorithm(Backend& be, ConvAlgoChoice algo, const ConvCase& c,
                               double sq_gflops, int64_t repeat, AlgorithmTotals& totals) {
  ConvDesc d = c.desc;
  // The weights stored as training stores them (an f32 run's: no compute copy).
  describe_weights_as_trained(be, false, d);
  auto plan = be.make_conv_plan(d);
  Tensor x = filled(be, {d.batch, d.in_channels, d.height, d.width}, 0.1f);
  Tensor w = filled(be, {d.out_channels, d.in_channels / d.groups, d.kernel_h, d.kernel_w}, 0.01f)
                 .with_layout(d.weight_layout);
  Tensor y = filled(be, {d.batch, d.out_channels, d.out_h(), d.out_w()}, 0);
  Tensor dx = filled(be, x.shape(), 0), dw = filled(be, w.shape(), 0).with_layout(d.grad_layout);
  const std::function<void()> run[3] = {[&] { be.conv_forward(*plan, x, w, y); },
                                        [&] { be.conv_backward_data(*plan, y, w, dx); },
                                        [&] { be.conv_backward_filter(*plan, x, y, dw); }};
  nlohmann::json passes = nlohmann::json::object();
  std::string cells[3];
  std::optional<size_t> workspace;  // the most any pass it ran needs
  for (const PassAlgorithm& pa : plan->algorithms()) {
    const int i = static_cast<int>(pa.pass);
    const std::string name(conv_pass_name(pa.pass));
    if (!pa.refused.empty()) {
      passes[name] = {{"unsupported", pa.refused}};
      cells[i] = "unsupported";
      ++totals.unsupported;
      continue;
    }
    const double t = median_seconds(be, repeat, run[i]);
    totals.seconds += t, totals.flops += c.flops, ++totals.passes;
    workspace = std::max(workspace.value_or(0), pa.workspace_bytes);
    cells[i] = pass_cell(t, c.flops, sq_gflops);
    passes[name] = {{"algorithm", pa.algorithm},
                    {"arithmetic", std::string(conv_arithmetic_name(pa.arithmetic))},
                    {"workspace_bytes", pa.workspace_bytes},
                    {"seconds", t},
                    {"gflops", c.flops / t / 1e9},
                    {"fraction_of_peak", c.flops / t / 1e9 / sq_gflops}};
  }
  fmt::print("{:<18} {:<17} {:>20} {:>14} {:>14} {:>14} {:>10} {:>13.1f}\n", c.layer,
             conv_algo_choice_name(algo), fmt::format("{}x{}x{}", c.m, c.n, c.k), cells[0],
             cells[1], cells[2], workspace ? format_bytes(*workspace) : "-", c.sgemm_gflops());
  return {{"layer", c.layer},
          {"conv_algo", conv_algo_choice_name(algo)},
          {"gemm_m", c.m},
          {"gemm_n", c.n},
          {"gemm_k", c.k},
          {"flops", c.flops},
          {"passes", passes},
          {"same_shape_sgemm_s", c.sgemm_seconds},
          {"weight_layout", std::string(layout_name(d.weight_layout))},
          {"grad_layout", std::string(layout_name(d.grad_layout))}};
}

// Every distinct conv shape of `g` (its GEMM and stride), in layer order.
std::vector<ConvCase> distinct_convs(const Graph& g) {
  std::vector<ConvCase> cases;
  std::set<std::string> seen;
  for (const auto& node : g.nodes()) {
    auto* conv = dynamic_cast<const Conv2d*>(node.layer.get());
    if (!conv) continue;
    ConvCase c = conv_case(node.name, conv->describe(g.shape(node.inputs[0])));
    const Layout blocks = blocked_weight_layout(c.desc);  // how a blocking backend stores it
    if (seen.insert(
                fmt::format("{}x{}x{}/{} {}", c.m, c.n, c.k, c.desc.stride_h, layout_name(blocks)))
            .second) {
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

}  // namespace

int bench_conv_command(const BenchConvOptions& o) {
  if (o.repeat < 1) throw InvalidArgument("--repeat must be at least 1");
  const std::vector<ConvAlgoChoice> algos =
      parse_named_conv_algorithms(o.backend, o.algos, "--algos");
  Graph g = build_model(o.model, ModelConfig{o.batch, o.image_size, 0, {}});
  std::vector<std::unique_ptr<Backend>> backends;
  for (ConvAlgoChoice a : algos) {
    BackendOptions bo;
    bo.conv_algo = a;
    backends.push_back(make_backend(o.backend, bo));
  }
  Backend& b = *backends.front();
  const double sq_gflops = square_sgemm_gflops(b, o.repeat);
  fmt::print("{} batch {} at {}x{} on {}; sgemm {}^3: {:.1f} GFLOP/s (the peak below)\n", o.model,
             o.batch, o.image_size, o.image_size, b.name(), kSquare, sq_gflops);
  fmt::print("{:<18} {:<17} {:>20} {:>14} {:>14} {:>14} {:>10} {:>13}\n", "layer", "algorithm",
             "GEMM MxNxK", "fwd GF/s peak", "bwdD GF/s peak", "bwdF GF/s peak", "workspace",
             "sgemm GF/s");
  nlohmann::json rows = nlohmann::json::array();
  std::vector<AlgorithmTotals> totals(algos.size());
  for (ConvCase& c : distinct_convs(g)) {
    c.sgemm_seconds = same_shape_sgemm_seconds(b, c, o.repeat);
    for (size_t ai = 0; ai < algos.size(); ++ai) {
      rows.push_back(bench_algorithm(*backends[ai], algos[ai], c, sq_gflops, o.repeat, totals[ai]));
    }
  }
  for (size_t ai = 0; ai < algos.size(); ++ai) {
    const AlgorithmTotals& t = totals[ai];
    const std::string rate =
        t.passes ? fmt::format("{:.1f} GFLOP/s", t.flops / t.seconds / 1e9) : "no pass ran";
    fmt::print("all distinct conv shapes, {}: {} over the {} passes it ran{}\n",
               conv_algo_choice_name(algos[ai]), rate, t.passes,
               t.unsupported ? fmt::format(" ({} unsupported)", t.unsupported) : "");
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
                                        {"square_sgemm", {{"n", kSquare}, {"gflops", sq_gflops}}},
                                        {"layers", rows}});
  }
  return 0;
}

}  // namespace dlb
