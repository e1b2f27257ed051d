// The only translation unit that includes cudnn-frontend. Graph construction follows NVIDIA's
// frontend samples (samples/cpp/convolution/fprop.cpp, dgrad.cpp, wgrad.cpp and
// samples/cpp/norm/batchnorm.cpp of NVIDIA/cudnn-frontend) with NCHW strides and f32 data, and
// the engine filters follow PyTorch's cuDNN v8 path (aten/src/ATen/native/cudnn/Conv_v8.cpp:
// heuristics mode A plus the fallback list; tensor-core engines excluded for f32 unless TF32 is
// allowed). docs/cuda.md has the table of calls and their semantics.
#define CUDNN_FRONTEND_SKIP_JSON_LIB 1
#include "runtime/backend/cuda/cudnn_graphs.h"

#include <cudnn_frontend.h>
#include <fmt/format.h>

#include <array>
#include <set>
#include <unordered_map>

#include "runtime/backend/cuda/cudnn_version.h"
#include "runtime/core/error.h"

namespace dlb::cuda {
namespace fe = cudnn_frontend;
// By the code first: "no engine" (no heuristic result, no plan that builds, a runtime-compiled
// engine that fails to compile) is the graph's lack of support, as the frontend's own Python
// binding reports it (python/pycudnn.cpp, throw_if: "graph not supported"), so that the callers'
// fallbacks run; then by cuDNN's status in the message.
void throw_frontend_error(std::string_view code, const std::string& message,
                          const std::string& what, FrontendOtherwise otherwise) {
  // The code first: the message may run to many lines of cuDNN's call trace. The version loaded
  // leads: what one cuDNN lacks, a later release may have.
  const std::string msg =
      fmt::format("cuDNN {} graph {} ({}): {}", cudnn_version_from(cudnnGetVersion()).str(), what,
                  code, message);
  const auto says = [&](const char* s) { return message.find(s) != std::string::npos; };
  const auto is = [&](const char* c) { return code == c; };
  if (says("ALLOCATION_FAILED") || says("ALLOC_FAILED")) throw OutOfMemory(msg);
  if (is("GRAPH_EXECUTION_FAILED") || is("CUDA_API_FAILED")) throw DeviceError(msg);
  if (is("GRAPH_NOT_SUPPORTED") || is("HEURISTIC_QUERY_FAILED") ||
      is("GRAPH_EXECUTION_PLAN_CREATION_FAILED") || is("UNSUPPORTED_GRAPH_FORMAT") ||
      is("NVRTC_COMPILATION_FAILED")) {
    throw Unsupported(msg);
  }
  if (says("EXECUTION_FAILED")) throw DeviceError(msg);
  if (says("NOT_SUPPORTED")) throw Unsupported(msg);
  if (says("BAD_PARAM") || otherwise == FrontendOtherwise::kBadRequest) throw InvalidArgument(msg);
  throw DeviceError(msg);
}

namespace {

using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;
using VariantPack = std::unordered_map<TensorPtr, void*>;

const char* code_name(fe::error_code_t code) {
  switch (code) {
#define DLB_FE_CODE(c)      \
  case fe::error_code_t::c: \
    return #c;
    DLB_FE_CODE(OK)
    DLB_FE_CODE(ATTRIBUTE_NOT_SET)
    DLB_FE_CODE(SHAPE_DEDUCTION_FAILED)
    DLB_FE_CODE(INVALID_TENSOR_NAME)
    DLB_FE_CODE(INVALID_VARIANT_PACK)
    DLB_FE_CODE(GRAPH_NOT_SUPPORTED)
    DLB_FE_CODE(GRAPH_EXECUTION_PLAN_CREATION_FAILED)
    DLB_FE_CODE(GRAPH_EXECUTION_FAILED)
    DLB_FE_CODE(HEURISTIC_QUERY_FAILED)
    DLB_FE_CODE(UNSUPPORTED_GRAPH_FORMAT)
    DLB_FE_CODE(CUDA_API_FAILED)
    DLB_FE_CODE(CUDNN_BACKEND_API_FAILED)
    DLB_FE_CODE(INVALID_CUDA_DEVICE)
    DLB_FE_CODE(HANDLE_ERROR)
    DLB_FE_CODE(INVALID_VALUE)
    DLB_FE_CODE(NVRTC_COMPILATION_FAILED)
#undef DLB_FE_CODE
  }
  return "UNKNOWN";
}

void check(fe::error_t e, const std::string& what,
           FrontendOtherwise otherwise = FrontendOtherwise::kBadRequest) {
  if (e.is_good()) return;
  throw_frontend_error(code_name(e.get_code()), e.get_message(), what, otherwise);
}

std::vector<int64_t> packed_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size() - 1; i > 0; --i) s[i - 1] = s[i] * dims[i];
  return s;
}

