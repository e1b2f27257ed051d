// How far a backend's result may be from the float64 answer, from the arithmetic alone.
//
// A sum of K products computed in floating point with unit roundoff u, in any order, differs
// from the exact sum by at most c·sqrt(K)·u·Σ|aᵢ||bᵢ|, except with probability at most
// 2K·exp(-c²/2) per element (Higham and Mary, "A new approach to probabilistic rounding error
// analysis", SIAM J. Sci. Comput. 41(5), 2019, theorem 3.1, for rounding errors that are
// independent and of mean zero). kC = 10 makes that 2K·2e-22: below 1e-15 per element for the
// largest K here (a million), so the whole grid (about 1e9 elements) passes with certainty in
// practice, while a wrong term, a missing term or a stray write stands far outside it.
// Elementwise work gets kUlps units of roundoff of the magnitudes it combines; storing a result
// in a narrower type adds that type's roundoff of the result, and, below the type's smallest
// normal number, half the spacing of its subnormals (the standard model with gradual underflow:
// fl(x) = x(1 + δ) + η; fp16's subnormals start at 6.1e-5, where gradients often are).
#pragma once
#include <cmath>

#include "runtime/core/dtype.h"

namespace dlb {

inline constexpr double kC = 10.0;
inline constexpr double kUlps = 4.0;

// The unit roundoff of a type: half its machine epsilon (2^-24 for f32, 2^-11 for f16, 2^-8 for
// bf16); 0 for int64, which is exact.
double unit_roundoff(DType t);

// Half the spacing of a type's subnormal numbers: the most a rounding to it can move a value
// below its smallest normal number (2^-25 for f16, 2^-134 for bf16, 2^-150 for f32).
double underflow_roundoff(DType t);

// The unit roundoff of the arithmetic that accumulates a precision's products: f32's in every
// precision (fp16 and bf16 inputs are 16-bit already, so their products are exact in f32, which
// accumulates; the store into a 16-bit output rounds once more, a term of its own).
double math_roundoff(Precision p);

// The unit roundoff a reduction accumulates with on an engine that declares (cuDNN's
// REDUCED_PRECISION_REDUCTION note) that it reduces in reduced precision: the data's own type, at
// best, for 16-bit data (fp16's 2^-11, bf16's 2^-8: a tensor core that accumulates 16-bit products
// in the data's type rounds each partial sum to it), and f32 otherwise, as math_roundoff says.
// The bound is then kC·sqrt(K)·u·Σ|aᵢ||bᵢ| with this u: the same probabilistic model, whose
// rounding errors are independent and of mean zero for any u.
double reduction_roundoff(Precision p, DType data, bool reduced_precision_reduction);

// How far rounding a product's two inputs may move it, relative, before it is summed: 0, but for
// tf32, whose tensor cores keep 10 of an f32 input's 23 mantissa bits (truncated, at worst:
// (1 + 2^-10)^2 - 1 < 2^-9). This error is fixed per product, not a random walk: a sum's share of
// it is at most this times Σ|aᵢ||bᵢ|, whatever K.
double input_roundoff(Precision p);

// The bound of one element of a reduction of `k` terms whose magnitudes sum to `magnitude`,
// accumulated with unit roundoff `u`, and stored with unit roundoff `store` as `value`.
inline double reduction_bound(double k, double magnitude, double u, double store, double value) {
  return kC * std::sqrt(k) * u * magnitude + store * std::fabs(value);
}

// An element's whole bound: the reference's `bound` (before the store), and the rounding of
// storing `want` in `stored` (relative, and below the smallest normal number, absolute).
inline double stored_bound(double bound, double want, DType stored) {
  return bound + unit_roundoff(stored) * std::fabs(want) + underflow_roundoff(stored);
}

// Elementwise: kUlps units of `u` over the magnitudes combined, plus the store's rounding.
inline double elementwise_bound(double magnitude, double u, double store, double value) {
  return kUlps * u * magnitude + store * std::fabs(value);
}

}  // namespace dlb
