// Batch norm's loops (runtime/backend/cpu/batch_norm_loops.h), included by batch_norm_loops.cpp
// once per instruction set, each time inside a namespace of its own. No include guard: that is
// the point. Everything here is in the including namespace.

// Sums in kLanes independent double accumulators, added together in a fixed order at the end: the
// same bits on any thread count, and no chain of dependent additions (one accumulator runs at one
// add per floating-point add latency, and GCC may not reorder the sum to vectorize it).
constexpr int64_t kLanes = 8;
struct LaneSum {
  double lane[kLanes] = {};
  // Adds f(k) for k in [0, n), element k into lane k % kLanes.
  template <typename F>
  void add(int64_t n, F f) {
    int64_t k = 0;
    for (; k + kLanes <= n; k += kLanes) {
      for (int64_t j = 0; j < kLanes; ++j) lane[j] += f(k + j);
    }
    for (int64_t j = 0; k < n; ++k, ++j) lane[j] += f(k);
  }
  double total() const {
    double pairs[kLanes / 2];
    for (int64_t j = 0; j < kLanes / 2; ++j) pairs[j] = lane[j] + lane[j + kLanes / 2];
    return (pairs[0] + pairs[2]) + (pairs[1] + pairs[3]);
  }
};
static_assert(kLanes == 8, "total() adds eight lanes");

// Channel c's statistics from its mean and biased variance into the saved and running ones, and
// the affine that normalises it: {scale, shift}.
struct Affine {
  float scale, shift;
};
template <typename T>
Affine channel_affine(const BnTrainArgs<T>& a, int64_t c, double mean, double var) {
  const int64_t m = a.d.n * a.d.inner;
  const double invstd = 1.0 / std::sqrt(var + a.eps);
  a.save_mean[c] = static_cast<float>(mean);
  a.save_invstd[c] = static_cast<float>(invstd);
  float& rm = a.running_mean[c];
  float& rv = a.running_var[c];
  rm = static_cast<float>((1 - a.momentum) * rm + a.momentum * mean);
  rv = static_cast<float>((1 - a.momentum) * rv + a.momentum * var * m / (m - 1));
  const float scale = static_cast<float>(a.gamma[c] * invstd);
  return {scale, static_cast<float>(a.beta[c] - mean * scale)};
}

// Channel c's statistics, then y = x * scale + shift, then max(y, 0) when relu.
template <typename T>
void train_channel(const BnTrainArgs<T>& a, int64_t c) {
  const BnDims& d = a.d;
  const int64_t m = d.n * d.inner;
  LaneSum sum;
  for (int64_t i = 0; i < d.n; ++i) {
    const T* row = a.x + (i * d.c + c) * d.inner;
    sum.add(d.inner, [row](int64_t k) { return static_cast<double>(load(row[k])); });
  }
  const double mean = sum.total() / m;
  LaneSum sq;
  for (int64_t i = 0; i < d.n; ++i) {
    const T* row = a.x + (i * d.c + c) * d.inner;
    sq.add(d.inner, [row, mean](int64_t k) {
      const double v = load(row[k]);
      return (v - mean) * (v - mean);
    });
  }
  const auto [scale, shift] = channel_affine(a, c, mean, sq.total() / m);
  const float floor = a.relu ? 0.f : -INFINITY;  // -inf: no ReLU (NaN and -0 pass either way)
  for (int64_t i = 0; i < d.n; ++i) {
    const T* row = a.x + (i * d.c + c) * d.inner;
    T* out = a.y + (i * d.c + c) * d.inner;
    for (int64_t k = 0; k < d.inner; ++k) {
      const float v = load(row[k]) * scale + shift;
      out[k] = stored<T>(v < floor ? 0.f : v);
    }
  }
}

// Channel c of the ReLU's backward: dx = dy where y > 0 (NaN included), else 0.
template <typename T>
void relu_mask_channel(const BnBackwardArgs<T>& a, int64_t c) {
  const BnDims& d = a.d;
  for (int64_t i = 0; i < d.n; ++i) {
    const int64_t row = (i * d.c + c) * d.inner;
    const T* yr = a.y + row;
    const T* gr = a.dy + row;
    T* o = a.dx + row;
    for (int64_t k = 0; k < d.inner; ++k) {
      const T g = gr[k];  // loaded whatever the mask, as relu_backward's (vectorized)
      o[k] = load(yr[k]) <= 0.f ? stored<T>(0.f) : g;
    }
  }
}

