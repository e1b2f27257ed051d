// dlbench: the command line. Strings become typed options here, and only here are errors turned
// into messages and exit codes (2 bad input, 3 out of memory, 4 unsupported, 5 communication,
// 6 device; 7 a run that diverged).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <optional>

#include "runtime/core/error.h"
#include "runtime/core/parse_number.h"
#include "runtime/io/output_file.h"
#include "suites/harness/bench/bench_commands.h"
#include "suites/harness/check_ops/check_ops_command.h"
#include "suites/harness/core/flag_hint.h"
#include "suites/harness/core/option_table.h"
#include "suites/harness/list/list_command.h"
#include "suites/harness/make_dataset/make_dataset_command.h"
#include "suites/harness/run/maxbatch.h"
#include "suites/harness/run/run_command.h"
#include "suites/harness/simulate/simulate_command.h"
#include "suites/harness/sweep/sweep_command.h"
#include "suites/harness/validate_sim/validate_sim.h"

namespace {

// One of the names in `values` (any case), as its enum. Unlike CLI11's Transformer, which passes
// a value it does not know through to the conversion (--backend=2 would become an enum's 2), a
// name not in the table is refused.
template <typename E>
CLI::Validator enum_option(const std::map<std::string, E>& values) {
  std::vector<std::string> names;
  for (const auto& [name, _] : values) names.push_back(name);
  return CLI::Validator(
      [values, names](std::string& text) -> std::string {
        std::string lower = text;
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        const auto it = values.find(lower);
        if (it == values.end()) return fmt::format("expected one of {}", fmt::join(names, ", "));
        text = std::to_string(static_cast<int>(it->second));
        return "";
      },
      fmt::format("{}", fmt::join(names, "|")));
}

// A path the command writes a file (or files, into a folder) at, checked at the parse by
// runtime/io/output_file.h's rules: a device, a FIFO or a folder that cannot be written is
// refused before any work, never found after it or replaced by a regular file.
CLI::Validator output_path(bool folder) {
  return CLI::Validator(
      [folder](std::string& path) -> std::string {
        const std::string problem =
            folder ? dlb::output_dir_problem(path) : dlb::output_file_problem(path);
        return problem.empty() ? "" : fmt::format("'{}': {}", path, problem);
      },
      folder ? "DIR" : "PATH");
}

// A number on the command line, by the one grammar (runtime/core/parse_number.h): decimal, no
// hex, no spaces, no underflow; whole where an integer is asked for, never signed for an unsigned
// one (a seed of -1 is refused, not wrapped to 2^64 - 1). Each element of a list is checked.
enum class NumberText { kReal, kWhole, kUnsigned };
CLI::Validator number_text(NumberText kind) {
  return CLI::Validator(
      [kind](std::string& text) -> std::string {
        switch (kind) {
          case NumberText::kReal:
            return dlb::parse_finite(text)
                       ? ""
                       : "expected a number (decimal, finite), got '" + text + "'";
          case NumberText::kWhole:
            return dlb::parse_whole(text, INT64_MIN, INT64_MAX)
                       ? ""
                       : "expected an integer, got '" + text + "'";
          case NumberText::kUnsigned:
            return dlb::parse_unsigned(text)
                       ? ""
                       : "expected an integer of 0 to 2^64 - 1, got '" + text + "'";
        }
        return "";
      },
      kind == NumberText::kReal ? "NUMBER" : "INT");
}
const CLI::Validator kReal = number_text(NumberText::kReal);
const CLI::Validator kWhole = number_text(NumberText::kWhole);
const CLI::Validator kUnsigned = number_text(NumberText::kUnsigned);

const std::map<std::string, dlb::BackendKind> kBackends{{"cpu", dlb::BackendKind::kCpu},
                                                        {"cuda", dlb::BackendKind::kCuda}};

// `dlbench check-ops`: its flags (check_ops_command.h says what each does).
CLI::App* add_check_ops(CLI::App& app, dlb::CheckOpsOptions& o) {
  auto* c = app.add_subcommand(
      "check-ops",
      "every op instance of the reference models against a float64 reference, with bounds from "
      "the arithmetic (exit 1 when a check fails)");
  c->add_option("--backend", o.backend, "cpu|cuda (default: cuda when a GPU is visible)")
      ->transform(enum_option(kBackends));
  c->add_option("--precisions", o.precisions, "fp32,tf32,fp16,bf16 (default: all it supports)")
      ->delimiter(',');
  c->add_option("--conv-algos", o.conv_algos,
                "cpu: im2col,onednn,winograd; cuda: heuristic,class:tensor_core,class:other,"
                "class:winograd,class:fft (default: every one it names)")
      ->delimiter(',');
  c->add_option("--models", o.models, "default: every reference model")->delimiter(',');
  c->add_option("--sizes", o.sizes, "image sizes (default: 32,64,96,224)")
      ->delimiter(',')
      ->check(kWhole);
  c->add_option("--batches", o.batches, "batches (default: 1,2,4)")->delimiter(',')->check(kWhole);
  c->add_option("--ops", o.ops, "only these ops: conv,linear,batch_norm,relu,...")->delimiter(',');
  c->add_option("--passes", o.passes, "only these passes: forward,backward_data,...")
      ->delimiter(',');
  c->add_option("--instance", o.instances,
                "an op instance as the output prints it, instead of the models' (repeatable)");
  c->add_option("--mode", o.mode, "compare|perf|grad")->capture_default_str();
  c->add_option("--seed", o.seed, "the inputs' seed")->check(kUnsigned)->capture_default_str();
  c->add_option("--repeats", o.repeats, "perf: timed runs per pass")
      ->check(kWhole)
      ->capture_default_str();
  c->add_option("--json", o.json_path, "write the record here");
  c->add_flag("--list", o.list, "print the op instances and stop");
  c->add_flag("--verbose", o.verbose, "a line per check, not only failures");
  c->add_option("--conv-math", o.conv_math,
                "cuda: fp16 and bf16 convolutions may take engines that reduce in 16 bits (fast, "
                "the default, as PyTorch) or not (strict); each is judged by its engine's notes");
  c->add_option("--perturb", o.perturb, "test only: break OP.PASS on purpose")->group("");
  return c;
}

// `dlbench simulate`: its flags (simulate_command.h says what each does). The strategies are
// read as names into `overlaps`, and typed by simulate_options.
CLI::App* add_simulate(CLI::App& app, dlb::SimulateCommandOptions& o,
                       std::vector<std::string>& overlaps, std::string& jitter, std::string& sync) {
  auto* c = app.add_subcommand(
      "simulate",
      "what-if scaling: replay the step on a virtual clock for many ranks on a network preset, "
      "calibrated from measured one-rank points, and append simulated records");
  c->add_option("--from", o.from,
                "a results folder: its measured one-rank points with a profile calibrate");
  c->add_option("--calibration", o.calibration, "a calibration file instead of --from");
  c->add_option("--roofline", o.roofline,
                "instead, the roofline on a device (suites/devices/NAME.json), for --model and "
                "--batch");
  c->add_option("--image-size", o.image_size, "--roofline: the image size (default 224)")
      ->check(kWhole);
  c->add_option("--precision", o.precision, "--roofline: fp32, tf32, fp16 or bf16")
      ->capture_default_str();
  c->add_option("--model", o.model, "only the calibrations of this model");
  c->add_option("--batch", o.batch, "only the calibrations of this batch (per rank)")
      ->check(kWhole);
  c->add_option("--network", o.network, "a preset (suites/networks/NAME.json) or a .json file")
      ->capture_default_str();
  c->add_option("--ranks", o.ranks, "rank counts (default 1,2,4,...,1024)")
      ->delimiter(',')
      ->check(kWhole);
  c->add_option("--overlap", overlaps, "strategies: none,backward,forward (default: all)")
      ->delimiter(',');
  c->add_option("--bucket-mb", o.bucket_mb, "bucket sizes in MB (default 25)")
      ->delimiter(',')
      ->check(kReal);
  c->add_option("--sync", sync,
                "sync, stale:K (bounded staleness: each step applies the gradients of K steps "
                "before), async (a parameter server on rank 0; a CPU calibration) or independent "
                "(each rank its own gradients; the ranks meet after backward); the last three take "
                "the strategy none, which is then the default")
      ->capture_default_str();
  c->add_option("--steps", o.steps, "timed steps simulated")->check(kWhole)->capture_default_str();
  c->add_option("--warmup", o.warmup, "untimed steps simulated first")
      ->check(kWhole)
      ->capture_default_str();
  c->add_option("--jitter", jitter,
                "measured (each rank draws its speed from the calibration's step times), none, or "
                "cv:X (a normal spread with coefficient of variation X, e.g. cv:0.03)")
      ->capture_default_str();
  c->add_option("--straggler", o.straggler, "RANK:FACTOR: that rank computes FACTOR times slower");
  c->add_option("--compute-factor", o.compute_factor,
                "every rank's compute this many times slower (ranks sharing cores)")
      ->check(kReal)
      ->capture_default_str();
  c->add_option("--seed", o.seed, "the jitter's draws")->check(kUnsigned)->capture_default_str();
  c->add_option("--out", o.out, "where results.jsonl and traces/ go (default: --from)")
      ->check(output_path(true));
  c->add_flag("--trace,!--no-trace", o.traces, "write rank 0's simulated trace of each point");
  return c;
}

// `dlbench validate-sim`: its flags (validate_sim.h says what it does).
CLI::App* add_validate_sim(CLI::App& app, dlb::ValidateSimOptions& o,
                           std::vector<std::string>& overlaps) {
  auto* c = app.add_subcommand(
      "validate-sim",
      "the simulator against measured multi-rank runs on this machine: the prediction error per "
      "point, against the bound its run-to-run spread allows (exit 1 when one is outside, 3 when "
      "the host was busy and the errors cannot be judged)");
  c->add_option("--out", o.out, "where the runs and validation.json go")
      ->check(output_path(true))
      ->capture_default_str();
  c->add_option("--model", o.model)->capture_default_str();
  c->add_option("--batch", o.batch, "per rank")->check(kWhole)->capture_default_str();
  c->add_option("--image-size", o.image_size)->check(kWhole)->capture_default_str();
  c->add_option("--ranks", o.ranks, "rank counts to validate (default 2,4)")
      ->delimiter(',')
      ->check(kWhole);
  c->add_option("--overlap", overlaps, "strategies (default: all)")->delimiter(',');
  c->add_option("--steps", o.steps, "timed steps a repetition")
      ->check(kWhole)
      ->capture_default_str();
  c->add_option("--warmup", o.warmup)->check(kWhole)->capture_default_str();
  c->add_option("--repetitions", o.repetitions,
                "timed phases a point: their spread bounds the error")
      ->check(kWhole)
      ->capture_default_str();
  return c;
}

// The strategies named on `dlbench simulate --overlap`.
std::vector<dlb::OverlapStrategy> parse_overlaps(const std::vector<std::string>& names) {
  std::vector<dlb::OverlapStrategy> out;
  for (const std::string& name : names) {
    const auto s = dlb::parse_overlap(name);
    if (!s) {
      throw dlb::InvalidArgument(
          fmt::format("--overlap: unknown strategy '{}' (none, backward or forward)", name));
    }
    out.push_back(*s);
  }
  return out;
}

// An option given an empty value ("--out=", or "--out" followed by ""): refused before the parse,
// which would otherwise take the next argument as the value ("--out= --dry-run" would run the
// suite into a folder named --dry-run). No option of dlbench has an empty value that means
// something. Returns the message, or "" when every argument has a value.
std::string empty_value(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    // "--out=" (the first '=' ends it); "--out=a=" is a value that ends in '='.
    if (arg.size() > 2 && arg.substr(0, 2) == "--" && arg.find('=') == arg.size() - 1) {
      return fmt::format("{}: an empty value (give the option a value, or leave it out)",
                         arg.substr(0, arg.size() - 1));
    }
    if (arg.empty()) {
      return fmt::format("argument {} is empty (give each option a value, or leave it out)", i);
    }
  }
  return "";
}

