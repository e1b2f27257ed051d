#include "runtime/check/op_instance.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>

#include "runtime/core/checked.h"
#include "runtime/core/error.h"
#include "runtime/core/parse_number.h"

namespace dlb {

namespace {

// The most elements one tensor of an instance may have: a spec is typed by hand, and a typo must
// not ask for terabytes. resnet50's largest activation at 224 px and batch 64 has 51 million.
constexpr int64_t kMaxElements = int64_t{1} << 31;

struct KindName {
  OpKind kind;
  std::string_view name;
};
constexpr KindName kKindNames[] = {
    {OpKind::kConv, "conv"},
    {OpKind::kLinear, "linear"},
    {OpKind::kBatchNorm, "batch_norm"},
    {OpKind::kRelu, "relu"},
    {OpKind::kMaxPool, "max_pool"},
    {OpKind::kAvgPool, "avg_pool"},
    {OpKind::kAdaptiveAvgPool, "adaptive_avg_pool"},
    {OpKind::kDropout, "dropout"},
    {OpKind::kAdd, "add"},
    {OpKind::kSoftmaxCrossEntropy, "softmax_cross_entropy"},
    {OpKind::kSgd, "sgd"},
    {OpKind::kLossScale, "loss_scale"},
};

struct PassName {
  CheckPass pass;
  std::string_view name;
};
constexpr PassName kPassNames[] = {
    {CheckPass::kForward, "forward"},
    {CheckPass::kForwardInfer, "forward_infer"},
    {CheckPass::kBackwardData, "backward_data"},
    {CheckPass::kBackwardWeights, "backward_weights"},
    {CheckPass::kBackwardBias, "backward_bias"},
    {CheckPass::kBackward, "backward"},
    {CheckPass::kForwardRelu, "forward_relu"},
    {CheckPass::kBackwardRelu, "backward_relu"},
    {CheckPass::kAccumulate, "accumulate"},
    {CheckPass::kBackwardScaled, "backward_scaled"},
    {CheckPass::kUpdate, "update"},
    {CheckPass::kFindNonFinite, "find_non_finite"},
    {CheckPass::kScaleUpdate, "scale_update"},
};

std::string shape_text(const Shape& s) {
  std::string out;
  for (size_t i = 0; i < s.rank(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out;
}

// key=value fields of a spec, each used exactly once.
class Fields {
 public:
  Fields(std::string_view spec, std::string_view body) : spec_(spec) {
    size_t at = 0;
    while (at <= body.size()) {
      const size_t end = std::min(body.find(',', at), body.size());
      const std::string_view field = body.substr(at, end - at);
      const size_t eq = field.find('=');
      if (eq == std::string_view::npos || eq == 0 || eq + 1 == field.size()) {
        fail(fmt::format("'{}' is not key=value", field));
      }
      const std::string key(field.substr(0, eq));
      if (!values_.emplace(key, std::string(field.substr(eq + 1))).second) {
        fail(fmt::format("'{}' is given twice", key));
      }
      at = end + 1;
    }
  }
  std::string take(const std::string& key) {
    auto it = values_.find(key);
    if (it == values_.end()) fail(fmt::format("'{}' is missing", key));
    std::string v = it->second;
    values_.erase(it);
    return v;
  }
  int64_t integer(const std::string& key, int64_t lo, int64_t hi) {
    const std::string v = take(key);
    const std::optional<int64_t> x = parse_whole(v, lo, hi);
    if (!x || v[0] == '-') fail(fmt::format("{}={} is not an integer in [{}, {}]", key, v, lo, hi));
    return *x;
  }
  double real(const std::string& key, double lo, double hi) {
    const std::string v = take(key);
    const std::optional<double> x = parse_finite(v);
    if (!x || *x < lo || *x > hi) {
      fail(fmt::format("{}={} is not a number in [{}, {}]", key, v, lo, hi));
    }
    return *x;
  }
  // "2x64x56x56": `rank` positive dimensions (any of `ranks`), at most kMaxElements in all.
  Shape shape(const std::string& key, std::initializer_list<size_t> ranks) {
    const std::string v = take(key);
    std::vector<int64_t> dims;
    size_t at = 0;
    while (at <= v.size()) {
      const size_t end = std::min(v.find('x', at), v.size());
      const std::string d = v.substr(at, end - at);
      const std::optional<int64_t> x = parse_whole(d, 1, std::numeric_limits<int64_t>::max());
      if (!x || d[0] == '+')
        fail(fmt::format("{}={}: '{}' is not a positive dimension", key, v, d));
      dims.push_back(*x);
      at = end + 1;
    }
    bool rank_ok = false;
    for (size_t r : ranks) rank_ok |= dims.size() == r;
    if (!rank_ok) fail(fmt::format("{}={} has {} dimensions", key, v, dims.size()));
    int64_t n = 1;
    for (int64_t d : dims) {
      if (d > kMaxElements / n) fail(fmt::format("{}={} is more than 2^31 elements", key, v));
      n *= d;
    }
    return Shape(std::move(dims));
  }
  // Refuses a key outside `known` before any is read, so a misspelt field is named as such.
  void only(const std::vector<std::string>& known) const {
    for (const auto& [key, value] : values_) {
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        fail(fmt::format("'{}' is not a field of this op (its fields: {})", key,
                         fmt::join(known, ", ")));
      }
    }
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw InvalidArgument(fmt::format("op instance '{}': {}", spec_, why));
  }

 private:
  std::string spec_;
  std::map<std::string, std::string> values_;
};

// The fields each kind's text has, in the order spec() writes them.
std::vector<std::string> fields_of(OpKind kind) {
  switch (kind) {
    case OpKind::kConv:
      return {"shape", "k", "kernel", "stride", "pad", "groups", "bias"};
    case OpKind::kLinear:
      return {"shape", "out"};
    case OpKind::kMaxPool:
    case OpKind::kAvgPool:
      return {"shape", "kernel", "stride", "pad"};
    case OpKind::kAdaptiveAvgPool:
      return {"shape", "out"};
    case OpKind::kDropout:
      return {"shape", "p"};
    case OpKind::kSgd:
      return {"shape", "copy"};
    default:
      return {"shape"};
  }
}

void parse_conv(Fields& f, OpInstance& op) {
  op.in = f.shape("shape", {4});
  ConvDesc& d = op.conv;
  d.batch = op.in[0], d.in_channels = op.in[1], d.height = op.in[2], d.width = op.in[3];
  d.out_channels = f.integer("k", 1, kMaxElements);
  d.kernel_h = d.kernel_w = f.integer("kernel", 1, 1024);
  d.stride_h = d.stride_w = f.integer("stride", 1, 1024);
  d.pad_h = d.pad_w = f.integer("pad", 0, 1024);
  d.groups = f.integer("groups", 1, kMaxElements);
  op.bias = d.bias = f.integer("bias", 0, 1) == 1;
  if (d.in_channels % d.groups || d.out_channels % d.groups) {
    f.fail("groups must divide both channel counts");
  }
  if (d.out_h() < 1 || d.out_w() < 1) f.fail("the kernel does not fit the padded input");
}

void parse_pool(Fields& f, OpInstance& op) {
  op.in = f.shape("shape", {4});
  PoolDesc& p = op.pool;
  p.mode = op.kind == OpKind::kMaxPool ? PoolMode::kMax : PoolMode::kAvg;
  p.kernel_h = p.kernel_w = f.integer("kernel", 1, 1024);
  p.stride_h = p.stride_w = f.integer("stride", 1, 1024);
  p.pad_h = p.pad_w = f.integer("pad", 0, 1024);
  if (2 * p.pad_h > p.kernel_h) f.fail("pad must be at most half the kernel (as PyTorch's)");
  if (op.in[2] + 2 * p.pad_h < p.kernel_h || op.in[3] + 2 * p.pad_w < p.kernel_w) {
    f.fail("the window does not fit the padded input");
  }
}

void parse_fields(Fields& f, OpInstance& op) {
  switch (op.kind) {
    case OpKind::kConv:
      return parse_conv(f, op);
    case OpKind::kMaxPool:
    case OpKind::kAvgPool:
      return parse_pool(f, op);
    case OpKind::kLinear:
      op.in = f.shape("shape", {2});
      op.features = f.integer("out", 1, kMaxElements);
      op.bias = true;
      return;
    case OpKind::kBatchNorm:
      op.in = f.shape("shape", {2, 4});
      if (op.in.numel() / op.in[1] < 2) f.fail("training needs two values per channel");
      return;
    case OpKind::kAdaptiveAvgPool: {
      op.in = f.shape("shape", {4});
      const Shape o = f.shape("out", {2});
      op.out_h = o[0], op.out_w = o[1];
      return;
    }
    case OpKind::kDropout:
      op.in = f.shape("shape", {2, 4});
      op.p = static_cast<float>(f.real("p", 0.0, 0.999));
      return;
    case OpKind::kRelu:
    case OpKind::kAdd:
      op.in = f.shape("shape", {2, 4});
      return;
    case OpKind::kSoftmaxCrossEntropy:
      op.in = f.shape("shape", {2});
      return;
    case OpKind::kSgd:
      op.in = f.shape("shape", {1});
      op.copy = f.integer("copy", 0, 1) == 1;
      return;
    case OpKind::kLossScale:
      op.in = f.shape("shape", {1});
      return;
  }
}

}  // namespace

std::string_view op_kind_name(OpKind k) {
  for (const KindName& n : kKindNames)
    if (n.kind == k) return n.name;
  return "?";
}

std::optional<OpKind> parse_op_kind(std::string_view s) {
  for (const KindName& n : kKindNames)
    if (n.name == s) return n.kind;
  return std::nullopt;
}

std::string_view check_pass_name(CheckPass p) {
  for (const PassName& n : kPassNames)
    if (n.pass == p) return n.name;
  return "?";
}

std::optional<CheckPass> parse_check_pass(std::string_view s) {
  for (const PassName& n : kPassNames)
    if (n.name == s) return n.pass;
  return std::nullopt;
}

std::string OpInstance::spec() const {
  const std::string head = fmt::format("{}:shape={}", op_kind_name(kind), shape_text(in));
  switch (kind) {
    case OpKind::kConv:
      return fmt::format("{},k={},kernel={},stride={},pad={},groups={},bias={}", head,
                         conv.out_channels, conv.kernel_h, conv.stride_h, conv.pad_h, conv.groups,
                         bias ? 1 : 0);
    case OpKind::kLinear:
      return fmt::format("{},out={}", head, features);
    case OpKind::kMaxPool:
    case OpKind::kAvgPool:
      return fmt::format("{},kernel={},stride={},pad={}", head, pool.kernel_h, pool.stride_h,
                         pool.pad_h);
    case OpKind::kAdaptiveAvgPool:
      return fmt::format("{},out={}x{}", head, out_h, out_w);
    case OpKind::kDropout:
      return fmt::format("{},p={}", head, p);
    case OpKind::kSgd:
      return fmt::format("{},copy={}", head, copy ? 1 : 0);
    default:
      return head;
  }
}

Shape OpInstance::out() const {
  switch (kind) {
    case OpKind::kConv:
      return Shape{conv.batch, conv.out_channels, conv.out_h(), conv.out_w()};
    case OpKind::kLinear:
      return Shape{in[0], features};
    case OpKind::kMaxPool:
    case OpKind::kAvgPool:
      return Shape{in[0], in[1], (in[2] + 2 * pool.pad_h - pool.kernel_h) / pool.stride_h + 1,
                   (in[3] + 2 * pool.pad_w - pool.kernel_w) / pool.stride_w + 1};
    case OpKind::kAdaptiveAvgPool:
      return Shape{in[0], in[1], out_h, out_w};
    case OpKind::kSoftmaxCrossEntropy:
      return Shape{};
    default:
      return in;
  }
}

double OpInstance::forward_flops() const {
  switch (kind) {
    case OpKind::kConv:
      return 2.0 * conv.forward_macs();
    case OpKind::kLinear:
      return 2.0 * static_cast<double>(in[0]) * in[1] * features;
    default:
      return static_cast<double>(in.numel());
  }
}

namespace {

// The input, output and weight shapes of an instance.
std::vector<Shape> instance_shapes(const OpInstance& op) {
  std::vector<Shape> shapes = {op.in, op.out()};
  if (op.kind == OpKind::kConv) {
    const ConvDesc& d = op.conv;
    shapes.push_back(Shape{d.out_channels, d.in_channels / d.groups, d.kernel_h, d.kernel_w});
  }
  if (op.kind == OpKind::kLinear) shapes.push_back(Shape{op.features, op.in[1]});
  return shapes;
}

double elements(const Shape& s) {
  double n = 1;  // in double: a product of four int64s may not fit one
  for (int64_t d : s.dims()) n *= static_cast<double>(d);
  return n;
}

}  // namespace

double check_bytes_estimate(const OpInstance& op) {
  if (op.kind == OpKind::kSgd) return 24.0 * elements(op.in) * (op.copy ? 4 : 3);
  if (op.kind == OpKind::kLossScale) return 16.0 * elements(op.in);
  double n = 0;
  for (const Shape& s : instance_shapes(op)) n += elements(s);
  return 72.0 * n;
}

void check_instance_sizes(const OpInstance& op) {
  for (const Shape& s : instance_shapes(op)) {
    const double n = elements(s);
    if (n > static_cast<double>(kMaxElements)) {
      throw InvalidArgument(
          fmt::format("op instance '{}': a tensor of {} has more than 2^31 "
                      "elements",
                      op.spec(), s.str()));
    }
  }
}

OpInstance parse_op_instance(std::string_view spec) {
  const size_t colon = spec.find(':');
  const std::string_view name = spec.substr(0, colon);
  const std::optional<OpKind> kind = parse_op_kind(name);
  if (!kind) {
    std::string known;
    for (const KindName& n : kKindNames) known += (known.empty() ? "" : ", ") + std::string(n.name);
    throw InvalidArgument(
        fmt::format("op instance '{}': unknown op '{}' (known: {})", spec, name, known));
  }
  if (colon == std::string_view::npos) {
    throw InvalidArgument(fmt::format("op instance '{}': expected {}:shape=...", spec, name));
  }
  OpInstance op;
  op.kind = *kind;
  Fields f(spec, spec.substr(colon + 1));
  f.only(fields_of(op.kind));
  parse_fields(f, op);
  check_instance_sizes(op);
  return op;
}

std::vector<CheckPass> passes_of(const OpInstance& op, Precision precision, FusedOps fused) {
  using P = CheckPass;
  switch (op.kind) {
    case OpKind::kConv:
    case OpKind::kLinear: {
      std::vector<CheckPass> out = {P::kForward, P::kBackwardData, P::kBackwardWeights};
      if (op.bias) out.push_back(P::kBackwardBias);
      if (op.kind == OpKind::kConv && fused.conv_relu) out.push_back(P::kForwardRelu);
      return out;
    }
    case OpKind::kBatchNorm:
      if (fused.batch_norm_relu) {
        return {P::kForward, P::kForwardInfer, P::kBackward, P::kForwardRelu, P::kBackwardRelu};
      }
      return {P::kForward, P::kForwardInfer, P::kBackward};
    case OpKind::kRelu:
    case OpKind::kMaxPool:
    case OpKind::kAvgPool:
    case OpKind::kAdaptiveAvgPool:
    case OpKind::kDropout:
      return {P::kForward, P::kBackwardData};
    case OpKind::kAdd:
      return {P::kForward, P::kAccumulate};
    case OpKind::kSoftmaxCrossEntropy:
      if (precision == Precision::kFp16) return {P::kForward, P::kBackwardData, P::kBackwardScaled};
      return {P::kForward, P::kBackwardData};
    case OpKind::kSgd:
      return {P::kUpdate};
    case OpKind::kLossScale:
      if (precision == Precision::kFp16) return {P::kFindNonFinite, P::kScaleUpdate};
      return {};  // only fp16 scales its loss
  }
  return {};
}

}  // namespace dlb
