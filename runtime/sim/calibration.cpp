#include "runtime/sim/calibration.h"

#include <fmt/format.h>

#include <map>
#include <memory>
#include <set>
#include <stdexcept>

#include "runtime/backend/backend.h"
#include "runtime/core/error.h"
#include "runtime/io/json_fields.h"
#include "runtime/overlap/sync_schedule.h"

namespace dlb {

namespace {

constexpr double kMaxMs = 1e9;
// No training step, on any device, is shorter than a microsecond (a kernel launch alone takes
// several): a shorter one is not a measurement, and would calibrate records claiming 1e300 img/s.
constexpr double kMinStepMs = 1e-3;

LayerTimes parse_layer(const JsonFields& f) {
  LayerTimes t;
  t.name = f.string("name");
  t.forward_ms = f.number("forward_ms", 0, kMaxMs);
  t.backward_data_ms = f.number("backward_data_ms", 0, kMaxMs);
  t.backward_weights_ms = f.number("backward_weights_ms", 0, kMaxMs);
  t.backward_ms = f.number("backward_ms", 0, kMaxMs);
  t.recompute_ms = f.number("recompute_ms", 0, kMaxMs);
  return t;
}

}  // namespace

Calibration parse_calibration(const nlohmann::json& j, const std::string& where) {
  const JsonFields f(j, where);
  if (f.string("kind") != "dlbench calibration") f.fail("kind", "\"dlbench calibration\"");
  Calibration c;
  c.model = f.string("model");
  c.precision = f.string("precision");
  c.backend = f.string("backend");
  if (!parse_backend_kind(c.backend)) f.fail("backend", "a backend dlbench has (cpu or cuda)");
  c.device = f.string("device");
  c.batch = f.integer("batch", 1);
  c.image_size = f.integer("image_size", 1);
  c.num_classes = f.integer("num_classes", 1);
  c.fused_relus = f.boolean("fused_relus");
  c.fused_conv_relus = f.has("fused_conv_relus") && f.boolean("fused_conv_relus");
  c.memory_plan = f.string("memory_plan");
  c.recompute = f.string("recompute");
  c.source = f.object("source").json();
  c.step_ms = f.number("step_ms", 0, kMaxMs);
  if (c.step_ms < kMinStepMs) f.fail("step_ms", "a step time of at least 0.001 ms");
  c.scale = f.number("scale", 1e-6, 1e6);
  c.loss_ms = f.number("loss_ms", 0, kMaxMs);
  c.optimizer_ms = f.number("optimizer_ms", 0, kMaxMs);
  const nlohmann::json& layers = f.array("layers");
  for (size_t i = 0; i < layers.size(); ++i) {
    c.layers.push_back(parse_layer(JsonFields(layers[i], f.element("layers", i))));
  }
  if (c.layers.empty()) f.fail("layers", "the model's layers");
  const nlohmann::json& jitter = f.array("jitter");
  for (size_t i = 0; i < jitter.size(); ++i) {
    const double x = jitter[i].is_number() ? jitter[i].get<double>() : -1;
    if (!(x > 0 && x < 1e3)) {
      throw InvalidArgument(fmt::format("{}: expected a factor above 0, got {}",
                                        f.element("jitter", i), jitter[i].dump()));
    }
    c.jitter.push_back(x);
  }
  return c;
}

nlohmann::json calibration_json(const Calibration& c) {
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerTimes& t : c.layers) {
    layers.push_back({{"name", t.name},
                      {"forward_ms", t.forward_ms},
                      {"backward_data_ms", t.backward_data_ms},
                      {"backward_weights_ms", t.backward_weights_ms},
                      {"backward_ms", t.backward_ms},
                      {"recompute_ms", t.recompute_ms}});
  }
  return {{"kind", "dlbench calibration"},
          {"model", c.model},
          {"batch", c.batch},
          {"image_size", c.image_size},
          {"num_classes", c.num_classes},
          {"fused_relus", c.fused_relus},
          {"fused_conv_relus", c.fused_conv_relus},
          {"precision", c.precision},
          {"backend", c.backend},
          {"device", c.device},
          {"memory_plan", c.memory_plan},
          {"recompute", c.recompute},
          {"source", c.source},
          {"step_ms", c.step_ms},
          {"scale", c.scale},
          {"loss_ms", c.loss_ms},
          {"optimizer_ms", c.optimizer_ms},
          {"layers", layers},
          {"jitter", c.jitter}};
}

std::string calibration_mismatch(const Calibration& c, const Graph& graph) {
  std::set<std::string> calibrated;
  for (const LayerTimes& t : c.layers) calibrated.insert(t.name);
  std::set<std::string> layers;
  for (const auto& node : graph.nodes()) {
    if (!node.layer) continue;
    layers.insert(node.name);
    if (!calibrated.count(node.name)) {
      return fmt::format("the calibration has no times for layer '{}'", node.name);
    }
  }
  for (const std::string& name : calibrated) {
    if (!layers.count(name)) return fmt::format("the model has no layer '{}'", name);
  }
  return "";
}

double reduction_bytes(const Graph& graph, const BucketPlan& plan, int bucket) {
  if (bucket == kMeeting) return 4;  // independent ranks' token: one f32
  const double element = static_cast<double>(dtype_size(graph.policy().gradients));
  if (bucket < 0) {
    return element *
           static_cast<double>(graph.tensor_infos()[graph.flat_gradient_id()].shape.numel());
  }
  return element * static_cast<double>(plan.buckets.at(static_cast<size_t>(bucket)).count);
}

