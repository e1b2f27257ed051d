// What `dlbench check-ops` reports: a line per failure (or per check, verbose) with its worst
// element, its bound and the command that reproduces it alone; a table by op; and the JSON record
// (suites/schema/check_ops.schema.json), written atomically.
#pragma once
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runtime/check/op_checker.h"
#include "suites/harness/check_ops/check_grid.h"

namespace dlb {

struct CheckRow {
  const GridInstance* instance;
  std::optional<Precision> precision;       // none in grad mode: the reference against itself
  std::optional<ConvAlgoChoice> algorithm;  // convolutions only
  PassResult result;
};

struct CheckRun {
  BackendKind kind = BackendKind::kCpu;
  CheckMode mode = CheckMode::kCompare;
  uint64_t seed = 1;
  std::vector<CheckPass> passes;
  std::string perturb;
  ConvMath conv_math = BackendOptions{}.conv_math;
  std::vector<std::string> notes;
  nlohmann::json environment;
  std::vector<CheckRow> rows;
  double seconds = 0;
  int64_t failures() const;
  // Rows whose pass computes in tf32, fp16 or bf16 on an engine that declares no tensor cores
  // (lacks_tensor_cores): a generic engine where a tensor-core one was meant.
  int64_t without_tensor_cores() const;
};

// The command line that runs one row alone.
std::string repro_command(const CheckRun& run, const CheckRow& row);
nlohmann::json check_environment(const Backend& backend);

void print_instances(const std::vector<GridInstance>& instances,
                     const std::vector<std::string>& notes);
// "[12/340] conv:shape=..." on a terminal's stderr; nothing when it is not one.
void progress(size_t done, size_t total, const OpInstance& op);
void print_row(const CheckRun& run, const CheckRow& row);
void print_summary(const CheckRun& run, size_t instances);

// The record, a pure function of the run.
nlohmann::json check_record(const CheckRun& run, size_t instances);
void write_check_record(const std::string& path, const CheckRun& run, size_t instances);

}  // namespace dlb
