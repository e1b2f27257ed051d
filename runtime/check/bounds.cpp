#include "runtime/check/bounds.h"

#include <algorithm>
#include <cmath>

namespace dlb {

double unit_roundoff(DType t) {
  switch (t) {
    case DType::kF32:
      return std::ldexp(1.0, -24);
    case DType::kF16:
      return std::ldexp(1.0, -11);
    case DType::kBF16:
      return std::ldexp(1.0, -8);
    case DType::kI64:
      return 0.0;
  }
  return 0.0;
}

double underflow_roundoff(DType t) {
  switch (t) {
    case DType::kF32:
      return std::ldexp(1.0, -150);
    case DType::kF16:
      return std::ldexp(1.0, -25);
    case DType::kBF16:
      return std::ldexp(1.0, -134);
    case DType::kI64:
      return 0.0;
  }
  return 0.0;
}

double math_roundoff(Precision) { return std::ldexp(1.0, -24); }

double reduction_roundoff(Precision p, DType data, bool reduced_precision_reduction) {
  const bool narrow = data == DType::kF16 || data == DType::kBF16;
  return reduced_precision_reduction && narrow ? std::max(unit_roundoff(data), math_roundoff(p))
                                               : math_roundoff(p);
}

double input_roundoff(Precision p) { return p == Precision::kTf32 ? std::ldexp(1.0, -9) : 0.0; }

}  // namespace dlb
