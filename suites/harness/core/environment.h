// The environment block every result record carries: host, CPU, device and library versions,
// git revision, dlbench version and time.
#pragma once
#include <nlohmann/json.hpp>

#include "runtime/backend/backend.h"

namespace dlb {

nlohmann::json collect_environment(const DeviceMemory& backend);
std::string utc_now_iso8601();
// This host's name, and its CPU's model name from /proc/cpuinfo ("unknown" without one).
std::string host_name();
std::string cpu_model();

}  // namespace dlb