// A message as one line: a value the user gave may hold a newline or another control character,
// which is shown escaped (\n, \x1b), so that every refusal stays one line.
std::string one_line(std::string_view message) {
  std::string out;
  for (const char c : message) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out;
}

// One flag of an option table (a run's or the sweep's), read as text into `text`: its help with
// its range, its metavar, and its default `d` where `show_default` (a bare boolean is true).
void add_table_flag(CLI::App& app, const dlb::Option& option, std::string& text,
                    const nlohmann::json& d, bool show_default) {
  std::string help = option.help;
  if (const std::string range = option.range_text(); !range.empty()) help += "; " + range;
  auto* flag = app.add_option(option.flag(), text, help)->type_name(option.metavar());
  if (option.type == dlb::OptionType::kBoolean) {
    // A bare flag is true. (CLI11 would give a bare flag its default text: none is set.)
    flag->expected(0, 1);
    flag->description(fmt::format("{} (default {})", help, d.dump()));
  } else if (show_default) {
    flag->default_str(d.is_string() ? d.get<std::string>() : d.dump());
  }
  if (option.hidden) flag->group("");
}

// The run's flags on `cmd`: one per entry of the option table, read as text into `text`.
void add_run_flags(CLI::App& cmd, std::map<std::string, std::string>& text) {
  for (const dlb::Option& option : dlb::run_option_table()) {
    const nlohmann::json d = option.get(dlb::RunOptions{});
    add_table_flag(cmd, option, text[option.key], d,
                   option.scope == dlb::OptionScope::kConfig && !d.is_null());
  }
}

