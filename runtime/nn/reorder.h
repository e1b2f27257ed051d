// Fujitsu's reordering of backward (--memory-plan=reorder): a layer's backward-data pass (which
// reads its output's gradient and writes its input's) and backward-weights pass (which reads its
// output's gradient and its input, and writes its parameters' gradients) are independent, so
// either may run first. The graph emits data first; this transformation runs the weights pass
// first wherever that frees bytes sooner: where the weights pass is the last reader of tensors
// that the data pass does not read (the layer's input, for a convolution or a linear layer),
// those are free before the data pass writes its input's gradient, instead of after it.
//
// Fujitsu ordered fully connected layers the other way because their frameworks allocated each
// weight gradient for the step; dlbench keeps every parameter gradient in the flat buffer for
// the whole run, so no order frees a weight gradient, and the rule above is the only one that
// changes the peak. A transformation of the schedule, before recomputation and the sync
// policy's passes; what each pass computes is unchanged.
#pragma once
#include <vector>

#include "runtime/nn/schedule.h"

namespace dlb {

// `schedule` with each layer's weights pass moved before its data pass where the weights pass
// is the last reader of something the data pass does not read, and reads nothing the data pass
// (or the accumulations after it) writes; dependencies linked again. `kept`: tensors read after
// the step, which no reordering frees.
Schedule reorder_backward(const Schedule& schedule, const std::vector<TensorInfo>& tensors,
                          const std::vector<int>& kept = {});

}  // namespace dlb
