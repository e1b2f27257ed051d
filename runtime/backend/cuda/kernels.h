// The math of the CUDA backend's own kernels (the ops cuDNN and cuBLASLt do not do), one functor
// per kernel. Each is called with one index (an element, a row or an input pixel) and computes
// exactly that index's output, so:
//   - kernels.cu launches each as a thin grid-stride loop (for_each_index);
//   - tests/unit/cuda_kernel_math_test.cpp runs the same functor on the host over every index and
//     compares with the CPU backend, which is the reference.
// Host-compilable: includes nothing of CUDA.
#pragma once
#include <cmath>
#include <cstdint>

#include "runtime/backend/backend.h"
#include "runtime/core/counter_hash.h"
#include "runtime/core/host_device.h"

namespace dlb::cuda {

struct Fill {
  float* p;
  float value;
  DLB_HD void operator()(int64_t i) const { p[i] = value; }
};

struct ReluForward {
  const float* x;
  float* y;
  // NaN and -0 fail the comparison and pass through, as in torch.relu.
  DLB_HD void operator()(int64_t i) const { y[i] = x[i] < 0.f ? 0.f : x[i]; }
};

// Reads the output, as the CPU backend does: y > 0 exactly where x > 0. As PyTorch's
// threshold_backward, the gradient passes where y is not <= 0, NaN included.
struct ReluBackward {
  const float* y;
  const float* dy;
  float* dx;
  DLB_HD void operator()(int64_t i) const { dx[i] = y[i] <= 0.f ? 0.f : dy[i]; }
};

struct Add {
  const float* a;
  const float* b;
  float* y;
  DLB_HD void operator()(int64_t i) const { y[i] = a[i] + b[i]; }
};

struct Accumulate {  // y += x
  const float* x;
  float* y;
  DLB_HD void operator()(int64_t i) const { y[i] += x[i]; }
};

// Inverted dropout: element i is dropped when counter_uniform(seed, i) < p, else scaled by
// 1/(1-p); the mask holds 0 or that scale, and backward multiplies by it.
struct DropoutForward {
  const float* x;
  float p;
  uint64_t seed;
  float* mask;
  float* y;
  DLB_HD void operator()(int64_t i) const {
    const float keep_scale = 1.f / (1.f - p);
    mask[i] = counter_uniform(seed, static_cast<uint64_t>(i)) < p ? 0.f : keep_scale;
    y[i] = x[i] * mask[i];
  }
};

struct DropoutBackward {
  const float* dy;
  const float* mask;
  float* dx;
  DLB_HD void operator()(int64_t i) const { dx[i] = dy[i] * mask[i]; }
};

// torch.optim.SGD with momentum and weight decay (dampening 0), over one element of the flat
// parameter buffer. nvcc may contract the multiply-adds into FMAs: on a GPU the result can differ
// from the CPU's by a rounding per operation.
struct SgdUpdate {
  SgdConfig cfg;
  const float* grad;
  float* momentum;
  float* param;
  DLB_HD void operator()(int64_t i) const {
    const float d = grad[i] + cfg.weight_decay * param[i];
    momentum[i] = cfg.momentum * momentum[i] + d;
    param[i] -= cfg.lr * momentum[i];
  }
};

// Softmax cross-entropy over one row of [rows, classes] logits: writes the row's probabilities
// and its loss term log(sum exp(z - max)) - (z[label] - max), in double as the CPU backend sums.
// A label outside [0, classes) makes the term NaN (a kernel cannot throw; the trainer refuses
// such labels when a batch is loaded).
struct SoftmaxCrossEntropyRow {
  const float* logits;
  const int64_t* labels;
  int64_t classes;
  float* probs;
  double* row_loss;
  DLB_HD void operator()(int64_t row) const {
    const float* z = logits + row * classes;
    float* p = probs + row * classes;
    float mx = z[0];
    for (int64_t j = 1; j < classes; ++j) mx = z[j] > mx ? z[j] : mx;
    double s = 0;
    for (int64_t j = 0; j < classes; ++j) s += exp(static_cast<double>(z[j] - mx));
    const double log_s = log(s);
    for (int64_t j = 0; j < classes; ++j) {
      p[j] = static_cast<float>(exp(static_cast<double>(z[j] - mx) - log_s));
    }
    const int64_t label = labels[row];
    row_loss[row] = label >= 0 && label < classes ? log_s - static_cast<double>(z[label] - mx)
                                                  : static_cast<double>(NAN);
  }
};

// The batch mean of the row terms, summed in row order: one index (a single thread), so the loss
// is the same on every run.
struct MeanOfRows {
  const double* row_loss;
  int64_t rows;
  float* loss;
  DLB_HD void operator()(int64_t) const {
    double total = 0;
    for (int64_t r = 0; r < rows; ++r) total += row_loss[r];
    loss[0] = static_cast<float>(total / static_cast<double>(rows));
  }
};

// d loss / d logits = (probs - onehot(label)) / rows, one element per index.
struct SoftmaxCrossEntropyBackward {
  const float* probs;
  const int64_t* labels;
  int64_t rows, classes;
  float* dlogits;
  DLB_HD void operator()(int64_t i) const {
    const float inv_n = 1.f / static_cast<float>(rows);
    const int64_t row = i / classes, j = i % classes;
    float g = probs[i] * inv_n;
    if (labels[row] == j) g -= inv_n;
    dlogits[i] = g;
  }
};

// torch's adaptive pooling bins: output i of `out` averages inputs [start, end) of `in`.
DLB_HD int64_t adaptive_bin_start(int64_t i, int64_t in, int64_t out) { return (i * in) / out; }
DLB_HD int64_t adaptive_bin_end(int64_t i, int64_t in, int64_t out) {
  return ((i + 1) * in + out - 1) / out;
}

// One output element of adaptive average pooling over [planes, h, w] -> [planes, oh, ow].
struct AdaptiveAvgPoolForward {
  const float* x;
  int64_t h, w, oh, ow;
  float* y;
  DLB_HD void operator()(int64_t o) const {
    const int64_t plane = o / (oh * ow), i = (o / ow) % oh, j = o % ow;
    const int64_t ha = adaptive_bin_start(i, h, oh), hb = adaptive_bin_end(i, h, oh);
    const int64_t wa = adaptive_bin_start(j, w, ow), wb = adaptive_bin_end(j, w, ow);
    const float* xp = x + plane * h * w;
    double s = 0;
    for (int64_t a = ha; a < hb; ++a) {
      for (int64_t b = wa; b < wb; ++b) s += xp[a * w + b];
    }
    y[o] = static_cast<float>(s / static_cast<double>((hb - ha) * (wb - wa)));
  }
};

// One input element's gradient: the sum, over the output bins that cover it (in row-major order),
// of dy / bin area. Gathering instead of scattering needs no atomics, and adds the same terms in
// the same order as the CPU backend's scatter.
struct AdaptiveAvgPoolBackward {
  const float* dy;
  int64_t h, w, oh, ow;
  float* dx;
  DLB_HD void operator()(int64_t in) const {
    const int64_t plane = in / (h * w), a = (in / w) % h, b = in % w;
    const float* gp = dy + plane * oh * ow;
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
        sum += gp[i * ow + j] / static_cast<float>((hb - ha) * (wb - wa));
      }
    }
    dx[in] = sum;
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
// in both passes), as an offset into its plane.
DLB_HD int64_t pool_argmax(const float* xp, int64_t w, const PoolWindow& win) {
  int64_t arg = win.ha * w + win.wa;
  for (int64_t a = win.ha; a < win.hb; ++a) {
    for (int64_t b = win.wa; b < win.wb; ++b) {
      if (takes_max(xp[a * w + b], xp[arg])) arg = a * w + b;
    }
  }
  return arg;
}

// One output element of max or average pooling over [planes, h, w] -> [planes, oh, ow]
// (floor mode, as PyTorch's default): the maximum ignores padding; the average sums in double.
struct PoolForward {
  PoolDesc p;
  const float* x;
  int64_t h, w, oh, ow;
  float* y;
  DLB_HD void operator()(int64_t o) const {
    const int64_t plane = o / (oh * ow), i = (o / ow) % oh, j = o % ow;
    const float* xp = x + plane * h * w;
    const PoolWindow win = pool_window(p, h, w, i, j);
    if (p.mode == PoolMode::kMax) {
      float best = -INFINITY;
      for (int64_t a = win.ha; a < win.hb; ++a) {
        for (int64_t b = win.wa; b < win.wb; ++b)
          best = takes_max(xp[a * w + b], best) ? xp[a * w + b] : best;
      }
      y[o] = best;
      return;
    }
    double s = 0;
    for (int64_t a = win.ha; a < win.hb; ++a) {
      for (int64_t b = win.wa; b < win.wb; ++b) s += xp[a * w + b];
    }
    y[o] = static_cast<float>(s / static_cast<double>(pool_divisor(p, h, w, win)));
  }
};

// One input element's pooling gradient, gathered over the windows that cover it in row-major
// order: max pooling adds dy of each window whose first maximum it is; average pooling adds
// dy / divisor of each. Same terms, same order as the CPU backend's scatter; no atomics.
struct PoolBackward {
  PoolDesc p;
  const float* x;
  const float* dy;
  int64_t h, w, oh, ow;
  float* dx;
  DLB_HD void operator()(int64_t in) const {
    const int64_t plane = in / (h * w), a = (in / w) % h, b = in % w;
    const float* xp = x + plane * h * w;
    const float* gp = dy + plane * oh * ow;
    // Windows i with i * stride - pad <= a < i * stride - pad + kernel.
    const int64_t top = a + p.pad_h - p.kernel_h + 1, left = b + p.pad_w - p.kernel_w + 1;
    const int64_t i_first = top > 0 ? (top + p.stride_h - 1) / p.stride_h : 0;
    const int64_t j_first = left > 0 ? (left + p.stride_w - 1) / p.stride_w : 0;
    const int64_t i_last = (a + p.pad_h) / p.stride_h, j_last = (b + p.pad_w) / p.stride_w;
    float sum = 0.f;
    for (int64_t i = i_first; i <= i_last && i < oh; ++i) {
      for (int64_t j = j_first; j <= j_last && j < ow; ++j) {
        const PoolWindow win = pool_window(p, h, w, i, j);
        if (p.mode == PoolMode::kMax) {
          if (pool_argmax(xp, w, win) == a * w + b) sum += gp[i * ow + j];
        } else {
          sum += gp[i * ow + j] / static_cast<float>(pool_divisor(p, h, w, win));
        }
      }
    }
    dx[in] = sum;
  }
};

// y[n, c, ...] += b[c] over [n, c, inner].
struct BiasAdd {
  const float* b;
  int64_t channels, inner;
  float* y;
  DLB_HD void operator()(int64_t i) const { y[i] += b[(i / inner) % channels]; }
};

// The bias gradient in two passes: the sum of each (n, c) row in double, then each channel's
// sum over n. The CPU backend sums each channel in one double, in the same element order; the
// two agree to within double rounding, far below a float's.
struct BiasRowSum {
  const float* dy;
  int64_t inner;
  double* rows;  // [n * c]
  DLB_HD void operator()(int64_t r) const {
    const float* row = dy + r * inner;
    double s = 0;
    for (int64_t k = 0; k < inner; ++k) s += row[k];
    rows[r] = s;
  }
};
struct BiasChannelSum {
  const double* rows;
  int64_t n, channels;
  float* db;
  DLB_HD void operator()(int64_t c) const {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += rows[i * channels + c];
    db[c] = static_cast<float>(s);
  }
};

// PyTorch's running statistics from one batch's saved mean and 1/sqrt(var + eps), per channel:
// running = (1 - momentum) * running + momentum * batch, with the unbiased variance
// var * m / (m - 1) over m values per channel. The batch variance is recovered from the saved
// inverse standard deviation (in double: a few float roundings of relative error).
struct BatchNormRunningUpdate {
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
struct BatchNormInfer {
  const float* x;
  const float* gamma;
  const float* beta;
  const float* running_mean;
  const float* running_var;
  float eps;
  int64_t channels, inner;
  float* y;
  DLB_HD void operator()(int64_t i) const {
    const int64_t c = (i / inner) % channels;
    const float invstd = 1.f / sqrtf(running_var[c] + eps);
    const float scale = gamma[c] * invstd;
    const float shift = beta[c] - running_mean[c] * scale;
    y[i] = x[i] * scale + shift;
  }
};

// Batch norm in training on our own kernels: what the CUDA backend runs when cuDNN has no engine
// for a batch-norm graph. The same arithmetic as the CPU backend (two passes in double: the mean,
// then the squared deviations), with each channel's sums grouped by (n, c) rows first, so the
// results agree with it to within double rounding. Scratch (doubles): `rows` holds 2 per (n, c)
// row; `channel` holds 4 per channel.
struct BatchNormRowSum {  // rows[r] = sum of x over row r
  const float* x;
  int64_t inner;
  double* rows;
  DLB_HD void operator()(int64_t r) const {
    const float* row = x + r * inner;
    double s = 0;
    for (int64_t k = 0; k < inner; ++k) s += row[k];
    rows[r] = s;
  }
};
struct BatchNormMean {  // channel[4c] = the mean
  const double* rows;
  int64_t n, channels, m;
  double* channel;
  DLB_HD void operator()(int64_t c) const {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += rows[i * channels + c];
    channel[4 * c] = s / static_cast<double>(m);
  }
};
struct BatchNormRowSquares {  // rows[r] = sum of (x - mean)^2 over row r
  const float* x;
  const double* channel;
  int64_t channels, inner;
  double* rows;
  DLB_HD void operator()(int64_t r) const {
    const float* row = x + r * inner;
    const double mean = channel[4 * (r % channels)];
    double s = 0;
    for (int64_t k = 0; k < inner; ++k) s += (row[k] - mean) * (row[k] - mean);
    rows[r] = s;
  }
};
// Per channel: the variance, the saved statistics, PyTorch's running statistics, and the affine
// (channel[4c + 1] = scale, [4c + 2] = shift) that normalizes.
struct BatchNormStatistics {
  const double* rows;
  const float* gamma;
  const float* beta;
  int64_t n, channels, m;
  float eps, momentum;
  double* channel;
  float* save_mean;
  float* save_invstd;
  float* running_mean;
  float* running_var;
  DLB_HD void operator()(int64_t c) const {
    double sq = 0;
    for (int64_t i = 0; i < n; ++i) sq += rows[i * channels + c];
    const double mean = channel[4 * c];
    const double var = sq / static_cast<double>(m);
    const double invstd = 1.0 / sqrt(var + eps);
    save_mean[c] = static_cast<float>(mean);
    save_invstd[c] = static_cast<float>(invstd);
    running_mean[c] = static_cast<float>((1 - momentum) * running_mean[c] + momentum * mean);
    running_var[c] =
        static_cast<float>((1 - momentum) * running_var[c] +
                           momentum * var * static_cast<double>(m) / static_cast<double>(m - 1));
    const float scale = static_cast<float>(gamma[c] * invstd);
    channel[4 * c + 1] = scale;
    channel[4 * c + 2] = static_cast<float>(beta[c] - mean * scale);
  }
};
struct BatchNormNormalize {  // y = x * scale + shift, in float
  const float* x;
  const double* channel;
  int64_t channels, inner;
  float* y;
  DLB_HD void operator()(int64_t i) const {
    const int64_t c = (i / inner) % channels;
    y[i] = x[i] * static_cast<float>(channel[4 * c + 1]) + static_cast<float>(channel[4 * c + 2]);
  }
};

// Batch norm's backward on our own kernels, the CPU backend's arithmetic: per row, the sums of
// dy and of dy * xhat (rows[2r], rows[2r + 1]); per channel, dgamma and dbeta and the constants of
// dx (channel[4c] = gamma * invstd, [4c + 1] = mean dy, [4c + 2] = mean dy * xhat); then dx.
struct BatchNormBackwardRowSums {
  const float* x;
  const float* dy;
  const float* save_mean;
  const float* save_invstd;
  int64_t channels, inner;
  double* rows;
  DLB_HD void operator()(int64_t r) const {
    const int64_t c = r % channels;
    const double mean = save_mean[c], invstd = save_invstd[c];
    const float* xr = x + r * inner;
    const float* gr = dy + r * inner;
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t k = 0; k < inner; ++k) {
      sum_dy += gr[k];
      sum_dy_xhat += gr[k] * (xr[k] - mean) * invstd;
    }
    rows[2 * r] = sum_dy;
    rows[2 * r + 1] = sum_dy_xhat;
  }
};
struct BatchNormBackwardChannel {
  const double* rows;
  const float* gamma;
  const float* save_invstd;
  int64_t n, channels, m;
  double* channel;
  float* dgamma;
  float* dbeta;
  DLB_HD void operator()(int64_t c) const {
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t i = 0; i < n; ++i) {
      sum_dy += rows[2 * (i * channels + c)];
      sum_dy_xhat += rows[2 * (i * channels + c) + 1];
    }
    dgamma[c] = static_cast<float>(sum_dy_xhat);
    dbeta[c] = static_cast<float>(sum_dy);
    channel[4 * c] = gamma[c] * static_cast<double>(save_invstd[c]);
    channel[4 * c + 1] = sum_dy / static_cast<double>(m);
    channel[4 * c + 2] = sum_dy_xhat / static_cast<double>(m);
  }
};
struct BatchNormBackwardData {
  const float* x;
  const float* dy;
  const float* save_mean;
  const float* save_invstd;
  const double* channel;
  int64_t channels, inner;
  float* dx;
  DLB_HD void operator()(int64_t i) const {
    const int64_t c = (i / inner) % channels;
    const double xhat = (x[i] - static_cast<double>(save_mean[c])) * save_invstd[c];
    dx[i] = static_cast<float>(channel[4 * c] *
                               (dy[i] - channel[4 * c + 1] - xhat * channel[4 * c + 2]));
  }
};

}  // namespace dlb::cuda
