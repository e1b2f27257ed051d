// Inside the op checker: one pass of one instance being run and judged. The per-op files
// (op_runs_layers.cpp, op_runs_pointwise.cpp) make the operands, call the backend through
// execute() (timed in perf mode) and, when comparing, judge each output against the reference.
#pragma once
#include <functional>
#include <string>

#include "runtime/check/op_checker.h"
#include "runtime/check/operands.h"
#include "runtime/check/reference.h"
#include "runtime/core/precision_policy.h"

namespace dlb {

class PassRun {
 public:
  PassRun(Backend& backend, const OpInstance& op, const CheckConfig& cfg, CheckPass pass,
          OperandCache& cache);

  Backend& backend() { return operands_.backend(); }
  Operands& operands() { return operands_; }
  const OpInstance& op() const { return op_; }
  CheckPass pass() const { return result_.pass; }
  const PrecisionPolicy& policy() const { return policy_; }
  OpTypes types() const { return OpTypes::of(policy_); }
  // How the backend stores 4-D data and conv weights at this precision.
  Layout layout() const { return layout_; }
  const Arithmetic& arithmetic() const { return arithmetic_; }
  // False in perf mode: run and time, no reference.
  bool comparing() const { return cfg_.mode == CheckMode::kCompare; }

  // Runs the backend's work: once, or (perf) once untimed and cfg.repeats times timed.
  void execute(const std::function<void()>& work);
  // Every element of `got` within want ± (bound + the store's rounding in `stored`). `offset`:
  // where these elements start in the tensor (a slice of it, compared a part at a time).
  void compare(const std::string& tensor, const Expected& e, const HostArray& got, DType stored,
               int64_t offset = 0);
  // Bit for bit (a skipped update, the scaler's state).
  void compare_exact(const std::string& tensor, const HostArray& want, const HostArray& got,
                     int64_t offset = 0);
  // Fails the pass with `why` (a check that is not a bound: a mask's values, a flag).
  void fail(const std::string& why);
  // The algorithm the backend chose for the pass, and what its engine declares: an engine that
  // reduces in 16 bits is judged by a 16-bit reduction's bound (reduction_roundoff).
  void set_engine(const PassAlgorithm& a);
  // What the pass's multiplications read (Backend::matmul_arithmetic): an engine that flushes
  // subnormal numbers is bounded with its flushes (reference.h's Arithmetic::flush).
  void set_products(const ProductArithmetic& p);
  void set_work(double flops, double bytes) { result_.flops = flops, result_.bytes = bytes; }
  PassResult result() const { return result_; }

 private:
  void compare_unplanted(const std::string& tensor, const Expected& e, const HostArray& got,
                         DType stored, int64_t offset);
  Operands operands_;
  const OpInstance& op_;
  const CheckConfig& cfg_;
  PrecisionPolicy policy_;
  Layout layout_;
  Arithmetic arithmetic_;
  PassResult result_;
};

// The per-op runners: each runs run.pass() of its op kind.
void run_conv(PassRun& run);
void run_linear(PassRun& run);
void run_batch_norm(PassRun& run);
void run_relu(PassRun& run);
void run_pool(PassRun& run);
void run_adaptive_avg_pool(PassRun& run);
void run_dropout(PassRun& run);
void run_add(PassRun& run);
void run_softmax_cross_entropy(PassRun& run);
void run_sgd(PassRun& run);
void run_loss_scale(PassRun& run);

// The backend op a kind's passes need, for supports().
Op backend_op(OpKind kind);
// The types that op sees at this precision (batch norm: f32 parameters; the loss: f32
// probabilities; SGD: gradients and master weights), as the layers ask supports().
OpTypes op_types_for(OpKind kind, const PrecisionPolicy& policy);

}  // namespace dlb
