#include "suites/harness/run/print_step.h"

#include <fmt/format.h>

#include "runtime/backend/backend.h"
#include "runtime/core/error.h"
#include "runtime/train/step_program.h"
#include "runtime/train/trainer.h"
#include "suites/harness/run/training.h"
#include "workloads/models/model.h"

namespace dlb {

void print_step(const RunOptions& o, std::FILE* out) {
  validate_run_options(o);
  if (!o.batch_file.empty()) {
    throw InvalidArgument(
        "--print-step builds the step from --batch and --image-size: give those instead of "
        "--batch-file");
  }
  const ModelConfig mc = model_config_of(o);
  Graph graph = build_model(o.model, mc);
  // The backend and the declaration as the run's (the guard's zones, --dump's distinct
  // gradients), and the Trainer's own refusals of the loss and the optimizer.
  const auto backend = make_backend(o.backend, backend_options_of(o, 0));
  if (!o.dump_path.empty()) graph.keep_gradients_distinct();
  graph.declare_for(*backend, PrecisionPolicy::for_precision(o.precision));
  Trainer::require(*backend, graph);
  // As the Trainer builds it: the layers' plans first, so --swap=auto's room is the budget less
  // the workspace they reserve.
  graph.plan_ops(*backend);
  TrainConfig config;
  config.step = step_spec_of(o);
  const StepProgram program =
      build_step(graph, config.step, Trainer::step_target(*backend, config));
  fmt::print(out, "{}, {} on {}\n{}", o.model, mc.image_size, backend->name(),
             program_text(program, graph, plan_step(program)));
}

}  // namespace dlb