// The run's options given on `cmd`, through the same checks as a suite's config.
dlb::RunOptions run_options(const CLI::App& cmd, const std::map<std::string, std::string>& text) {
  dlb::RunOptions run;
  for (const dlb::Option& option : dlb::run_option_table()) {
    if (cmd.count(option.flag()) == 0) continue;
    dlb::apply_option(run, option, dlb::value_from_text(option, text.at(option.key)),
                      dlb::OptionOrigin::kCommandLine);
  }
  return run;
}

// A subcommand: its flags, parsed into what it holds, and what runs it once they are.
struct Command {
  CLI::App* app;
  std::function<int()> run;
};

// `dlbench run` and `dlbench maxbatch`: one flag per entry of the option table, read as text and
// applied after the parse, through the same checks as a suite's config (maxbatch refuses those
// of the batch and the timed steps).
Command run_command_of(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "train one configuration and write a result record");
  auto text = std::make_shared<std::map<std::string, std::string>>();
  add_run_flags(*cmd, *text);
  return {cmd, [cmd, text] { return dlb::run_command(run_options(*cmd, *text)); }};
}

Command maxbatch_command_of(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "maxbatch",
      "the largest batch whose training step fits --memory-budget (exit 1 when none does)");
  auto text = std::make_shared<std::map<std::string, std::string>>();
  add_run_flags(*cmd, *text);
  return {cmd, [cmd, text] { return dlb::maxbatch_command(run_options(*cmd, *text)); }};
}

