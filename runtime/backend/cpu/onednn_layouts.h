// oneDNN's names for the layouts the CPU backend stores tensors in, for the files that make
// oneDNN primitives over them.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include "runtime/core/dtype.h"

namespace dlb {

// An ungrouped weight stored in `layout` beside activations stored in `activations`: kNCHW is
// the activations' order, KCRS (oihw) or channels-last KRSC (ohwi); the blocked ones are oneDNN's
// own.
dnnl::memory::format_tag onednn_weight_tag(Layout layout, Layout activations);

}  // namespace dlb
