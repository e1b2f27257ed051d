#include "suites/harness/core/launcher.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "runtime/core/error.h"
#include "runtime/core/host_cpus.h"
#include "suites/harness/core/option_table.h"

namespace dlb {

std::optional<LauncherKind> parse_launcher(std::string_view s) {
  if (s == "auto") return LauncherKind::kAuto;
  if (s == "local") return LauncherKind::kLocal;
  if (s == "mpirun") return LauncherKind::kMpirun;
  if (s == "srun") return LauncherKind::kSrun;
  return std::nullopt;
}

int64_t outer_threads(const char* omp_num_threads) {
  // OpenMP's grammar: a list of positive integers, one per nesting level, spaces around each.
  const char* p = omp_num_threads;
  while (*p == ' ' || *p == '\t') ++p;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(p, &end, 10);
  if (end == p || errno == ERANGE || n < 1) return 0;
  while (*end == ' ' || *end == '\t') ++end;
  return *end == '\0' || *end == ',' ? n : 0;
}

LaunchHost this_host() {
  LaunchHost h;
  h.cores = usable_cpus();
  h.as_root = geteuid() == 0;
  h.in_slurm = std::getenv("SLURM_JOB_ID") != nullptr;
  if (const char* n = std::getenv("SLURM_NTASKS")) h.slurm_tasks = std::atoll(n);
  h.mpi_hostfile = std::getenv("OMPI_MCA_orte_default_hostfile") ||
                   std::getenv("OMPI_MCA_rmaps_base_hostfile") || std::getenv("PBS_NODEFILE");
  h.online_cpus = std::max<int64_t>(sysconf(_SC_NPROCESSORS_ONLN), h.cores);
  if (const char* t = std::getenv("OMP_NUM_THREADS")) {
    h.omp_threads_set = true;
    h.user_threads = outer_threads(t);
  }
  return h;
}

namespace {

// The CPUs each of `ranks` ranks of `threads` threads (0: not known) runs on. Open MPI binds each
// of up to 2 ranks to one core by default (more to a socket), which would put a rank's every
// thread on that core, and it binds to the machine's cores whatever mask mpirun started under.
// Ranks that fit get `threads` hardware threads of their own, counted as usable_cpus counts them;
// others are left unbound, in the mask they inherit.
void place_ranks(LaunchCommand& c, int64_t ranks, int64_t threads, const LaunchHost& host) {
  if (threads < 1 || host.cores < host.online_cpus || threads > host.cores / ranks) {
    c.argv.insert(c.argv.end(), {"--bind-to", "none"});
  } else {
    c.argv.insert(c.argv.end(),
                  {"--map-by", fmt::format("slot:PE={}", threads), "--use-hwthread-cpus"});
  }
}

// mpirun's part of the command (launch_command).
LaunchCommand mpirun_command(int64_t ranks, const LaunchHost& host) {
  LaunchCommand c;
  c.argv = {"mpirun", "-np", std::to_string(ranks)};
  if (!host.mpi_hostfile && ranks > host.cores * kMaxRanksPerCore) {
    throw InvalidArgument(fmt::format(
        "ranks={} is more than mpirun starts on this host: {} cores, at most {} ranks per "
        "core ({}); run across nodes (srun inside a Slurm allocation, or mpirun with a "
        "hostfile in OMPI_MCA_orte_default_hostfile)",
        ranks, host.cores, kMaxRanksPerCore, host.cores * kMaxRanksPerCore));
  }
  if (!host.mpi_hostfile && ranks > host.cores) c.argv.push_back("--oversubscribe");
  if (host.as_root) {
    c.argv.push_back("--allow-run-as-root");
    c.env = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};
  }
  if (host.mpi_hostfile) return c;
  // Ranks on this host share its cores: each rank's OpenMP pool (the CPU backend's threads)
  // gets its share, unless the user chose. Otherwise every rank would start a thread per
  // core, and on an oversubscribed host they spin against each other.
  int64_t threads = host.user_threads;
  if (!host.omp_threads_set) {
    threads = std::max<int64_t>(host.cores / ranks, 1);
    c.env["OMP_NUM_THREADS"] = std::to_string(threads);
    c.argv.insert(c.argv.end(), {"-x", "OMP_NUM_THREADS"});
  }
  place_ranks(c, ranks, threads, host);
  return c;
}

}  // namespace

