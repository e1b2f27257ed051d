// dlbench: the command line. Strings become typed options here, and only here are errors turned
// into messages and exit codes (2 bad input, 3 out of memory, 4 unsupported, 5 communication).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <map>

#include "runtime/core/error.h"
#include "suites/harness/commands.h"
#include "suites/harness/run_command.h"
#include "suites/harness/sweep_command.h"

namespace {

template <typename E>
CLI::Transformer enum_option(const std::map<std::string, E>& values) {
  return CLI::Transformer(values, CLI::ignore_case);
}

const std::map<std::string, dlb::BackendKind> kBackends{{"cpu", dlb::BackendKind::kCpu},
                                                        {"cuda", dlb::BackendKind::kCuda}};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dlbench: deep-learning training benchmarks on GPUs and CPUs"};
  app.require_subcommand(0, 1);

  dlb::SweepOptions sweep;
  std::string launcher = "auto";
  app.add_option("--suite", sweep.suite, "run a suite: a shipped name (dlbench list) or PATH.json");
  app.add_option("--out", sweep.out_dir, "output directory (default out/<suite>)");
  app.add_flag("--resume", sweep.resume, "skip the points already recorded as ok in --out");
  app.add_option("--timeout", sweep.timeout_s, "seconds per point before its processes are killed")
      ->capture_default_str();
  app.add_flag("--dry-run", sweep.dry_run, "print the points and their launch commands only");
  app.add_option("--launcher", launcher, "auto, local, mpirun or srun")
      ->check(CLI::IsMember({"auto", "local", "mpirun", "srun"}))
      ->capture_default_str();
  app.add_flag("--no-report{false}", sweep.report,
               "do not render plots and report.{md,html} after the sweep");
  app.add_option("--trace-steps", sweep.trace_steps, "timed steps traced per point (0: off)")
      ->capture_default_str();
  app.add_option("--inject-fault", sweep.inject_fault, "test only: crash@I, hang@I or oom@I")
      ->group("");

  std::string point_file;
  auto* worker_cmd =
      app.add_subcommand("worker", "run one point of a suite (the harness starts it)");
  worker_cmd->add_option("--point", point_file, "point file written by the harness")->required();
  app.set_version_flag("--version", DLB_VERSION);

  dlb::RunOptions run;
  std::string budget;
  int64_t batch = 0, image_size = 0;
  float dropout = 0;
  double target_accuracy = 0;
  auto* run_cmd = app.add_subcommand("run", "train one configuration and write a result record");
  run_cmd->add_option("--model", run.model, "alexnet, vgg16, resnet18, resnet50, digits-cnn")
      ->capture_default_str();
  auto* batch_opt = run_cmd->add_option("--batch", batch, "images per step (per rank); default 16");
  auto* size_opt = run_cmd->add_option("--image-size", image_size, "square image side in pixels");
  run_cmd->add_option("--num-classes", run.num_classes, "classes (default: the model's)");
  run_cmd->add_option("--steps", run.steps, "timed steps")->capture_default_str();
  run_cmd->add_option("--warmup", run.warmup, "untimed steps before them")->capture_default_str();
  run_cmd->add_option("--epochs", run.epochs,
                      "epochs over a real data set (--data=digits); with --target-accuracy, the "
                      "most");
  auto* target_opt = run_cmd->add_option("--target-accuracy", target_accuracy,
                                         "stop once test accuracy reaches this (e.g. 0.95)");
  run_cmd->add_option("--mllog", run.mllog_path, "write MLPerf :::MLLOG lines here");
  run_cmd->add_option("--backend", run.backend, "cpu or cuda")
      ->transform(enum_option(kBackends))
      ->capture_default_str();
  run_cmd->add_option("--precision", run.precision, "fp32, tf32, fp16 or bf16")
      ->transform(
          enum_option(std::map<std::string, dlb::Precision>{{"fp32", dlb::Precision::kFp32},
                                                            {"tf32", dlb::Precision::kTf32},
                                                            {"fp16", dlb::Precision::kFp16},
                                                            {"bf16", dlb::Precision::kBf16}}));
  run_cmd->add_option("--data", run.data, "synthetic or digits")
      ->transform(enum_option(std::map<std::string, dlb::DataSource>{
          {"synthetic", dlb::DataSource::kSynthetic}, {"digits", dlb::DataSource::kDigits}}));
  run_cmd->add_option("--data-path", run.data_path, "digits.csv.gz (default: scikit-learn's)");
  run_cmd->add_option("--lr", run.sgd.lr, "SGD learning rate")->capture_default_str();
  run_cmd->add_option("--momentum", run.sgd.momentum, "SGD momentum")->capture_default_str();
  run_cmd->add_option("--weight-decay", run.sgd.weight_decay, "added to the gradient")
      ->capture_default_str();
  auto* dropout_opt = run_cmd->add_option("--dropout", dropout, "override dropout; 0 turns it off");
  run_cmd->add_option("--seed", run.seed, "weights and data seed")->capture_default_str();
  run_cmd->add_option("--memory-budget", budget, "e.g. 4GiB; exceeding it is OutOfMemory");
  run_cmd->add_option("--init", run.init_path, "start from these weights (safetensors)");
  run_cmd->add_option("--batch-file", run.batch_file,
                      "train on this fixed batch (safetensors: images f32 NCHW, labels int64)");
  run_cmd->add_option("--save", run.save_path, "write weights and buffers after the last step");
  run_cmd->add_option("--json", run.json_path, "write the result record here");
  run_cmd->add_option("--ranks", run.ranks, "data-parallel ranks (start them with mpirun/srun)");
  run_cmd->add_option("--overlap", run.overlap, "gradient sync: none, backward or forward")
      ->transform(enum_option(std::map<std::string, dlb::OverlapStrategy>{
          {"none", dlb::OverlapStrategy::kNone},
          {"backward", dlb::OverlapStrategy::kBackward},
          {"forward", dlb::OverlapStrategy::kForward}}));
  run_cmd->add_option("--bucket-mb", run.bucket_mb, "all-reduce bucket size in MiB")
      ->capture_default_str();
  run_cmd
      ->add_option("--comm-progress", run.comm_progress,
                   "MPI progress: poll (test calls between layers) or thread")
      ->transform(enum_option(std::map<std::string, dlb::CommProgress>{
          {"poll", dlb::CommProgress::kPoll}, {"thread", dlb::CommProgress::kThread}}));
  run_cmd->add_option("--comm-timeout", run.comm_timeout_s, "seconds before a collective fails")
      ->capture_default_str();
  run_cmd->add_option("--inject-fault", run.fault, "test only")
      ->transform(enum_option(std::map<std::string, dlb::RunOptions::Fault>{
          {"crash", dlb::RunOptions::Fault::kCrash},
          {"hang", dlb::RunOptions::Fault::kHang},
          {"oom", dlb::RunOptions::Fault::kOom},
          {"rank-stops", dlb::RunOptions::Fault::kRankStops},
          {"rank-dies", dlb::RunOptions::Fault::kRankDies}}))
      ->group("");
  run_cmd->add_option("--trace", run.trace_path, "write a Chrome trace of the traced steps here");
  run_cmd->add_option("--profile", run.profile_path, "write the per-layer profile here");
  run_cmd->add_option("--trace-steps", run.trace_steps, "timed steps to trace (0: off)")
      ->capture_default_str();

