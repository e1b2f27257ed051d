// The loss's kernels' math (kernel_layout.h says how these headers work): softmax
// cross-entropy, its batch mean and its gradient. Host-compilable.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/backend/cuda/channel_reduce.h"
#include "runtime/backend/cuda/kernel_layout.h"
#include "runtime/backend/cuda/stored.h"
#include "runtime/core/host_device.h"

namespace dlb::cuda {

// Softmax cross-entropy over [rows, classes] logits (T), a block per row, in five launches
// (runtime/backend/cuda/loss.cpp): the row's maximum and then its sum of exp(z - max), each a
// block's tree (launch_channel_reduce, a row as a "channel" of `classes` values); the f32
// probabilities and each row's loss term log(sum) - (z[label] - max), an element per index; the
// terms' sum, one block's tree; and the mean. The maximum is one of the row's values, so the
// CPU's; the sums are in double as the CPU's, grouped by the tree, so a probability or the loss
// may differ from the CPU's by one float rounding where a double sum's last bits decide it. A
// label outside [0, classes) makes its term NaN (a kernel cannot throw; the trainer refuses such
// labels when a batch is loaded).
// The maximum of the values added (`seen`: how many; RowMax{} is empty, as every accumulator of
// channel_reduce.h, which lives in shared memory and so has no initializer of its own). The
// larger of two is kept; a NaN is passed over, as std::max's running maximum passes over one.
struct RowMax {
  double m, seen;
  DLB_HD void add(double v) {
    if (seen == 0 || v > m) m = v;
    seen += 1;
  }
  DLB_HD static RowMax merge(const RowMax& a, const RowMax& b) {
    if (b.seen == 0) return a;
    if (a.seen == 0) return b;
    return {b.m > a.m ? b.m : a.m, a.seen + b.seen};
  }
};
struct RowSum {
  double s;
  DLB_HD static RowSum merge(const RowSum& a, const RowSum& b) { return {a.s + b.s}; }
};

template <typename T>
struct SoftmaxRowMax {
  static constexpr const char* kName = "softmax: row maximum";
  using Acc = RowMax;
  const T* logits;
  ChannelRows layout;  // {rows, classes, NCHW}: row r's values are r * classes + j
  DLB_HD void add(Acc& a, int64_t, int64_t offset) const { a.add(load(logits[offset])); }
};

template <typename T>
struct SoftmaxRowSum {
  static constexpr const char* kName = "softmax: row sum";
  using Acc = RowSum;
  const T* logits;
  const RowMax* max;  // per row
  ChannelRows layout;
  DLB_HD void add(Acc& a, int64_t row, int64_t offset) const {
    a.s += exp(static_cast<double>(load(logits[offset]) - static_cast<float>(max[row].m)));
  }
};

template <typename T>
struct SoftmaxProbabilities {
  static constexpr const char* kName = "softmax cross-entropy";
  const T* logits;
  const int64_t* labels;
  int64_t classes;
  const RowMax* max;
  const RowSum* sum;
  float* probs;
  double* row_loss;
  DLB_HD void operator()(int64_t i) const {
    const int64_t row = i / classes, j = i - row * classes;
    const float mx = static_cast<float>(max[row].m), z = load(logits[i]);
    const double log_s = log(sum[row].s);
    probs[i] = static_cast<float>(exp(static_cast<double>(z - mx) - log_s));
    const int64_t label = labels[row];
    if (label == j) row_loss[row] = log_s - static_cast<double>(z - mx);
    if (j == 0 && (label < 0 || label >= classes)) row_loss[row] = static_cast<double>(NAN);
  }
};

// The sum of the rows' terms: one block's tree over `rows` values (layout {1, rows, NCHW}).
struct LossTermsSum {
  static constexpr const char* kName = "loss: sum of rows";
  using Acc = RowSum;
  const double* row_loss;
  ChannelRows layout;
  DLB_HD void add(Acc& a, int64_t, int64_t offset) const { a.s += row_loss[offset]; }
};

// The batch mean, one index.
struct LossMean {
  static constexpr const char* kName = "loss mean";
  const RowSum* total;
  int64_t rows;
  float* loss;
  DLB_HD void operator()(int64_t) const {
    loss[0] = static_cast<float>(total->s / static_cast<double>(rows));
  }
};

// softmax_cross_entropy's five launches on the host, as the device runs them (the trees through
// reduce_channels_on_host): what the tests compare with the CPU backend.
template <typename T>
void softmax_cross_entropy_on_host(const T* logits, const int64_t* labels, int64_t rows,
                                   int64_t classes, float* probs, float* loss) {
  std::vector<RowMax> maxes(static_cast<size_t>(rows));
  std::vector<RowSum> sums(static_cast<size_t>(rows));
  std::vector<double> terms(static_cast<size_t>(rows));
  RowSum total{};
  const ChannelRows by_row{rows, classes, false};
  reduce_channels_on_host(SoftmaxRowMax<T>{logits, by_row}, rows, classes, 1, maxes.data());
  reduce_channels_on_host(SoftmaxRowSum<T>{logits, maxes.data(), by_row}, rows, classes, 1,
                          sums.data());
  const SoftmaxProbabilities<T> p{logits,      labels, classes,     maxes.data(),
                                  sums.data(), probs,  terms.data()};
  for (int64_t i = 0; i < rows * classes; ++i) p(i);
  reduce_channels_on_host(LossTermsSum{terms.data(), ChannelRows{1, rows, false}}, 1, rows, 1,
                          &total);
  LossMean{&total, rows, loss}(0);
}

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

}  // namespace dlb::cuda