// A tensor's storage as cuDNN names it: f32, or fp16 and bf16 (HALF and BFLOAT16), whose
// graphs still compute and keep virtual tensors in f32.
fe::DataType_t fe_type(DType t) {
  switch (t) {
    case DType::kF32:
      return fe::DataType_t::FLOAT;
    case DType::kF16:
      return fe::DataType_t::HALF;
    case DType::kBF16:
      return fe::DataType_t::BFLOAT16;
    default:
      throw InvalidArgument(fmt::format("cuDNN graph: {} tensors hold no floats", dtype_name(t)));
  }
}

// The strides of a 4-D [N, C, H, W] tensor stored NCHW (packed) or NHWC (channels last: C
// varies fastest). cuDNN reads the layout from them; the dims stay in NCHW order either way.
std::vector<int64_t> strides_of(const std::vector<int64_t>& dims, Layout layout) {
  if (layout == Layout::kNCHW || dims.size() != 4) return packed_strides(dims);
  const int64_t c = dims[1], h = dims[2], w = dims[3];
  return {h * w * c, 1, w * c, c};
}

TensorPtr tensor_of(fe::graph::Graph& g, const char* name, std::vector<int64_t> dims, DType dtype,
                    Layout layout) {
  const auto strides = strides_of(dims, layout);
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_dim(std::move(dims))
                      .set_stride(strides)
                      .set_data_type(fe_type(dtype)));
}

// A graph that says what its chosen engine declares: the numerical notes of the configuration
// it executes (the frontend keeps them per configuration, in the protected plan list, with no
// getter), and whether that configuration came from the heuristics or from the fallback list
// (the frontend keeps one list of both, so the heuristics' share is asked for first, alone).
class NotedGraph : public fe::graph::Graph {
 public:
  // Heuristics mode A, then cuDNN's fallback list, as PyTorch's Conv_v8.cpp takes both. Either
  // may have nothing for a graph; only both having nothing is an error.
  fe::error_t create_plans() {
    const fe::error_t heuristics = create_execution_plans({fe::HeurMode_t::A});
    heuristic_names_.clear();
    for (int64_t i = 0; heuristics.is_good() && i < get_execution_plan_count(); ++i) {
      std::string name;
      if (get_plan_name_at_index(i, name).is_good()) heuristic_names_.insert(name);
    }
    const fe::error_t fallback = create_execution_plans({fe::HeurMode_t::FALLBACK});
    if (heuristics.is_good()) return {fe::error_code_t::OK, ""};
    return fallback.is_good() ? fe::error_t{fe::error_code_t::OK, ""} : heuristics;
  }

  // The chosen (built) configuration's notes; call after build_plans.
  EngineNotes chosen_notes() const {
    const int64_t c = plans.candidate;
    if (!has_notes(c)) return EngineNotes{};
    EngineNotes n = notes_at(c);
    std::string name;
    n.fallback = get_plan_name(name).is_good() && heuristic_names_.count(name) == 0;
    return n;
  }

  // Keeps only the configurations of class `c` (by their notes), in their order; call after
  // create_plans. Returns how many are left.
  size_t keep_class(EngineClass c) {
    std::vector<int64_t> kept;
    const auto count = static_cast<int64_t>(plans.execution_plans.size());
    for (int64_t i = 0; i < count; ++i) {
      if (has_notes(i) && engine_class(notes_at(i)) == c) kept.push_back(i);
    }
    plans.reorder_plans(kept);
    return kept.size();
  }

