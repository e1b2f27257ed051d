// Max, average and adaptive average pooling on our kernels (pooling_kernels.h): cudnn-frontend's
// resample node has no backward.
#include <fmt/format.h>

#include "runtime/backend/cuda/cuda_backend_impl.h"
#include "runtime/backend/cuda/pooling_kernels.h"

namespace dlb::cuda {

void CudaBackend::pool_forward(const PoolDesc& p, const Tensor& x, Tensor& y) {
  const PoolGeo g = pool_geo(x, y);
  with_storage(x.dtype(), "pool input", [&](auto tag) {
    using T = decltype(tag);
    run(y.numel(), PoolForward<T>{p, as<T>(x), g.in, g.out, as<T>(y)});
  });
}

void CudaBackend::pool_backward(const PoolDesc& p, const Tensor& x, const Tensor& y,
                                const Tensor& dy, Tensor& dx) {
  const PoolGeo g = pool_geo(x, y);
  same(x, dx, "pool backward");
  same(y, dy, "pool backward");
  with_storage(x.dtype(), "pool input", [&](auto tag) {
    using T = decltype(tag);
    run(dx.numel(), PoolBackward<T>{p, as<T>(x), as<T>(dy), g.in, g.out, as<T>(dx)});
  });
}

void CudaBackend::max_pool_forward_argmax(const PoolDesc& p, const Tensor& x, Tensor& y,
                                          Tensor& argmax) {
  const PoolGeo g = pool_geo(x, y);
  check_argmax(p, argmax, y);
  with_storage(x.dtype(), "pool input", [&](auto tag) {
    using T = decltype(tag);
    run(y.numel(),
        MaxPoolForwardArgmax<T>{p, as<T>(x), g.in, g.out, as<T>(y), argmax.data<int64_t>()});
  });
}

void CudaBackend::max_pool_backward_argmax(const PoolDesc& p, const Tensor& argmax,
                                           const Tensor& dy, Tensor& dx) {
  const PoolGeo g = pool_geo(dx, dy);
  check_argmax(p, argmax, dy);
  with_storage(dx.dtype(), "pool gradient", [&](auto tag) {
    using T = decltype(tag);
    run(dx.numel(),
        MaxPoolBackwardArgmax<T>{p, argmax.data<int64_t>(), as<T>(dy), g.in, g.out, as<T>(dx)});
  });
}

// The places of max pooling's outputs: int64, in the output's shape and layout.
void CudaBackend::check_argmax(const PoolDesc& p, const Tensor& argmax, const Tensor& y) {
  if (p.mode != PoolMode::kMax) throw InvalidArgument("cuda: an argmax of average pooling");
  check_dtype(argmax, DType::kI64, "max pool argmax");
  if (argmax.shape() != y.shape() || argmax.layout() != y.layout()) {
    throw InvalidArgument(fmt::format("cuda: max pool argmax {} {} for output {} {}",
                                      argmax.shape().str(), layout_name(argmax.layout()),
                                      y.shape().str(), layout_name(y.layout())));
  }
}

void CudaBackend::adaptive_avg_pool_forward(const Tensor& x, Tensor& y) {
  const PoolGeo g = pool_geo(x, y);
  with_storage(x.dtype(), "pool input", [&](auto tag) {
    using T = decltype(tag);
    run(y.numel(), AdaptiveAvgPoolForward<T>{as<T>(x), g.in, g.out, as<T>(y)});
  });
}

void CudaBackend::adaptive_avg_pool_backward(const Tensor& dy, Tensor& dx) {
  const PoolGeo g = pool_geo(dx, dy);
  with_storage(dx.dtype(), "pool gradient", [&](auto tag) {
    using T = decltype(tag);
    run(dx.numel(), AdaptiveAvgPoolBackward<T>{as<T>(dy), g.in, g.out, as<T>(dx)});
  });
}

CudaBackend::PoolGeo CudaBackend::pool_geo(const Tensor& x, const Tensor& y) {
  check_dtype(y, x.dtype(), "pool output");
  if (x.shape().rank() != 4 || y.shape().rank() != 4 || x.dim(0) != y.dim(0) ||
      x.dim(1) != y.dim(1)) {
    throw InvalidArgument(fmt::format("pool input {} and output {} differ in N or C",
                                      x.shape().str(), y.shape().str()));
  }
  return {nchw(x), nchw(y)};
}

}  // namespace dlb::cuda
