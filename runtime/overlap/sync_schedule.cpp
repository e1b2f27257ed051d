#include "runtime/overlap/sync_schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <utility>

#include "runtime/core/error.h"

namespace dlb {

const char* sync_pass_name(SyncPass p) {
  switch (p) {
    case SyncPass::kAllReduce:
      return "allreduce";
    case SyncPass::kWait:
      return "wait";
    case SyncPass::kUpdate:
    case SyncPass::kUpdateCarried:
      return "optimizer";
    case SyncPass::kProgress:
      return "progress";
    case SyncPass::kStash:
      return "stash";
    case SyncPass::kUpdateStale:
      return "optimizer";
    case SyncPass::kPull:
      return "pull";
    case SyncPass::kPush:
      return "push";
  }
  return "?";
}

SyncPass sync_pass_of(const Step& step) {
  if (step.pass != Pass::kSync || step.op < 0 || step.op > static_cast<int>(SyncPass::kPush)) {
    throw InvalidArgument(fmt::format("a {} pass is not the sync policy's", step_name(step)));
  }
  return static_cast<SyncPass>(step.op);
}

int64_t staleness_of(const Schedule& schedule) {
  for (const Step& step : schedule.steps) {
    if (step.pass == Pass::kSync && sync_pass_of(step) == SyncPass::kStash) {
      return static_cast<int64_t>(step.writes.size());
    }
  }
  return 0;
}

namespace {

// The flat parameters that the tensors `ids` are (gradients or values), in order: [first, first +
// count), each named once.
std::pair<size_t, size_t> params_named(const std::vector<int>& ids, const Graph& graph,
                                       int bucket) {
  const std::vector<ParamIds>& params = graph.flat_params();
  std::vector<size_t> named;
  for (int id : ids) {
    const auto it = std::find_if(params.begin(), params.end(),
                                 [id](const ParamIds& p) { return p.grad == id || p.value == id; });
    if (it == params.end()) {
      throw InvalidArgument(
          fmt::format("bucket {}'s sync pass names tensor {}, no parameter's", bucket, id));
    }
    named.push_back(static_cast<size_t>(it - params.begin()));
  }
  std::sort(named.begin(), named.end());
  for (size_t k = 1; k < named.size(); ++k) {
    if (named[k] != named[0] + k) {
      throw InvalidArgument(
          fmt::format("bucket {}'s sync pass names parameters that are not contiguous", bucket));
    }
  }
  if (named.empty()) throw InvalidArgument(fmt::format("bucket {}'s sync pass names none", bucket));
  return {named.front(), named.size()};
}

// As make_bucket_plan lays a bucket out: from its first gradient to the end of its last.
Bucket bucket_over(size_t first, size_t count, const Graph& graph) {
  const std::vector<int64_t>& at = graph.grad_offsets();
  auto numel = [&](size_t i) {
    return graph.tensor_infos()[graph.flat_params()[i].grad].shape.numel();
  };
  const size_t last = first + count - 1;
  Bucket b{first, count, at[first], at[last] + numel(last) - at[first], 0};
  for (size_t i = first; i <= last; ++i) b.values += numel(i);
  return b;
}

bool names_bucket(const Step& step) {
  if (step.pass != Pass::kSync || step.arg < 0) return false;
  const SyncPass p = sync_pass_of(step);
  return p == SyncPass::kAllReduce || p == SyncPass::kUpdate || p == SyncPass::kUpdateCarried;
}

}  // namespace

BucketPlan buckets_of(const Schedule& schedule, const Graph& graph) {
  std::vector<std::optional<Bucket>> found;
  for (const Step& step : schedule.steps) {
    if (!names_bucket(step)) continue;
    const auto [first, count] = params_named(step.writes, graph, step.arg);
    const Bucket b = bucket_over(first, count, graph);
    if (found.size() <= static_cast<size_t>(step.arg)) found.resize(step.arg + 1);
    std::optional<Bucket>& at = found[step.arg];
    if (at && (at->first_param != b.first_param || at->num_params != b.num_params)) {
      throw InvalidArgument(
          fmt::format("bucket {}'s sync passes name different parameters", step.arg));
    }
    at = b;
  }
  BucketPlan plan;
  size_t next = 0;
  for (size_t k = 0; k < found.size(); ++k) {
    if (!found[k] || found[k]->first_param != next) {
      throw InvalidArgument("the schedule's buckets do not tile the parameters in order");
    }
    next += found[k]->num_params;
    plan.buckets.push_back(*found[k]);
    plan.bucket_of.insert(plan.bucket_of.end(), found[k]->num_params, k);
  }
  if (!found.empty() && next != graph.flat_params().size()) {
    throw InvalidArgument("the schedule's buckets do not tile the parameters in order");
  }
  return plan;
}

bool is_async(const Schedule& schedule) {
  auto has = [&](SyncPass p) {
    return std::any_of(schedule.steps.begin(), schedule.steps.end(), [p](const Step& step) {
      return step.pass == Pass::kSync && sync_pass_of(step) == p;
    });
  };
  return has(SyncPass::kPull) && has(SyncPass::kPush);
}

namespace {

struct BucketTensors {
  std::vector<int> grads, values;
  std::vector<int> carried;  // the forward strategy's: views of `grads` read in the next step
};

std::vector<BucketTensors> bucket_tensors(std::vector<TensorInfo>& table, const Graph& graph,
                                          const BucketPlan& plan, bool carry) {
  std::vector<BucketTensors> out;
  const std::vector<ParamIds>& params = graph.flat_params();
  for (const Bucket& b : plan.buckets) {
    BucketTensors t;
    for (size_t i = b.first_param; i < b.first_param + b.num_params; ++i) {
      const int grad = params[i].grad;
      t.grads.push_back(grad);
      t.values.push_back(params[i].value);
      if (!carry) continue;
      TensorInfo info = table[grad];
      info.name += " (carried)";
      info.kind = TensorKind::kCarried;
      info.alias_of = grad;
      info.offset = 0;  // the whole gradient, from its first element
      t.carried.push_back(declare_tensor(table, std::move(info)));
    }
    out.push_back(std::move(t));
  }
  return out;
}

bool touches(const std::vector<int>& list, const std::vector<int>& any) {
  return std::any_of(any.begin(), any.end(),
                     [&](int t) { return std::find(list.begin(), list.end(), t) != list.end(); });
}

Step sync_step(SyncPass kind, int bucket, Lane lane) {
  Step s;
  s.pass = Pass::kSync;
  s.op = static_cast<int>(kind);
  s.op_name = sync_pass_name(kind);
  s.arg = bucket;
  s.lane = lane;
  // A wait orders the compute lane after its reduction; a push copies the gradients to host
  // memory and the device with them; a pull stages the weights from host memory, and copies them
  // to the device on the compute queue.
  s.join = kind == SyncPass::kWait   ? Join::kLanes
           : kind == SyncPass::kPush ? Join::kHost
           : kind == SyncPass::kPull ? Join::kHostMemory
                                     : Join::kNone;
  return s;
}

// The reduction's passes read and write what they reduce: later readers come after them.
Step reduction_step(SyncPass kind, int bucket, const std::vector<int>& grads) {
  Step s = sync_step(kind, bucket, kind == SyncPass::kAllReduce ? Lane::kComm : Lane::kCompute);
  s.reads = s.writes = grads;
  return s;
}

Step update_step(int bucket, const BucketTensors& t, bool carried) {
  Step s =
      sync_step(carried ? SyncPass::kUpdateCarried : SyncPass::kUpdate, bucket, Lane::kCompute);
  s.reads = carried ? t.carried : t.grads;
  s.reads.insert(s.reads.end(), t.values.begin(), t.values.end());
  s.writes = t.values;
  return s;
}

// The passes of the backward phase (a recomputation runs among them).
bool is_backward(Pass p) {
  return p == Pass::kBackwardData || p == Pass::kBackwardWeights || p == Pass::kBackward ||
         p == Pass::kAccumulate || p == Pass::kRecompute;
}

// Every bucket's wait and update, in bucket (reduction) order; with updates that read every
// gradient first, every wait first.
void append_updates(std::vector<Step>& out, const std::vector<BucketTensors>& buckets, bool carried,
                    bool wait, bool all_first) {
  const int nb = static_cast<int>(buckets.size());
  auto waited = [&](int b) { return carried ? buckets[b].carried : buckets[b].grads; };
  if (wait && all_first) {
    for (int b = 0; b < nb; ++b) out.push_back(reduction_step(SyncPass::kWait, b, waited(b)));
  }
  for (int b = 0; b < nb; ++b) {
    if (wait && !all_first) out.push_back(reduction_step(SyncPass::kWait, b, waited(b)));
    out.push_back(update_step(b, buckets[b], carried));
  }
}

// The forward strategy's waits and updates, placed before the first forward pass that reads any
// bucket's parameters (the front layers', whose bucket is reduced last): every bucket's wait and
// update in reduction order, so the updates of buckets already reduced run while the last
// reductions are still in flight. With updates that read every gradient first, every wait first.
void place_carried(std::vector<Step>& out, const Step& step,
                   const std::vector<BucketTensors>& buckets, bool& placed, bool all_first) {
  if (placed) return;
  const bool reads_any = std::any_of(buckets.begin(), buckets.end(), [&](const BucketTensors& b) {
    return touches(step.reads, b.values);
  });
  if (!reads_any) return;
  append_updates(out, buckets, true, true, all_first);
  placed = true;
}

// Every flat parameter's gradient and value, in the graph's flat order.
std::pair<std::vector<int>, std::vector<int>> param_tensors(const Graph& graph) {
  std::vector<int> grads, values;
  for (const ParamIds& p : graph.flat_params()) {
    grads.push_back(p.grad);
    values.push_back(p.value);
  }
  return {grads, values};
}

// The stale slots: K tensors shaped as the flat gradient buffer, kept across steps.
std::vector<int> declare_stale_slots(std::vector<TensorInfo>& table, const Graph& graph,
                                     int64_t k) {
  const TensorInfo flat = table[graph.flat_gradient_id()];
  std::vector<int> ids;
  for (int64_t i = 0; i < k; ++i) {
    TensorInfo slot{fmt::format("stale gradients {}", i),
                    TensorKind::kBuffer,
                    flat.shape,
                    flat.dtype,
                    -1,
                    -1,
                    MemCategory::kGradients};
    slot.turns = static_cast<int>(k);  // iteration t's passes touch slot stale_slot(t, k)
    slot.turn = static_cast<int>(i);
    ids.push_back(declare_tensor(table, std::move(slot)));
  }
  return ids;
}

// Bounded staleness (sync_schedule.h): progress passes among forward and backward, then the
// slot's wait, the update from it, the stash and the slot's reduction. Every stale pass names
// every slot: which one step i uses is stale_slot(i, K) (sync_schedule.h), the index the executor
// gives its runners.
std::vector<int> insert_stale(Schedule& schedule, std::vector<TensorInfo>& table,
                              const Graph& graph, const SyncOptions& o) {
  if (o.strategy != OverlapStrategy::kNone || o.updates_read_all_gradients) {
    throw std::logic_error(
        "bounded staleness with an overlap strategy or loss scaling (StepSpec::validate refuses "
        "both)");
  }
  const std::vector<int> slots = declare_stale_slots(table, graph, o.staleness);
  const auto [grads, values] = param_tensors(graph);
  std::vector<Step> out;
  for (const Step& step : schedule.steps) {
    out.push_back(step);
    if (o.distributed() && (step.pass == Pass::kForward || is_backward(step.pass)))
      out.push_back(sync_step(SyncPass::kProgress, -1, Lane::kHost));
  }
  // One rank reduces nothing: the slots delay its gradients alone.
  if (o.distributed()) out.push_back(reduction_step(SyncPass::kWait, kStaleSlot, slots));
  Step update = sync_step(SyncPass::kUpdateStale, -1, Lane::kCompute);
  update.reads = slots;
  update.reads.insert(update.reads.end(), values.begin(), values.end());
  update.writes = values;
  out.push_back(update);
  Step stash = sync_step(SyncPass::kStash, -1, Lane::kCompute);
  stash.reads = grads;
  stash.writes = slots;
  out.push_back(stash);
  if (o.distributed()) out.push_back(reduction_step(SyncPass::kAllReduce, kStaleSlot, slots));
  schedule.steps = std::move(out);
  link_dependencies(schedule, table);
  return slots;
}

// Asynchronous SGD's host tensors (sync_schedule.h), kept across steps.
AsyncTensors declare_async_tensors(std::vector<TensorInfo>& table, const Graph& graph,
                                   const SyncOptions& o) {
  const int64_t n = table[graph.flat_gradient_id()].shape.numel();
  auto host = [&table](std::string name, int64_t numel) {
    return declare_tensor(table, {std::move(name), TensorKind::kBuffer, Shape{numel}, DType::kF32,
                                  -1, -1, MemCategory::kHostComm});
  };
  AsyncTensors t;
  t.grads = host("async: gradients", n);
  if (o.rank != 0) {
    t.reply = host("async: reply", n + 1);
    return t;
  }
  t.master = host("async: master weights", n + 1);
  t.momentum = host("async: momentum", n);
  t.replies.assign(static_cast<size_t>(o.ranks), -1);
  for (int64_t r = 1; r < o.ranks; ++r) {
    t.replies[r] = host(fmt::format("async: reply to rank {}", r), n + 1);
  }
  return t;
}

// Asynchronous SGD (sync_schedule.h): a pull, the step with progress passes, a push.
AsyncTensors insert_async(Schedule& schedule, std::vector<TensorInfo>& table, const Graph& graph,
                          const SyncOptions& o) {
  if (o.strategy != OverlapStrategy::kNone || o.updates_read_all_gradients || o.staleness > 0) {
    throw std::logic_error(
        "asynchronous SGD with an overlap strategy, staleness or loss scaling (StepSpec::validate "
        "refuses them)");
  }
  if (o.rank < 0 || o.rank >= o.ranks) {
    throw std::logic_error("asynchronous SGD on a rank that is not among the step's ranks");
  }
  const AsyncTensors t = declare_async_tensors(table, graph, o);
  const auto [grads, values] = param_tensors(graph);
  // What rank 0 serves with: the master weights, their momentum and the replies.
  std::vector<int> server;
  if (o.rank == 0) server = {t.master, t.momentum};
  for (int r : t.replies) {
    if (r >= 0) server.push_back(r);
  }
  Step pull = sync_step(SyncPass::kPull, -1, Lane::kCompute);
  pull.reads = {o.rank == 0 ? t.master : t.reply};
  pull.writes = values;
  std::vector<Step> out = {pull};
  for (const Step& step : schedule.steps) {
    out.push_back(step);
    if (step.pass != Pass::kForward && !is_backward(step.pass)) continue;
    Step progress = sync_step(SyncPass::kProgress, -1, Lane::kHost);
    progress.reads = progress.writes = server;
    out.push_back(progress);
  }
  Step push = sync_step(SyncPass::kPush, -1, Lane::kCompute);
  push.reads = grads;
  push.writes = {t.grads};
  push.writes.insert(push.writes.end(), server.begin(), server.end());
  if (o.rank != 0) push.writes.push_back(t.reply);  // its receive, posted with the push
  out.push_back(push);
  schedule.steps = std::move(out);
  link_dependencies(schedule, table);
  return t;
}

// Independent ranks (sync_schedule.h): the ranks' meeting after backward, then every bucket's
// update from the rank's own gradients. Returns the token's id (-1 with one rank: no meeting).
int insert_independent(Schedule& schedule, std::vector<TensorInfo>& table, const Graph& graph,
                       const BucketPlan& plan, const SyncOptions& o) {
  if (o.strategy != OverlapStrategy::kNone || o.staleness > 0 || o.async) {
    throw std::logic_error(
        "independent ranks with an overlap strategy, staleness or asynchronous SGD "
        "(StepSpec::validate refuses them)");
  }
  int token = -1;
  const size_t updates = schedule.steps.size() + (o.distributed() ? 2 : 0);
  if (o.distributed()) {
    token = declare_tensor(table, {"independent ranks' meeting", TensorKind::kBuffer, Shape{1},
                                   DType::kF32, -1, -1, MemCategory::kGradients});
    // The ranks meet once their gradients are complete (the reduction reads them, as sync's
    // does, and sends none of them), and update after the meeting (the updates read the token
    // its wait writes): so the program's edges order them as the list does.
    Step meet = reduction_step(SyncPass::kAllReduce, kMeeting, {token});
    const std::vector<int> grads = param_tensors(graph).first;
    meet.reads.insert(meet.reads.end(), grads.begin(), grads.end());
    schedule.steps.push_back(meet);
    schedule.steps.push_back(reduction_step(SyncPass::kWait, kMeeting, {token}));
  }
  append_updates(schedule.steps, bucket_tensors(table, graph, plan, false), false, false,
                 o.updates_read_all_gradients);
  for (size_t i = updates; token >= 0 && i < schedule.steps.size(); ++i) {
    schedule.steps[i].reads.push_back(token);
  }
  link_dependencies(schedule, table);
  return token;
}

}  // namespace

SyncTensors insert_sync(Schedule& schedule, std::vector<TensorInfo>& table, const Graph& graph,
                        const BucketPlan& plan, const SyncOptions& o) {
  if (o.async) return {{}, insert_async(schedule, table, graph, o)};
  if (o.staleness > 0) return {insert_stale(schedule, table, graph, o), {}};
  if (o.independent) return {{}, {}, insert_independent(schedule, table, graph, plan, o)};
  const bool per_bucket = o.distributed() && o.strategy != OverlapStrategy::kNone;
  const bool deferred = o.distributed() && o.strategy == OverlapStrategy::kForward;
  const std::vector<BucketTensors> buckets = bucket_tensors(table, graph, plan, deferred);
  const int nb = static_cast<int>(buckets.size());
  // The pass that writes each bucket's last gradient.
  std::vector<int> completes(nb, -1);
  for (int b = 0; b < nb; ++b) {
    for (size_t i = 0; i < schedule.steps.size(); ++i)
      if (touches(schedule.steps[i].writes, buckets[b].grads)) completes[b] = static_cast<int>(i);
  }
  bool placed = false;
  std::vector<Step> out;
  bool launched = false;
  for (size_t i = 0; i < schedule.steps.size(); ++i) {
    const Step& step = schedule.steps[i];
    if (deferred && step.pass == Pass::kForward)
      place_carried(out, step, buckets, placed, o.updates_read_all_gradients);
    out.push_back(step);
    if (!per_bucket) continue;
    if (launched && is_backward(step.pass))
      out.push_back(sync_step(SyncPass::kProgress, -1, Lane::kHost));
    for (int b = 0; b < nb; ++b) {
      if (completes[b] != static_cast<int>(i)) continue;
      out.push_back(reduction_step(SyncPass::kAllReduce, b, buckets[b].grads));
      launched = true;
    }
  }
  if (o.distributed() && o.strategy == OverlapStrategy::kNone) {
    std::vector<int> all;
    for (const BucketTensors& t : buckets) all.insert(all.end(), t.grads.begin(), t.grads.end());
    out.push_back(reduction_step(SyncPass::kAllReduce, -1, all));
    out.push_back(reduction_step(SyncPass::kWait, -1, all));
  }
  if (!deferred) append_updates(out, buckets, false, per_bucket, o.updates_read_all_gradients);
  schedule.steps = std::move(out);
  link_dependencies(schedule, table);
  return {};
}

}  // namespace dlb
