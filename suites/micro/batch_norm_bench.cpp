// Batch norm in training (forward, then backward) on the CPU: dlbench's loops against oneDNN's
// primitive on the same NCHW tensors, at each distinct batch-norm shape of resnet50 at 64x64,
// batch 8. This is the measurement behind keeping our own loops: the CPU graph hands batch norm
// NCHW tensors, where oneDNN runs its plain-layout kernel (ncsp_bnorm).
//   build/suites/dlbench_micro --benchmark_filter=BatchNorm
#include <benchmark/benchmark.h>

#include <oneapi/dnnl/dnnl.hpp>

#include "runtime/backend/cpu/cpu_backend.h"

namespace {

using dlb::DType;
using dlb::MemCategory;
using dlb::Tensor;

constexpr int64_t kBatch = 8;

struct Operands {
  dlb::CpuBackend backend{{}};
  Tensor x, y, dy, dx, gamma, beta, running_mean, running_var, mean, invstd, dgamma, dbeta;
  Operands(int64_t c, int64_t hw) {
    const dlb::Shape s{kBatch, c, hw, hw};
    auto act = [&](float v) {
      Tensor t = backend.empty(s, DType::kF32, MemCategory::kActivations, "bench");
      backend.fill(t, v);
      return t;
    };
    auto chan = [&](float v) {
      Tensor t = backend.empty({c}, DType::kF32, MemCategory::kWeights, "bench");
      backend.fill(t, v);
      return t;
    };
    x = act(0), y = act(0), dy = act(0.1f), dx = act(0);
    float* xp = x.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) xp[i] = static_cast<float>(i % 97) * 0.01f;
    gamma = chan(1), beta = chan(0), running_mean = chan(0), running_var = chan(1);
    mean = chan(0), invstd = chan(0), dgamma = chan(0), dbeta = chan(0);
  }
};

void BM_BatchNormTrainDlbench(benchmark::State& state) {
  Operands o(state.range(0), state.range(1));
  auto& b = o.backend;
  for (auto _ : state) {
    b.batch_norm_train(o.x, o.gamma, o.beta, o.running_mean, o.running_var, o.mean, o.invstd, o.y,
                       0.1f, 1e-5f);
    b.batch_norm_backward(o.x, o.dy, o.gamma, o.mean, o.invstd, o.dx, o.dgamma, o.dbeta);
  }
  state.SetBytesProcessed(state.iterations() * o.x.bytes() * 6);  // x twice, y; x, dy, dx
}

void BM_BatchNormTrainOnednn(benchmark::State& state) {
  Operands o(state.range(0), state.range(1));
  const int64_t c = state.range(0), hw = state.range(1);
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const dnnl::memory::desc d({kBatch, c, hw, hw}, dnnl::memory::data_type::f32,
                             dnnl::memory::format_tag::nchw);
  const auto flags = dnnl::normalization_flags::use_scale_shift;
  const dnnl::batch_normalization_forward::primitive_desc fwd(
      {dnnl::prop_kind::forward_training, d, 1e-5f, flags}, engine);
  const dnnl::batch_normalization_backward::primitive_desc bwd(
      {dnnl::prop_kind::backward, d, d, 1e-5f, flags}, engine, fwd);
  dnnl::memory x(d, engine, o.x.raw()), y(d, engine, o.y.raw()), dy(d, engine, o.dy.raw()),
      dx(d, engine, o.dx.raw());
  dnnl::memory scale_shift(fwd.weights_desc(), engine),
      dscale_shift(bwd.diff_weights_desc(), engine), mean(fwd.mean_desc(), engine),
      var(fwd.variance_desc(), engine);
  auto* ss = static_cast<float*>(scale_shift.get_data_handle());
  for (int64_t i = 0; i < c; ++i) ss[i] = 1.f, ss[c + i] = 0.f;
  const dnnl::batch_normalization_forward forward(fwd);
  const dnnl::batch_normalization_backward backward(bwd);
  for (auto _ : state) {
    forward.execute(stream, {{DNNL_ARG_SRC, x},
                             {DNNL_ARG_DST, y},
                             {DNNL_ARG_SCALE_SHIFT, scale_shift},
                             {DNNL_ARG_MEAN, mean},
                             {DNNL_ARG_VARIANCE, var}});
    backward.execute(stream, {{DNNL_ARG_SRC, x},
                              {DNNL_ARG_DIFF_DST, dy},
                              {DNNL_ARG_SCALE_SHIFT, scale_shift},
                              {DNNL_ARG_MEAN, mean},
                              {DNNL_ARG_VARIANCE, var},
                              {DNNL_ARG_DIFF_SRC, dx},
                              {DNNL_ARG_DIFF_SCALE_SHIFT, dscale_shift}});
    stream.wait();
  }
  state.SetLabel(fwd.impl_info_str());
  state.SetBytesProcessed(state.iterations() * o.x.bytes() * 6);
}

// (channels, height = width) of resnet50's batch norms at 64x64.
void Resnet50Shapes(benchmark::internal::Benchmark* b) {
  for (auto [c, hw] : {std::pair{64, 32},
                       {64, 16},
                       {256, 16},
                       {128, 16},
                       {128, 8},
                       {512, 8},
                       {256, 8},
                       {1024, 4},
                       {512, 4},
                       {2048, 2},
                       {512, 2}}) {
    b->Args({c, hw});
  }
  b->ArgNames({"c", "hw"})->Unit(benchmark::kMicrosecond);
}
BENCHMARK(BM_BatchNormTrainDlbench)->Apply(Resnet50Shapes);
BENCHMARK(BM_BatchNormTrainOnednn)->Apply(Resnet50Shapes);

}  // namespace
