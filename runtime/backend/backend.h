// The Backend seam: memory through the allocator, and typed training operations. Layers call
// these and never kernels or library handles. A backend says what it supports; asking for anything
// else raises Unsupported with a message naming the op, the dtypes involved and the backend.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "runtime/core/clock.h"
#include "runtime/core/dtype.h"
#include "runtime/core/host_device.h"
#include "runtime/core/precision_policy.h"
#include "runtime/core/stream_ref.h"
#include "runtime/memory/allocator.h"
#include "runtime/memory/tensor.h"

namespace dlb {

enum class Op {
  kConv,
  kMatmul,
  kBatchNorm,
  kRelu,
  kPool,
  kDropout,
  kAdd,
  kSoftmaxCrossEntropy,
  kSgd,
  kLossScale,  // the loss-scaling ops below
};
std::string_view op_name(Op op);

// The dtypes an op actually involves: its data (inputs, outputs and their gradients), its
// parameters, and the math its products may use. Batch norm in a bf16 run has bf16 data and f32
// parameters; the loss may stay f32 while convolutions run in 16 bits.
struct OpTypes {
  Precision math = Precision::kFp32;
  DType data = DType::kF32;
  DType params = DType::kF32;
  // The types a layer's op sees under `policy`: activations, compute weights and its math.
  static OpTypes of(const PrecisionPolicy& policy);
};
std::string op_types_str(const OpTypes& t);  // "fp16 (f16 data, f16 parameters)"

// A 2-D convolution problem, its dimensions in NCHW order (whatever the layout its tensors are
// stored in). Dilation is 1 (no reference model uses another).
struct ConvDesc {
  int64_t batch = 0, in_channels = 0, height = 0, width = 0;
  int64_t out_channels = 0, kernel_h = 0, kernel_w = 0;
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, groups = 1;
  // The layer adds a bias per output channel: the forward pass is conv_bias_forward, which a
  // backend may fuse (the CUDA backend's forward graph adds it in the convolution's epilogue).
  bool bias = false;
  OpTypes types;  // from the run's precision policy
  // How x, y and w (with their gradients) are stored: NCHW (w: KCRS), or channels-last NHWC
  // (w: KRSC), the backend's activation_layout for these types.
  Layout layout = Layout::kNCHW;
  // How w, which the forward and backward-data passes read, is stored: as `layout` says (kNCHW),
  // or in oneDNN's blocks (the CPU's weights whose channels fill them,
  // Backend::blocks_conv_weights, and their 16-bit compute copies,
  // Backend::conv_weight_copy_layout). And how dw, which the backward-filter pass writes, is:
  // the master weights' layout, which the compute copy's may differ from.
  Layout weight_layout = Layout::kNCHW;
  Layout grad_layout = Layout::kNCHW;

  // floor((in + 2·pad − kernel) / stride) + 1, as PyTorch computes it; at most 0 (no output)
  // where the kernel overhangs the padded input, which a truncating division would make 1.
  int64_t out_h() const { return out_extent(height, pad_h, kernel_h, stride_h); }
  int64_t out_w() const { return out_extent(width, pad_w, kernel_w, stride_w); }
  // Multiply-adds of the forward pass; FLOPs are twice this.
  double forward_macs() const;

