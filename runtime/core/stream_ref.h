// The queue a backend's work runs in, so a communicator can order its work against the backend's
// without a host synchronisation. The CPU backend has none: an op has finished when it returns,
// and the host itself is the queue. The CUDA backend's is its compute stream, a cudaStream_t
// carried untyped so that core, comm and overlap compile without CUDA headers.
#pragma once

namespace dlb {

struct StreamRef {
  void* native = nullptr;  // cudaStream_t when on a device; null for the host
  bool on_device() const { return native != nullptr; }
};

}  // namespace dlb
