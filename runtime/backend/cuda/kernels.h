// The math of the CUDA backend's own kernels (the ops cuDNN and cuBLASLt do not do), one functor
// per kernel. Each is called with one index (an element, a row or an input pixel) and computes
// exactly that index's output, so:
//   - kernels.cu launches each as a thin grid-stride loop (for_each_index);
//   - tests/unit/cuda_kernel_math_test.cpp (f32) and cuda_kernel_math_16bit_test.cpp (fp16 and
//     bf16) run the same functor on the host over every index and compare with the CPU backend,
//     which is the reference.
// A functor templated on T reads and writes its data (activations and their gradients) as T: f32,
// or the 16-bit storage of a mixed-precision run (stored.h), loaded into float, computed in float
// (or double, as the CPU backend does) and rounded once on store. Batch-norm scale, shift and
// statistics, the softmax probabilities, the loss, master weights and momentum stay f32 (the
// precision policy's roles). Each has a kName, the NVTX range its launches appear under.
// Host-compilable: includes nothing of CUDA.
#pragma once
#include <cmath>
#include <cstdint>

#include "runtime/backend/backend.h"
#include "runtime/backend/cuda/channel_reduce.h"
#include "runtime/backend/cuda/stored.h"
#include "runtime/core/counter_hash.h"
#include "runtime/core/host_device.h"