 private:
  static int64_t out_extent(int64_t in, int64_t pad, int64_t kernel, int64_t stride) {
    const int64_t span = in + 2 * pad - kernel;
    return span < 0 ? 0 : span / stride + 1;
  }
};

// How a backend that blocks convolution weights (Backend::blocks_conv_weights) stores this
// problem's: Layout::kOIhw16i16o where they fill oneDNN's blocks of 16 (ungrouped, output and
// input channels multiples of 16), else KCRS (kNCHW). Conv2d, the op checker and `bench conv`
// all store them so.
Layout blocked_weight_layout(const ConvDesc& d);

// The three passes of a convolution, each of which a plan chooses an algorithm for.
enum class ConvPass { kForward, kBackwardData, kBackwardFilter };
inline constexpr ConvPass kConvPasses[] = {ConvPass::kForward, ConvPass::kBackwardData,
                                           ConvPass::kBackwardFilter};
std::string_view conv_pass_name(ConvPass p);  // "forward", "backward_data", "backward_filter"

// How a plan chooses each pass's algorithm: the library's heuristic (its first choice that fits
// the workspace limit), or by timing every candidate that fits once, at plan time. The CPU
// backend also takes one algorithm by name: im2col + sgemm (its reference), oneDNN's direct
// convolution, oneDNN's Winograd, oneDNN's own choice between those two (auto), or im2col + one
// oneDNN matrix product over the batch (matmul: channels-last bf16 layers, and NCHW layers'
// backward-filter passes). The CUDA
// backend instead takes one class of cuDNN's engines (EngineClass: class:fft, class:winograd,
// class:tensor_core, class:other), the heuristic's first choice within it. A named algorithm or
// class exists for some shapes only: a pass without it takes the heuristic's choice, and its plan
// says why (PassAlgorithm::refused). Each backend refuses the other's names.
enum class ConvAlgoChoice {
  kHeuristic,
  kAutotune,
  kIm2col,
  kOnednn,
  kWinograd,
  kAuto,
  kMatmul,
  kClassFft,
  kClassWinograd,
  kClassTensorCore,
  kClassOther
};
inline constexpr ConvAlgoChoice kConvAlgoChoices[] = {
    ConvAlgoChoice::kHeuristic,       ConvAlgoChoice::kAutotune,  ConvAlgoChoice::kIm2col,
    ConvAlgoChoice::kOnednn,          ConvAlgoChoice::kWinograd,  ConvAlgoChoice::kAuto,
    ConvAlgoChoice::kMatmul,          ConvAlgoChoice::kClassFft,  ConvAlgoChoice::kClassWinograd,
    ConvAlgoChoice::kClassTensorCore, ConvAlgoChoice::kClassOther};
std::string_view conv_algo_choice_name(ConvAlgoChoice c);
std::optional<ConvAlgoChoice> parse_conv_algo_choice(std::string_view s);

// Which engines a 16-bit convolution may take, where the library says how an engine reduces
// (cuDNN's REDUCED_PRECISION_REDUCTION note). kFast: also those that accumulate in the data's
// 16-bit type, as PyTorch allows (its filter, aten/src/ATen/native/cudnn/Conv_v8.cpp, never
// excludes them); the default for 16-bit data, so that a comparison with PyTorch is like for
// like. kStrict: f32 accumulation only. f32 data always accumulates in f32.
enum class ConvMath { kStrict, kFast };
inline constexpr ConvMath kConvMaths[] = {ConvMath::kStrict, ConvMath::kFast};
std::string_view conv_math_name(ConvMath m);
std::optional<ConvMath> parse_conv_math(std::string_view s);

// What a library declares about the engine a pass runs on (cuDNN's numerical notes), and whether
// it came from the library's heuristics or from its fallback list, the generic engines it keeps
// for when the heuristics have nothing (a 16-bit convolution there ran 70x slower on an H100:
// docs/cuda.md). A backend that chooses among no library engines (the CPU's) declares none.
struct EngineNotes {
  bool tensor_core = false;                  // computes on tensor cores
  bool down_convert_inputs = false;          // converts its inputs to a narrower type first
  bool reduced_precision_reduction = false;  // accumulates in the data's 16-bit type
  bool nondeterministic = false;             // results may differ from run to run
  bool fft = false;
  bool winograd = false;
  bool fallback = false;  // not among the heuristics' answers
};
// The notes that are set, by name: "tensor_core", "down_convert_inputs",
// "reduced_precision_reduction", "nondeterministic", "fft", "winograd", "fallback".
std::vector<std::string> engine_note_names(const EngineNotes& n);

// The classes of cuDNN's engines, by what their numerical notes declare. cuDNN names no
// algorithm per engine (its legacy algorithms each ran several engines, and one engine served
// several algorithms), so implicit GEMM, precomputed-index GEMM and direct engines are not told
// apart: they are tensor_core or other. In this order, the first that applies: fft (the FFT
// note), winograd (any Winograd note), tensor_core, other.
enum class EngineClass { kFft, kWinograd, kTensorCore, kOther };
inline constexpr EngineClass kEngineClasses[] = {EngineClass::kFft, EngineClass::kWinograd,
                                                 EngineClass::kTensorCore, EngineClass::kOther};
EngineClass engine_class(const EngineNotes& n);
std::string_view engine_class_name(EngineClass c);  // "fft", "winograd", "tensor_core", "other"
// The class an --conv-algo=class:NAME restricts a pass to; none for every other choice.
std::optional<EngineClass> restricted_class(ConvAlgoChoice c);

// What a pass computes its outputs as, for the op checker's bounds (runtime/check/reference.h):
// sums of the products of inputs and weights (direct, im2col, GEMM-based engines), or oneDNN's
// Winograd F(4x4, 3x3), whose transforms of inputs, weights and outputs add rounding of their own
// (runtime/check/reference_winograd.cpp), or a transform whose points and tiles the library does
// not state (cuDNN's FFT and Winograd engines): the op checker derives no bound for that, and
// reports such a pass unsupported rather than judge it by another arithmetic's bound.
enum class ConvArithmetic { kProducts, kWinogradF4x3, kUnstatedTransform };
// "products", "winograd_f4x3", "unstated_transform"
std::string_view conv_arithmetic_name(ConvArithmetic a);

// What a matrix product's multiplications read: the stored type itself (16-bit products, which
// f32 holds exactly, accumulated in f32), or f32 (f32 data, or f32 copies of 16-bit data, which the
// store rounds back). AVX-512 BF16's dot products and conversions also flush subnormal numbers
// (and their inputs) to zero.
struct ProductArithmetic {
  DType operands = DType::kF32;
  bool flushes_subnormals = false;
};

// The algorithm a plan chose for one pass, and the workspace it needs: the per-layer profile
// records these.
struct PassAlgorithm {
  ConvPass pass = ConvPass::kForward;
  std::string algorithm;
  size_t workspace_bytes = 0;
  // The plan was made for an earlier layer of the same shape and is shared (a backend that caches
  // plans by conv_plan_key), so nothing was built or tuned for this one.
  bool shared = false;
  std::optional<EngineNotes> notes;  // what the library declares of the engine, where it does
  ConvArithmetic arithmetic = ConvArithmetic::kProducts;
  ProductArithmetic products;  // what the pass's multiplications read
  // Why the algorithm the run named (--conv-algo=winograd) did not run this pass, which took the
  // heuristic's choice instead; empty when it ran, or when the run named none.
  std::string refused;
};

// Whether a pass whose arithmetic is `math` should run on tensor cores: tf32, fp16 and bf16 are
// what tensor cores are for. A pass that declares its engine's notes and lacks tensor_core then
// ran on generic arithmetic: a warning in the run, a failed row in the device check.
bool wants_tensor_cores(Precision math);
bool lacks_tensor_cores(const PassAlgorithm& a, Precision math);

// Everything a convolution's plan depends on, as one key: every field of `d` (shapes, strides,
// padding, groups, bias, types, layout). Two layers with equal keys can share one plan.
std::string conv_plan_key(const ConvDesc& d);
// A convolution's shape for people: "3x3, 64->128 channels on 16x16, stride 2, pad 1".
std::string conv_shape_text(const ConvDesc& d);

// Made once per layer shape: holds whatever the backend needs (descriptors or graphs, the chosen
// algorithms) and states its workspace need, which the backend reserves up front.
class ConvPlan {
 public:
  explicit ConvPlan(const ConvDesc& d) : desc_(d) {}
  virtual ~ConvPlan() = default;
  const ConvDesc& desc() const { return desc_; }
  // The most workspace any of its passes needs.
  virtual size_t workspace_bytes() const = 0;
  virtual std::vector<PassAlgorithm> algorithms() const = 0;