Command worker_command_of(CLI::App& app) {
  auto point = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("worker", "run one point of a suite (the harness starts it)");
  cmd->add_option("--point", *point, "point file written by the harness")->required();
  return {cmd, [point] { return dlb::worker_command(*point); }};
}

Command bench_conv_of(CLI::App& bench) {
  auto o = std::make_shared<dlb::BenchConvOptions>();
  auto* cmd = bench.add_subcommand("conv", "conv layers of a model against sgemm");
  cmd->add_option("--model", o->model)->capture_default_str();
  cmd->add_option("--batch", o->batch)->check(kWhole)->capture_default_str();
  cmd->add_option("--image-size", o->image_size)->check(kWhole)->capture_default_str();
  cmd->add_option("--repeat", o->repeat, "timed repetitions (median)")
      ->check(kWhole)
      ->capture_default_str();
  cmd->add_option("--backend", o->backend)->transform(enum_option(kBackends));
  cmd->add_option("--algos", o->algos,
                  "all, or some of cpu: im2col,onednn,winograd; cuda: heuristic,class:tensor_core,"
                  "class:other,class:winograd,class:fft (default: all)")
      ->delimiter(',');
  cmd->add_option("--json", o->json_path, "write the results here")->check(output_path(false));
  return {cmd, [o] { return dlb::bench_conv_command(*o); }};
}

