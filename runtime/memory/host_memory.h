// How much memory this machine gives a process here, and the refusal of work whose estimated
// bytes exceed it: what a command checks before it allocates from sizes a user gave (a batch, a
// check-ops instance, stale gradient slots), so that too large a request ends in one line instead
// of swapping or the kernel's OOM killer.
#pragma once
#include <cstddef>
#include <string_view>

namespace dlb {

// The physical memory, or less where a control group limits this process (cgroup v2
// memory.max, v1 memory.limit_in_bytes). The environment variable DLBENCH_HOST_MEMORY (a size:
// "8GiB") replaces it, for a host shared with other work and for tests; an unreadable one is
// InvalidArgument. 0 where nothing can be read.
size_t host_memory_bytes();

// Throws OutOfMemory "{what} would take about {estimate}, more than {where} ({limit})" when the
// estimate exceeds `limit`; nothing when limit is 0 (unknown).
void require_memory(double estimate_bytes, size_t limit, std::string_view what,
                    std::string_view where);

}  // namespace dlb