 private:
  // One list of notes per configuration, in the plan list's order (the frontend this builds
  // with, 1.32, notes only the configurations each create_execution_plans call added).
  bool has_notes(int64_t i) const {
    return i >= 0 && plans.numeric_notes.size() == plans.execution_plans.size() &&
           i < static_cast<int64_t>(plans.numeric_notes.size());
  }
  EngineNotes notes_at(int64_t i) const {
    EngineNotes n;
    // The frontend's list opens with a NOT_SET per note (it resizes, then appends): skipped.
    for (fe::NumericalNote_t note : plans.numeric_notes[static_cast<size_t>(i)]) {
      n.tensor_core |= note == fe::NumericalNote_t::TENSOR_CORE;
      n.down_convert_inputs |= note == fe::NumericalNote_t::DOWN_CONVERT_INPUTS;
      n.reduced_precision_reduction |= note == fe::NumericalNote_t::REDUCED_PRECISION_REDUCTION;
      n.nondeterministic |= note == fe::NumericalNote_t::NONDETERMINISTIC;
      n.fft |= note == fe::NumericalNote_t::FFT;
      n.winograd |= note == fe::NumericalNote_t::WINOGRAD ||
                    note == fe::NumericalNote_t::WINOGRAD_TILE_4x4 ||
                    note == fe::NumericalNote_t::WINOGRAD_TILE_6x6 ||
                    note == fe::NumericalNote_t::WINOGRAD_TILE_13x13;
    }
    return n;
  }

  std::set<std::string> heuristic_names_;
};

std::unique_ptr<NotedGraph> new_graph(const char* name, DType io) {
  auto g = std::make_unique<NotedGraph>();
  g->set_name(name)
      .set_io_data_type(fe_type(io))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

void finalize(fe::graph::Graph& g, cudnnHandle_t handle, const std::string& what) {
  check(g.validate(), what + ": validate");
  check(g.build_operation_graph(handle), what + ": build_operation_graph");
}

// The engine filter, as PyTorch's (aten/src/ATen/native/cudnn/Conv_v8.cpp, filterEngineConfigs):
// never an engine that converts its inputs to a narrower type (tf32 included: its inputs keep
// TF32's 10 bits, never 16-bit ones), tensor cores for f32 data only under tf32. Where dlbench
// differs, by choice: an engine that reduces in 16 bits only under --conv-math=fast (PyTorch
// allows it always; fast is the default for 16-bit data), never for f32 data.
void deselect_engines(NotedGraph& g, const EngineChoice& c,
                      const std::vector<std::string>& barred) {
  g.deselect_numeric_notes({fe::NumericalNote_t::DOWN_CONVERT_INPUTS});
  if (!c.tensor_op_math) g.deselect_numeric_notes({fe::NumericalNote_t::TENSOR_CORE});
  if (!c.reduced_precision_reduction) {
    g.deselect_numeric_notes({fe::NumericalNote_t::REDUCED_PRECISION_REDUCTION});
  }
  if (!barred.empty()) g.deselect_engines(barred);
  if (c.workspace_limit)
    g.deselect_workspace_greater_than(static_cast<int64_t>(*c.workspace_limit));
}

// Engine configurations for a finalized graph (NotedGraph::create_plans), filtered
// (deselect_engines), and built: the heuristics' first choice that builds, or every candidate
// for autotuning.
void make_plans(NotedGraph& g, const EngineChoice& c, bool build_all, const std::string& what,
                const std::vector<std::string>& barred = {}) {
  check(g.create_plans(), what + ": create_execution_plans");
  deselect_engines(g, c, barred);
  if (c.engine_class) g.keep_class(*c.engine_class);
  // The limit is --workspace-limit's, or autotune's cap when none was given.
  const std::string limit =
      c.workspace_limit
          ? fmt::format(" within {} of workspace (--workspace-limit, or autotune's cap)",
                        format_bytes(*c.workspace_limit))
          : std::string();
  const std::string of_class =
      c.engine_class ? fmt::format(" of class {}", engine_class_name(*c.engine_class)) : "";
  if (g.check_support().is_bad()) {
    const std::string msg = fmt::format("{}: cuDNN has no engine{}{}{}", what, of_class,
                                        c.tensor_op_math ? "" : " without tensor-op math", limit);
    // Under a limit, the limit is the request's fault; without one, cuDNN cannot run the graph.
    if (c.workspace_limit && c.limit_is_users) throw InvalidArgument(msg);
    throw Unsupported(msg);
  }
  check(g.build_plans(build_all ? fe::BuildPlanPolicy_t::ALL
                                : fe::BuildPlanPolicy_t::HEURISTICS_CHOICE),
        what + ": build_plans" + limit);
}

// Engine configurations that strict f32 backward-filter graphs never take: their results exceed
// what f32 arithmetic allows. Found by dlbench check-ops on an H100 with cuDNN 9.19
// (results/device/, 2026-11-26): eng17 with knob 25 = 0 on alexnet's 5x5 convolutions was 73
// to 183 times the f32 bound (and within TF32's, so tf32 keeps it), though its numerical notes
// claim neither tensor cores nor down-converted inputs.
const std::vector<std::string> kStrictWgradErrata = {"eng17_k25=0"};

std::string plan_name(const fe::graph::Graph& g) {
  std::string name;
  return g.get_plan_name(name).is_good() ? name : std::string("?");
}

size_t workspace_of(const fe::graph::Graph& g) {
  int64_t ws = 0;
  check(g.get_workspace_size(ws), "get_workspace_size");
  return static_cast<size_t>(ws);
}

// A convolution's x, w and y dims in NCHW (and KCRS) order, whatever their layout.
struct ConvDims {
  std::vector<int64_t> x, w, y;
};
ConvDims conv_dims(const ConvDesc& d) {
  return {{d.batch, d.in_channels, d.height, d.width},
          {d.out_channels, d.in_channels / d.groups, d.kernel_h, d.kernel_w},
          {d.batch, d.out_channels, d.out_h(), d.out_w()}};
}

}  // namespace

