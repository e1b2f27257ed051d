// Element-wise ops on the GPU: fill, cast, ReLU, dropout, add, accumulate and a device counter's
// increment, each one kernel of elementwise_kernels.h.
#include <fmt/format.h>

#include "runtime/backend/cuda/cuda_backend_impl.h"
#include "runtime/backend/cuda/elementwise_kernels.h"

namespace dlb::cuda {

void CudaBackend::fill(Tensor& t, float value) {
  with_storage(t.dtype(), "fill", [&](auto tag) {
    using T = decltype(tag);
    run(t.numel(), Fill<T>{as<T>(t), stored<T>(value)});
  });
}

void CudaBackend::cast(const Tensor& src, Tensor& dst) {
  check_numel(dst, src.numel(), "cast output");
  const ToChannelsLast to = relayout(src, dst, "cast");
  with_storage(src.dtype(), "cast input", [&](auto s) {
    using S = decltype(s);
    with_storage(dst.dtype(), "cast output", [&](auto d) {
      using D = decltype(d);
      run(src.numel(), Cast<S, D>{as<S>(src), as<D>(dst), to});
    });
  });
}

void CudaBackend::relu_forward(const Tensor& x, Tensor& y) {
  same(x, y, "relu");
  with_storage(x.dtype(), "relu input", [&](auto tag) {
    using T = decltype(tag);
    run(x.numel(), ReluForward<T>{as<T>(x), as<T>(y)});
  });
}

void CudaBackend::relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  same(y, dx, "relu backward");
  same(dy, dx, "relu backward");
  with_storage(y.dtype(), "relu output", [&](auto tag) {
    using T = decltype(tag);
    run(y.numel(), ReluBackward<T>{as<T>(y), as<T>(dy), as<T>(dx)});
  });
}

void CudaBackend::dropout_forward(const Tensor& x, float p, const DropoutSeed& seed, Tensor& mask,
                                  Tensor& y) {
  same(x, y, "dropout");
  same(x, mask, "dropout mask");
  if (!(p >= 0.f && p < 1.f)) {
    throw InvalidArgument(fmt::format("dropout probability must be in [0, 1) (got {})", p));
  }
  with_storage(x.dtype(), "dropout input", [&](auto tag) {
    using T = decltype(tag);
    run(x.numel(),
        DropoutForward<T>{as<T>(x), p, seed.base, step_counter(seed.step), as<T>(mask), as<T>(y)});
  });
}

void CudaBackend::dropout_backward(const Tensor& dy, const Tensor& mask, Tensor& dx) {
  same(dy, dx, "dropout backward");
  same(mask, dx, "dropout backward");
  with_storage(dy.dtype(), "dropout gradient", [&](auto tag) {
    using T = decltype(tag);
    run(dy.numel(), DropoutBackward<T>{as<T>(dy), as<T>(mask), as<T>(dx)});
  });
}

void CudaBackend::add(const Tensor& a, const Tensor& b, Tensor& y) {
  same(a, y, "add");
  same(b, y, "add");
  with_storage(y.dtype(), "add", [&](auto tag) {
    using T = decltype(tag);
    run(y.numel(), Add<T>{as<T>(a), as<T>(b), as<T>(y)});
  });
}

void CudaBackend::accumulate(const Tensor& x, Tensor& y) {
  same(x, y, "accumulate");
  with_storage(y.dtype(), "accumulate", [&](auto tag) {
    using T = decltype(tag);
    run(y.numel(), Accumulate<T>{as<T>(x), as<T>(y)});
  });
}

void CudaBackend::increment(Tensor& counter) { run(1, Increment{step_counter(&counter)}); }

}  // namespace dlb::cuda
