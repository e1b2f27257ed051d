// Batch norm: cuDNN graphs (with or without the ReLU fused) where cuDNN has an engine for the
// shape, our kernels (batch_norm_kernels.h) where it has none.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "runtime/backend/cuda/batch_norm_kernels.h"
#include "runtime/backend/cuda/cuda_backend_impl.h"

namespace dlb::cuda {

void CudaBackend::batch_norm_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                   Tensor& running_mean, Tensor& running_var, Tensor& save_mean,
                                   Tensor& save_invstd, Tensor& y, float momentum, float eps) {
  batch_norm_train_counted(false, x, gamma, beta, running_mean, running_var, save_mean, save_invstd,
                           y, momentum, eps, nullptr);
}

bool CudaBackend::fuses_batch_norm_relu(const OpTypes& types) const {
  return supports(Op::kBatchNorm, types);
}

void CudaBackend::batch_norm_relu_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                        Tensor& running_mean, Tensor& running_var,
                                        Tensor& save_mean, Tensor& save_invstd, Tensor& y,
                                        float momentum, float eps) {
  batch_norm_train_counted(true, x, gamma, beta, running_mean, running_var, save_mean, save_invstd,
                           y, momentum, eps, nullptr);
}

void CudaBackend::batch_norm_train_counted(bool relu, const Tensor& x, const Tensor& gamma,
                                           const Tensor& beta, Tensor& running_mean,
                                           Tensor& running_var, Tensor& save_mean,
                                           Tensor& save_invstd, Tensor& y, float momentum,
                                           float eps, Tensor* num_batches_tracked) {
  const BnTrain t{x,
                  gamma,
                  beta,
                  running_mean,
                  running_var,
                  save_mean,
                  save_invstd,
                  y,
                  momentum,
                  eps,
                  step_counter(num_batches_tracked)};
  const BnDims d = bn_train_dims(x, gamma);
  if (const BatchNormGraphs* g = bn_graphs(d, eps, relu)) {
    bn_train_graph(*g, d, t);
  } else if (relu) {  // no engine for the fused pair: batch norm alone, then our ReLU
    batch_norm_train_counted(false, x, gamma, beta, running_mean, running_var, save_mean,
                             save_invstd, y, momentum, eps, num_batches_tracked);
    relu_forward(y, y);
  } else {  // cuDNN has no engine for this shape: our kernels
    bn_train_kernels(d, t);
  }
}