Command bench_allreduce_of(CLI::App& bench) {
  auto o = std::make_shared<dlb::BenchAllreduceOptions>();
  auto comm = std::make_shared<std::string>("auto");
  auto* cmd = bench.add_subcommand("allreduce", "all-reduce size sweep, as nccl-tests");
  cmd->add_option("--ranks", o->ranks, "ranks to launch")->check(kWhole)->capture_default_str();
  cmd->add_option("--min-bytes", o->min_bytes)->capture_default_str();
  cmd->add_option("--max-bytes", o->max_bytes)->capture_default_str();
  cmd->add_option("--iters", o->iterations)->check(kWhole)->capture_default_str();
  cmd->add_option("--warmup", o->warmup)->check(kWhole)->capture_default_str();
  cmd->add_option("--launcher", o->launcher, "auto, mpirun or srun")->capture_default_str();
  cmd->add_option("--json", o->json_path, "write the results here (rank 0)")
      ->check(output_path(false));
  cmd->add_flag("--average", o->average,
                "time averages (sum, then divide by the ranks: a training step's reduction) "
                "instead of sums; the correctness check stays a sum");
  cmd->add_option("--comm", *comm,
                  "auto (nccl on device buffers when a GPU is visible, else mpi), mpi or nccl")
      ->check(CLI::IsMember({"auto", "mpi", "nccl"}))
      ->capture_default_str();
  return {cmd, [o, comm] {
            if (*comm == "mpi") o->comm = dlb::CommKind::kMpi;
            if (*comm == "nccl") o->comm = dlb::CommKind::kNccl;
            return dlb::bench_allreduce_command(*o);
          }};
}

Command bench_input_of(CLI::App& bench) {
  auto o = std::make_shared<dlb::BenchInputOptions>();
  auto* cmd = bench.add_subcommand(
      "input", "the input pipeline alone: JPEGs decoded and augmented into batches, images/s");
  cmd->add_option("--data-path", o->data_path, "the data set's root: DIR/train/<class>/*.JPEG")
      ->required();
  cmd->add_option("--threads", o->threads, "loader threads (and PyTorch's workers) to measure")
      ->delimiter(',')
      ->check(kWhole);
  cmd->add_option("--batch", o->batch)->check(kWhole)->capture_default_str();
  cmd->add_option("--image-size", o->image_size)->check(kWhole)->capture_default_str();
  cmd->add_option("--batches", o->batches, "timed batches a round")
      ->check(kWhole)
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup)->check(kWhole)->capture_default_str();
  cmd->add_option("--rounds", o->rounds, "rounds of every system and thread count in turn")
      ->check(kWhole)
      ->capture_default_str();
  cmd->add_option("--systems", o->systems,
                  "dlbench, dlbench-full-decode (no DCT scaling), dlbench-gpu (nvJPEG and "
                  "dlbench's kernels on the GPU: --decode=gpu), pytorch (its DataLoader), "
                  "dali (DALI's CPU pipeline: scripts/install-deps.sh --dali) and dali-gpu "
                  "(DALI's nvJPEG decoder and GPU pipeline)")
      ->delimiter(',');
  cmd->add_option("--json", o->json_path, "write the results here")->check(output_path(false));
  return {cmd, [o] { return dlb::bench_input_command(*o); }};
}

// `dlbench bench conv|peak|allreduce|input`.
std::vector<Command> bench_commands_of(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "micro-benchmarks");
  bench->require_subcommand(1);
  std::vector<Command> commands{bench_conv_of(*bench)};
  commands.push_back(
      {bench->add_subcommand(
           "peak", "measure this machine's peak FLOP/s and bytes/s, kept for training records"),
       [] { return dlb::bench_peak_command(); }});
  commands.push_back(bench_allreduce_of(*bench));
  commands.push_back(bench_input_of(*bench));
  return commands;
}

Command check_ops_command_of(CLI::App& app) {
  auto o = std::make_shared<dlb::CheckOpsOptions>();
  return {add_check_ops(app, *o), [o] { return dlb::check_ops_command(*o); }};
}

Command simulate_command_of(CLI::App& app) {
  auto o = std::make_shared<dlb::SimulateCommandOptions>();
  auto overlaps = std::make_shared<std::vector<std::string>>();
  auto jitter = std::make_shared<std::string>("measured");
  auto sync = std::make_shared<std::string>("sync");
  return {add_simulate(app, *o, *overlaps, *jitter, *sync), [o, overlaps, jitter, sync] {
            const std::optional<dlb::SyncMode> mode = dlb::parse_sync_mode(*sync);
            if (!mode) {
              throw dlb::InvalidArgument(fmt::format(
                  "--sync: '{}' is not sync, stale:K, async or independent (K a whole number; "
                  "stale:0 is sync)",
                  *sync));
            }
            o->sync = *mode;
            const bool sync = mode->kind == dlb::SyncMode::Kind::kSync;
            if (!overlaps->empty()) {
              o->overlaps = parse_overlaps(*overlaps);
            } else if (!sync) {
              o->overlaps = {dlb::OverlapStrategy::kNone};  // the other modes' only strategy
            }
            const dlb::SimulateCommandOptions defaults;
            if (mode->kind == dlb::SyncMode::Kind::kAsync && o->ranks == defaults.ranks) {
              o->ranks.erase(o->ranks.begin());  // one rank has no server to push to
            }
            o->jitter = *jitter;
            return dlb::simulate_command(*o);
          }};
}