namespace {

// Each graph node's times (a layer's, by its name; nothing for the input).
std::vector<LayerTimes> times_by_node(const Calibration& c, const Graph& graph) {
  std::map<std::string, const LayerTimes*> by_name;
  for (const LayerTimes& t : c.layers) by_name[t.name] = &t;
  std::vector<LayerTimes> times(graph.nodes().size());
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    if (graph.nodes()[i].layer) times[i] = *by_name.at(graph.nodes()[i].name);
  }
  return times;
}

// Each bucket's share of the optimizer's time: its share of the parameters.
std::vector<double> update_shares(const BucketPlan& plan) {
  int64_t values = 0;
  for (const Bucket& b : plan.buckets) values += b.values;
  std::vector<double> shares;
  for (const Bucket& b : plan.buckets) {
    shares.push_back(values > 0 ? static_cast<double>(b.values) / static_cast<double>(values)
                                : 0.0);
  }
  return shares;
}

// A sync pass's time: a reduction's from the network, an update's as its share of the
// optimizer's.
double sync_cost(const Step& step, const std::map<int, double>& reduce_us,
                 const std::vector<double>& update_share, double optimizer) {
  switch (sync_pass_of(step)) {
    case SyncPass::kAllReduce:  // a stale slot is laid out as the whole buffer
      return reduce_us.at(reduced_buffer(step));
    case SyncPass::kUpdate:
    case SyncPass::kUpdateCarried:
      return step.arg < 0 ? optimizer : optimizer * update_share.at(step.arg);
    case SyncPass::kUpdateStale:
      return optimizer;
    case SyncPass::kStash:
    case SyncPass::kPull:
    case SyncPass::kPush:
      // Not in the profile: a copy of the gradients (the stash; the push's to the host) or of
      // the weights (the pull's into the model), 2 streams of their bytes (read, write) against
      // SGD with momentum's 5 (gradient, weight and momentum read, weight and momentum
      // written), both bound by memory bandwidth.
      return optimizer * 2 / 5;
    case SyncPass::kWait:
    case SyncPass::kProgress:
      return 0;
  }
  throw std::logic_error("a sync pass with no cost");
}

}  // namespace

PassCost calibrated_cost(const Calibration& c, const Graph& graph, const BucketPlan& plan,
                         const Network& network, int64_t ranks) {
  if (const std::string why = calibration_mismatch(c, graph); !why.empty()) {
    throw InvalidArgument(
        fmt::format("the calibration of {} at batch {} does not fit: {}", c.model, c.batch, why));
  }
  auto times = std::make_shared<std::vector<LayerTimes>>(times_by_node(c, graph));
  auto update_share = std::make_shared<std::vector<double>>(update_shares(plan));
  auto reduce_us = std::make_shared<std::map<int, double>>();
  for (int b : reduced_buffers(plan.buckets.size())) {
    (*reduce_us)[b] = fastest_allreduce(network, reduction_bytes(graph, plan, b), ranks).us;
  }
  const double us = 1e3 * c.scale;  // a profiled millisecond, in simulated microseconds
  const double loss = c.loss_ms * us, optimizer = c.optimizer_ms * us;
  return [times, update_share, reduce_us, us, loss, optimizer](const Step& step) -> double {
    const auto layer = [&]() -> const LayerTimes& { return (*times)[step.node]; };
    switch (step.pass) {
      case Pass::kForward:
        return layer().forward_ms * us;
      case Pass::kBackwardData:
        return layer().backward_data_ms * us;
      case Pass::kBackwardWeights:
        return layer().backward_weights_ms * us;
      case Pass::kBackward:
        return layer().backward_ms * us;
      case Pass::kRecompute:
        return layer().recompute_ms * us;
      case Pass::kLoss:
        return loss;
      case Pass::kAccumulate:  // not in the profile: inside the scale
        return 0;
      case Pass::kSync:
        return sync_cost(step, *reduce_us, *update_share, optimizer);
      case Pass::kSwapOut:
      case Pass::kSwapIn:
      case Pass::kSwapWait:
        break;
    }
    throw Unsupported("simulate: a swapped step's copies have no calibrated times");
  };
}

SharingOf reduction_sharing(const Graph& graph, const BucketPlan& plan, const Network& network,
                            int64_t ranks) {
  auto sharing = std::make_shared<std::map<int, CoreSharing>>();
  bool any = false;
  for (int b : reduced_buffers(plan.buckets.size())) {
    (*sharing)[b] = core_sharing(network, ranks, reduction_bytes(graph, plan, b));
    any = any || (*sharing)[b].lost > 0;
  }
  if (!any) return nullptr;
  return [sharing](const Step& all_reduce) {  // a stale slot is laid out as the whole buffer
    return sharing->at(reduced_buffer(all_reduce));
  };
}

ServerCosts server_costs(const Calibration& c, const Graph& graph, const Network& network) {
  if (parse_backend_kind(c.backend) != BackendKind::kCpu) {
    throw Unsupported(fmt::format(
        "simulate --sync=async: the parameter server applies gradients on the host's CPU, and "
        "copies them between host and device each step, which a calibration on {} does not "
        "time; calibrate on the CPU backend",
        c.device));
  }
  const double bytes =
      4.0 * static_cast<double>(graph.tensor_infos()[graph.flat_gradient_id()].shape.numel());
  ServerCosts costs;
  costs.apply_us = c.optimizer_ms * 1e3 * c.scale;
  costs.reply_copy_us = costs.apply_us * 2 / 5;  // a copy: 2 streams of the bytes against SGD's 5
  const int64_t per_node = network.gpus_per_node;
  const Link node = network.node, net = network.net;
  costs.transfer_us = [bytes, per_node, node, net](int64_t rank) {
    const Link& link = rank < per_node ? node : net;  // rank 0's node, or through one NIC
    return link.latency_us + bytes / (link.bandwidth_gbs * 1e3);
  };
  return costs;
}

}  // namespace dlb
