// oneDNN's names for the layouts the CPU backend stores tensors in, for the files that make
// oneDNN primitives over them.
#pragma once
#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>

#include "runtime/core/dtype.h"

namespace dlb {

// An ungrouped weight stored in `layout` beside activations stored in `activations`: kNCHW is
// the activations' order, KCRS (oihw) or channels-last KRSC (ohwi); the blocked ones are oneDNN's
// own.
dnnl::memory::format_tag onednn_weight_tag(Layout layout, Layout activations);

// A row-major rows x cols matrix of `type`, or (transposed) the transpose of one stored
// cols x rows: an operand of oneDNN's matmul primitive.
inline dnnl::memory::desc onednn_matrix(int64_t rows, int64_t cols, dnnl::memory::data_type type,
                                        bool transposed = false) {
  return transposed ? dnnl::memory::desc({rows, cols}, type, {1, rows})
                    : dnnl::memory::desc({rows, cols}, type, {cols, 1});
}

}  // namespace dlb
