// The element-wise loops (runtime/backend/cpu/pointwise_loops.h), included by
// pointwise_loops.cpp once per instruction set, each time inside a namespace of its own. No
// include guard: that is the point.

template <typename T>
void sum(const T* a, const T* b, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = stored<T>(load(a[i]) + load(b[i]));
}

template <typename T>
void relu(const T* x, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = load(x[i]);
    y[i] = stored<T>(v < 0.f ? 0.f : v);
  }
}

// The gradient is loaded whatever the sign: a load under the condition is control flow, which
// keeps GCC from vectorizing the loop (17x slower on a million random signs, measured).
template <typename T>
void relu_grad(const T* y, const T* dy, T* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = load(dy[i]);
    dx[i] = stored<T>(load(y[i]) <= 0.f ? 0.f : g);
  }
}

template <typename T>
void widen(const T* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = load(src[i]);
}

template <typename T>
void narrow(const float* src, T* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = stored<T>(src[i]);
}

void sgd_update(const SgdStep& s, const float* g, float* buf, float* p, int64_t n) {
  // The settings in locals: read through `s` they would be reloaded after every store (a float
  // store may alias them), which keeps the loop from vectorizing.
  const float lr = s.lr, momentum = s.momentum, decay = s.decay, factor = s.grad_factor;
  if (factor == 1.f) {  // unscaled: exactly the loop of an fp32 run
    for (int64_t i = 0; i < n; ++i) {
      const float d = g[i] + decay * p[i];
      buf[i] = momentum * buf[i] + d;
      p[i] -= lr * buf[i];
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float d = g[i] * factor + decay * p[i];
    buf[i] = momentum * buf[i] + d;
    p[i] -= lr * buf[i];
  }
}

// The update a chunk at a time: the chunk's 16-bit gradient widened, the update, then
// narrow(at, k) rounds elements [at, at + k) of the weights into the copy.
template <typename G, typename Narrow>
void update_in_chunks(const SgdStep& s, const G* g, float* buf, float* p, int64_t n,
                      Narrow narrow) {
  constexpr int64_t kChunk = 1024;  // whole blocks of 256 (sgd_update_into_pairs)
  float wide[kChunk];
  for (int64_t at = 0; at < n; at += kChunk) {
    const int64_t k = n - at < kChunk ? n - at : kChunk;
    widen(g + at, wide, k);
    sgd_update(s, wide, buf + at, p + at, k);
    narrow(at, k);
  }
}

template <typename G, typename C>
void sgd_update_with_copy(const SgdStep& s, const G* g, float* buf, float* p, C* compute,
                          int64_t n) {
  update_in_chunks(s, g, buf, p, n,
                   [=](int64_t at, int64_t k) { narrow(p + at, compute + at, k); });
}

// One 16 x 16 block of kOIhw16i16o weights ([16 c][16 k]) rounded into kOIhw8i16o2i's order
// ([8 c / 2][16 k][2 c % 2]: runtime/core/layout_order.h's stored_offset).
template <typename T>
void narrow_block_into_pairs(const float* src, T* dst) {
  for (int64_t pair = 0; pair < 8; ++pair) {
    const float* even = src + 2 * pair * 16;
    const float* odd = even + 16;
    T* out = dst + pair * 32;
    for (int64_t k = 0; k < 16; ++k) {
      out[2 * k] = stored<T>(even[k]);
      out[2 * k + 1] = stored<T>(odd[k]);
    }
  }
}

template <typename T>
void narrow_into_pairs(const float* src, T* dst, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b) narrow_block_into_pairs(src + b * 256, dst + b * 256);
}

template <typename G, typename C>
void sgd_update_into_pairs(const SgdStep& s, const G* g, float* buf, float* p, C* compute,
                           int64_t blocks) {
  update_in_chunks(s, g, buf, p, blocks * 256, [=](int64_t at, int64_t k) {
    narrow_into_pairs(p + at, compute + at, k / 256);
  });
}

template <typename T>
const PointwiseLoops<T> kPointwiseLoops{&sum<T>,   &relu<T>,   &relu_grad<T>,
                                        &widen<T>, &narrow<T>, &narrow_into_pairs<T>};
const SgdLoops kSgdLoops{&sgd_update};
template <typename G, typename C>
const SgdCopyLoops<G, C> kSgdCopyLoops{&sgd_update_with_copy<G, C>, &sgd_update_into_pairs<G, C>};
