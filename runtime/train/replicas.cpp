#include "runtime/train/replicas.h"

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "runtime/core/hash.h"

namespace dlb {

void broadcast_model_state(Graph& graph, Backend& backend, Communicator& comm, Allocator& host,
                           bool buffers_only) {
  StateDict state = graph.state_dict();  // parameters and batch-norm running statistics
  std::set<std::string> params;
  if (buffers_only) {
    for (const auto& np : graph.named_params()) params.insert(np.name);
  }
  Allocator& staging = backend.stream().on_device() ? host : backend.allocator();
  for (auto& [name, t] : state) {
    if (params.count(name)) continue;
    Tensor copy(staging.allocate(t.bytes.size(), MemCategory::kComm, name), t.shape, t.dtype);
    std::memcpy(copy.raw(), t.bytes.data(), t.bytes.size());
    comm.broadcast(copy, 0);
    std::memcpy(t.bytes.data(), copy.raw(), t.bytes.size());
  }
  graph.load_state_dict(state);
}

uint64_t parameters_checksum(const Graph& graph, Backend& backend) {
  uint64_t h = kFnv1aOffset;
  std::vector<unsigned char> bytes;
  for (const auto& np : graph.named_params()) {
    bytes.resize(np.param.value.bytes());
    backend.copy_to_host(np.param.value, bytes.data());
    h = fnv1a(bytes.data(), bytes.size(), h);
  }
  return h;
}

}  // namespace dlb