 private:
  ConvDesc desc_;
};

enum class PoolMode { kMax, kAvg };
struct PoolDesc {
  PoolMode mode = PoolMode::kMax;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  bool count_include_pad = true;  // average pooling only; PyTorch's default
};
// Max pooling's rule, on every backend and in both passes: `v` takes the window from `best` when
// it is larger or NaN (PyTorch's max_pool2d), so a NaN propagates and the last NaN takes the
// gradient. (v != v: NaN, in host and device code alike.)
DLB_HD bool takes_max(float v, float best) { return v > best || v != v; }

// Dynamic loss scaling, as torch.cuda.amp.GradScaler: the loss gradient is multiplied by the
// scale; a step whose gradients hold an inf or NaN is skipped and the scale multiplied by
// `backoff`; after `growth_interval` clean steps in a row it is multiplied by `growth` (unless
// that overflows). A fixed scale is growth = backoff = 1.
struct LossScaleConfig {
  float initial_scale = 65536.f;  // 2^16
  float growth = 2.f;
  float backoff = 0.5f;
  int64_t growth_interval = 2000;
};
// The scaler's state lives on the device, as 4 floats, so that no step waits for the host.
enum LossScaleSlot : int64_t {
  kScaleSlot = 0,       // the current scale
  kFoundInfSlot = 1,    // 1 when this step's gradients hold an inf or NaN, else 0
  kCleanStepsSlot = 2,  // clean steps since the scale last changed (GradScaler's growth tracker)
  kSkippedSlot = 3,     // steps skipped so far
  kLossScaleSlots = 4,
};

// GradScaler.update (aten/src/ATen/native/cuda/AmpKernels.cu, _amp_update_scale_cuda_kernel) on
// the state above, the one rule every backend applies: back off and count a skipped step, or grow
// after growth_interval clean steps (unless the grown scale is not finite: x - x is 0 exactly for
// finite x), then clear the found-inf slot for the next step.
DLB_HD void update_loss_scale_state(const LossScaleConfig& cfg, float* s) {
  if (s[kFoundInfSlot] != 0.f) {
    s[kScaleSlot] *= cfg.backoff;
    s[kCleanStepsSlot] = 0.f;
    s[kSkippedSlot] += 1.f;
  } else if (s[kCleanStepsSlot] + 1.f >= static_cast<float>(cfg.growth_interval)) {
    const float grown = s[kScaleSlot] * cfg.growth;
    if (grown - grown == 0.f) s[kScaleSlot] = grown;
    s[kCleanStepsSlot] = 0.f;
  } else {
    s[kCleanStepsSlot] += 1.f;
  }
  s[kFoundInfSlot] = 0.f;
}

// Where a dropout mask's draws come from: element i is dropped when counter_uniform(base + step,
// i) < p, where `step` is a one-element int64 tensor on the backend (the trainer's step counter,
// which each step advances on the device, so a step replayed from a capture draws a new mask) or
// 0 without one.
struct DropoutSeed {
  DropoutSeed(uint64_t base_seed = 0, const Tensor* step_counter = nullptr)  // NOLINT: a seed
      : base(base_seed), step(step_counter) {}
  uint64_t base;
  const Tensor* step;
};

// Work captured once and replayed: a CUDA graph of a training step. replay() queues the same
// operations again, on the same memory, with every value they were captured with (kernel
// arguments, pointers, sizes); what changes between replays must be read from memory.
class CapturedWork {
 public:
  virtual ~CapturedWork() = default;
  virtual void replay() = 0;
  // Operations captured (a CUDA graph's nodes), for the record.
  virtual int64_t operations() const = 0;
};

struct SgdConfig {
  float lr = 0.01f;
  float momentum = 0.9f;
  float weight_decay = 0.f;  // added to the gradient, as torch.optim.SGD does
};

// One parameter of a grouped update (Backend::sgd_update_group): its gradient, momentum and
// master weights, and the compute copy the update also writes (null: none).
struct SgdParamRef {
  const Tensor* grad = nullptr;
  Tensor* momentum = nullptr;
  Tensor* param = nullptr;
  Tensor* compute = nullptr;
};

// Memory on one device and the queue its work runs in. Every backend is one; on its own it is
// what a communicator benchmark needs (buffers to reduce, a stream to order against).
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual std::string_view name() const = 0;
  // Device name, library versions and the like, for result records.
  virtual std::map<std::string, std::string> environment() const = 0;

