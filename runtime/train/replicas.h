// What keeps data-parallel replicas of one model the same: rank 0's state broadcast to every
// rank, and a checksum of the parameters that ranks compare.
#pragma once
#include <cstdint>

#include "runtime/backend/backend.h"
#include "runtime/comm/communicator.h"
#include "runtime/memory/allocator.h"
#include "runtime/nn/graph.h"

namespace dlb {

// Makes `graph`'s parameters and buffers (batch-norm running statistics) rank 0's; only the
// buffers where `buffers_only`. The communicators broadcast host buffers (nccl's through its MPI
// bootstrap): a backend on a device stages them in `host`, the CPU in its own memory.
void broadcast_model_state(Graph& graph, Backend& backend, Communicator& comm, Allocator& host,
                           bool buffers_only);

// FNV-1a over the bytes of every parameter, in layer order: equal across ranks iff the weights
// are.
uint64_t parameters_checksum(const Graph& graph, Backend& backend);

}  // namespace dlb