// Channel c of batch norm's backward, of `dy` (a.dy, or a.dx after the ReLU's mask) into a.dx.
template <typename T>
void bn_backward_channel(const BnBackwardArgs<T>& a, const T* dy, int64_t c) {
  const BnDims& d = a.d;
  const double mean = a.save_mean[c], invstd = a.save_invstd[c];
  const int64_t m = d.n * d.inner;
  const auto at = [&](int64_t i) { return (i * d.c + c) * d.inner; };
  LaneSum dy_sum, dy_xhat_sum;
  for (int64_t i = 0; i < d.n; ++i) {
    const T* xr = a.x + at(i);
    const T* gr = dy + at(i);
    dy_sum.add(d.inner, [gr](int64_t k) { return static_cast<double>(load(gr[k])); });
    dy_xhat_sum.add(d.inner,
                    [=](int64_t k) { return load(gr[k]) * (load(xr[k]) - mean) * invstd; });
  }
  const double sum_dy = dy_sum.total(), sum_dy_xhat = dy_xhat_sum.total();
  a.dgamma[c] = static_cast<float>(sum_dy_xhat);
  a.dbeta[c] = static_cast<float>(sum_dy);
  const double k1 = a.gamma[c] * invstd;
  const double mean_dy = sum_dy / m, mean_dy_xhat = sum_dy_xhat / m;
  for (int64_t i = 0; i < d.n; ++i) {
    const T* xr = a.x + at(i);
    const T* gr = dy + at(i);
    T* out = a.dx + at(i);
    for (int64_t k = 0; k < d.inner; ++k) {
      const double xhat = (load(xr[k]) - mean) * invstd;
      out[k] = stored<T>(static_cast<float>(k1 * (load(gr[k]) - mean_dy - xhat * mean_dy_xhat)));
    }
  }
}

// The masked gradient into dx first (where fused), then batch norm's backward from dx into dx,
// while the channel's rows are in cache: the same bits as relu_backward then batch norm's.
template <typename T>
void backward_channel(const BnBackwardArgs<T>& a, int64_t c) {
  if (a.y) relu_mask_channel(a, c);
  bn_backward_channel(a, a.y ? a.dx : a.dy, c);
}

template <typename T>
void infer_channel(const BnInferArgs<T>& a, int64_t c) {
  const float invstd = 1.f / std::sqrt(a.running_var[c] + a.eps);
  const float scale = a.gamma[c] * invstd;
  const float shift = a.beta[c] - a.running_mean[c] * scale;
  for (int64_t i = 0; i < a.d.n; ++i) {
    const T* row = a.x + (i * a.d.c + c) * a.d.inner;
    T* out = a.y + (i * a.d.c + c) * a.d.inner;
    for (int64_t k = 0; k < a.d.inner; ++k) out[k] = stored<T>(load(row[k]) * scale + shift);
  }
}

// Channels last (NHWC): element (i, c, k) at (i * inner + k) * channels + c. The loops below take
// a range of channels [c0, c1) and walk the pixels in the order the loops above do, each
// channel's value k of a row into lane k % kLanes, summed as LaneSum::total() sums: the same bits
// as NCHW's, with every row of channels read contiguously.
struct ChannelLanes {
  int64_t width;             // channels in the range
  std::vector<double> lane;  // lane j of channel c0 + q at j * width + q
  explicit ChannelLanes(int64_t w) : width(w), lane(static_cast<size_t>(kLanes * w), 0.0) {}
  double* at(int64_t k) { return lane.data() + (k % kLanes) * width; }
  double total(int64_t q) const {
    const double* l = lane.data() + q;
    double pairs[kLanes / 2];
    for (int64_t j = 0; j < kLanes / 2; ++j) pairs[j] = l[j * width] + l[(j + kLanes / 2) * width];
    return (pairs[0] + pairs[2]) + (pairs[1] + pairs[3]);
  }
};

// f(k, offset) for every pixel of every image, offset the element of channel c0 at pixel k.
template <typename F>
void each_pixel(const BnDims& d, int64_t c0, F f) {
  for (int64_t i = 0; i < d.n; ++i) {
    for (int64_t k = 0; k < d.inner; ++k) f(k, (i * d.inner + k) * d.c + c0);
  }
}