namespace dlb::cuda {

// Where element (n, c, a, b) of an [N, C, H, W] tensor is stored: NCHW, or NHWC (channels last,
// the CUDA backend's layout for 16-bit activations). The shape is always the logical NCHW one.
struct Nchw {
  int64_t c, h, w;
  bool channels_last;
  DLB_HD int64_t at(int64_t n, int64_t ch, int64_t a, int64_t b) const {
    return channels_last ? ((n * h + a) * w + b) * c + ch : ((n * c + ch) * h + a) * w + b;
  }
  // The coordinates of the element stored at offset i.
  DLB_HD void coords(int64_t i, int64_t& n, int64_t& ch, int64_t& a, int64_t& b) const {
    if (channels_last) {
      ch = i % c;
      const int64_t pixel = i / c;
      b = pixel % w;
      a = (pixel / w) % h;
      n = pixel / (w * h);
    } else {
      b = i % w;
      a = (i / w) % h;
      ch = (i / (w * h)) % c;
      n = i / (w * h * c);
    }
  }
};

// The same for the per-channel ops, which see [N, C, inner] (inner: the pixels of a channel):
// "row" r is (n, c) = (r / C, r % C), and k runs over its inner values.
struct ChannelRows {
  int64_t channels, inner;
  bool channels_last;
  DLB_HD int64_t channel_of(int64_t i) const {
    return channels_last ? i % channels : (i / inner) % channels;
  }
  DLB_HD int64_t at(int64_t row, int64_t k) const {
    return channels_last ? ((row / channels) * inner + k) * channels + row % channels
                         : row * inner + k;
  }
  // Value j of channel c's n * inner (image j / inner, pixel j % inner).
  DLB_HD int64_t value_at(int64_t c, int64_t j) const {
    return at((j / inner) * channels + c, j % inner);
  }
};

// Offset i of a [K, C, R, S] (or any [N, C, inner]) tensor stored NCHW, stored NHWC: how a conv
// weight's f32 master (torchvision's layout) maps onto its channels-last 16-bit copy and
// gradient. `channels` 0: the identity.
struct ToChannelsLast {
  int64_t channels = 0, inner = 1;
  DLB_HD int64_t operator()(int64_t i) const {
    if (channels == 0) return i;
    const int64_t per_n = channels * inner, n = i / per_n, rem = i % per_n;
    return (n * inner + rem % inner) * channels + rem / inner;
  }
};

template <typename T>
struct Fill {
  static constexpr const char* kName = "fill";
  T* p;
  T value;  // already stored as T
  DLB_HD void operator()(int64_t i) const { p[i] = value; }
};

// dst = src, converted element-wise (to nearest even where dst is narrower; exact where wider).
// One 16-bit type into the other goes through float, exactly on the way in, as the CPU's does.
// `to` moves element i of an NCHW source to its place in a channels-last destination.
template <typename S, typename D>
struct Cast {
  static constexpr const char* kName = "cast";
  const S* src;
  D* dst;
  ToChannelsLast to;
  DLB_HD void operator()(int64_t i) const { dst[to(i)] = stored<D>(load(src[i])); }
};

template <typename T>
struct ReluForward {
  static constexpr const char* kName = "relu forward";
  const T* x;
  T* y;
  // NaN and -0 fail the comparison and pass through, as in torch.relu.
  DLB_HD void operator()(int64_t i) const {
    const float v = load(x[i]);
    y[i] = stored<T>(v < 0.f ? 0.f : v);
  }
};

// Reads the output, as the CPU backend does: y > 0 exactly where x > 0. As PyTorch's
// threshold_backward, the gradient passes where y is not <= 0, NaN included.
template <typename T>
struct ReluBackward {
  static constexpr const char* kName = "relu backward";
  const T* y;
  const T* dy;
  T* dx;
  DLB_HD void operator()(int64_t i) const {
    dx[i] = stored<T>(load(y[i]) <= 0.f ? 0.f : load(dy[i]));
  }
};

template <typename T>
struct Add {
  static constexpr const char* kName = "add";
  const T* a;
  const T* b;
  T* y;
  DLB_HD void operator()(int64_t i) const { y[i] = stored<T>(load(a[i]) + load(b[i])); }
};

template <typename T>
struct Accumulate {  // y += x
  static constexpr const char* kName = "accumulate";
  const T* x;
  T* y;
  DLB_HD void operator()(int64_t i) const { y[i] = stored<T>(load(y[i]) + load(x[i])); }
};

// Inverted dropout: element i is dropped when counter_uniform(seed, i) < p, else scaled by
// 1/(1-p) as the mask stores it; the mask holds 0 or that scale, and backward multiplies by it.
// The seed is `seed` plus the step counter at `step` (null: plus 0), read when the kernel runs,
// so a replayed graph draws each step's own mask (DropoutSeed, backend.h).
template <typename T>
struct DropoutForward {
  static constexpr const char* kName = "dropout forward";
  const T* x;
  float p;
  uint64_t seed;
  const int64_t* step;
  T* mask;
  T* y;
  DLB_HD void operator()(int64_t i) const {
    const float keep_scale = load(stored<T>(1.f / (1.f - p)));
    const uint64_t s = seed + (step ? static_cast<uint64_t>(*step) : 0);
    const float m = counter_uniform(s, static_cast<uint64_t>(i)) < p ? 0.f : keep_scale;
    mask[i] = stored<T>(m);
    y[i] = stored<T>(load(x[i]) * m);
  }
};

template <typename T>
struct DropoutBackward {
  static constexpr const char* kName = "dropout backward";
  const T* dy;
  const T* mask;
  T* dx;
  DLB_HD void operator()(int64_t i) const { dx[i] = stored<T>(load(dy[i]) * load(mask[i])); }
};

// A counter in device memory (the step counter, num_batches_tracked): counter[0] += 1, one index.
struct Increment {
  static constexpr const char* kName = "increment";
  int64_t* counter;
  DLB_HD void operator()(int64_t) const { *counter += 1; }
};

// torch.optim.SGD with momentum and weight decay (dampening 0), over one element of the flat
// parameter buffer: the master weights and momentum are f32, the gradient G (f32, or 16-bit in a
// mixed-precision run). nvcc may contract the multiply-adds into FMAs: on a GPU the result can
// differ from the CPU's by a rounding per operation.
//   - With `scaler` (fp16's loss-scale state): the gradient times 1/scale (the reciprocal in
//     double, rounded to float once, as GradScaler), or nothing at all when the step's found-inf
//     slot is set: the step is skipped.
//   - With `compute`: the updated weight is also stored in the compute precision, the 16-bit
//     copy that forward and backward read. The copy costs no pass of its own.
//   - With `to` (a conv weight in a channels-last run): the gradient and the copy are stored
//     channels-last, the master weights and momentum in torchvision's layout.
template <typename G>
struct SgdUpdate {
  static constexpr const char* kName = "sgd update";
  SgdConfig cfg;
  const G* grad;
  const float* scaler;  // null: no loss scaling
  float* momentum;
  float* param;
  G* compute;  // null: no compute copy
  ToChannelsLast to;
  DLB_HD void operator()(int64_t i) const {
    const int64_t j = to(i);
    float g = load(grad[j]);
    if (scaler) {
      if (scaler[kFoundInfSlot] != 0.f) return;
      g *= static_cast<float>(1.0 / static_cast<double>(scaler[kScaleSlot]));
    }
    const float d = g + cfg.weight_decay * param[i];
    momentum[i] = cfg.momentum * momentum[i] + d;
    param[i] -= cfg.lr * momentum[i];
    if (compute) compute[j] = stored<G>(param[i]);
  }
};

// Loss scaling's check (GradScaler's found_inf), on the stored bits: sets the found-inf slot when
// gradient i is inf or NaN; never clears it. Index 0 also counts a scale whose reciprocal is
// infinite, as GradScaler does (0 x inf is NaN there). Every writer writes the same 1.
template <typename G>
struct FindNonFinite {
  static constexpr const char* kName = "loss scale: find inf/nan";
  const G* grads;
  float* scaler;
  DLB_HD void operator()(int64_t i) const {
    bool found = non_finite(grads[i]);
    if (i == 0) {
      found =
          found || non_finite(static_cast<float>(1.0 / static_cast<double>(scaler[kScaleSlot])));
    }
    if (found) scaler[kFoundInfSlot] = 1.f;
  }
};

// GradScaler.update on the device, one index (a single thread): backend.h's rule.
struct UpdateLossScale {
  static constexpr const char* kName = "loss scale: update";
  LossScaleConfig cfg;
  float* s;
  DLB_HD void operator()(int64_t) const { update_loss_scale_state(cfg, s); }
};

// Softmax cross-entropy over one row of [rows, classes] logits (T): writes the row's f32
// probabilities and its loss term log(sum exp(z - max)) - (z[label] - max), in double as the CPU
// backend sums. A label outside [0, classes) makes the term NaN (a kernel cannot throw; the
// trainer refuses such labels when a batch is loaded).
template <typename T>
struct SoftmaxCrossEntropyRow {
  static constexpr const char* kName = "softmax cross-entropy";
  const T* logits;
  const int64_t* labels;
  int64_t classes;
  float* probs;
  double* row_loss;
  DLB_HD void operator()(int64_t row) const {
    const T* z = logits + row * classes;
    float* p = probs + row * classes;
    float mx = load(z[0]);
    for (int64_t j = 1; j < classes; ++j) mx = load(z[j]) > mx ? load(z[j]) : mx;
    double s = 0;
    for (int64_t j = 0; j < classes; ++j) s += exp(static_cast<double>(load(z[j]) - mx));
    const double log_s = log(s);
    for (int64_t j = 0; j < classes; ++j) {
      p[j] = static_cast<float>(exp(static_cast<double>(load(z[j]) - mx) - log_s));
    }
    const int64_t label = labels[row];
    row_loss[row] = label >= 0 && label < classes ? log_s - static_cast<double>(load(z[label]) - mx)
                                                  : static_cast<double>(NAN);
  }
};

// The batch mean of the row terms, summed in row order: one index (a single thread), so the loss
// is the same on every run.
struct MeanOfRows {
  static constexpr const char* kName = "loss mean";
  const double* row_loss;
  int64_t rows;
  float* loss;
  DLB_HD void operator()(int64_t) const {
    double total = 0;
    for (int64_t r = 0; r < rows; ++r) total += row_loss[r];
    loss[0] = static_cast<float>(total / static_cast<double>(rows));
  }
};

// d loss / d logits = (probs - onehot(label)) / rows, one element per index, computed in f32 and
// stored as T. With `scaler` (fp16), times the loss scale before it is rounded: small gradients
// survive fp16, which is what loss scaling is for.
template <typename T>
struct SoftmaxCrossEntropyBackward {
  static constexpr const char* kName = "softmax cross-entropy backward";
  const float* probs;
  const int64_t* labels;
  const float* scaler;  // null: unscaled
  int64_t rows, classes;
  T* dlogits;
  DLB_HD void operator()(int64_t i) const {
    const float inv_n = 1.f / static_cast<float>(rows);
    const int64_t row = i / classes, j = i % classes;
    float g = probs[i] * inv_n;
    if (labels[row] == j) g -= inv_n;
    if (scaler) g *= scaler[kScaleSlot];
    dlogits[i] = stored<T>(g);
  }
};

// torch's adaptive pooling bins: output i of `out` averages inputs [start, end) of `in`.
DLB_HD int64_t adaptive_bin_start(int64_t i, int64_t in, int64_t out) { return (i * in) / out; }
DLB_HD int64_t adaptive_bin_end(int64_t i, int64_t in, int64_t out) {
  return ((i + 1) * in + out - 1) / out;
}

// One output element of adaptive average pooling over [N, C, h, w] -> [N, C, oh, ow]; x and y
// each in its own layout (a pool before a flatten writes NCHW from a channels-last input).
template <typename T>
struct AdaptiveAvgPoolForward {
  static constexpr const char* kName = "adaptive avg pool forward";
  const T* x;
  Nchw in, out;
  T* y;
  DLB_HD void operator()(int64_t o) const {
    int64_t n, c, i, j;
    out.coords(o, n, c, i, j);
    const int64_t h = in.h, w = in.w;
    const int64_t ha = adaptive_bin_start(i, h, out.h), hb = adaptive_bin_end(i, h, out.h);
    const int64_t wa = adaptive_bin_start(j, w, out.w), wb = adaptive_bin_end(j, w, out.w);
    double s = 0;
    for (int64_t a = ha; a < hb; ++a) {
      for (int64_t b = wa; b < wb; ++b) s += load(x[in.at(n, c, a, b)]);
    }
    y[o] = stored<T>(static_cast<float>(s / static_cast<double>((hb - ha) * (wb - wa))));
  }
};

// One input element's gradient: the sum, over the output bins that cover it (in row-major order),
// of dy / bin area. Gathering instead of scattering needs no atomics, and adds the same terms in
// the same order as the CPU backend's scatter. dy is in the output's layout, dx in the input's.
template <typename T>
struct AdaptiveAvgPoolBackward {
  static constexpr const char* kName = "adaptive avg pool backward";
  const T* dy;
  Nchw in, out;
  T* dx;
  DLB_HD void operator()(int64_t e) const {
    int64_t n, c, a, b;
    in.coords(e, n, c, a, b);
    const int64_t h = in.h, w = in.w, oh = out.h, ow = out.w;
    float sum = 0.f;
    // Bins i with start(i) <= a < end(i) lie in [a * oh / h, (a + 1) * oh / h], checked exactly.
    const int64_t i_first = a * oh / h, i_last = ((a + 1) * oh + h - 1) / h;
    const int64_t j_first = b * ow / w, j_last = ((b + 1) * ow + w - 1) / w;
    for (int64_t i = i_first; i <= i_last && i < oh; ++i) {
      const int64_t ha = adaptive_bin_start(i, h, oh), hb = adaptive_bin_end(i, h, oh);
      if (a < ha || a >= hb) continue;
      for (int64_t j = j_first; j <= j_last && j < ow; ++j) {
        const int64_t wa = adaptive_bin_start(j, w, ow), wb = adaptive_bin_end(j, w, ow);
        if (b < wa || b >= wb) continue;
        sum += load(dy[out.at(n, c, i, j)]) / static_cast<float>((hb - ha) * (wb - wa));
      }
    }
    dx[e] = stored<T>(sum);
  }
};

// The window of output (i, j) of max or average pooling, clipped to the input: rows [ha, hb),
// columns [wa, wb). h0 and w0 are its unclipped corner.
struct PoolWindow {
  int64_t h0, w0, ha, hb, wa, wb;
};
DLB_HD PoolWindow pool_window(const PoolDesc& p, int64_t h, int64_t w, int64_t i, int64_t j) {
  PoolWindow win;
  win.h0 = i * p.stride_h - p.pad_h;
  win.w0 = j * p.stride_w - p.pad_w;
  win.ha = win.h0 > 0 ? win.h0 : 0;
  win.hb = win.h0 + p.kernel_h < h ? win.h0 + p.kernel_h : h;
  win.wa = win.w0 > 0 ? win.w0 : 0;
  win.wb = win.w0 + p.kernel_w < w ? win.w0 + p.kernel_w : w;
  return win;
}
// What an average-pooling window divides by: with count_include_pad, the window clipped to the
// padded input; without, to the input.
DLB_HD int64_t pool_divisor(const PoolDesc& p, int64_t h, int64_t w, const PoolWindow& win) {
  if (p.count_include_pad) {
    const int64_t he = win.h0 + p.kernel_h < h + p.pad_h ? win.h0 + p.kernel_h : h + p.pad_h;
    const int64_t we = win.w0 + p.kernel_w < w + p.pad_w ? win.w0 + p.kernel_w : w + p.pad_w;
    return (he - win.h0) * (we - win.w0);
  }
  return (win.hb - win.ha) * (win.wb - win.wa);
}
// The first maximum of a window in row-major order, or its last NaN (PyTorch's max_pool2d rule,
// in both passes), as a*w + b within its channel.
template <typename T>
DLB_HD int64_t pool_argmax(const T* x, const Nchw& in, int64_t n, int64_t c,
                           const PoolWindow& win) {
  int64_t arg_a = win.ha, arg_b = win.wa;
  for (int64_t a = win.ha; a < win.hb; ++a) {
    for (int64_t b = win.wa; b < win.wb; ++b) {
      if (takes_max(load(x[in.at(n, c, a, b)]), load(x[in.at(n, c, arg_a, arg_b)]))) {
        arg_a = a;
        arg_b = b;
      }
    }
  }
  return arg_a * in.w + arg_b;
}

// One output element of max or average pooling over [N, C, h, w] -> [N, C, oh, ow] (floor mode,
// as PyTorch's default): the maximum ignores padding; the average sums in double. x and y each
// in its own layout.
template <typename T>
struct PoolForward {
  static constexpr const char* kName = "pool forward";
  PoolDesc p;
  const T* x;
  Nchw in, out;
  T* y;
  DLB_HD void operator()(int64_t o) const {
    int64_t n, c, i, j;
    out.coords(o, n, c, i, j);
    const PoolWindow win = pool_window(p, in.h, in.w, i, j);
    if (p.mode == PoolMode::kMax) {
      float best = -INFINITY;
      for (int64_t a = win.ha; a < win.hb; ++a) {
        for (int64_t b = win.wa; b < win.wb; ++b) {
          const float v = load(x[in.at(n, c, a, b)]);
          best = takes_max(v, best) ? v : best;
        }
      }
      y[o] = stored<T>(best);
      return;
    }
    double s = 0;
    for (int64_t a = win.ha; a < win.hb; ++a) {
      for (int64_t b = win.wa; b < win.wb; ++b) s += load(x[in.at(n, c, a, b)]);
    }
    y[o] = stored<T>(static_cast<float>(s / static_cast<double>(pool_divisor(p, in.h, in.w, win))));
  }
};

// One input element's pooling gradient, gathered over the windows that cover it in row-major
// order: max pooling adds dy of each window whose first maximum it is; average pooling adds
// dy / divisor of each. Same terms, same order as the CPU backend's scatter; no atomics. x and
// dx in the input's layout, dy in the output's.
template <typename T>
struct PoolBackward {
  static constexpr const char* kName = "pool backward";
  PoolDesc p;
  const T* x;
  const T* dy;
  Nchw in, out;
  T* dx;
  DLB_HD void operator()(int64_t e) const {
    int64_t n, c, a, b;
    in.coords(e, n, c, a, b);
    // Windows i with i * stride - pad <= a < i * stride - pad + kernel.
    const int64_t top = a + p.pad_h - p.kernel_h + 1, left = b + p.pad_w - p.kernel_w + 1;
    const int64_t i_first = top > 0 ? (top + p.stride_h - 1) / p.stride_h : 0;
    const int64_t j_first = left > 0 ? (left + p.stride_w - 1) / p.stride_w : 0;
    const int64_t i_last = (a + p.pad_h) / p.stride_h, j_last = (b + p.pad_w) / p.stride_w;
    float sum = 0.f;
    for (int64_t i = i_first; i <= i_last && i < out.h; ++i) {
      for (int64_t j = j_first; j <= j_last && j < out.w; ++j) {
        const PoolWindow win = pool_window(p, in.h, in.w, i, j);
        if (p.mode == PoolMode::kMax) {
          if (pool_argmax(x, in, n, c, win) == a * in.w + b) sum += load(dy[out.at(n, c, i, j)]);
        } else {
          sum +=
              load(dy[out.at(n, c, i, j)]) / static_cast<float>(pool_divisor(p, in.h, in.w, win));
        }
      }
    }
    dx[e] = stored<T>(sum);
  }
};

// y[n, c, ...] += b[c] over [n, c, inner]; b is the layer's compute weight, of y's type.
template <typename T>
struct BiasAdd {
  static constexpr const char* kName = "bias add";
  const T* b;
  ChannelRows rows;
  T* y;
  DLB_HD void operator()(int64_t i) const {
    y[i] = stored<T>(load(y[i]) + load(b[rows.channel_of(i)]));
  }
};

// The bias gradient in three passes, each thread's chain short: partial sums in double, each over
// every lanes-th value of an (n, c) row (about 64 values); each row's sum of its lanes partials
// (at most 256); each channel's sum over n (BiasChannelSum). With more than one lane, consecutive
// indices read consecutive addresses in either layout (NCHW: a row's lanes; NHWC: the channels),
// so a warp's loads coalesce, and a row of VGG's first layer (50,176 values) is summed by 256
// threads, not one. The CPU backend sums each channel in one double; the two agree to within
// double rounding, far below a float's.
template <typename T>
struct BiasPartialSums {
  static constexpr const char* kName = "bias gradient partial sums";
  const T* dy;
  ChannelRows layout;
  int64_t lanes;
  double* partials;  // [n, lanes, c]
  DLB_HD void operator()(int64_t e) const {
    const int64_t c = layout.channels;
    int64_t n, ch, lane;
    if (layout.channels_last) {
      ch = e % c;
      lane = (e / c) % lanes;
      n = e / (c * lanes);
    } else {
      lane = e % lanes;
      ch = (e / lanes) % c;
      n = e / (lanes * c);
    }
    double s = 0;
    for (int64_t k = lane; k < layout.inner; k += lanes) s += load(dy[layout.at(n * c + ch, k)]);
    partials[(n * lanes + lane) * c + ch] = s;
  }
};
// Row r's sum of its lanes partial sums, in lane order.
struct BiasLaneSum {
  static constexpr const char* kName = "bias gradient rows";
  const double* partials;  // [n, lanes, c]
  int64_t channels, lanes;
  double* rows;  // [n * c]
  DLB_HD void operator()(int64_t r) const {
    const int64_t n = r / channels, ch = r % channels;
    double s = 0;
    for (int64_t lane = 0; lane < lanes; ++lane) s += partials[(n * lanes + lane) * channels + ch];
    rows[r] = s;
  }
};
// How many partial sums per (n, c) row: about 64 values each, at most 256, and no more lanes
// than keep the partials within 2^22 (32 MiB of doubles) while there are two or more.
inline int64_t bias_lanes(int64_t n, int64_t channels, int64_t inner) {
  int64_t lanes = inner / 64;
  if (lanes > 256) lanes = 256;
  while (lanes > 1 && n * channels * lanes > (int64_t{1} << 22)) lanes /= 2;
  return lanes < 1 ? 1 : lanes;
}
template <typename T>
struct BiasChannelSum {
  static constexpr const char* kName = "bias gradient channels";
  const double* rows;
  int64_t n, channels;
  T* db;
  DLB_HD void operator()(int64_t c) const {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += rows[i * channels + c];
    db[c] = stored<T>(static_cast<float>(s));
  }
};

// PyTorch's running statistics from one batch's saved mean and 1/sqrt(var + eps), per channel:
// running = (1 - momentum) * running + momentum * batch, with the unbiased variance
// var * m / (m - 1) over m values per channel. The batch variance is recovered from the saved
// inverse standard deviation (in double: a few float roundings of relative error).
struct BatchNormRunningUpdate {
  static constexpr const char* kName = "batch norm running statistics";
  const float* save_mean;
  const float* save_invstd;
  double eps, momentum;
  int64_t m;
  float* running_mean;
  float* running_var;
  DLB_HD void operator()(int64_t c) const {
    const double invstd = save_invstd[c];
    const double var = 1.0 / (invstd * invstd) - eps;
    const double unbiased =
        (var > 0 ? var : 0) * static_cast<double>(m) / static_cast<double>(m - 1);
    running_mean[c] =
        static_cast<float>((1 - momentum) * running_mean[c] + momentum * save_mean[c]);
    running_var[c] = static_cast<float>((1 - momentum) * running_var[c] + momentum * unbiased);
  }
};

// Batch norm with the running statistics (evaluation), one element per index, as the CPU
// backend computes it: scale = gamma / sqrt(var + eps), shift = beta - mean * scale, in float.
template <typename T>
struct BatchNormInfer {
  static constexpr const char* kName = "batch norm inference";
  const T* x;
  const float* gamma;
  const float* beta;
  const float* running_mean;
  const float* running_var;
  float eps;
  ChannelRows rows;
  T* y;
  DLB_HD void operator()(int64_t i) const {
    const int64_t c = rows.channel_of(i);
    const float invstd = 1.f / sqrtf(running_var[c] + eps);
    const float scale = gamma[c] * invstd;
    const float shift = beta[c] - running_mean[c] * scale;
    y[i] = stored<T>(load(x[i]) * scale + shift);
  }
};

// Batch norm in training on our own kernels: what the CUDA backend runs when cuDNN has no engine
// for a batch-norm graph. Each channel's mean and variance by Welford's update in double, one
// block per (channel, part) (channel_reduce.h), where the CPU backend sums twice in double (the
// mean, then the squared deviations): the two agree to within double rounding. Then, per channel,
// the statistics (BatchNormStatistics), and y element-wise.
template <typename T>
struct BatchNormMoments {
  static constexpr const char* kName = "batch norm moments";
  using Acc = Welford;
  const T* x;
  ChannelRows layout;
  DLB_HD void add(Welford& a, int64_t c, int64_t j) const { a.add(load(x[layout.value_at(c, j)])); }
};
// Per channel: its parts' moments merged in part order; the variance, the saved statistics,
// PyTorch's running statistics (the unbiased variance over m values), and the affine that
// normalizes (channel[4c + 1] = scale, [4c + 2] = shift; 4 doubles per channel).
struct BatchNormStatistics {
  static constexpr const char* kName = "batch norm statistics";
  const Welford* parts;
  int64_t parts_per_channel;
  const float* gamma;
  const float* beta;
  float eps, momentum;
  double* channel;
  float* save_mean;
  float* save_invstd;
  float* running_mean;
  float* running_var;
  DLB_HD void operator()(int64_t c) const {
    Welford w{};
    for (int64_t p = 0; p < parts_per_channel; ++p) {
      w = Welford::merge(w, parts[c * parts_per_channel + p]);
    }
    const double mean = w.mean, m = w.count;
    const double var = w.m2 / m;
    const double invstd = 1.0 / sqrt(var + eps);
    save_mean[c] = static_cast<float>(mean);
    save_invstd[c] = static_cast<float>(invstd);
    running_mean[c] = static_cast<float>((1 - momentum) * running_mean[c] + momentum * mean);
    running_var[c] =
        static_cast<float>((1 - momentum) * running_var[c] + momentum * var * m / (m - 1));
    const float scale = static_cast<float>(gamma[c] * invstd);
    channel[4 * c + 1] = scale;
    channel[4 * c + 2] = static_cast<float>(beta[c] - mean * scale);
  }
};
template <typename T>
struct BatchNormNormalize {  // y = x * scale + shift, in float
  static constexpr const char* kName = "batch norm normalize";
  const T* x;
  const double* channel;
  ChannelRows rows;
  T* y;
  DLB_HD void operator()(int64_t i) const {
    const int64_t c = rows.channel_of(i);
    y[i] = stored<T>(load(x[i]) * static_cast<float>(channel[4 * c + 1]) +
                     static_cast<float>(channel[4 * c + 2]));
  }
};

// Batch norm's backward on our own kernels, the CPU backend's arithmetic: per channel, the sums
// of dy and of dy * xhat in double, one block per (channel, part) (channel_reduce.h); then per
// channel, dgamma and dbeta (of the gradients' type G) and the constants of dx (channel[4c] =
// gamma * invstd, [4c + 1] = mean dy, [4c + 2] = mean dy * xhat); then dx.
template <typename T>
struct BatchNormBackwardSums {
  static constexpr const char* kName = "batch norm backward sums";
  using Acc = SumPair;
  const T* x;
  const T* dy;
  const float* save_mean;
  const float* save_invstd;
  ChannelRows layout;
  DLB_HD void add(SumPair& a, int64_t c, int64_t j) const {
    const int64_t at = layout.value_at(c, j);
    const float g = load(dy[at]);
    a.first += g;
    a.second +=
        g * (load(x[at]) - static_cast<double>(save_mean[c])) * static_cast<double>(save_invstd[c]);
  }
};
template <typename G>
struct BatchNormBackwardChannel {
  static constexpr const char* kName = "batch norm backward channels";
  const SumPair* parts;
  int64_t parts_per_channel, m;
  const float* gamma;
  const float* save_invstd;
  double* channel;
  G* dgamma;
  G* dbeta;
  DLB_HD void operator()(int64_t c) const {
    SumPair s{};
    for (int64_t p = 0; p < parts_per_channel; ++p) {
      s = SumPair::merge(s, parts[c * parts_per_channel + p]);
    }
    dgamma[c] = stored<G>(static_cast<float>(s.second));
    dbeta[c] = stored<G>(static_cast<float>(s.first));
    channel[4 * c] = gamma[c] * static_cast<double>(save_invstd[c]);
    channel[4 * c + 1] = s.first / static_cast<double>(m);
    channel[4 * c + 2] = s.second / static_cast<double>(m);
  }
};
template <typename T>
struct BatchNormBackwardData {
  static constexpr const char* kName = "batch norm backward data";
  const T* x;
  const T* dy;
  const float* save_mean;
  const float* save_invstd;
  const double* channel;
  ChannelRows rows;
  T* dx;
  DLB_HD void operator()(int64_t i) const {
    const int64_t c = rows.channel_of(i);
    const double xhat = (load(x[i]) - static_cast<double>(save_mean[c])) * save_invstd[c];
    dx[i] = stored<T>(static_cast<float>(
        channel[4 * c] * (load(dy[i]) - channel[4 * c + 1] - xhat * channel[4 * c + 2])));
  }
};

}  // namespace dlb::cuda
