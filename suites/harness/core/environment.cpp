#include "suites/harness/core/environment.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>

#include "suites/harness/core/source_dir.h"

namespace dlb {
namespace {
std::string run_quietly(const std::string& cmd) {
  std::array<char, 256> buf{};
  std::string out;
  FILE* p = popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!p) return "";
  while (fgets(buf.data(), buf.size(), p)) out += buf.data();
  pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}
}  // namespace

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto pos = line.find(':');
      if (pos != std::string::npos) return line.substr(pos + 2);
    }
  }
  return "unknown";
}

std::string host_name() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

std::string utc_now_iso8601() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::json collect_environment(const DeviceMemory& backend) {
  std::string git =
      run_quietly("git -C '" + source_dir() + "' describe --always --dirty --abbrev=12");
  nlohmann::json env = {
      {"host", host_name()},
      {"backend", std::string(backend.name())},
      {"git_sha", git.empty() ? "unknown" : git},
      {"dlbench_version", DLB_VERSION},
      {"time", utc_now_iso8601()},
      {"cpu", cpu_model()},
      // Libraries this build does not use yet are recorded as "none".
      {"cudnn", "none"},
      {"nccl", "none"},
      {"mpi", "none"},
  };
  for (const auto& [k, v] : accelerator_versions()) env[k] = v;
  for (const auto& [k, v] : backend.environment()) env[k] = v;
  return env;
}

}  // namespace dlb
