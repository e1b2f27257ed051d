// Runs one op instance's passes on a backend and compares every output element with the float64
// reference (reference.h) within its bound (bounds.h). The three modes of ggml's
// test-backend-ops: compare (the default), perf (the time of each pass) and grad (central
// differences on the float64 reference: it checks the reference itself, with no backend).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/check/op_instance.h"

namespace dlb {

enum class CheckMode { kCompare, kPerf, kGrad };
std::string_view check_mode_name(CheckMode m);

// kError: the backend threw while running the pass (a library or device error); counted as a
// failure, and the checks after it still run.
enum class CheckStatus { kOk, kFail, kUnsupported, kError };
std::string_view check_status_name(CheckStatus s);

struct CheckConfig {
  Precision precision = Precision::kFp32;
  CheckMode mode = CheckMode::kCompare;
  uint64_t seed = 1;
  int repeats = 5;                // perf: timed runs of each pass (the median is kept)
  std::vector<CheckPass> passes;  // only these (all when empty)
  // Test only: moves the middle element of each compared output away from the reference by this
  // multiple of its bound (on top of its own error; any distance where the bound is zero), to
  // show that each bound fails on a one-element error just past it.
  double planted_error = 0;
};

// The element furthest outside (or nearest to) its bound: ratio = |got - want| / bound.
struct WorstElement {
  std::string tensor;  // which output ("y", "dx", "running_var"...)
  int64_t index = -1;  // logical (NCHW) flat index
  double got = 0, want = 0, bound = 0, ratio = 0;
};

struct PassResult {
  CheckPass pass = CheckPass::kForward;
  CheckStatus status = CheckStatus::kOk;
  int64_t elements = 0;  // output elements compared
  WorstElement worst;
  std::string message;               // why unsupported, or what failed besides the bound
  std::string algorithm;             // the convolution algorithm the backend chose for the pass
  std::optional<EngineNotes> notes;  // what its engine declares, where the backend says
  double seconds = 0;                // perf: median time of one run
  double flops = 0;                  // perf: floating-point operations of one run (conv and linear)
  double bytes = 0;                  // perf: bytes the pass reads and writes, at least
};

// The passes of `op` (all that passes_of gives, or cfg.passes) on `backend`. Never throws for
// a backend's refusal (Unsupported becomes the pass's status); other errors pass through.
std::vector<PassResult> check_instance(Backend& backend, const OpInstance& op,
                                       const CheckConfig& cfg);
// The same, drawing the operands once into `cache` for every pass and precision of the instance
// that is checked with it.
struct OperandCache;
std::vector<PassResult> check_instance(Backend& backend, const OpInstance& op,
                                       const CheckConfig& cfg, OperandCache& cache);

// grad mode: the reference's backward against central differences of its forward, for `op`'s
// differentiable inputs, at a few seeded elements each. No backend.
std::vector<PassResult> check_reference_gradients(const OpInstance& op, uint64_t seed);

}  // namespace dlb
