// Convolution through oneDNN (Debian's libdnnl, the library PyTorch's CPU convolutions use):
// forward, backward-data and backward-filter primitives made once per layer shape. Each primitive
// works in the blocked layout oneDNN prefers for this machine; operands are reordered into it,
// and results out of it to NCHW, in the workspace. Its scratchpad is workspace too.
#pragma once
#include <memory>
#include <string>

#include "runtime/backend/backend.h"

namespace dlb {

class OnednnConv {
 public:
  // Throws Unsupported when oneDNN has no implementation of this problem.
  explicit OnednnConv(const ConvDesc& d);
  ~OnednnConv();
  OnednnConv(const OnednnConv&) = delete;
  OnednnConv& operator=(const OnednnConv&) = delete;

  // The workspace one pass needs: its blocked copies of operands and results, and its scratchpad.
  size_t workspace_bytes(ConvPass pass) const;
  // "onednn jit:avx512_core (aBcd16b)": oneDNN's implementation and the activations' blocked
  // layout.
  std::string algorithm(ConvPass pass) const;
  // Whether oneDNN fell back to its reference loops, which im2col beats by far.
  bool is_reference(ConvPass pass) const;

  // NCHW f32 operands, KCRS weights; `workspace` is 64-byte aligned, workspace_bytes(pass) long.
  void forward(const float* x, const float* w, float* y, void* workspace) const;
  void backward_data(const float* dy, const float* w, float* dx, void* workspace) const;
  void backward_filter(const float* x, const float* dy, float* dw, void* workspace) const;

 private:
  struct Pass;
  std::unique_ptr<Pass> passes_[3];
};

// oneDNN's version, "2.6.3", for the environment record.
std::string onednn_version();

}  // namespace dlb
