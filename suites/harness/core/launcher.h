// Starting a point's worker: a plain child process for one rank, mpirun -np N or srun -n N for
// several. Each child runs in its own process group, so a timeout kills the whole group.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlb {

enum class LauncherKind { kAuto, kLocal, kMpirun, kSrun };
std::optional<LauncherKind> parse_launcher(std::string_view s);

struct LaunchCommand {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // added to the child's environment
};

// What decides how ranks are started, and how many can be.
struct LaunchHost {
  int64_t cores = 1;  // the CPUs this process may use (usable_cpus: a cpuset counts, as mpirun's)
  int64_t online_cpus = 1;  // the machine's: more than `cores` under taskset, a cpuset, isolcpus
  bool as_root = false;
  bool in_slurm = false;               // SLURM_JOB_ID set
  std::optional<int64_t> slurm_tasks;  // SLURM_NTASKS: the allocation's task count, when given
  bool mpi_hostfile = false;           // mpirun has hosts beyond this one (a hostfile, PBS)
  bool omp_threads_set = false;        // OMP_NUM_THREADS is the user's
  int64_t user_threads = 0;            // its outer level's threads (outer_threads), 0 if none
};
LaunchHost this_host();

// The threads of OpenMP's outer level that an OMP_NUM_THREADS value asks for: its first
// positive integer, spaces around it allowed ("4", " 4 ", "4,2"); 0 where it names none.
int64_t outer_threads(const char* omp_num_threads);

// More ranks than this per core are not started on one host: past it, an oversubscribed run
// measures the scheduler, and each rank's model and buffers still take their memory.
constexpr int64_t kMaxRanksPerCore = 4;
// The most ranks this host's launcher starts without a host file.
int64_t most_local_ranks();

// The command that runs `worker_argv` on `ranks` ranks. kAuto: local for one rank, srun inside a
// Slurm allocation, mpirun otherwise. mpirun on this host alone gets --oversubscribe when ranks
// exceed the cores (up to kMaxRanksPerCore per core), each rank OMP_NUM_THREADS = cores / ranks
// unless the user set OMP_NUM_THREADS, and --allow-run-as-root with Open MPI's root variables
// when run as root. Its ranks are placed by their threads (the user's outer level, or those):
// where ranks x threads fit the cores, each rank gets that many hardware threads of its own
// (--map-by slot:PE=N --use-hwthread-cpus); where they do not, where the user's value names no
// count, or where the process may use fewer CPUs than the machine has online (taskset, a cpuset,
// isolcpus), none is bound (--bind-to none), so each keeps the mask it inherits. With a hostfile
// mpirun places the ranks as it is told. Throws InvalidArgument for ranks the launcher cannot
// start: beyond that bound on one host, or beyond the Slurm allocation's tasks.
LaunchCommand launch_command(LauncherKind kind, int64_t ranks,
                             const std::vector<std::string>& worker_argv, const LaunchHost& host);

// `run_command`, a record's "dlbench run ..." line (after any launcher words it names), as
// `launch` started its ranks: the launcher's environment and words, the last `worker_words` of
// which (the worker's) the run's own words replace. Unchanged where it has no "dlbench run".
std::string as_launched(const std::string& run_command, const LaunchCommand& launch,
                        size_t worker_words);

// launch_command on this_host().
LaunchCommand launch_command_here(LauncherKind kind, int64_t ranks,
                                  const std::vector<std::string>& worker_argv);
// The path of the running dlbench binary, for relaunching it as a worker.
std::string self_executable();

struct ProcessResult {
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal ended it
  bool timed_out = false;
  double seconds = 0;
};

// Runs the command with stdout and stderr appended to `log_path`, in a new process group.
// `on_tick(elapsed)` is called about twice a second while it runs.
ProcessResult run_process(const LaunchCommand& cmd, double timeout_s, const std::string& log_path,
                          const std::function<void(double)>& on_tick);

// Replaces this process with the command (for commands that relaunch themselves under mpirun).
[[noreturn]] void exec_command(const LaunchCommand& cmd);

// The last `max_bytes` of a file.
std::string tail_of_file(const std::string& path, size_t max_bytes);

}  // namespace dlb
