#include "suites/harness/check_ops/check_grid.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>

#include "runtime/core/error.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

// The update of each parameter a layer's instance has: its weight and bias (batch norm: scale
// and shift), by element count, which is all an elementwise update's work depends on.
std::vector<int64_t> parameter_sizes(const OpInstance& op) {
  switch (op.kind) {
    case OpKind::kConv: {
      const ConvDesc& d = op.conv;
      const int64_t w = d.out_channels * (d.in_channels / d.groups) * d.kernel_h * d.kernel_w;
      return op.bias ? std::vector<int64_t>{w, d.out_channels} : std::vector<int64_t>{w};
    }
    case OpKind::kLinear:
      return {op.features * op.in[1], op.features};
    case OpKind::kBatchNorm:
      return {op.in[1]};
    default:
      return {};
  }
}

class Collector {
 public:
  Collector(const std::vector<OpKind>& ops, std::vector<std::string>& notes)
      : ops_(ops), notes_(notes) {}
  void add(const OpInstance& op, const std::string& origin) {
    if (!ops_.empty() && std::find(ops_.begin(), ops_.end(), op.kind) == ops_.end()) return;
    if (op.kind == OpKind::kBatchNorm && op.in.numel() / op.in[1] < 2) {
      // PyTorch refuses it too ("Expected more than 1 value per channel when training").
      ++untrainable_[origin.substr(0, origin.find(':'))];
      return;
    }
    check_instance_sizes(op);
    GridInstance& g = by_spec_[op.spec()];
    if (g.origins.empty()) g.op = op;
    g.origins.push_back(origin);
  }
  std::vector<GridInstance> sorted() && {
    for (const auto& [where, n] : untrainable_) {
      notes_.push_back(fmt::format(
          "{}: {} batch norm(s) of one value per channel, which cannot train; skipped", where, n));
    }
    std::vector<GridInstance> out;
    for (auto& [spec, g] : by_spec_) out.push_back(std::move(g));
    std::stable_sort(out.begin(), out.end(), [](const GridInstance& a, const GridInstance& b) {
      return a.op.kind < b.op.kind;
    });
    return out;
  }

 private:
  const std::vector<OpKind>& ops_;
  std::vector<std::string>& notes_;
  std::map<std::string, GridInstance> by_spec_;
  std::map<std::string, int> untrainable_;  // per model, size and batch
};

void collect_model(Collector& c, const std::string& model, int64_t size, int64_t batch) {
  const Graph g = build_model(model, ModelConfig{batch, size, 0, {}});
  const std::string where = fmt::format("{} {}px b{}", model, size, batch);
  for (size_t i = 1; i < g.nodes().size(); ++i) {
    const Graph::Node& node = g.nodes()[i];
    std::vector<Shape> in;
    for (int j : node.inputs) in.push_back(g.shape(j));
    for (const OpInstance& op : node.layer->op_instances(in)) {
      c.add(op, fmt::format("{}: {}", where, node.name));
      for (int64_t n : parameter_sizes(op)) {
        OpInstance sgd;
        sgd.kind = OpKind::kSgd;
        sgd.in = Shape{n};
        sgd.copy = op.kind != OpKind::kBatchNorm;  // conv and linear keep a compute copy
        c.add(sgd, fmt::format("{}: {} (update)", where, node.name));
      }
    }
  }
  OpInstance loss;
  loss.kind = OpKind::kSoftmaxCrossEntropy;
  loss.in = g.shape(g.output());
  c.add(loss, fmt::format("{}: loss", where));
  OpInstance scale;  // over every parameter's gradient at once
  scale.kind = OpKind::kLossScale;
  scale.in = Shape{g.num_params()};
  c.add(scale, fmt::format("{}: loss scaling", where));
}

}  // namespace

Grid enumerate_grid(const GridRequest& r) {
  std::vector<std::string> models = r.models;
  if (models.empty()) {
    for (const ModelInfo& m : model_registry()) models.push_back(m.name);
  }
  const bool default_sizes = r.sizes.empty();
  const std::vector<int64_t> sizes =
      default_sizes
          ? std::vector<int64_t>(std::begin(kDefaultCheckSizes), std::end(kDefaultCheckSizes))
          : r.sizes;
  const std::vector<int64_t> batches =
      r.batches.empty()
          ? std::vector<int64_t>(std::begin(kDefaultCheckBatches), std::end(kDefaultCheckBatches))
          : r.batches;
  Grid grid;
  Collector c(r.ops, grid.notes);
  for (const std::string& name : models) {
    const ModelInfo& m = find_model(name);  // InvalidArgument naming the known models
    std::vector<int64_t> own = sizes;
    if (default_sizes && m.default_image_size < sizes.front()) own = {m.default_image_size};
    for (int64_t size : own) {
      if (default_sizes && size < min_image_size(m)) {
        grid.notes.push_back(
            fmt::format("{} skipped at {} px: the smallest image it takes is {} px", name, size,
                        min_image_size(m)));
        continue;
      }
      for (int64_t batch : batches) collect_model(c, name, size, batch);
    }
  }
  grid.instances = std::move(c).sorted();
  return grid;
}

}  // namespace dlb