  Allocator& allocator() { return *allocator_; }
  Tensor empty(const Shape& shape, DType dtype, MemCategory category, std::string_view what,
               Layout layout = Layout::kNCHW);

  virtual void copy_from_host(const void* src, Tensor& dst) = 0;
  virtual void copy_to_host(const Tensor& src, void* dst) = 0;
  virtual void copy(const Tensor& src, Tensor& dst) = 0;
  virtual void fill(Tensor& t, float value) = 0;
  // dst = src converted element-wise between float types (to nearest even where dst is
  // narrower), each element to where dst's layout keeps it. By default only between equal types
  // and layouts (a copy); backends with 16-bit storage, or compute copies stored in another
  // order (conv_weight_copy_layout), override it.
  virtual void cast(const Tensor& src, Tensor& dst);
  // Waits for all the work this backend has queued: compute, and input copies (copy_in).
  virtual void synchronize() = 0;
  // The queue this memory's work runs in: null (the host) for the CPU, the compute stream for
  // a GPU. Communicators order their work against it.
  virtual StreamRef stream() const { return {}; }

 protected:
  explicit DeviceMemory(std::shared_ptr<Allocator> allocator) : allocator_(std::move(allocator)) {}

 private:
  std::shared_ptr<Allocator> allocator_;
};

