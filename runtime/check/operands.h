// The tensors of one checked op on a backend: seeded random values rounded to the tensor's type
// (so the float64 reference sees exactly what the backend sees), uploaded in the layout the
// backend stores them in, and read back into logical order as float64.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/check/reference.h"

namespace dlb {

// An instance's drawn values, kept for all its passes and precisions: an update of vgg16's
// 103-million-weight classifier draws its operands once, not once per pass.
struct OperandCache {
  std::map<std::string, std::vector<float>> drawn;
};

class Operands {
 public:
  // Values depend on the seed, the instance's text and each tensor's name only, so every
  // backend, precision and algorithm of one instance starts from the same numbers (up to the
  // rounding to each type).
  Operands(Backend& backend, uint64_t seed, const std::string& instance, OperandCache& cache);

  // Values of `shape` with this mean and standard deviation (uniformly distributed: the bounds
  // hold for any distribution), rounded to `dtype`.
  HostArray draw(const std::string& name, const Shape& shape, DType dtype, double mean,
                 double stddev) const;
  HostArray uniform(const std::string& name, const Shape& shape, DType dtype, double lo,
                    double hi) const;
  std::vector<int64_t> labels(const std::string& name, int64_t n, int64_t classes) const;
  // Elements [begin, begin + count) of draw(name, shape, ...) in flat order, as a 1-D array:
  // the reference of an elementwise op over a tensor too large to hold in float64 at once.
  HostArray draw_slice(const std::string& name, const Shape& shape, DType dtype, double mean,
                       double stddev, int64_t begin, int64_t count) const;
  // draw(name, shape, ...) uploaded a slice at a time (NCHW), without a float64 copy.
  Tensor upload_drawn(const std::string& name, const Shape& shape, DType dtype, double mean,
                      double stddev);

  // A tensor holding `values` (which must be representable in `dtype`), stored in `layout`.
  Tensor upload(const HostArray& values, DType dtype, Layout layout = Layout::kNCHW);
  // Stores `values` (in logical order) into `t`, which has their element count.
  void upload_into(const HostArray& values, Tensor& t);
  Tensor upload_labels(const std::vector<int64_t>& labels);
  // A tensor of `shape` filled with NaN: an element the op under test does not write shows.
  Tensor poisoned(const Shape& shape, DType dtype, Layout layout = Layout::kNCHW);
  HostArray download(const Tensor& t) const;
  // Elements [begin, begin + count) of an NCHW tensor in flat order.
  HostArray download_slice(const Tensor& t, int64_t begin, int64_t count) const;

  Backend& backend() const { return backend_; }

 private:
  uint64_t stream(const std::string& name) const;
  const std::vector<float>& drawn(const std::string& name, const Shape& shape, double lo,
                                  double hi) const;
  Backend& backend_;
  uint64_t seed_;
  std::string instance_;
  OperandCache& cache_;
};

// `values` rounded to `dtype` (to nearest even, as every backend stores).
void round_to(HostArray& values, DType dtype);

}  // namespace dlb