Command validate_sim_command_of(CLI::App& app) {
  auto o = std::make_shared<dlb::ValidateSimOptions>();
  auto overlaps = std::make_shared<std::vector<std::string>>();
  return {add_validate_sim(app, *o, *overlaps), [o, overlaps] {
            if (!overlaps->empty()) o->overlaps = parse_overlaps(*overlaps);
            o->parts = {dlb::sweep_command, dlb::simulate_measured_point};
            return dlb::validate_sim_command(*o);
          }};
}

Command make_dataset_command_of(CLI::App& app) {
  auto o = std::make_shared<dlb::MakeDatasetCommandOptions>();
  auto* c = app.add_subcommand(
      "make-dataset",
      "write a generated data set of real JPEG files: ImageNet's folders (train/, val/) and "
      "WebDataset tar shards (shards/)");
  c->add_option("--out", o->out, "the new folder (it must not exist, or be empty)")
      ->required()
      ->check(output_path(true));
  dlb::MakeDatasetOptions& d = o->data;
  c->add_option("--images", d.images, "training images")->check(kWhole)->capture_default_str();
  c->add_option("--val-images", d.val_images, "validation images")
      ->check(kWhole)
      ->capture_default_str();
  c->add_option("--classes", d.classes)->check(kWhole)->capture_default_str();
  c->add_option("--size", o->size, "the images' mean size, WxH; each side drawn from 0.6 to 1.4x")
      ->capture_default_str();
  c->add_option("--shards", d.shards, "tar shards of the training images (0: none)")
      ->check(kWhole)
      ->capture_default_str();
  c->add_option("--quality", d.quality, "JPEG quality")->capture_default_str();
  c->add_option("--seed", d.seed)->capture_default_str();
  return {c, [o] { return dlb::make_dataset_command(*o); }};
}

// Every subcommand, in the order --help lists them.
std::vector<Command> commands_of(CLI::App& app) {
  std::vector<Command> commands{worker_command_of(app)};
  app.set_version_flag("--version", DLB_VERSION);
  commands.push_back(run_command_of(app));
  commands.push_back(maxbatch_command_of(app));
  commands.push_back({app.add_subcommand("list", "models, suites, backends and devices"),
                      [] { return dlb::list_command(); }});
  for (Command& c : bench_commands_of(app)) commands.push_back(std::move(c));
  commands.push_back(check_ops_command_of(app));
  commands.push_back(simulate_command_of(app));
  commands.push_back(validate_sim_command_of(app));
  commands.push_back(make_dataset_command_of(app));
  return commands;
}

// The sweep's flags: one per entry of its table, read as text into `text` and applied after the
// parse (sweep_options), through the same checks as a run's options.
void add_sweep_flags(CLI::App& app, std::map<std::string, std::string>& text) {
  for (const dlb::SweepFlag& f : dlb::sweep_flag_table()) {
    const nlohmann::json d = f.get(dlb::SweepOptions{});
    add_table_flag(app, f.option, text[f.option.key], d,
                   !(d.is_string() && d.get<std::string>().empty()));
  }
}

dlb::SweepOptions sweep_options(const CLI::App& app,
                                const std::map<std::string, std::string>& text) {
  dlb::SweepOptions sweep;
  for (const dlb::SweepFlag& f : dlb::sweep_flag_table()) {
    if (app.count(f.option.flag()) == 0) continue;
    dlb::apply_sweep_flag(sweep, f, text.at(f.option.key));
  }
  return sweep;
}