template <typename T>
void train_channels_last(const BnTrainArgs<T>& a, int64_t c0, int64_t c1) {
  const BnDims& d = a.d;
  const int64_t w = c1 - c0, m = d.n * d.inner;
  ChannelLanes sum(w), sq(w);
  each_pixel(d, c0, [&](int64_t k, int64_t at) {
    double* l = sum.at(k);
    for (int64_t q = 0; q < w; ++q) l[q] += static_cast<double>(load(a.x[at + q]));
  });
  std::vector<double> mean(static_cast<size_t>(w));
  for (int64_t q = 0; q < w; ++q) mean[q] = sum.total(q) / m;
  each_pixel(d, c0, [&](int64_t k, int64_t at) {
    double* l = sq.at(k);
    for (int64_t q = 0; q < w; ++q) {
      const double v = load(a.x[at + q]);
      l[q] += (v - mean[q]) * (v - mean[q]);
    }
  });
  std::vector<float> scale(static_cast<size_t>(w)), shift(static_cast<size_t>(w));
  for (int64_t q = 0; q < w; ++q) {
    const Affine f = channel_affine(a, c0 + q, mean[q], sq.total(q) / m);
    scale[q] = f.scale, shift[q] = f.shift;
  }
  const float floor = a.relu ? 0.f : -INFINITY;
  each_pixel(d, c0, [&](int64_t, int64_t at) {
    for (int64_t q = 0; q < w; ++q) {
      const float v = load(a.x[at + q]) * scale[q] + shift[q];
      a.y[at + q] = stored<T>(v < floor ? 0.f : v);
    }
  });
}

template <typename T>
void backward_channels_last(const BnBackwardArgs<T>& a, int64_t c0, int64_t c1) {
  const BnDims& d = a.d;
  const int64_t w = c1 - c0, m = d.n * d.inner;
  if (a.y) {
    each_pixel(d, c0, [&](int64_t, int64_t at) {
      for (int64_t q = 0; q < w; ++q) {
        const T g = a.dy[at + q];
        a.dx[at + q] = load(a.y[at + q]) <= 0.f ? stored<T>(0.f) : g;
      }
    });
  }
  const T* dy = a.y ? a.dx : a.dy;
  ChannelLanes dy_sum(w), dy_xhat_sum(w);
  each_pixel(d, c0, [&](int64_t k, int64_t at) {
    double* s = dy_sum.at(k);
    double* sx = dy_xhat_sum.at(k);
    for (int64_t q = 0; q < w; ++q) {
      const double mean = a.save_mean[c0 + q], invstd = a.save_invstd[c0 + q];
      s[q] += static_cast<double>(load(dy[at + q]));
      sx[q] += load(dy[at + q]) * (load(a.x[at + q]) - mean) * invstd;
    }
  });
  std::vector<double> k1(static_cast<size_t>(w)), mean_dy(k1), mean_dy_xhat(k1);
  for (int64_t q = 0; q < w; ++q) {
    const double sum_dy = dy_sum.total(q), sum_dy_xhat = dy_xhat_sum.total(q);
    a.dgamma[c0 + q] = static_cast<float>(sum_dy_xhat);
    a.dbeta[c0 + q] = static_cast<float>(sum_dy);
    k1[q] = a.gamma[c0 + q] * static_cast<double>(a.save_invstd[c0 + q]);
    mean_dy[q] = sum_dy / m, mean_dy_xhat[q] = sum_dy_xhat / m;
  }
  each_pixel(d, c0, [&](int64_t, int64_t at) {
    for (int64_t q = 0; q < w; ++q) {
      const double mean = a.save_mean[c0 + q], invstd = a.save_invstd[c0 + q];
      const double xhat = (load(a.x[at + q]) - mean) * invstd;
      a.dx[at + q] = stored<T>(
          static_cast<float>(k1[q] * (load(dy[at + q]) - mean_dy[q] - xhat * mean_dy_xhat[q])));
    }
  });
}

template <typename T>
void infer_channels_last(const BnInferArgs<T>& a, int64_t c0, int64_t c1) {
  const int64_t w = c1 - c0;
  std::vector<float> scale(static_cast<size_t>(w)), shift(static_cast<size_t>(w));
  for (int64_t q = 0; q < w; ++q) {
    const int64_t c = c0 + q;
    const float invstd = 1.f / std::sqrt(a.running_var[c] + a.eps);
    scale[q] = a.gamma[c] * invstd;
    shift[q] = a.beta[c] - a.running_mean[c] * scale[q];
  }
  each_pixel(a.d, c0, [&](int64_t, int64_t at) {
    for (int64_t q = 0; q < w; ++q)
      a.y[at + q] = stored<T>(load(a.x[at + q]) * scale[q] + shift[q]);
  });
}

template <typename T>
const BnLoops<T> kBnLoops{&train_channel<T>,          &backward_channel<T>,
                          &infer_channel<T>,          &train_channels_last<T>,
                          &backward_channels_last<T>, &infer_channels_last<T>};
