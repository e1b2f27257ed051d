// The result record of one run, as JSON. The harness issue versions it with a schema.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/memory/allocator.h"

namespace dlb {

constexpr int kResultSchemaVersion = 1;

nlohmann::json memory_json(const MemoryStats& stats);
// Writes to a temporary file and renames it, so a crash never leaves half a record.
void write_json_atomically(const std::string& path, const nlohmann::json& j);

}  // namespace dlb