class Backend : public DeviceMemory {
 public:
  virtual bool supports(Op op, const OpTypes& types) const = 0;
  // What matmul's multiplications read for operands of these types, and whether they flush
  // subnormal numbers to zero. A convolution's plan says the same per pass (PassAlgorithm).
  virtual ProductArithmetic matmul_arithmetic(const OpTypes& types) const = 0;
  // How this backend stores 4-D activations of these types, with their gradients and the
  // convolution weights' compute copies and gradients: NCHW, or NHWC (channels last). A graph
  // stores its tensors so; the master weights keep torchvision's layout (NCHW, KCRS) unless the
  // backend blocks them (blocks_conv_weights), and a tensor that a flatten reads is NCHW
  // (flattening reads channel-major order). The CPU's are NHWC in a native bf16 run on a CPU with
  // AMX (CpuBackend::activation_layout; not under --conv-algo=im2col), NCHW otherwise.
  virtual Layout activation_layout(const OpTypes& types) const {
    (void)types;
    return Layout::kNCHW;
  }
  // The clock of this backend's work, for step boundaries: the host's for the CPU (an op has
  // finished when it returns), CUDA events on the compute stream for a GPU.
  virtual const Clock& clock() const { return host_clock_; }
  // Input batches, double-buffered. copy_in starts a copy of `src` into `dst` on a queue of its
  // own (a GPU's copy engine) once the compute work before `free` (a mark of clock(): the last
  // step that read `dst`) has run, and returns marks of the copy's start and end on that queue
  // (for traces); `src` may be reused as soon as it returns. wait_for_input makes the compute
  // work queued after it wait for a copy's end. So the next batch is copied while the current
  // step computes. Where copies are synchronous (the CPU: async_input_copies() is false),
  // copy_in copies now and waiting does nothing; a trainer then keeps one input buffer.
  struct CopyMarks {
    Mark start, end;
  };
  virtual bool async_input_copies() const { return false; }
  virtual CopyMarks copy_in(const void* src, Tensor& dst, const Mark& free);
  virtual void wait_for_input(const Mark& copied) { (void)copied; }
  // Activation swapping (--swap; runtime/nn/swap.h): copies all of `src` into `dst` (equal
  // bytes; one of the two is host-swap memory, MemCategory::kHostSwap) on a copy queue, once the
  // compute work queued so far has run, and returns marks of the copy's start and end on that
  // queue. Compute work queued after wait_for_copy(end) runs after the copy; nothing else orders
  // it. Where copies are synchronous (the CPU), the copy is done when swap_copy returns and
  // waiting does nothing.
  virtual CopyMarks swap_copy(const Tensor& src, Tensor& dst);
  virtual void wait_for_copy(const Mark& copied) { (void)copied; }
  // Throws Unsupported, naming the op, the types and the backend, unless supports(op, types).
  void require(Op op, const OpTypes& types) const;
  // Grows the one shared workspace to at least `bytes`, now rather than mid-step.
  void reserve_workspace(size_t bytes);
  // Releases the shared workspace (a binding that failed after its plans reserved it); a pass
  // that needs one allocates it again.
  void release_workspace();

  // Convolution, through a plan. Gradients overwrite their outputs.
  virtual std::unique_ptr<ConvPlan> make_conv_plan(const ConvDesc& desc) = 0;
  virtual void conv_forward(const ConvPlan& plan, const Tensor& x, const Tensor& w, Tensor& y) = 0;
  virtual void conv_backward_data(const ConvPlan& plan, const Tensor& dy, const Tensor& w,
                                  Tensor& dx) = 0;
  virtual void conv_backward_filter(const ConvPlan& plan, const Tensor& x, const Tensor& dy,
                                    Tensor& dw) = 0;
  // y = conv(x, w) + b[c], for a plan made with desc.bias. By default the two ops one after the
  // other; a backend that fuses them overrides it.
  virtual void conv_bias_forward(const ConvPlan& plan, const Tensor& x, const Tensor& w,
                                 const Tensor& b, Tensor& y);
  // Convolution then ReLU, y = max(conv(x, w) (+ b when `b`), 0) (NaN passes, as in torch.relu),
  // for a layer the graph gave the ReLU after it (fuses_conv_relu: one pass fewer in the schedule,
  // and one output and one gradient fewer to store). By default the ops one after the other (the
  // ReLU in place on y); a backend may override it. The backward is the layer's: the ReLU's mask
  // of dy, then the convolution's passes.
  virtual bool fuses_conv_relu(const OpTypes& types) const {
    (void)types;
    return false;
  }
  virtual void conv_relu_forward(const ConvPlan& plan, const Tensor& x, const Tensor& w,
                                 const Tensor* b, Tensor& y);
  // Whether convolution weights whose output and input channels are multiples of 16 are best
  // stored in Layout::kOIhw16i16o, with their gradients and optimizer state (all in one order, so
  // that the update stays element for element) and their compute copies (in that order too, or
  // in conv_weight_copy_layout's): the layout this backend's convolutions read and write weights
  // in, so that fewer passes reorder them (ConvDesc::weight_layout, grad_layout). The master
  // weights otherwise keep torchvision's KCRS.
  virtual bool blocks_conv_weights(const OpTypes& types) const {
    (void)types;
    return false;
  }
  // How the 16-bit compute copy of convolution weights stored in `stored` is stored: by default
  // as they are. A backend whose 16-bit convolutions read another order takes it there, where
  // the update that writes the copy (sgd_update_with_copy) and cast can write it.
  virtual Layout conv_weight_copy_layout(const OpTypes& types, Layout stored) const {
    (void)types;
    return stored;
  }
  // y[n, c, ...] += b[c], and db[c] = sum of dy over every axis but 1.
  virtual void bias_add(const Tensor& b, Tensor& y) = 0;
  virtual void bias_backward(const Tensor& dy, Tensor& db) = 0;

  // Row-major c = alpha * op(a) * op(b) + beta * c on 2-D tensors, with `math` (tf32 lets a GPU
  // use TF32 tensor-op math; fp32 is strict).
  virtual void matmul(Precision math, bool trans_a, bool trans_b, float alpha, const Tensor& a,
                      const Tensor& b, float beta, Tensor& c) = 0;