EngineChoice conv_engine_choice(const BackendOptions& options, const OpTypes& types) {
  EngineChoice c;
  c.how = options.conv_algo;
  c.engine_class = restricted_class(options.conv_algo);
  c.workspace_limit = options.workspace_limit;
  c.limit_is_users = true;
  c.tensor_op_math = types.math != Precision::kFp32;
  c.reduced_precision_reduction = options.conv_math == ConvMath::kFast &&
                                  (types.data == DType::kF16 || types.data == DType::kBF16);
  return c;
}

struct ConvGraphs::Impl {
  struct Pass {
    std::unique_ptr<NotedGraph> graph;
    TensorPtr a, b, out;
    TensorPtr bias;  // forward with desc.bias: the epilogue's operand
    std::string engine;
    EngineNotes notes;
    size_t workspace = 0;
    std::string refused;  // why the run's class of engines has none for this pass
  };
  std::array<Pass, 3> passes;
  std::string shape;  // for messages
  ConvDesc desc;
};

// forward: y = conv(x, w) (+ bias in the epilogue when `with_bias`). y's dims are left for the
// frontend to infer (and checked); every tensor's strides are NCHW-packed (the frontend's default
// would be NHWC), the virtual conv output's included.
void ConvGraphs::build_forward(const ConvDesc& d, bool with_bias, cudnnHandle_t handle) {
  const auto [x_dims, w_dims, y_dims] = conv_dims(d);
  auto& p = impl_->passes[0];
  p = Impl::Pass{};
  const DType data = d.types.data, weights = d.types.params;
  const Layout layout = d.layout;
  p.graph = new_graph(with_bias ? "conv_fprop_bias" : "conv_fprop", data);
  p.a = tensor_of(*p.graph, "x", x_dims, data, layout);
  p.b = tensor_of(*p.graph, "w", w_dims, weights, layout);
  p.out = p.graph->conv_fprop(p.a, p.b,
                              fe::graph::Conv_fprop_attributes()
                                  .set_padding({d.pad_h, d.pad_w})
                                  .set_stride({d.stride_h, d.stride_w})
                                  .set_dilation({1, 1})
                                  .set_compute_data_type(fe::DataType_t::FLOAT));
  if (with_bias) {
    // Fused epilogue: the convolution's result stays virtual and the graph writes conv + bias,
    // the bias broadcast from [1, K, 1, 1] (conv_fprop, then a pointwise ADD).
    p.out->set_dim(y_dims)
        .set_stride(strides_of(y_dims, layout))
        .set_data_type(fe::DataType_t::FLOAT);
    p.bias = tensor_of(*p.graph, "bias", {1, d.out_channels, 1, 1}, weights, layout);
    p.out = p.graph->pointwise(p.out, p.bias,
                               fe::graph::Pointwise_attributes()
                                   .set_mode(fe::PointwiseMode_t::ADD)
                                   .set_compute_data_type(fe::DataType_t::FLOAT));
  }
  p.out->set_output(true).set_stride(strides_of(y_dims, layout)).set_data_type(fe_type(data));
  finalize(*p.graph, handle, impl_->shape + " forward");
  if (p.out->get_dim() != y_dims) {
    throw InvalidArgument(fmt::format("{}: cuDNN infers output dims {}, not {}", impl_->shape,
                                      fmt::join(p.out->get_dim(), "x"), fmt::join(y_dims, "x")));
  }
}