LaunchCommand launch_command(LauncherKind kind, int64_t ranks,
                             const std::vector<std::string>& worker_argv, const LaunchHost& host) {
  if (ranks < 1) throw InvalidArgument(fmt::format("ranks must be >= 1 (got {})", ranks));
  if (kind == LauncherKind::kAuto) {
    kind = ranks == 1      ? LauncherKind::kLocal
           : host.in_slurm ? LauncherKind::kSrun
                           : LauncherKind::kMpirun;
  }
  LaunchCommand c;
  switch (kind) {
    case LauncherKind::kLocal:
      if (ranks != 1) {
        throw InvalidArgument("--launcher=local starts one rank; use mpirun or srun for ranks > 1");
      }
      break;
    case LauncherKind::kMpirun:
      c = mpirun_command(ranks, host);
      break;
    case LauncherKind::kSrun:
      if (host.slurm_tasks && ranks > *host.slurm_tasks) {
        throw InvalidArgument(fmt::format(
            "ranks={} is more than this Slurm allocation's {} tasks (SLURM_NTASKS); allocate "
            "more (sbatch/salloc -n) or lower ranks",
            ranks, *host.slurm_tasks));
      }
      c.argv = {"srun", "-n", std::to_string(ranks)};
      break;
    case LauncherKind::kAuto:
      break;
  }
  c.argv.insert(c.argv.end(), worker_argv.begin(), worker_argv.end());
  return c;
}

std::string as_launched(const std::string& run_command, const LaunchCommand& launch,
                        size_t worker_words) {
  const size_t run = run_command.find("dlbench run");
  if (run == std::string::npos || launch.argv.size() < worker_words) return run_command;
  std::string out;
  for (const auto& [name, value] : launch.env) out += shell_word(name + "=" + value) + " ";
  for (size_t i = 0; i + worker_words < launch.argv.size(); ++i) {
    out += shell_word(launch.argv[i]) + " ";
  }
  return out + run_command.substr(run);
}

LaunchCommand launch_command_here(LauncherKind kind, int64_t ranks,
                                  const std::vector<std::string>& worker_argv) {
  return launch_command(kind, ranks, worker_argv, this_host());
}

std::string self_executable() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

ProcessResult run_process(const LaunchCommand& cmd, double timeout_s, const std::string& log_path,
                          const std::function<void(double)>& on_tick) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) throw IoError("cannot open " + log_path);
  const pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    throw IoError("fork failed");
  }
  if (pid == 0) {
    setpgid(0, 0);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    for (const auto& [k, v] : cmd.env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> argv;
    for (const auto& a : cmd.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    dprintf(STDERR_FILENO, "cannot start %s\n", argv[0]);
    _exit(127);
  }
  setpgid(pid, pid);  // also from the parent, so the group exists before any kill
  close(log_fd);
  ProcessResult r;
  auto last_tick = t0;
  for (;;) {
    int status = 0;
    const pid_t w = waitpid(pid, &status, WNOHANG);
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    if (w == pid) {
      if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
      r.seconds = elapsed;
      kill(-pid, SIGKILL);  // anything the worker left behind in its group
      return r;
    }
    if (elapsed > timeout_s) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      r.timed_out = true;
      r.signal = SIGKILL;
      r.seconds = elapsed;
      return r;
    }
    if (on_tick && Clock::now() - last_tick > std::chrono::milliseconds(500)) {
      on_tick(elapsed);
      last_tick = Clock::now();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void exec_command(const LaunchCommand& cmd) {
  for (const auto& [k, v] : cmd.env) setenv(k.c_str(), v.c_str(), 1);
  std::vector<char*> argv;
  for (const auto& a : cmd.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  throw IoError("cannot start " + cmd.argv[0] + " (is it installed? scripts/install-deps.sh)");
}

std::string tail_of_file(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const auto size = static_cast<size_t>(in.tellg());
  const size_t start = size > max_bytes ? size - max_bytes : 0;
  in.seekg(static_cast<std::streamoff>(start));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int64_t most_local_ranks() { return usable_cpus() * kMaxRanksPerCore; }

}  // namespace dlb
