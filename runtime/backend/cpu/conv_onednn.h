// Convolution through oneDNN (Debian's libdnnl, the library PyTorch's CPU convolutions use):
// forward, backward-data and backward-filter primitives made once per layer shape, with one of
// oneDNN's algorithms, on f32 or bf16 operands. Each primitive works in the blocked layout oneDNN
// prefers for this machine; operands are reordered into it, and results out of it to the stored
// layout (NCHW, or channels last: ConvDesc::layout), in the workspace. Its scratchpad (Winograd's
// transformed tiles, among others) is workspace too.
#pragma once
#include <memory>
#include <string>

#include "runtime/backend/backend.h"

namespace dlb {

// oneDNN's convolution algorithms: direct (its default, and PyTorch's), Winograd (F(4x4, 3x3) on
// AVX-512 in f32: 3x3 kernels at stride 1 only), and auto (oneDNN picks one of the two per shape
// and pass).
enum class OnednnAlgorithm { kDirect, kWinograd, kAuto };
std::string_view onednn_algorithm_name(OnednnAlgorithm a);  // "direct", "winograd", "auto"

// Which of oneDNN's implementations a plan may take: its first choice for each pass, or the first
// whose name is not AMX's (oneDNN names its AMX convolution kernels "..._amx_..."; for resnet
// shapes that is its jit AVX-512 BF16 kernel, though a gemm-based one could still use AMX
// inside its matrix products).
enum class OnednnKernels { kFirst, kWithoutAmx };

class OnednnConv {
 public:
  // Every operand, result and gradient in `operands`: f32, or bf16, which oneDNN multiplies
  // (AVX-512 BF16's dot products, accumulating in f32, where the CPU has them: the caller asks,
  // onednn_engine.h) and rounds once on store. A bf16 plan adds the bias (d.bias) inside its
  // forward primitive, before that one rounding.
  //
  // Throws Unsupported when oneDNN has no forward primitive of this algorithm for the problem
  // (direct: nor either backward one), and for bf16 when any pass would be oneDNN's reference
  // loops. A Winograd or auto plan may lack a backward pass alone: has() says so, and missing()
  // why. With OnednnKernels::kWithoutAmx a pass whose implementations all use AMX is missing.
  OnednnConv(const ConvDesc& d, OnednnAlgorithm algorithm, DType operands = DType::kF32,
             OnednnKernels kernels = OnednnKernels::kFirst);
  ~OnednnConv();
  OnednnConv(const OnednnConv&) = delete;
  OnednnConv& operator=(const OnednnConv&) = delete;

  bool has(ConvPass pass) const { return passes_[static_cast<int>(pass)] != nullptr; }
  const std::string& missing(ConvPass pass) const { return missing_[static_cast<int>(pass)]; }
  // What the pass's primitive computes: Winograd's F(4x4, 3x3) (which auto may pick), or sums of
  // products. A Winograd primitive with other transforms is not made (missing() says so): the op
  // checker bounds these ones only.
  ConvArithmetic arithmetic(ConvPass pass) const;

  // The workspace one pass needs: its blocked copies of operands and results, and its scratchpad.
  size_t workspace_bytes(ConvPass pass) const;
  // "onednn jit:avx512_core (aBcd16b)": oneDNN's implementation and the activations' blocked
  // layout.
  std::string algorithm(ConvPass pass) const;
  // Whether oneDNN fell back to its reference loops, which im2col beats by far.
  bool is_reference(ConvPass pass) const;

  DType operands() const { return operands_; }
  // Whether the forward primitive adds the bias (a bf16 plan of a layer with one).
  bool adds_bias() const { return adds_bias_; }

  // Operands of operands() in ConvDesc::layout, weights as ConvDesc::weight_layout says; `bias`
  // only if adds_bias(), which then also runs without it. `workspace` is 64-byte aligned,
  // workspace_bytes(pass) long.
  void forward(const void* x, const void* w, const void* bias, void* y, void* workspace) const;
  void backward_data(const void* dy, const void* w, void* dx, void* workspace) const;
  void backward_filter(const void* x, const void* dy, void* dw, void* workspace) const;

 private:
  struct Pass;
  struct Builder;
  std::unique_ptr<Pass> passes_[3];
  std::string missing_[3];
  DType operands_ = DType::kF32;
  bool adds_bias_ = false;
  std::unique_ptr<Pass> without_bias_;  // adds_bias(): the forward pass without its bias
  void refuse_reference_loops(const ConvDesc& d, std::string_view name) const;
  std::unique_ptr<Pass> forward_without_bias(const ConvDesc& d, OnednnAlgorithm algorithm,
                                             OnednnKernels kernels) const;
};

// oneDNN's version, "2.6.3", for the environment record.
std::string onednn_version();

}  // namespace dlb