// backward-data: dx = conv_dgrad(dy, w)
void ConvGraphs::build_backward_data(const ConvDesc& d, cudnnHandle_t handle) {
  const auto [x_dims, w_dims, y_dims] = conv_dims(d);
  auto& p = impl_->passes[1];
  p = Impl::Pass{};
  p.graph = new_graph("conv_dgrad", d.types.data);
  p.a = tensor_of(*p.graph, "dy", y_dims, d.types.data, d.layout);
  p.b = tensor_of(*p.graph, "w", w_dims, d.types.params, d.layout);
  p.out = p.graph->conv_dgrad(p.a, p.b,
                              fe::graph::Conv_dgrad_attributes()
                                  .set_padding({d.pad_h, d.pad_w})
                                  .set_stride({d.stride_h, d.stride_w})
                                  .set_dilation({1, 1})
                                  .set_compute_data_type(fe::DataType_t::FLOAT));
  p.out->set_output(true)
      .set_dim(x_dims)
      .set_stride(strides_of(x_dims, d.layout))
      .set_data_type(fe_type(d.types.data));
  finalize(*p.graph, handle, impl_->shape + " backward-data");
}

// backward-filter: dw = conv_wgrad(dy, x)
void ConvGraphs::build_backward_filter(const ConvDesc& d, cudnnHandle_t handle) {
  const auto [x_dims, w_dims, y_dims] = conv_dims(d);
  auto& p = impl_->passes[2];
  p = Impl::Pass{};
  p.graph = new_graph("conv_wgrad", d.types.data);
  p.a = tensor_of(*p.graph, "x", x_dims, d.types.data, d.layout);
  p.b = tensor_of(*p.graph, "dy", y_dims, d.types.data, d.layout);
  p.out = p.graph->conv_wgrad(p.b, p.a,
                              fe::graph::Conv_wgrad_attributes()
                                  .set_padding({d.pad_h, d.pad_w})
                                  .set_stride({d.stride_h, d.stride_w})
                                  .set_dilation({1, 1})
                                  .set_compute_data_type(fe::DataType_t::FLOAT));
  p.out->set_output(true)
      .set_dim(w_dims)
      .set_stride(strides_of(w_dims, d.layout))
      .set_data_type(fe_type(d.types.params));
  finalize(*p.graph, handle, impl_->shape + " backward-filter");
}

void ConvGraphs::build(ConvPass pass, cudnnHandle_t handle) {
  const ConvDesc& d = impl_->desc;
  if (pass == ConvPass::kForward) build_forward(d, d.bias, handle);
  if (pass == ConvPass::kBackwardData) build_backward_data(d, handle);
  if (pass == ConvPass::kBackwardFilter) build_backward_filter(d, handle);
}

ConvGraphs::ConvGraphs(const ConvDesc& d, cudnnHandle_t handle) : impl_(std::make_unique<Impl>()) {
  impl_->desc = d;
  impl_->shape = fmt::format("conv {}x{}/{} {}->{} on {}x{}x{} ({} {})", d.kernel_h, d.kernel_w,
                             d.stride_h, d.in_channels, d.out_channels, d.batch, d.height, d.width,
                             dtype_name(d.types.data), layout_name(d.layout));
  for (ConvPass pass : kConvPasses) build(pass, handle);
}

ConvGraphs::~ConvGraphs() = default;

std::vector<int64_t> ConvGraphs::output_dims(ConvPass pass) const {
  return impl_->passes[static_cast<int>(pass)].out->get_dim();
}