  // Batch norm over axis 1. Training uses batch statistics, saves mean and 1/sqrt(var + eps),
  // and updates the running statistics with the unbiased variance: running = (1 - momentum) *
  // running + momentum * batch, so that momentum 0 leaves them bit for bit (a recomputed pass).
  virtual void batch_norm_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                Tensor& running_mean, Tensor& running_var, Tensor& save_mean,
                                Tensor& save_invstd, Tensor& y, float momentum, float eps) = 0;
  virtual void batch_norm_infer(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                const Tensor& running_mean, const Tensor& running_var, Tensor& y,
                                float eps) = 0;
  virtual void batch_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                   const Tensor& save_mean, const Tensor& save_invstd, Tensor& dx,
                                   Tensor& dgamma, Tensor& dbeta) = 0;
  // What batch norm in training over `x` will need, made before anything is bound, as
  // make_conv_plan makes a convolution's algorithms (BatchNorm::plan, from Graph::plan_ops): a
  // library's graphs for the shape, and the workspace they reserve, which is then held when the
  // step's tensors are planned. The default needs nothing. The CUDA backend builds its cuDNN
  // graphs here; a shape no plan was made for gets them at its first pass.
  struct BatchNormShape {
    Shape x;
    DType dtype = DType::kF32;  // x's and y's
    Layout layout = Layout::kNCHW;
    float eps = 1e-5f;
    bool relu = false;  // with its ReLU (fuses_batch_norm_relu)
  };
  virtual void plan_batch_norm(const BatchNormShape& bn) { (void)bn; }

  // Batch norm then ReLU as one op, for a graph that fuses the pair where the backend says so:
  // in training y = max(batch_norm(x), 0), and the backward of both from that y (batch norm's
  // backward of dy where y > 0). By default the ops one after the other: ReLU in place on y; its
  // backward into dx, then batch norm's backward from dx into dx (the CPU's batch_norm_backward
  // allows dy and dx to be one buffer). A backend that fuses them overrides all three.
  virtual bool fuses_batch_norm_relu(const OpTypes& types) const {
    (void)types;
    return false;
  }
  virtual void batch_norm_relu_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                     Tensor& running_mean, Tensor& running_var, Tensor& save_mean,
                                     Tensor& save_invstd, Tensor& y, float momentum, float eps);
  virtual void batch_norm_relu_backward(const Tensor& x, const Tensor& y, const Tensor& dy,
                                        const Tensor& gamma, const Tensor& save_mean,
                                        const Tensor& save_invstd, Tensor& dx, Tensor& dgamma,
                                        Tensor& dbeta);

  // Batch norm in training as a layer runs it: batch_norm_train (batch_norm_relu_train when
  // `relu`), then num_batches_tracked[0] += 1 (null: not advanced, as a recomputed pass leaves
  // it). By default those ops one after the other; a backend that advances the counter in the
  // pass's own work overrides it (the CUDA backend: in its running-statistics kernel), so that a
  // batch norm costs no launch of its own for it.
  virtual void batch_norm_train_counted(bool relu, const Tensor& x, const Tensor& gamma,
                                        const Tensor& beta, Tensor& running_mean,
                                        Tensor& running_var, Tensor& save_mean, Tensor& save_invstd,
                                        Tensor& y, float momentum, float eps,
                                        Tensor* num_batches_tracked);

  virtual void relu_forward(const Tensor& x, Tensor& y) = 0;
  virtual void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) = 0;

  virtual void pool_forward(const PoolDesc& desc, const Tensor& x, Tensor& y) = 0;
  virtual void pool_backward(const PoolDesc& desc, const Tensor& x, const Tensor& y,
                             const Tensor& dy, Tensor& dx) = 0;
  // Max pooling that keeps, for each output, where its maximum is (a * w + b within its input
  // channel, by takes_max's rule, int64 in the output's shape and layout, as PyTorch's
  // max_pool2d_with_indices), and its backward from those places instead of searching every
  // window again. A backend that does says saves_pool_argmax(), and a max-pooling layer then
  // declares the tensor and calls these; by default Unsupported.
  virtual bool saves_pool_argmax() const { return false; }
  virtual void max_pool_forward_argmax(const PoolDesc& desc, const Tensor& x, Tensor& y,
                                       Tensor& argmax);
  virtual void max_pool_backward_argmax(const PoolDesc& desc, const Tensor& argmax,
                                        const Tensor& dy, Tensor& dx);
  // Output size comes from y's shape; bins as torch.nn.AdaptiveAvgPool2d makes them.
  virtual void adaptive_avg_pool_forward(const Tensor& x, Tensor& y) = 0;
  virtual void adaptive_avg_pool_backward(const Tensor& dy, Tensor& dx) = 0;

  // Inverted dropout: mask holds 0 or 1/(1-p), drawn from `seed`.
  virtual void dropout_forward(const Tensor& x, float p, const DropoutSeed& seed, Tensor& mask,
                               Tensor& y) = 0;
  virtual void dropout_backward(const Tensor& dy, const Tensor& mask, Tensor& dx) = 0;

  virtual void add(const Tensor& a, const Tensor& b, Tensor& y) = 0;
  virtual void accumulate(const Tensor& x, Tensor& y) = 0;  // y += x

  // Mean cross-entropy over the batch of softmax(logits) against int64 labels. Writes the
  // probabilities (kept for backward) and the loss into a one-element tensor.
  virtual void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor& probs,
                                     Tensor& loss) = 0;
  virtual void softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels,
                                              Tensor& dlogits) = 0;

  // torch.optim.SGD with momentum (dampening 0, no Nesterov): buf = m * buf + (g + wd * p);
  // p -= lr * buf. The momentum buffer must start at zero.
  virtual void sgd_update(const SgdConfig& cfg, const Tensor& grad, Tensor& momentum_buf,
                          Tensor& param) = 0;

  // Loss scaling (Op::kLossScale; `scaler` is the state above). By default Unsupported.
  // The loss gradient times the scale, computed in f32 before it is rounded to dlogits' type.
  virtual void softmax_cross_entropy_backward_scaled(const Tensor& probs, const Tensor& labels,
                                                     const Tensor& scaler, Tensor& dlogits);
  // Sets the found-inf slot when any element of `grads` is inf or NaN (never clears it).
  virtual void find_non_finite(const Tensor& grads, Tensor& scaler);
  // sgd_update with the gradient divided by the scale (times 1/scale, in f32), or nothing at all
  // when the found-inf slot is set: the step is skipped.
  virtual void sgd_update_unscaled(const SgdConfig& cfg, const Tensor& grad, const Tensor& scaler,
                                   Tensor& momentum_buf, Tensor& param);
  // An update (sgd_update, or sgd_update_unscaled when `scaler` is given) that also stores the
  // updated master weights in `compute`, the compute-precision copy that forward and backward
  // read. By default the update, then cast(param, compute); a backend that writes the copy in
  // the update's own pass (the CUDA backend's SGD kernel, the CPU's) overrides it. A skipped step
  // (loss scaling found an inf) may leave `compute` untouched: it already holds cast(param),
  // which binding the step and load_state_dict establish and every update keeps.
  virtual void sgd_update_with_copy(const SgdConfig& cfg, const Tensor& grad, const Tensor* scaler,
                                    Tensor& momentum_buf, Tensor& param, Tensor& compute);
  // Every parameter of `group` updated as the ops above update one: with a compute copy through
  // sgd_update_with_copy, else with `scaler` through sgd_update_unscaled, else sgd_update. By
  // default one call each; a backend that updates them all in one pass overrides it (the CUDA
  // backend: one launch over a table of their pointers, as PyTorch's fused SGD), so that a
  // step's update is not a launch per parameter.
  virtual void sgd_update_group(const SgdConfig& cfg, const std::vector<SgdParamRef>& group,
                                const Tensor* scaler);
  // GradScaler.update: backs off (and counts a skipped step) or grows the scale, and clears the
  // found-inf slot for the next step.
  virtual void update_loss_scale(const LossScaleConfig& cfg, Tensor& scaler);

  // counter[0] += 1, on a one-element int64 tensor, in the queue of work: the trainer's step
  // counter (DropoutSeed) and batch norm's num_batches_tracked, which a replayed step must
  // advance as a step run op by op does.
  virtual void increment(Tensor& counter) = 0;

  // Capture (--cuda-graph): why this backend cannot capture its work; empty when it can.
  virtual std::string capture_unsupported() const;
  // Between begin_capture and end_capture, the ops called are recorded, not run; end_capture
  // returns them as work to replay. Anything that waits for the device or copies to or from
  // the host in between makes the capture fail (the CUDA backend: cudaStreamCaptureModeGlobal).
  // Both throw Unsupported with capture_unsupported() where it is not empty.
  virtual void begin_capture();
  virtual std::unique_ptr<CapturedWork> end_capture();
  // Ends a capture that failed midway and discards what it recorded; never throws.
  virtual void abandon_capture() noexcept {}
  // Moves each time scratch memory that ops reuse (the shared workspace, a backend's own scratch)
  // is reallocated: captured work that holds the old addresses must be captured again.
  uint64_t scratch_generation() const { return scratch_generation_; }

 protected:
  explicit Backend(std::shared_ptr<Allocator> allocator) : DeviceMemory(std::move(allocator)) {}
  // The shared scratch area, at least `bytes` long (grown through the allocator when needed).
  // Neither it nor a backend's own scratch (the CPU's f32 views of 16-bit tensors, the CUDA
  // backend's batch-norm scratch) is a tensor of the step's table (nn/memory_plan.h): how much
  // an op needs is the backend's answer, known once its plans have chosen their algorithms or
  // fallbacks, never from a declaration; and it holds nothing from one pass to the next, so a
  // plan has nothing of it to place. It is counted apart, as MemCategory::kWorkspace.
  void* workspace(size_t bytes);
  // A backend's own scratch was reallocated (scratch_generation).
  void scratch_moved() { ++scratch_generation_; }

 private:
  std::shared_ptr<Buffer> workspace_;
  uint64_t scratch_generation_ = 0;
  SteadyClock host_clock_;
};

