#include "suites/harness/core/peers.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/error.h"
#include "suites/harness/core/source_dir.h"

namespace dlb {
namespace {

struct PeerProgram {
  std::string script;   // under reports/peers/
  std::string imports;  // what its Python must import
  std::string install;  // how a user gets that
  // Pythons to try after DLBENCH_PEER_PYTHON, python3 on PATH and /usr/bin/python3.
  std::vector<std::string> also = {};
};

PeerProgram program(System system) {
  switch (system) {
    case System::kPytorch:
      // jsonschema: the peer checks its point against suites/schema/suite.schema.json.
      return {source_dir() + "/reports/peers/pytorch_train.py", "torch, torchvision, jsonschema",
              "Debian: apt install python3-torch python3-torchvision python3-jsonschema "
              "(scripts/install-deps.sh); elsewhere: pip install torch torchvision jsonschema"};
    case System::kDlbench:
      break;
  }
  throw InvalidArgument(fmt::format("{} is not a peer", system_name(system)));
}

// The Python that runs a peer: DLBENCH_PEER_PYTHON when set, else the first of python3 on PATH,
// /usr/bin/python3 and the peer's own that imports the peer's framework. Probed once per process
// and framework.
std::string peer_python(std::string_view name, const PeerProgram& peer) {
  static std::map<std::string, std::string> found;  // by what it must import
  if (auto it = found.find(peer.imports); it != found.end()) return it->second;
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("DLBENCH_PEER_PYTHON"); env && *env) {
    candidates = {env};
  } else {
    candidates = {"python3", "/usr/bin/python3"};
    for (const std::string& p : peer.also) {
      if (std::filesystem::exists(p)) candidates.push_back(p);
    }
  }
  for (const std::string& python : candidates) {
    const ProcessResult r = run_process({{python, "-c", "import " + peer.imports}, {}}, 300,
                                        "/dev/null", [](double) {});
    if (r.exit_code == 0 && !r.timed_out && r.signal == 0) return found[peer.imports] = python;
  }
  throw Unsupported(fmt::format(
      "the {} peer needs a Python that imports {}; tried {} ({}; or set DLBENCH_PEER_PYTHON)", name,
      peer.imports, fmt::join(candidates, " and "), peer.install));
}

// A TCP port that was free a moment ago (the kernel's choice for port 0).
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw IoError("socket() failed while choosing a rendezvous port");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  close(fd);
  if (!ok) throw IoError("could not find a free TCP port for the peer's rendezvous");
  return ntohs(addr.sin_port);
}

}  // namespace

std::vector<std::string> peer_argv(System system, const std::string& point_file) {
  const PeerProgram peer = program(system);
  if (!std::filesystem::exists(peer.script)) {
    throw Unsupported(
        fmt::format("the {} peer's program {} is missing", system_name(system), peer.script));
  }
  return {peer_python(system_name(system), peer), peer.script, "--point=" + point_file};
}

std::vector<std::string> input_peer_argv(const std::string& system) {
  PeerProgram peer;
  if (system == "pytorch") {
    peer = {source_dir() + "/reports/peers/torch_input.py", "torch, torchvision",
            "Debian: apt install python3-torch python3-torchvision (scripts/install-deps.sh); "
            "elsewhere: pip install torch torchvision"};
  } else if (system == "dali" || system == "dali-gpu") {
    peer = {source_dir() + "/reports/peers/dali_input.py",
            "nvidia.dali",
            "scripts/install-deps.sh --dali installs DALI into .venv-dali; elsewhere: pip install "
            "nvidia-dali-cuda130",
            {source_dir() + "/.venv-dali/bin/python"}};
  } else {
    throw InvalidArgument(fmt::format("{} is not an input peer (pytorch, dali, dali-gpu)", system));
  }
  if (!std::filesystem::exists(peer.script)) {
    throw Unsupported(
        fmt::format("the {} input peer's program {} is missing", system, peer.script));
  }
  std::vector<std::string> argv{peer_python(system, peer), peer.script};
  if (system == "dali-gpu") argv.push_back("--device=gpu");  // DALI's mixed decoder, GPU 0
  return argv;
}

void add_peer_rendezvous(LaunchCommand& cmd, const LaunchHost& host) {
  const bool one_host = !host.in_slurm && !host.mpi_hostfile;
  if (!std::getenv("MASTER_PORT")) cmd.env["MASTER_PORT"] = std::to_string(free_port());
  if (!std::getenv("MASTER_ADDR") && one_host) cmd.env["MASTER_ADDR"] = "127.0.0.1";
  if (cmd.argv.empty() || cmd.argv[0] != "mpirun") return;
  // After "mpirun -np N", before the program: Open MPI passes these to every rank.
  std::vector<std::string> pass;
  for (const char* name : {"MASTER_ADDR", "MASTER_PORT"}) {
    if (cmd.env.count(name) || std::getenv(name)) pass.insert(pass.end(), {"-x", name});
  }
  auto at = std::find(cmd.argv.begin(), cmd.argv.end(), "-np");
  if (at != cmd.argv.end() && cmd.argv.end() - at >= 2)
    cmd.argv.insert(at + 2, pass.begin(), pass.end());
}

}  // namespace dlb