// Plans pass `pass` under `choice` (the heuristic's first engine, or autotune's fastest). Where
// cuDNN has no engine for the conv + bias graph, or none of its engines runs under autotune, the
// forward graph is the convolution alone, and the backend adds the bias with its own kernel.
void ConvGraphs::plan_pass(ConvPass pass, cudnnHandle_t handle, const EngineChoice& choice,
                           const PassOperands& scratch,
                           const std::function<void*(size_t)>& workspace) {
  auto& p = impl_->passes[static_cast<int>(pass)];
  const std::string what = fmt::format("{} {}", impl_->shape, conv_pass_name(pass));
  const bool autotune = choice.how == ConvAlgoChoice::kAutotune;
  const std::vector<std::string> barred =
      pass == ConvPass::kBackwardFilter && !choice.tensor_op_math ? kStrictWgradErrata
                                                                  : std::vector<std::string>{};
  // Plans, and under autotune the timing of every candidate, which may find none that runs.
  const auto plan = [&] {
    make_plans(*p.graph, choice, autotune, what, barred);
    if (!autotune) return;
    VariantPack pack{{p.a, const_cast<void*>(scratch.a)},
                     {p.b, const_cast<void*>(scratch.b)},
                     {p.out, scratch.out}};
    if (p.bias) pack.emplace(p.bias, const_cast<void*>(scratch.bias));
    void* ws = workspace(static_cast<size_t>(p.graph->get_autotune_workspace_size()));
    check(p.graph->autotune(handle, pack, ws), what + ": autotune",
          FrontendOtherwise::kDeviceFault);
  };
  try {
    plan();
  } catch (const Error& e) {
    // An allocation failure is not the graph's: it stays an error.
    if (!(pass == ConvPass::kForward && p.bias) || e.kind() == ErrorKind::kOutOfMemory) throw;
    build_forward(impl_->desc, false, handle);
    plan();
  }
}

void ConvGraphs::choose_engines(cudnnHandle_t handle, const EngineChoice& choice,
                                const PassOperands (&scratch)[3],
                                const std::function<void*(size_t)>& workspace) {
  for (ConvPass pass : kConvPasses) {
    const auto i = static_cast<size_t>(pass);
    std::string refused;
    try {
      plan_pass(pass, handle, choice, scratch[i], workspace);
    } catch (const Error& e) {
      // A class with no engine for this pass (within the limit): the heuristic's choice, on a
      // graph built afresh, and the plan says why.
      // Only the class's lack of an engine (Unsupported, or none within the user's limit); a
      // device or library failure stays an error.
      const bool none =
          e.kind() == ErrorKind::kUnsupported || e.kind() == ErrorKind::kInvalidArgument;
      if (!choice.engine_class || !none) throw;
      refused = e.what();
      refused = refused.substr(0, refused.find('\n'));  // not the frontend's per-plan list
      EngineChoice any = choice;
      any.engine_class.reset();
      build(pass, handle);
      plan_pass(pass, handle, any, scratch[i], workspace);
    }
    auto& p = impl_->passes[i];
    p.engine = plan_name(*p.graph);
    p.notes = p.graph->chosen_notes();
    p.workspace = workspace_of(*p.graph);
    p.refused = std::move(refused);
  }
}

bool ConvGraphs::bias_fused() const { return static_cast<bool>(impl_->passes[0].bias); }

PassAlgorithm ConvGraphs::chosen(ConvPass pass) const {
  const auto& p = impl_->passes[static_cast<int>(pass)];
  PassAlgorithm a;
  a.pass = pass;
  a.algorithm = p.engine;
  a.workspace_bytes = p.workspace;
  a.notes = p.notes;
  // cuDNN states neither the points nor the tiles of its FFT and Winograd transforms.
  if (p.notes.fft || p.notes.winograd) a.arithmetic = ConvArithmetic::kUnstatedTransform;
  a.refused = p.refused;
  return a;
}

void ConvGraphs::execute(cudnnHandle_t handle, ConvPass pass, const PassOperands& op,
                         void* workspace) const {
  const auto& p = impl_->passes[static_cast<int>(pass)];
  if (static_cast<bool>(p.bias) != (op.bias != nullptr)) {
    throw InvalidArgument(fmt::format("{} {}: the graph {} a bias and the call {} one",
                                      impl_->shape, conv_pass_name(pass),
                                      p.bias ? "adds" : "has no", op.bias ? "gives" : "gives no"));
  }
  VariantPack pack{{p.a, const_cast<void*>(op.a)}, {p.b, const_cast<void*>(op.b)}, {p.out, op.out}};
  if (p.bias) pack.emplace(p.bias, const_cast<void*>(op.bias));
  check(p.graph->execute(handle, pack, workspace),
        fmt::format("{} {}: execute", impl_->shape, conv_pass_name(pass)),
        FrontendOtherwise::kDeviceFault);
}

