// The loss's kernels' math (kernel_layout.h says how these headers work): softmax
// cross-entropy, its batch mean and its gradient. Host-compilable.
#pragma once
#include <cmath>
#include <cstdint>

#include "runtime/backend/backend.h"
#include "runtime/backend/cuda/stored.h"
#include "runtime/core/host_device.h"

namespace dlb::cuda {

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

}  // namespace dlb::cuda