  auto* list_cmd = app.add_subcommand("list", "models, backends and devices");

  dlb::BenchConvOptions bench;
  auto* bench_cmd = app.add_subcommand("bench", "micro-benchmarks");
  bench_cmd->require_subcommand(1);
  auto* conv_cmd = bench_cmd->add_subcommand("conv", "conv layers of a model against sgemm");
  conv_cmd->add_option("--model", bench.model)->capture_default_str();
  conv_cmd->add_option("--batch", bench.batch)->capture_default_str();
  conv_cmd->add_option("--image-size", bench.image_size)->capture_default_str();
  conv_cmd->add_option("--repeat", bench.repeat, "timed repetitions (median)")
      ->capture_default_str();
  conv_cmd->add_option("--backend", bench.backend)->transform(enum_option(kBackends));
  conv_cmd->add_option("--json", bench.json_path, "write the results here");

  dlb::BenchAllreduceOptions allreduce;
  auto* allreduce_cmd =
      bench_cmd->add_subcommand("allreduce", "all-reduce size sweep, as nccl-tests");
  allreduce_cmd->add_option("--ranks", allreduce.ranks, "ranks to launch")->capture_default_str();
  allreduce_cmd->add_option("--min-bytes", allreduce.min_bytes)->capture_default_str();
  allreduce_cmd->add_option("--max-bytes", allreduce.max_bytes)->capture_default_str();
  allreduce_cmd->add_option("--iters", allreduce.iterations)->capture_default_str();
  allreduce_cmd->add_option("--warmup", allreduce.warmup)->capture_default_str();
  allreduce_cmd->add_option("--launcher", allreduce.launcher, "auto, mpirun or srun")
      ->capture_default_str();
  allreduce_cmd->add_option("--json", allreduce.json_path, "write the results here (rank 0)");
  std::string allreduce_comm = "auto";
  allreduce_cmd
      ->add_option("--comm", allreduce_comm,
                   "auto (nccl on device buffers when a GPU is visible, else mpi), mpi or nccl")
      ->check(CLI::IsMember({"auto", "mpi", "nccl"}))
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }

  try {
    if (*run_cmd) {
      if (*batch_opt) run.batch = batch;
      if (*size_opt) run.image_size = image_size;
      if (*dropout_opt) run.dropout = dropout;
      if (*target_opt) run.target_accuracy = target_accuracy;
      if (!budget.empty()) run.memory_budget = dlb::parse_bytes(budget);
      return dlb::run_command(run);
    }
    if (*list_cmd) return dlb::list_command();
    if (*worker_cmd) return dlb::worker_command(point_file);
    if (*conv_cmd) return dlb::bench_conv_command(bench);
    if (*allreduce_cmd) {
      if (allreduce_comm == "mpi") allreduce.comm = dlb::CommKind::kMpi;
      if (allreduce_comm == "nccl") allreduce.comm = dlb::CommKind::kNccl;
      return dlb::bench_allreduce_command(allreduce);
    }
    if (!sweep.suite.empty()) {
      sweep.launcher = *dlb::parse_launcher(launcher);
      return dlb::sweep_command(sweep);
    }
    fmt::print(stderr, "{}\ndlbench: give a subcommand or --suite=NAME\n", app.help());
    return 2;
  } catch (const dlb::Error& e) {
    fmt::print(stderr, "dlbench: error ({}): {}\n", dlb::error_kind_name(e.kind()), e.what());
    return dlb::exit_code_for(e.kind());
  } catch (const std::exception& e) {
    fmt::print(stderr, "dlbench: internal error: {}\n", e.what());
    return 1;
  }
  return 0;
}