void CudaBackend::batch_norm_relu_backward(const Tensor& x, const Tensor& y, const Tensor& dy,
                                           const Tensor& gamma, const Tensor& save_mean,
                                           const Tensor& save_invstd, Tensor& dx, Tensor& dgamma,
                                           Tensor& dbeta) {
  const BnDims d = bn_dims(x, gamma);
  same(x, y, "batch norm + relu backward");
  same(dy, y, "batch norm + relu backward");
  if (const BatchNormGraphs* g = made_bn_graphs(d, true)) {
    NvtxRange range("cudnn batch norm + relu backward");
    bn_backward_graph(*g, d, x, &y, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
    return;
  }
  // The mask into scratch (cuDNN's batch-norm graph is not promised dy and dx in one buffer).
  Tensor masked =
      relu_grad_scratch_.slice_flat(0, dy.numel()).reshaped(dy.shape()).with_layout(dy.layout());
  relu_backward(y, dy, masked);
  batch_norm_backward(x, masked, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
}

void CudaBackend::batch_norm_infer(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                   const Tensor& running_mean, const Tensor& running_var, Tensor& y,
                                   float eps) {
  const BnDims d = bn_dims(x, gamma);
  same(x, y, "batch norm inference");
  with_storage(x.dtype(), "batch norm input", [&](auto tag) {
    using T = decltype(tag);
    run(x.numel(), BatchNormInfer<T>{as<T>(x), gamma.data<float>(), beta.data<float>(),
                                     running_mean.data<float>(), running_var.data<float>(), eps,
                                     d.rows(), as<T>(y)});
  });
}

void CudaBackend::batch_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                      const Tensor& save_mean, const Tensor& save_invstd,
                                      Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  const BnDims d = bn_dims(x, gamma);
  const BatchNormGraphs* g = made_bn_graphs(d, false);
  if (!g) {
    bn_backward_kernels(d, x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
    return;
  }
  NvtxRange range("cudnn batch norm backward");
  bn_backward_graph(*g, d, x, nullptr, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
}

CudaBackend::BnDims CudaBackend::bn_dims(const Tensor& x, const Tensor& gamma) {
  check_f32(gamma, "batch norm weight");
  const int64_t n = x.dim(0), c = x.dim(1);
  check_numel(gamma, c, "batch norm weight");
  return {n, c, x.numel() / (n * c), x.dtype(), x.layout()};
}

CudaBackend::BnDims CudaBackend::bn_train_dims(const Tensor& x, const Tensor& gamma) {
  const BnDims d = bn_dims(x, gamma);
  if (d.n * d.inner < 2) {
    throw InvalidArgument(
        fmt::format("batch norm in training needs more than one value per channel (got input {})",
                    x.shape().str()));
  }
  return d;
}

void CudaBackend::bn_train_graph(const BatchNormGraphs& g, const BnDims& d, const BnTrain& t) {
  float* stats = bn_scratch(d.c);
  NvtxRange range("cudnn batch norm forward");
  g.forward(cudnn_,
            {t.x.raw(), t.gamma.raw(), t.beta.raw(), t.y.raw(), t.save_mean.raw(),
             t.save_invstd.raw(), stats},
            workspace(bn_workspace_));
  run(d.c, BatchNormRunningUpdate{t.save_mean.data<float>(), t.save_invstd.data<float>(), t.eps,
                                  t.momentum, d.n * d.inner, t.running_mean.data<float>(),
                                  t.running_var.data<float>(), t.count});
}

void CudaBackend::plan_batch_norm(const BatchNormShape& bn) {
  const Shape& x = bn.x;
  if (x.rank() < 2 || x[0] * x[1] == 0) return;
  const BnDims d{x[0], x[1], x.numel() / (x[0] * x[1]), bn.dtype, bn.layout};
  // A shape training cannot normalise is refused at its pass, with the tensor's shape.
  if (d.n * d.inner < 2) return;
  bn_scratch(d.c);  // the running statistics' scratch
  // Each plan reserves again what the pass takes: a binding that fails releases the workspace,
  // while the graphs made before stay cached. Where there is no graph, the fallback's scratch.
  const auto reserve = [&](bool relu) {
    const bool graph = bn_graphs(d, bn.eps, relu) != nullptr;
    graph ? reserve_workspace(bn_workspace_) : reserve_bn_fallback(d, relu);
    return graph;
  };
  // No fused graph: the pass runs batch norm alone (on its graph or the kernels), then the ReLU
  // (batch_norm_train_counted).
  if (!reserve(bn.relu) && bn.relu) reserve(false);
}

void CudaBackend::reserve_bn_fallback(const BnDims& d, bool relu) {
  if (!relu) {  // the kernels' sums
    reserve_workspace(bn_kernel_scratch_bytes(d));
    return;
  }
  // The masked gradient, which the unfused backward reads.
  const int64_t numel = d.n * d.c * d.inner;
  if (!relu_grad_scratch_.defined() || relu_grad_scratch_.numel() < numel ||
      relu_grad_scratch_.dtype() != d.dtype) {
    relu_grad_scratch_ = Tensor();  // released first, so the budget sees one of them
    scratch_moved();
    relu_grad_scratch_ =
        empty(Shape{numel}, d.dtype, MemCategory::kWorkspace, "batch norm + relu: masked gradient");
  }
}

const BatchNormGraphs* CudaBackend::bn_graphs(const BnDims& d, float eps, bool relu) {
  uint32_t eps_bits = 0;
  std::memcpy(&eps_bits, &eps, sizeof(eps_bits));
  const auto key = std::make_tuple(d.n, d.c, d.inner, d.dtype, d.layout, relu, eps_bits);
  auto it = bn_by_shape_.find(key);
  if (it == bn_by_shape_.end()) {
    std::unique_ptr<BatchNormGraphs> g;
    // Made by plan_batch_norm before the step is bound (or, for a shape no plan was made for,
    // at the first forward, a warm-up step), so whatever falls back reserves its scratch there,
    // not in the timed steps.
    const auto fall_back = [&](const std::exception& e) {
      // The message's first line: cuDNN's call trace that follows it is for a bug report.
      const std::string why(e.what());
      fmt::print(stderr, "dlbench: {}; batch norm{} over {}x{}x{} runs {}\n",
                 why.substr(0, why.find('\n')), relu ? " + relu" : "", d.n, d.c, d.inner,
                 relu ? "unfused" : "on dlbench's kernels");
      g.reset();
      reserve_bn_fallback(d, relu);
    };
    try {
      g = std::make_unique<BatchNormGraphs>(d.n, d.c, d.inner, 1, d.dtype, d.layout, eps, relu,
                                            cudnn_);
      bn_workspace_ = std::max(bn_workspace_, g->choose_engines(cudnn_));
      reserve_workspace(bn_workspace_);
    } catch (const Unsupported& e) {
      fall_back(e);
    } catch (const InvalidArgument& e) {
      // The fused pattern refused with another status: batch norm alone still has its path.
      if (!relu) throw;
      fall_back(e);
    }
    it = bn_by_shape_.emplace(key, std::move(g)).first;
  }
  return it->second.get();
}

const BatchNormGraphs* CudaBackend::made_bn_graphs(const BnDims& d, bool relu) const {
  auto it = bn_by_shape_.lower_bound(
      std::make_tuple(d.n, d.c, d.inner, d.dtype, d.layout, relu, uint32_t{0}));
  if (it == bn_by_shape_.end() || std::get<0>(it->first) != d.n || std::get<1>(it->first) != d.c ||
      std::get<2>(it->first) != d.inner || std::get<3>(it->first) != d.dtype ||
      std::get<4>(it->first) != d.layout || std::get<5>(it->first) != relu) {
    throw InvalidArgument("cuda: batch norm backward before its forward pass");
  }
  return it->second.get();
}

size_t CudaBackend::bn_kernel_scratch_bytes(const BnDims& d) {
  const int64_t parts = reduce_parts(d.c, d.n * d.inner);
  return static_cast<size_t>(d.c * parts) * sizeof(Welford) +
         static_cast<size_t>(4 * d.c) * sizeof(double);
}

void CudaBackend::bn_train_kernels(const BnDims& d, const BnTrain& t) {
  same(t.x, t.y, "batch norm");
  NvtxRange range("batch norm forward (kernels)");
  const int64_t m = d.n * d.inner, parts = reduce_parts(d.c, m);
  auto* moments = static_cast<Welford*>(workspace(bn_kernel_scratch_bytes(d)));
  auto* channel = reinterpret_cast<double*>(moments + d.c * parts);
  with_storage(d.dtype, "batch norm input", [&](auto tag) {
    using T = decltype(tag);
    reduce(d.c, m, parts, BatchNormMoments<T>{as<T>(t.x), d.rows()}, moments);
    run(d.c, BatchNormStatistics{moments, parts, t.gamma.data<float>(), t.beta.data<float>(), t.eps,
                                 t.momentum, channel, t.save_mean.data<float>(),
                                 t.save_invstd.data<float>(), t.running_mean.data<float>(),
                                 t.running_var.data<float>(), t.count});
    run(t.x.numel(), BatchNormNormalize<T>{as<T>(t.x), channel, d.rows(), as<T>(t.y)});
  });
}

void CudaBackend::bn_backward_kernels(const BnDims& d, const Tensor& x, const Tensor& dy,
                                      const Tensor& gamma, const Tensor& save_mean,
                                      const Tensor& save_invstd, Tensor& dx, Tensor& dgamma,
                                      Tensor& dbeta) {
  same(x, dy, "batch norm backward");
  same(x, dx, "batch norm backward");
  NvtxRange range("batch norm backward (kernels)");
  const int64_t m = d.n * d.inner, parts = reduce_parts(d.c, m);
  auto* sums = static_cast<SumPair*>(workspace(bn_kernel_scratch_bytes(d)));
  auto* channel = reinterpret_cast<double*>(sums + d.c * parts);
  check_dtype(dbeta, dgamma.dtype(), "batch norm bias gradient");
  with_storage(d.dtype, "batch norm input", [&](auto tag) {
    using T = decltype(tag);
    reduce(d.c, m, parts,
           BatchNormBackwardSums<T>{as<T>(x), as<T>(dy), save_mean.data<float>(),
                                    save_invstd.data<float>(), d.rows()},
           sums);
    with_storage(dgamma.dtype(), "batch norm weight gradient", [&](auto gtag) {
      using G = decltype(gtag);
      run(d.c, BatchNormBackwardChannel<G>{sums, parts, m, gamma.data<float>(),
                                           save_invstd.data<float>(), channel, as<G>(dgamma),
                                           as<G>(dbeta)});
    });
    run(x.numel(),
        BatchNormBackwardData<T>{as<T>(x), as<T>(dy), save_mean.data<float>(),
                                 save_invstd.data<float>(), channel, d.rows(), as<T>(dx)});
  });
}

void CudaBackend::bn_backward_graph(const BatchNormGraphs& g, const BnDims& d, const Tensor& x,
                                    const Tensor* y, const Tensor& dy, const Tensor& gamma,
                                    const Tensor& save_mean, const Tensor& save_invstd, Tensor& dx,
                                    Tensor& dgamma, Tensor& dbeta) {
  same(x, dy, "batch norm backward");
  same(x, dx, "batch norm backward");
  check_dtype(dbeta, dgamma.dtype(), "batch norm bias gradient");
  const bool wide = dgamma.dtype() == DType::kF32;
  float* scratch = wide ? nullptr : bn_scratch(d.c) + 4 * d.c;
  g.backward(
      cudnn_,
      {x.raw(), y ? y->raw() : nullptr, dy.raw(), gamma.raw(), save_mean.raw(), save_invstd.raw(),
       dx.raw(), wide ? dgamma.raw() : scratch, wide ? dbeta.raw() : scratch + d.c},
      workspace(bn_workspace_));
  if (!wide) {
    cast(bn_scratch_.slice_flat(4 * d.c, d.c), dgamma);
    cast(bn_scratch_.slice_flat(5 * d.c, d.c), dbeta);
  }
}

float* CudaBackend::bn_scratch(int64_t c) {
  if (!bn_scratch_.defined() || bn_scratch_.numel() < 6 * c) {
    scratch_moved();
    bn_scratch_ = empty(Shape{6 * c}, DType::kF32, MemCategory::kWorkspace,
                        "batch-norm running-statistics scratch");
    fill(bn_scratch_, 0.f);
  }
  return bn_scratch_.data<float>();
}

}  // namespace dlb::cuda