struct BatchNormGraphs::Impl {
  std::unique_ptr<NotedGraph> fwd, bwd;
  // forward
  TensorPtr x, gamma, beta, prev_mean, prev_var, y, mean, invstd, next_mean, next_var;
  // backward (b_y: the ReLU's output, with relu only)
  TensorPtr b_x, b_y, b_dy, b_gamma, b_mean, b_invstd, dx, dgamma, dbeta;
  int64_t c = 0;
  DType data = DType::kF32;
  std::string shape, engines;
};

namespace {
constexpr DType kStatsType = DType::kF32;  // scale, bias and statistics under every data type
fe::graph::Pointwise_attributes relu_mode(fe::PointwiseMode_t mode) {
  return fe::graph::Pointwise_attributes().set_mode(mode).set_compute_data_type(
      fe::DataType_t::FLOAT);
}
}  // namespace

BatchNormGraphs::BatchNormGraphs(int64_t n, int64_t c, int64_t h, int64_t w, DType data,
                                 Layout layout, float eps, bool relu, cudnnHandle_t handle)
    : impl_(std::make_unique<Impl>()) {
  impl_->c = c;
  impl_->data = data;
  impl_->shape = fmt::format("batch norm{} over {}x{}x{}x{} ({} {})", relu ? " + relu" : "", n, c,
                             h, w, dtype_name(data), layout_name(layout));
  const std::vector<int64_t> dims{n, c, h, w};
  build_forward(dims, data, layout, eps, relu, handle);
  build_backward(dims, data, layout, relu, handle);
}

void BatchNormGraphs::build_forward(const std::vector<int64_t>& dims, DType data, Layout layout,
                                    float eps, bool relu, cudnnHandle_t handle) {
  Impl& m = *impl_;
  constexpr DType f32 = kStatsType;
  const std::vector<int64_t> per_channel{1, dims[1], 1, 1};
  m.fwd = new_graph(relu ? "batchnorm_relu_fwd" : "batchnorm_fwd", data);
  auto& g = *m.fwd;
  m.x = tensor_of(g, "x", dims, data, layout);
  m.gamma = tensor_of(g, "gamma", per_channel, f32, layout);
  m.beta = tensor_of(g, "beta", per_channel, f32, layout);
  m.prev_mean = tensor_of(g, "prev_running_mean", per_channel, f32, layout);
  m.prev_var = tensor_of(g, "prev_running_var", per_channel, f32, layout);
  auto epsilon = g.tensor(eps);
  auto momentum = g.tensor(0.1f);
  auto options = fe::graph::Batchnorm_attributes().set_epsilon(epsilon).set_previous_running_stats(
      m.prev_mean, m.prev_var, momentum);
  auto [y, mean, invstd, next_mean, next_var] = g.batchnorm(m.x, m.gamma, m.beta, options);
  m.y = y;
  if (relu) {  // batch norm's output stays virtual (NCHW, as every tensor of the graph)
    m.y->set_dim(dims).set_stride(strides_of(dims, layout)).set_data_type(fe::DataType_t::FLOAT);
    m.y = g.pointwise(m.y, relu_mode(fe::PointwiseMode_t::RELU_FWD));
  }
  m.mean = mean;
  m.invstd = invstd;
  m.next_mean = next_mean;
  m.next_var = next_var;
  m.y->set_output(true)
      .set_dim(dims)
      .set_stride(strides_of(dims, layout))
      .set_data_type(fe_type(data));
  for (auto* t : {&m.mean, &m.invstd, &m.next_mean, &m.next_var}) {
    (*t)->set_output(true).set_data_type(fe::DataType_t::FLOAT);
  }
  finalize(g, handle, m.shape + " forward");
}

