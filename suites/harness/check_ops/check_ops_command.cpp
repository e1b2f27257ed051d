#include "suites/harness/check_ops/check_ops_command.h"

#include <fmt/format.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>

#include "runtime/check/op_checker.h"
#include "runtime/check/operands.h"
#include "runtime/check/perturbing_backend.h"
#include "runtime/core/error.h"
#include "runtime/io/output_file.h"
#include "runtime/memory/host_memory.h"
#include "suites/harness/check_ops/check_grid.h"
#include "suites/harness/check_ops/check_ops_report.h"

namespace dlb {
namespace {

template <typename T, typename Parse>
std::vector<T> parse_each(const std::vector<std::string>& names, Parse parse, std::string_view flag,
                          std::string_view known) {
  std::vector<T> out;
  for (const std::string& n : names) {
    const std::optional<T> v = parse(n);
    if (!v) throw InvalidArgument(fmt::format("{}: unknown '{}' (known: {})", flag, n, known));
    out.push_back(*v);
  }
  return out;
}

std::string op_kind_list() {
  std::string s;
  for (OpKind k : kOpKinds) s += (s.empty() ? "" : ", ") + std::string(op_kind_name(k));
  return s;
}

CheckMode parse_mode(const std::string& m) {
  for (CheckMode c : {CheckMode::kCompare, CheckMode::kPerf, CheckMode::kGrad})
    if (check_mode_name(c) == m) return c;
  throw InvalidArgument(fmt::format("--mode={}: expected compare, perf or grad", m));
}

// The precisions to check: those given (each one the backend must support), or every one the
// backend supports.
std::vector<Precision> resolve_precisions(const CheckOpsOptions& o, const Backend& b) {
  const auto supported = [&](Precision p) {
    return b.supports(Op::kConv, OpTypes::of(PrecisionPolicy::for_precision(p)));
  };
  std::vector<Precision> out;
  if (o.precisions.empty()) {
    for (Precision p : kPrecisions)
      if (supported(p)) out.push_back(p);
    return out;
  }
  for (Precision p : parse_each<Precision>(o.precisions, parse_precision, "--precisions",
                                           "fp32, tf32, fp16, bf16")) {
    if (!supported(p)) {
      throw Unsupported(fmt::format("--precisions={}: the {} backend does not support it",
                                    precision_name(p), b.name()));
    }
    out.push_back(p);
  }
  return out;
}

std::vector<ConvAlgoChoice> resolve_algorithms(const CheckOpsOptions& o, BackendKind kind) {
  return parse_named_conv_algorithms(kind, o.conv_algos, "--conv-algos");
}

std::vector<GridInstance> resolve_instances(const CheckOpsOptions& o,
                                            std::vector<std::string>& notes) {
  const std::vector<OpKind> ops = parse_each<OpKind>(o.ops, parse_op_kind, "--ops", op_kind_list());
  if (!o.instances.empty()) {
    std::vector<GridInstance> out;
    for (const std::string& s : o.instances) out.push_back({parse_op_instance(s), {"--instance"}});
    return out;
  }
  Grid grid = enumerate_grid(GridRequest{o.models, o.sizes, o.batches, ops});
  notes = std::move(grid.notes);
  return std::move(grid.instances);
}

std::unique_ptr<Backend> make_checked_backend(const CheckRun& run, ConvAlgoChoice algo) {
  const BackendKind kind = run.kind;
  const std::string& perturb = run.perturb;
  BackendOptions bo;
  bo.conv_algo = algo;
  bo.conv_math = run.conv_math;
  std::unique_ptr<Backend> b = make_backend(kind, bo);
  if (perturb.empty()) return b;
  return std::make_unique<PerturbingBackend>(std::move(b), perturb);
}

void require_compiled(BackendKind kind) {
  if (!backend_compiled(kind)) {
    throw Unsupported(
        fmt::format("--backend={}: this build has no {} backend (build it where the "
                    "toolkit is: scripts/build.sh)",
                    backend_kind_name(kind), backend_kind_name(kind)));
  }
}

// What the run is: the flags checked, before any instance, backend or check is made.
CheckRun resolve_run(const CheckOpsOptions& o) {
  CheckRun run;
  run.mode = parse_mode(o.mode);
  run.kind = o.backend.value_or(gpu_available() ? BackendKind::kCuda : BackendKind::kCpu);
  require_compiled(run.kind);
  if (o.repeats < 1 || o.repeats > 1000000) {
    throw InvalidArgument(fmt::format("--repeats={}: expected 1 to 1000000", o.repeats));
  }
  if (!o.instances.empty() &&
      (!o.models.empty() || !o.sizes.empty() || !o.batches.empty() || !o.ops.empty())) {
    throw InvalidArgument(
        "--instance names its op and shapes itself: give it without --models, --sizes, --batches "
        "or --ops");
  }
  run.passes = parse_each<CheckPass>(o.passes, parse_check_pass, "--passes",
                                     "forward, backward_data, backward_weights, ...");
  parse_each<Precision>(o.precisions, parse_precision, "--precisions", "fp32, tf32, fp16, bf16");
  if (!o.perturb.empty()) PerturbingBackend::check_target(o.perturb);
  // A record that could not be written would be found out only when the grid is done.
  if (!o.json_path.empty()) check_output_file(o.json_path, "--json");
  if (!o.conv_math.empty()) {
    const std::optional<ConvMath> m = parse_conv_math(o.conv_math);
    if (!m)
      throw InvalidArgument(fmt::format("--conv-math: unknown '{}' (strict or fast)", o.conv_math));
    if (run.kind != BackendKind::kCuda) {
      throw InvalidArgument(fmt::format(
          "--conv-math chooses among cuDNN's engines, and means nothing with --backend={}",
          backend_kind_name(run.kind)));
    }
    run.conv_math = *m;
  }
  run.seed = o.seed;
  run.perturb = o.perturb;
  return run;
}

// grad mode: the float64 reference against itself, once per instance; no backend.
void check_gradients(CheckRun& run, const std::vector<GridInstance>& instances, bool verbose) {
  for (size_t i = 0; i < instances.size(); ++i) {
    progress(i, instances.size(), instances[i].op);
    for (const PassResult& r : check_reference_gradients(instances[i].op, run.seed)) {
      if (!run.passes.empty() &&
          std::find(run.passes.begin(), run.passes.end(), r.pass) == run.passes.end()) {
        continue;
      }
      run.rows.push_back({&instances[i], std::nullopt, std::nullopt, r});
      if (verbose || r.status != CheckStatus::kOk) print_row(run, run.rows.back());
    }
  }
}

// compare and perf: each instance at each precision, and each algorithm for a convolution.
void check_on_backend(CheckRun& run, const std::vector<GridInstance>& instances,
                      const CheckOpsOptions& o) {
  const std::vector<ConvAlgoChoice> algos = resolve_algorithms(o, run.kind);
  std::map<ConvAlgoChoice, std::unique_ptr<Backend>> backends;
  for (ConvAlgoChoice a : algos) backends[a] = make_checked_backend(run, a);
  const std::vector<Precision> precisions = resolve_precisions(o, *backends.begin()->second);
  run.environment = check_environment(*backends.begin()->second);
  CheckConfig cfg;
  cfg.mode = run.mode;
  cfg.seed = run.seed;
  cfg.repeats = static_cast<int>(o.repeats);
  cfg.passes = run.passes;
  for (size_t i = 0; i < instances.size(); ++i) {
    const GridInstance& g = instances[i];
    progress(i, instances.size(), g.op);
    OperandCache cache;
    const bool conv = g.op.kind == OpKind::kConv;  // only a convolution chooses an algorithm
    for (Precision p : precisions) {
      cfg.precision = p;
      for (size_t a = 0; a < (conv ? algos.size() : 1); ++a) {
        // im2col+matmul takes bf16 layers, and f32 ones' backward-filter passes: in fp16 its
        // rows would repeat the heuristic's
        if (conv && algos[a] == ConvAlgoChoice::kMatmul && p == Precision::kFp16) continue;
        const std::optional<ConvAlgoChoice> algo = conv ? std::optional(algos[a]) : std::nullopt;
        for (const PassResult& r : check_instance(*backends[algos[a]], g.op, cfg, cache)) {
          run.rows.push_back({&g, p, algo, r});
          const bool bad = r.status == CheckStatus::kFail || r.status == CheckStatus::kError;
          if (o.verbose || bad) print_row(run, run.rows.back());
        }
      }
    }
  }
}

// Each instance's memory estimated before the first is checked (they run one at a time): an
// instance text or a grid's batch within the size limits can still ask for more than the machine
// has, which would end in the kernel's OOM killer minutes in.
void require_memory_for(const std::vector<GridInstance>& instances) {
  const size_t host = host_memory_bytes();
  for (const GridInstance& g : instances) {
    require_memory(check_bytes_estimate(g.op), host,
                   fmt::format("checking {} ({})", g.op.spec(), g.origins.front()),
                   "this machine's memory");
  }
}

}  // namespace

int check_ops_command(const CheckOpsOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  // Every pass allocates and frees host arrays of up to a gigabyte (vgg16's classifier): served
  // from the heap and kept there, they are reused without the page faults of fresh mappings
  // (measured: more than half the time of such a pass went to faulting new pages in).
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  CheckRun run = resolve_run(o);
  const std::vector<GridInstance> instances = resolve_instances(o, run.notes);
  resolve_algorithms(o, run.kind);  // refused before a listing too
  if (o.list) {
    print_instances(instances, run.notes);
    return 0;
  }
  require_memory_for(instances);
  if (run.mode == CheckMode::kGrad) {
    check_gradients(run, instances, o.verbose);
  } else {
    check_on_backend(run, instances, o);
  }
  progress(instances.size(), instances.size(), {});
  if (run.rows.empty()) {
    throw InvalidArgument(
        "the filters select no check (an op without that pass, or a pass only another "
        "precision has: --list shows the instances)");
  }
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  print_summary(run, instances.size());
  if (!o.json_path.empty()) write_check_record(o.json_path, run, instances.size());
  return run.failures() ? 1 : 0;
}

}  // namespace dlb
