#include "runtime/check/op_checker.h"

#include <fmt/format.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <mutex>

#include "runtime/backend/cpu/parallel.h"
#include "runtime/check/bounds.h"
#include "runtime/check/op_run.h"
#include "runtime/core/error.h"

namespace dlb {

std::string_view check_mode_name(CheckMode m) {
  switch (m) {
    case CheckMode::kCompare:
      return "compare";
    case CheckMode::kPerf:
      return "perf";
    case CheckMode::kGrad:
      return "grad";
  }
  return "?";
}

std::string_view check_status_name(CheckStatus s) {
  switch (s) {
    case CheckStatus::kOk:
      return "ok";
    case CheckStatus::kFail:
      return "fail";
    case CheckStatus::kUnsupported:
      return "unsupported";
    case CheckStatus::kError:
      return "error";
  }
  return "?";
}

Op backend_op(OpKind kind) {
  switch (kind) {
    case OpKind::kConv:
      return Op::kConv;
    case OpKind::kLinear:
      return Op::kMatmul;
    case OpKind::kBatchNorm:
      return Op::kBatchNorm;
    case OpKind::kRelu:
      return Op::kRelu;
    case OpKind::kMaxPool:
    case OpKind::kAvgPool:
    case OpKind::kAdaptiveAvgPool:
      return Op::kPool;
    case OpKind::kDropout:
      return Op::kDropout;
    case OpKind::kAdd:
      return Op::kAdd;
    case OpKind::kSoftmaxCrossEntropy:
      return Op::kSoftmaxCrossEntropy;
    case OpKind::kSgd:
      return Op::kSgd;
    case OpKind::kLossScale:
      return Op::kLossScale;
  }
  return Op::kConv;
}

OpTypes op_types_for(OpKind kind, const PrecisionPolicy& policy) {
  switch (kind) {
    case OpKind::kBatchNorm:
      return OpTypes{policy.math, policy.activations, policy.dtype(TensorRole::kStatistics)};
    case OpKind::kSoftmaxCrossEntropy:
      return OpTypes{policy.math, policy.activations, DType::kF32};
    case OpKind::kSgd:
      return OpTypes{Precision::kFp32, policy.gradients, policy.master_weights};
    case OpKind::kLossScale:
      return OpTypes::of(policy);
    default:
      return OpTypes::of(policy);
  }
}

PassRun::PassRun(Backend& backend, const OpInstance& op, const CheckConfig& cfg, CheckPass pass,
                 OperandCache& cache)
    : operands_(backend, cfg.seed, op.spec(), cache),
      op_(op),
      cfg_(cfg),
      policy_(PrecisionPolicy::for_precision(cfg.precision)),
      layout_(backend.activation_layout(OpTypes::of(policy_))) {
  arithmetic_.math = math_roundoff(cfg.precision);
  arithmetic_.inputs = input_roundoff(cfg.precision);
  arithmetic_.ops = unit_roundoff(DType::kF32);
  arithmetic_.data = unit_roundoff(policy_.activations);
  result_.pass = pass;
}

void PassRun::execute(const std::function<void()>& work) {
  if (cfg_.mode != CheckMode::kPerf) {
    work();
    return;
  }
  work();  // plans, workspaces, library state
  Backend& b = backend();
  b.synchronize();
  std::vector<double> times;
  for (int i = 0; i < std::max(1, cfg_.repeats); ++i) {
    const Mark start = b.clock().mark();
    work();
    const Mark end = b.clock().mark();
    times.push_back(b.clock().elapsed_us(start, end) * 1e-6);
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  result_.seconds = times[times.size() / 2];
}

void PassRun::compare(const std::string& tensor, const Expected& e, const HostArray& got,
                      DType stored, int64_t offset) {
  if (got.shape != e.want.shape) {
    fail(fmt::format("{} is {}, the reference {}", tensor, got.shape.str(), e.want.shape.str()));
    return;
  }
  if (cfg_.planted_error > 0 && got.numel() > 0) {
    HostArray planted = got;
    const size_t i = planted.v.size() / 2;
    const double want = e.want.v[i], bound = stored_bound(e.bound[i], want, stored);
    const double away = planted.v[i] >= want ? 1.0 : -1.0;
    planted.v[i] +=
        away * std::max(cfg_.planted_error * bound, 4 * DBL_EPSILON * std::fabs(want) + DBL_MIN);
    return compare_unplanted(tensor, e, planted, stored, offset);
  }
  return compare_unplanted(tensor, e, got, stored, offset);
}

void PassRun::compare_unplanted(const std::string& tensor, const Expected& e, const HostArray& got,
                                DType stored, int64_t offset) {
  std::mutex mu;
  WorstElement worst;
  parallel_blocks(got.numel(), kParallelElements, [&](int64_t begin, int64_t end) {
    WorstElement mine;
    for (int64_t i = begin; i < end; ++i) {
      const double want = e.want.v[i];
      const double bound = stored_bound(e.bound[i], want, stored);
      const double diff = std::fabs(got.v[i] - want);
      // Outside any bound: NaN where the answer is a number, or a difference where none is
      // allowed.
      double ratio = diff / bound;
      if (std::isnan(diff) || (bound == 0 && diff > 0)) ratio = DBL_MAX;
      if (bound == 0 && diff == 0) ratio = 0;
      if (mine.index < 0 || ratio > mine.ratio) {
        mine = {tensor, offset + i, got.v[i], want, bound, ratio};
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    if (mine.index >= 0 && (worst.index < 0 || mine.ratio > worst.ratio ||
                            (mine.ratio == worst.ratio && mine.index < worst.index))) {
      worst = mine;
    }
  });
  WorstElement& w = result_.worst;
  if (worst.index >= 0 && (w.index < 0 || worst.ratio > w.ratio)) w = worst;
  if (worst.ratio > 1) result_.status = CheckStatus::kFail;
  result_.elements += got.numel();
}

void PassRun::compare_exact(const std::string& tensor, const HostArray& want, const HostArray& got,
                            int64_t offset) {
  Expected e(want.shape);
  e.want = want;
  compare(tensor, e, got, DType::kI64, offset);  // an integer type's roundoff: none
}

void PassRun::set_engine(const PassAlgorithm& a) {
  result_.algorithm = a.algorithm;
  result_.notes = a.notes;
  arithmetic_.math = reduction_roundoff(cfg_.precision, policy_.activations,
                                        a.notes && a.notes->reduced_precision_reduction);
  set_products(a.products);
}

void PassRun::set_products(const ProductArithmetic& p) {
  arithmetic_.flush = p.flushes_subnormals ? std::ldexp(1.0, -126) : 0.0;
}

void PassRun::fail(const std::string& why) {
  result_.status = CheckStatus::kFail;
  if (!result_.message.empty()) result_.message += "; ";
  result_.message += why;
}

namespace {

void run_pass(PassRun& run) {
  switch (run.op().kind) {
    case OpKind::kConv:
      return run_conv(run);
    case OpKind::kLinear:
      return run_linear(run);
    case OpKind::kBatchNorm:
      return run_batch_norm(run);
    case OpKind::kRelu:
      return run_relu(run);
    case OpKind::kMaxPool:
    case OpKind::kAvgPool:
      return run_pool(run);
    case OpKind::kAdaptiveAvgPool:
      return run_adaptive_avg_pool(run);
    case OpKind::kDropout:
      return run_dropout(run);
    case OpKind::kAdd:
      return run_add(run);
    case OpKind::kSoftmaxCrossEntropy:
      return run_softmax_cross_entropy(run);
    case OpKind::kSgd:
      return run_sgd(run);
    case OpKind::kLossScale:
      return run_loss_scale(run);
  }
}

PassResult unsupported(CheckPass pass, const std::string& why) {
  PassResult r;
  r.pass = pass;
  r.status = CheckStatus::kUnsupported;
  r.message = why;
  return r;
}

}  // namespace

std::vector<PassResult> check_instance(Backend& backend, const OpInstance& op,
                                       const CheckConfig& cfg, OperandCache& cache) {
  if (cfg.mode == CheckMode::kGrad) return check_reference_gradients(op, cfg.seed);
  const PrecisionPolicy policy = PrecisionPolicy::for_precision(cfg.precision);
  const OpTypes types = op_types_for(op.kind, policy);
  std::vector<CheckPass> passes = passes_of(op, cfg.precision,
                                            {backend.fuses_batch_norm_relu(OpTypes::of(policy)),
                                             backend.fuses_conv_relu(OpTypes::of(policy))});
  if (!cfg.passes.empty()) {
    passes.erase(std::remove_if(passes.begin(), passes.end(),
                                [&](CheckPass p) {
                                  return std::find(cfg.passes.begin(), cfg.passes.end(), p) ==
                                         cfg.passes.end();
                                }),
                 passes.end());
  }
  std::vector<PassResult> out;
  for (CheckPass pass : passes) {
    if (!backend.supports(backend_op(op.kind), types)) {
      out.push_back(
          unsupported(pass, fmt::format("the {} backend does not support {} in {}", backend.name(),
                                        op_name(backend_op(op.kind)), op_types_str(types))));
      continue;
    }
    try {
      PassRun run(backend, op, cfg, pass, cache);
      run_pass(run);
      out.push_back(run.result());
    } catch (const Unsupported& e) {
      out.push_back(unsupported(pass, e.what()));
    } catch (const Error& e) {
      PassResult r = unsupported(pass, fmt::format("{}: {}", error_kind_name(e.kind()), e.what()));
      r.status = CheckStatus::kError;
      out.push_back(std::move(r));
    }
  }
  return out;
}

std::vector<PassResult> check_instance(Backend& backend, const OpInstance& op,
                                       const CheckConfig& cfg) {
  OperandCache cache;
  return check_instance(backend, op, cfg, cache);
}

}  // namespace dlb
