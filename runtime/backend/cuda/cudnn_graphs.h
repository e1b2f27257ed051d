// cuDNN's graph API through cudnn-frontend, for convolution and batch norm. This header does not
// include the frontend (one translation unit that does takes ~30 s to compile): the graphs live
// behind pointers to implementation.
//
// Every graph is built in two steps:
//   1. construction validates it and finalizes cuDNN's operation graph. That needs no device, and
//      a null handle is allowed: cuDNN itself then checks the shapes, strides and types
//      (tests/unit/cuda_library_calls_test.cpp does this for every layer of every model);
//   2. choose_engines() picks an engine configuration per graph, on a device.
#pragma once
#include <cudnn.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "runtime/backend/backend.h"

namespace dlb::cuda {

// How engines are chosen: heuristic or autotune (or the heuristic within one class), under a
// workspace limit; whether tensor-op math
// is allowed (precision tf32, and 16-bit data) or not (strict fp32: engines with the tensor-core
// note are excluded); whether engines that reduce in 16 bits are (--conv-math=fast, 16-bit data).
// Engines that down-convert their inputs never are. Built by field name only (not an aggregate):
// a positional initializer once set limit_is_users where it meant tensor_op_math.
struct EngineChoice {
  EngineChoice() {}  // user-provided: not an aggregate ("= default" would keep it one)
  ConvAlgoChoice how = ConvAlgoChoice::kHeuristic;
  std::optional<size_t> workspace_limit;
  bool limit_is_users = true;  // false: autotune's own cap, so no engine is not the user's fault
  bool tensor_op_math = false;
  bool reduced_precision_reduction = false;
  // --conv-algo=class:NAME: only engines of this class; a pass with none takes the heuristic's
  // choice, and its PassAlgorithm::refused says why.
  std::optional<EngineClass> engine_class;
};
static_assert(!std::is_aggregate_v<EngineChoice>, "EngineChoice is built by field name");

// A convolution's engine choice under the backend's options: their heuristic or autotune and
// workspace limit (the user's), and tensor-op math for tf32 and 16-bit data; strict fp32 keeps
// to FMA engines. (Until 2026-11-26 a positional initializer set limit_is_users where it meant
// tensor_op_math, so every precision ran without tensor cores: bf16 resnet50 on an H100 at
// 57 img/s, results/device/.)
EngineChoice conv_engine_choice(const BackendOptions& options, const OpTypes& types);

// Throws the error a cudnn-frontend failure is, from its code as the frontend names it
// ("HEURISTIC_QUERY_FAILED") and its message: an allocation failure OutOfMemory; no engine (no
// heuristic result, no plan that builds, an engine that does not compile) or an unsupported graph
// Unsupported, so that fallbacks run; an execution or CUDA failure DeviceError; a bad parameter
// InvalidArgument; anything else InvalidArgument (kBadRequest) or DeviceError (kDeviceFault).
enum class FrontendOtherwise { kBadRequest, kDeviceFault };
[[noreturn]] void throw_frontend_error(std::string_view code, const std::string& message,
                                       const std::string& what, FrontendOtherwise otherwise);

// Device buffers of one pass's operands, for autotuning (timed at plan time) and execution.
struct PassOperands {
  const void* a = nullptr;     // forward: x; backward-data: dy; backward-filter: x
  const void* b = nullptr;     // forward: w; backward-data: w;  backward-filter: dy
  void* out = nullptr;         // forward: y; backward-data: dx; backward-filter: dw
  const void* bias = nullptr;  // forward of a plan with desc.bias: the bias
};

// The three graphs of one convolution (data and weights of desc.types, f32, f16 or bf16, computed
// in f32; every tensor stored in desc.layout, NCHW or channels-last NHWC): forward (with the bias
// added in its epilogue when desc.bias), backward-data, backward-filter.
class ConvGraphs {
 public:
  // Throws InvalidArgument with the frontend's or cuDNN's message when a graph is refused.
  ConvGraphs(const ConvDesc& d, cudnnHandle_t handle);
  ~ConvGraphs();
  ConvGraphs(const ConvGraphs&) = delete;
  ConvGraphs& operator=(const ConvGraphs&) = delete;

  // The output dimensions of a pass's graph as the frontend inferred them.
  std::vector<int64_t> output_dims(ConvPass pass) const;

