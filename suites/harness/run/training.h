// What `dlbench run` (run_command.h), a sweep's worker and maxbatch's probes train with:
// run_training, one configuration's run, measured.
#pragma once
#include <string>

#include "runtime/backend/backend.h"
#include "suites/harness/core/record.h"
#include "suites/harness/core/run_options.h"
#include "workloads/models/model.h"

namespace dlb {

// The runner: trains as the options say, writes the run's traces, profile and weights, and
// returns what it measured. Throws dlb::Error on failure. Every rank calls it.
RunResult run_training(const RunOptions& options);

// The model a run's options ask for: their batch, image size and classes, or the model's
// defaults (a --batch-file's batch and size replace them in run_training).
ModelConfig model_config_of(const RunOptions& options);

// The backend a run's options ask for (its memory budget and guard, convolution choices), on
// this rank's GPU (one per rank on each node).
BackendOptions backend_options_of(const RunOptions& options, int rank);

// What a record of `r` gets from this host after its run: the fraction of the machine's measured
// peak (machine_peak.h), where a peak was measured here for its device; and its noise (noise.h):
// the host around the timed steps, how the run sat on it, and the step times' spread.
void attach_peak(RunResult& r);
void attach_noise(RunResult& r);

}  // namespace dlb
