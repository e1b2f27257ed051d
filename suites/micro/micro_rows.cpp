// The GEMM and convolution rows of dlbench_micro (micro.h): what is timed, and how.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>

#include "runtime/core/error.h"
#include "runtime/core/precision_policy.h"
#include "runtime/nn/layers/conv2d.h"
#include "suites/micro/micro.h"
#include "workloads/models/model.h"

namespace dlb::micro {
namespace {

// One backend per (kind, conv algorithm), made on first use and kept: a CUDA backend's handles
// cost more to make than most rows take to time.
Backend& backend_for(BackendKind kind, ConvAlgoChoice algo) {
  static std::map<std::pair<BackendKind, ConvAlgoChoice>, std::unique_ptr<Backend>> made;
  auto& b = made[{kind, algo}];
  if (!b) {
    BackendOptions o;
    o.conv_algo = algo;
    b = make_backend(kind, o);
  }
  return *b;
}

// Times `fn` per iteration with the device synchronised after it (manual time: a GPU's queue
// drained, so the row is the op, not its launch), and sets the rate counters: `work` units
// (FLOPs or bytes) per iteration over the peak's rate `peak`.
void time_rows(benchmark::State& state, Backend& b, const std::function<void()>& fn, double work,
               double peak, const char* unit) {
  fn();  // untimed: first touch, plan caches, thread start
  b.synchronize();
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    b.synchronize();
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  using C = benchmark::Counter;
  state.counters[unit] = C(work, C::kIsIterationInvariantRate, C::kIs1000);
  state.counters["of_peak"] = C(work / peak, C::kIsIterationInvariantRate);
}

Tensor filled(Backend& b, const Shape& s, DType dt, Layout layout, float v) {
  Tensor t = b.empty(s, dt, MemCategory::kWorkspace, "micro-benchmark operand").with_layout(layout);
  b.fill(t, v);
  return t;
}

struct LinearShape {
  int64_t in, out;
  std::string layers;  // "alexnet.classifier.4, vgg16.classifier.3"
};

std::vector<LinearShape> linear_shapes() {
  std::vector<LinearShape> out;
  for (const ModelInfo& m : model_registry()) {
    const Graph g = build_model(m.name, ModelConfig{2, m.default_image_size, 0, {}});
    for (const auto& node : g.nodes()) {
      if (!node.layer || node.layer->kind() != "linear") continue;
      const int64_t in = g.shape(node.inputs[0])[1], o = node.shape[1];
      auto it = std::find_if(out.begin(), out.end(),
                             [&](const LinearShape& s) { return s.in == in && s.out == o; });
      const std::string name = m.name + "." + node.name;
      if (it == out.end()) {
        out.push_back({in, o, name});
      } else {
        it->layers += ", " + name;
      }
    }
  }
  return out;
}

}  // namespace

void guarded(benchmark::State& state, const std::function<void()>& body) {
  try {
    body();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

MicroShape micro_shape(BackendKind kind) {
  return kind == BackendKind::kCpu ? MicroShape{32, 8, 64} : MicroShape{256, 64, 224};
}

std::vector<Precision> micro_precisions(BackendKind kind) {
  Backend& b = backend_for(kind, ConvAlgoChoice::kHeuristic);
  std::vector<Precision> out;
  for (Precision p : kPrecisions) {
    if (b.supports(Op::kConv, OpTypes::of(PrecisionPolicy::for_precision(p)))) out.push_back(p);
  }
  return out;
}

MachinePeak peak_for(const std::vector<MachinePeak>& peaks, Backend& backend, Precision precision) {
  const auto p = find_peak(peaks, host_name(), device_name(backend), std::string(backend.name()),
                           std::string(precision_name(precision)));
  if (!p) {
    throw InvalidArgument(fmt::format("no peak measured for {} at {} on this host", backend.name(),
                                      precision_name(precision)));
  }
  return *p;
}

void register_gemm_benchmarks(BackendKind kind, const std::vector<MachinePeak>& peaks) {
  const int64_t batch = micro_shape(kind).gemm_batch;
  const std::string backend_name(backend_kind_name(kind));
  for (Precision p : micro_precisions(kind)) {
    const double peak =
        peak_for(peaks, backend_for(kind, ConvAlgoChoice::kHeuristic), p).flops_per_s;
    for (const LinearShape& s : linear_shapes()) {
      // The three products of a linear layer y = x W^T, as Linear makes them.
      struct Pass {
        const char* name;
        int64_t m, n, k;
        bool ta, tb;
      };
      const Pass passes[] = {{"forward", batch, s.out, s.in, false, true},
                             {"backward_data", batch, s.in, s.out, false, false},
                             {"backward_weights", s.out, s.in, batch, true, false}};
      for (const Pass& pass : passes) {
        const std::string name = fmt::format("gemm/{}/{}/{}x{}x{}/{}", backend_name,
                                             precision_name(p), pass.m, pass.n, pass.k, pass.name);
        benchmark::RegisterBenchmark(
            name.c_str(),
            [=](benchmark::State& state) {
              guarded(state, [&] {
                Backend& b = backend_for(kind, ConvAlgoChoice::kHeuristic);
                const DType dt = PrecisionPolicy::for_precision(p).activations;
                const Shape a_shape = pass.ta ? Shape{pass.k, pass.m} : Shape{pass.m, pass.k};
                const Shape b_shape = pass.tb ? Shape{pass.n, pass.k} : Shape{pass.k, pass.n};
                Tensor a = filled(b, a_shape, dt, Layout::kNCHW, 0.01f);
                Tensor w = filled(b, b_shape, dt, Layout::kNCHW, 0.02f);
                Tensor y = filled(b, {pass.m, pass.n}, dt, Layout::kNCHW, 0);
                time_rows(
                    state, b, [&] { b.matmul(p, pass.ta, pass.tb, 1, a, w, 0, y); },
                    2.0 * pass.m * pass.n * pass.k, peak, "FLOP/s");
                state.SetLabel(s.layers);
              });
            })
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
}

// Whether the CPU's Winograd runs every pass of `d` itself: it has no row for a layer it leaves
// to the heuristic (PassAlgorithm::refused), whose time would be another algorithm's.
bool winograd_runs(const ConvDesc& d) {
  for (const PassAlgorithm& a :
       backend_for(BackendKind::kCpu, ConvAlgoChoice::kWinograd).make_conv_plan(d)->algorithms()) {
    if (!a.refused.empty()) return false;
  }
  return true;
}

// Whether im2col+matmul runs every pass of `d` in precision `p` itself (a bf16 layer stored
// channels last, on a CPU with AMX): elsewhere it leaves them to the heuristic, whose rows these
// would repeat.
bool matmul_runs(const ConvDesc& d, Precision p) {
  Backend& b = backend_for(BackendKind::kCpu, ConvAlgoChoice::kMatmul);
  ConvDesc desc = d;
  desc.types = OpTypes::of(PrecisionPolicy::for_precision(p));
  desc.layout = b.activation_layout(desc.types);
  for (const PassAlgorithm& a : b.make_conv_plan(desc)->algorithms()) {
    if (!a.refused.empty()) return false;
  }
  return true;
}

// A conv row's label: "8x64x16x16 k3x3 s1 p1 -> 64".
std::string conv_key(const ConvDesc& d) {
  return fmt::format("{}x{}x{}x{} k{}x{} s{} p{} -> {}", d.batch, d.in_channels, d.height, d.width,
                     d.kernel_h, d.kernel_w, d.stride_h, d.pad_h, d.out_channels);
}

void register_conv_benchmarks(BackendKind kind, const std::vector<MachinePeak>& peaks) {
  const MicroShape shape = micro_shape(kind);
  const std::string backend_name(backend_kind_name(kind));
  for (const char* model : {"resnet50", "vgg16"}) {
    const Graph g = build_model(model, ModelConfig{shape.conv_batch, shape.conv_image_size, 0, {}});
    std::set<std::string> seen;
    for (const auto& node : g.nodes()) {
      auto* conv = dynamic_cast<const Conv2d*>(node.layer.get());
      if (!conv) continue;
      ConvDesc d = conv->describe(g.shape(node.inputs[0]));
      d.bias = false;  // the convolution alone
      const std::string key = conv_key(d);
      if (!seen.insert(key).second) continue;
      const bool winograd = kind == BackendKind::kCpu && winograd_runs(d);
      for (Precision p : micro_precisions(kind)) {
        const double peak =
            peak_for(peaks, backend_for(kind, ConvAlgoChoice::kHeuristic), p).flops_per_s;
        for (ConvAlgoChoice algo : named_conv_algorithms(kind)) {
          if (algo == ConvAlgoChoice::kWinograd && !winograd) continue;
          if (algo == ConvAlgoChoice::kMatmul && !matmul_runs(d, p)) continue;
          for (ConvPass pass : kConvPasses) {
            const std::string name =
                fmt::format("conv/{}/{}/{}/{}.{}/{}", backend_name, precision_name(p),
                            conv_algo_choice_name(algo), model, node.name, conv_pass_name(pass));
            benchmark::RegisterBenchmark(
                name.c_str(),
                [=](benchmark::State& state) {
                  guarded(state, [&] {
                    Backend& b = backend_for(kind, algo);
                    ConvDesc desc = d;
                    desc.types = OpTypes::of(PrecisionPolicy::for_precision(p));
                    desc.layout = b.activation_layout(desc.types);
                    auto plan = b.make_conv_plan(desc);
                    const DType dt = desc.types.data;
                    const Layout l = desc.layout;
                    Tensor x = filled(b, {d.batch, d.in_channels, d.height, d.width}, dt, l, 0.1f);
                    Tensor w = filled(
                        b, {d.out_channels, d.in_channels / d.groups, d.kernel_h, d.kernel_w},
                        desc.types.params, l, 0.01f);
                    Tensor y =
                        filled(b, {d.batch, d.out_channels, d.out_h(), d.out_w()}, dt, l, 0.1f);
                    const std::function<void()> run[] = {
                        [&] { b.conv_forward(*plan, x, w, y); },
                        [&] { b.conv_backward_data(*plan, y, w, x); },
                        [&] { b.conv_backward_filter(*plan, x, y, w); }};
                    time_rows(state, b, run[static_cast<int>(pass)], 2.0 * d.forward_macs(), peak,
                              "FLOP/s");
                    for (const PassAlgorithm& pa : plan->algorithms()) {
                      if (pa.pass == pass) state.SetLabel(key + "; " + pa.algorithm);
                    }
                  });
                })
                ->UseManualTime()
                ->Unit(benchmark::kMillisecond);
          }
        }
      }
    }
  }
}

}  // namespace dlb::micro