// Sets d.weight_layout and d.grad_layout as training stores the weights of d's layer on
// `backend`: the master weights (whose layout the gradient takes) in its blocks where it blocks
// them (blocked_weight_layout), and the weights the passes read in the compute copy's layout
// where the run keeps one (`compute_copy`: 16-bit compute weights beside f32 masters).
// Conv2d::plan, the op checker and `bench conv` all describe their convolutions so.
void describe_weights_as_trained(const Backend& backend, bool compute_copy, ConvDesc& d);

// Options every backend accepts.
// Built by field name only: a positional initializer once set one flag where another was meant,
// and every GPU pass ran without tensor cores (docs/cuda.md). Not an aggregate, so
// BackendOptions{a, b, c} does not compile.
struct BackendOptions {
  BackendOptions() {}  // user-provided: not an aggregate ("= default" would keep it one)
  std::optional<size_t> memory_budget;
  // Which GPU, modulo the number visible: a rank passes its local rank and gets one GPU per rank
  // on each node, as the nccl communicator picks.
  int device = 0;
  ConvAlgoChoice conv_algo = ConvAlgoChoice::kHeuristic;
  // The most workspace one convolution pass may use. A plan takes the best algorithm within it,
  // and fails with InvalidArgument when no algorithm fits.
  std::optional<size_t> workspace_limit;
  // --memory-guard: red zones around every allocation (memory/memory_guard.h), checked after
  // each pass of the step.
  bool memory_guard = false;
  // 16-bit convolutions: whether engines that reduce in 16 bits may run (cuda); fast, as PyTorch.
  ConvMath conv_math = ConvMath::kFast;
};
static_assert(!std::is_aggregate_v<BackendOptions>, "BackendOptions is built by field name");