// The command a command line names (its words that name subcommands, in turn), and its path.
std::pair<CLI::App*, std::string> named_command(CLI::App& app, int argc, char** argv) {
  CLI::App* cmd = &app;
  std::string path = "dlbench";
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.empty() || word[0] == '-') continue;
    const auto subs = cmd->get_subcommands([&](CLI::App* s) { return s->get_name() == word; });
    if (subs.empty()) continue;
    cmd = subs.front();
    path += " " + word;
  }
  return {cmd, path};
}

// What a refusal adds: the flag meant, where one flag was near a name the command knows, and
// where the command's flags are listed.
std::string refusal_hint(CLI::App& app, int argc, char** argv) {
  const auto [cmd, path] = named_command(app, argc, argv);
  std::vector<std::string> known, commands;
  for (const CLI::Option* o : cmd->get_options()) {
    if (o->get_group().empty()) continue;  // hidden from --help: not offered either
    known.insert(known.end(), o->get_lnames().begin(), o->get_lnames().end());
  }
  for (const CLI::App* sub : cmd->get_subcommands([](CLI::App*) { return true; })) {
    commands.push_back(sub->get_name());
  }
  std::string hint;
  for (int i = 1; i < argc && hint.empty(); ++i) {
    if (const auto near = dlb::nearest_flag(argv[i], known))
      hint = "did you mean --" + *near + "? ";
    // A bare word that names no command of `cmd` (named_command took those that do).
    if (const auto near = dlb::nearest_name(argv[i], commands); near && argv[i][0] != '-') {
      hint = "did you mean " + *near + "? ";
    }
  }
  return fmt::format("({}{} --help lists {} flags)", hint, path, cmd == &app ? "the" : "its");
}

// Parses the command line: nothing when the command is to run, else the exit code (--help,
// --version, or one line refusing a flag).
std::optional<int> parse(CLI::App& app, int argc, char** argv) {
  if (const std::string empty = empty_value(argc, argv); !empty.empty()) {
    fmt::print(stderr, "dlbench: error (invalid argument): {}\n", one_line(empty));
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // One line, as every other refusal: the flag and what it expected.
    fmt::print(stderr, "dlbench: error (invalid argument): {} {}\n", one_line(e.what()),
               refusal_hint(app, argc, argv));
    return 2;
  }
  return std::nullopt;
}

// `command`'s exit code, or one line naming the error it threw and that error's exit code.
int guarded(const std::function<int()>& command) {
  try {
    return command();
  } catch (const dlb::Error& e) {
    fmt::print(stderr, "dlbench: error ({}): {}\n", dlb::error_kind_name(e.kind()),
               one_line(e.what()));
    return dlb::exit_code_for(e.kind());
  } catch (const std::filesystem::filesystem_error& e) {
    // A path that cannot be made or read (under a regular file, in /proc, without permission).
    fmt::print(stderr, "dlbench: error ({}): {}\n", dlb::error_kind_name(dlb::ErrorKind::kIo),
               e.what());
    return dlb::exit_code_for(dlb::ErrorKind::kIo);
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "dlbench: error (out of memory): the host could not allocate memory\n");
    return dlb::exit_code_for(dlb::ErrorKind::kOutOfMemory);
  } catch (const std::exception& e) {
    fmt::print(stderr, "dlbench: internal error: {}\n", one_line(e.what()));
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dlbench: deep-learning training benchmarks on GPUs and CPUs"};
  app.require_subcommand(0, 1);
  app.footer(
      "Reports, in Python, through scripts/dlbench (which builds this binary and runs it for the "
      "rest): scripts/dlbench report DIR, compare DIR..., micro DIR, check-mllog FILE "
      "(docs/reports.md)");
  std::map<std::string, std::string> sweep_text;
  add_sweep_flags(app, sweep_text);
  const std::vector<Command> commands = commands_of(app);
  if (const std::optional<int> exit = parse(app, argc, argv)) return *exit;
  return guarded([&] {
    // The sweep's flags are checked whatever the command, as a parse would.
    dlb::SweepOptions sweep = sweep_options(app, sweep_text);
    sweep.simulation = {dlb::check_simulate_block, dlb::simulate_suite_block};
    for (const Command& c : commands) {
      if (*c.app) return c.run();
    }
    if (!sweep.suite.empty()) {
      return sweep.suite == "micro" ? dlb::micro_command(sweep) : dlb::sweep_command(sweep);
    }
    fmt::print(stderr, "{}\ndlbench: give a subcommand or --suite=NAME\n", app.help());
    return 2;
  });
}