void BatchNormGraphs::build_backward(const std::vector<int64_t>& dims, DType data, Layout layout,
                                     bool relu, cudnnHandle_t handle) {
  Impl& m = *impl_;
  constexpr DType f32 = kStatsType;
  const std::vector<int64_t> per_channel{1, dims[1], 1, 1};
  m.bwd = new_graph(relu ? "batchnorm_relu_bwd" : "batchnorm_bwd", data);
  auto& g = *m.bwd;
  m.b_dy = tensor_of(g, "dy", dims, data, layout);
  TensorPtr dz = m.b_dy;
  if (relu) {  // dz = dy where y > 0 (RELU_BWD: IN_0 is the gradient, IN_1 the sign's source)
    m.b_y = tensor_of(g, "y", dims, data, layout);
    dz = g.pointwise(m.b_dy, m.b_y, relu_mode(fe::PointwiseMode_t::RELU_BWD));
    dz->set_dim(dims).set_stride(strides_of(dims, layout)).set_data_type(fe::DataType_t::FLOAT);
  }
  m.b_x = tensor_of(g, "x", dims, data, layout);
  m.b_gamma = tensor_of(g, "gamma", per_channel, f32, layout);
  m.b_mean = tensor_of(g, "mean", per_channel, f32, layout);
  m.b_invstd = tensor_of(g, "inv_variance", per_channel, f32, layout);
  auto options = fe::graph::Batchnorm_backward_attributes().set_saved_mean_and_inv_variance(
      m.b_mean, m.b_invstd);
  auto [dx, dgamma, dbeta] = g.batchnorm_backward(dz, m.b_x, m.b_gamma, options);
  m.dx = dx;
  m.dgamma = dgamma;
  m.dbeta = dbeta;
  m.dx->set_output(true)
      .set_dim(dims)
      .set_stride(strides_of(dims, layout))
      .set_data_type(fe_type(data));
  m.dgamma->set_output(true).set_data_type(fe::DataType_t::FLOAT);
  m.dbeta->set_output(true).set_data_type(fe::DataType_t::FLOAT);
  finalize(g, handle, m.shape + " backward");
}

BatchNormGraphs::~BatchNormGraphs() = default;

std::vector<int64_t> BatchNormGraphs::forward_output_dims() const { return impl_->y->get_dim(); }
std::vector<int64_t> BatchNormGraphs::backward_output_dims() const { return impl_->dx->get_dim(); }

size_t BatchNormGraphs::choose_engines(cudnnHandle_t /*handle*/) {
  // Strict for f32 data (no tensor-op notes apply to its normalization engines); 16-bit data
  // may take tensor-op engines, never down-converting or 16-bit-reducing ones (deselect_engines).
  EngineChoice heuristic;
  heuristic.tensor_op_math = impl_->data != DType::kF32;
  make_plans(*impl_->fwd, heuristic, false, impl_->shape + " forward");
  make_plans(*impl_->bwd, heuristic, false, impl_->shape + " backward");
  impl_->engines =
      fmt::format("forward {}, backward {}", plan_name(*impl_->fwd), plan_name(*impl_->bwd));
  return std::max(workspace_of(*impl_->fwd), workspace_of(*impl_->bwd));
}

std::string BatchNormGraphs::engine_names() const { return impl_->engines; }

void BatchNormGraphs::forward(cudnnHandle_t handle, const BatchNormForwardOperands& op,
                              void* workspace) const {
  const Impl& m = *impl_;
  VariantPack pack{{m.x, const_cast<void*>(op.x)},
                   {m.gamma, const_cast<void*>(op.gamma)},
                   {m.beta, const_cast<void*>(op.beta)},
                   {m.y, op.y},
                   {m.mean, op.save_mean},
                   {m.invstd, op.save_invstd},
                   {m.prev_mean, op.running_scratch},
                   {m.prev_var, op.running_scratch + m.c},
                   {m.next_mean, op.running_scratch + 2 * m.c},
                   {m.next_var, op.running_scratch + 3 * m.c}};
  check(m.fwd->execute(handle, pack, workspace), m.shape + " forward: execute",
        FrontendOtherwise::kDeviceFault);
}

void BatchNormGraphs::backward(cudnnHandle_t handle, const BatchNormBackwardOperands& op,
                               void* workspace) const {
  const Impl& m = *impl_;
  VariantPack pack{{m.b_x, const_cast<void*>(op.x)},
                   {m.b_dy, const_cast<void*>(op.dy)},
                   {m.b_gamma, const_cast<void*>(op.gamma)},
                   {m.b_mean, const_cast<void*>(op.save_mean)},
                   {m.b_invstd, const_cast<void*>(op.save_invstd)},
                   {m.dx, op.dx},
                   {m.dgamma, op.dgamma},
                   {m.dbeta, op.dbeta}};
  if (m.b_y) pack.emplace(m.b_y, const_cast<void*>(op.y));
  check(m.bwd->execute(handle, pack, workspace), m.shape + " backward: execute",
        FrontendOtherwise::kDeviceFault);
}

}  // namespace dlb::cuda