  // Picks an engine for every pass. Autotune times every candidate once on `scratch` operands,
  // with workspace from `workspace(bytes)`. Throws InvalidArgument, naming the pass, when no
  // engine fits the workspace limit. Under choice.engine_class, a pass with no engine of that
  // class takes the heuristic's choice, and chosen(pass).refused says why.
  void choose_engines(cudnnHandle_t handle, const EngineChoice& choice,
                      const PassOperands (&scratch)[3],
                      const std::function<void*(size_t)>& workspace);
  PassAlgorithm chosen(ConvPass pass) const;
  // Whether the forward graph adds the bias (desc.bias, and cuDNN had an engine for the fused
  // graph); when not, execute() takes no bias and the caller adds it.
  bool bias_fused() const;

  void execute(cudnnHandle_t handle, ConvPass pass, const PassOperands& operands,
               void* workspace) const;

 private:
  void build_forward(const ConvDesc& d, bool with_bias, cudnnHandle_t handle);
  void build_backward_data(const ConvDesc& d, cudnnHandle_t handle);
  void build_backward_filter(const ConvDesc& d, cudnnHandle_t handle);
  void build(ConvPass pass, cudnnHandle_t handle);  // a pass's graph, afresh
  void plan_pass(ConvPass pass, cudnnHandle_t handle, const EngineChoice& choice,
                 const PassOperands& scratch, const std::function<void*(size_t)>& workspace);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Batch norm in training over [n, c, h, w] (NCHW or NHWC; data f32, f16 or bf16; scale, bias,
// statistics and the parameter gradients f32): the forward graph
// (y, the batch mean and 1/sqrt(var + eps)) and the backward graph (dx, dgamma, dbeta from the
// saved statistics). The running statistics are not the graph's: CudaBackend updates them with
// PyTorch's unbiased variance (batch_norm_kernels.h's BatchNormRunningUpdate).
struct BatchNormForwardOperands {
  const void* x;
  const void* gamma;
  const void* beta;
  void* y;
  void* save_mean;
  void* save_invstd;
  // The graph's own running statistics, [previous mean, previous var, next mean, next var] x c
  // floats of device scratch: read and written, never used (see above).
  float* running_scratch;
};
struct BatchNormBackwardOperands {
  const void* x;
  const void* y;  // graphs with the ReLU: the forward output, whose sign masks dy; else unused
  const void* dy;
  const void* gamma;
  const void* save_mean;
  const void* save_invstd;
  void* dx;
  void* dgamma;
  void* dbeta;
};

// With `relu`, batch norm + ReLU: the forward graph writes max(y, 0) (a pointwise RELU_FWD on the
// virtual batch-norm output), and the backward graph masks dy by the sign of that output (a
// pointwise RELU_BWD of dy and y into a virtual tensor) before batch norm's backward.
class BatchNormGraphs {
 public:
  BatchNormGraphs(int64_t n, int64_t c, int64_t h, int64_t w, DType data, Layout layout, float eps,
                  bool relu, cudnnHandle_t handle);
  ~BatchNormGraphs();
  BatchNormGraphs(const BatchNormGraphs&) = delete;
  BatchNormGraphs& operator=(const BatchNormGraphs&) = delete;

  std::vector<int64_t> forward_output_dims() const;   // y as inferred
  std::vector<int64_t> backward_output_dims() const;  // dx as inferred

  // Heuristic engines (batch norm has no algorithm choice worth timing); returns the larger of
  // the two workspaces.
  size_t choose_engines(cudnnHandle_t handle);
  std::string engine_names() const;

  void forward(cudnnHandle_t handle, const BatchNormForwardOperands& op, void* workspace) const;
  void backward(cudnnHandle_t handle, const BatchNormBackwardOperands& op, void* workspace) const;

 private:
  // The training forward graph (with the ReLU fused when `relu`) and its backward; `dims` is
  // [n, c, h, w], every tensor stored in `layout`.
  void build_forward(const std::vector<int64_t>& dims, DType data, Layout layout, float eps,
                     bool relu, cudnnHandle_t handle);
  void build_backward(const std::vector<int64_t>& dims, DType data, Layout layout, bool relu,
                      cudnnHandle_t handle);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dlb::cuda