// A backend's allocator over `resource`, with the options' budget and guard; `host`: where
// host-swap memory comes from (null: `resource`, the CPU's host memory).
std::shared_ptr<Allocator> make_allocator(std::unique_ptr<MemoryResource> resource,
                                          const BackendOptions& options,
                                          std::unique_ptr<MemoryResource> host = nullptr);

enum class BackendKind { kCpu, kCuda };
inline constexpr BackendKind kBackendKinds[] = {BackendKind::kCpu, BackendKind::kCuda};
std::string_view backend_kind_name(BackendKind k);
std::optional<BackendKind> parse_backend_kind(std::string_view s);

// The registry: the one place that knows which backends this build has.
bool backend_compiled(BackendKind kind);
// The --conv-algo choices that name one algorithm each on this backend, for benchmarks that time
// every algorithm: cpu {im2col, onednn, winograd}; cuda {heuristic} and each class of cuDNN's
// engines (its engines are not named one by one).
std::vector<ConvAlgoChoice> named_conv_algorithms(BackendKind kind);
// The named algorithms a list of names asks for (all of them when `names` is empty, or is
// {"all"}); InvalidArgument, naming `flag` and what the backend has, for any other name.
std::vector<ConvAlgoChoice> parse_named_conv_algorithms(BackendKind kind,
                                                        const std::vector<std::string>& names,
                                                        std::string_view flag);
std::unique_ptr<Backend> make_backend(BackendKind kind, const BackendOptions& options);
// Memory and a stream only, on a backend kind's device: for communication benchmarks, which
// need no training ops (the CUDA one exists before the CUDA training ops do).
std::unique_ptr<DeviceMemory> make_device_memory(BackendKind kind, const BackendOptions& options);
// Whether a GPU backend is compiled in and a device is visible (suites then skip their cpu
// override).
bool gpu_available();
// Versions of the accelerator stack this build has, for result records: "driver" and "cuda"
// (runtime) when CUDA is compiled in ("none" otherwise; driver "none" without a driver).
std::map<std::string, std::string> accelerator_versions();
// Human-readable lines, one per device found ("cpu: 2 cores", "cuda:0 NVIDIA H100 ...").
std::vector<std::string> list_devices();

}  // namespace dlb
