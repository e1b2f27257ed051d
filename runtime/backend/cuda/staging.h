// Copies between the host and the device, for the CUDA backend. A copy from pageable host memory
// cannot be asynchronous, so every host-to-device copy of a caller's memory first lands in a
// pinned buffer that this file owns, and the transfer is queued from there; a swap's copies are
// between device memory and pinned host memory the allocator owns, and need no staging.
//   - PinnedStaging: copies on the compute stream (weights, one-off tensors), through two pinned
//     slots used in turn, so the host fills one while the device still reads the other.
//   - InputCopies: the trainer's input batches, on a copy stream of their own, so the next
//     batch's transfer runs while the current step computes (Backend::copy_in).
//   - SwapCopies: swapped activations (Backend::swap_copy), between device memory and pinned
//     host-swap memory, which needs no staging, on a stream of their own.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstring>
#include <list>
#include <memory>
#include <utility>

#include "runtime/backend/cuda/device.h"

namespace dlb::cuda {

// A timing event recorded on `stream` now, destroyed with the last copy of the pointer (a Mark's
// device event).
std::shared_ptr<void> record_event(cudaStream_t stream);

// One pinned buffer and the event that marks the end of the last transfer out of it.
class PinnedSlot {
 public:
  PinnedSlot() = default;
  PinnedSlot(const PinnedSlot&) = delete;
  PinnedSlot& operator=(const PinnedSlot&) = delete;
  ~PinnedSlot();
  // Waits for the slot's previous transfer (a host wait, for this slot only), grows it to
  // `bytes` and copies `src` in. Returns the pinned pointer.
  void* fill(const void* src, size_t bytes) { return std::memcpy(reserve(bytes), src, bytes); }
  // The same without the copy: the slot, at least `bytes`, for the caller to write.
  void* reserve(size_t bytes);
  // Queues the transfer of the slot's first `bytes` into `dst` on `stream`, and marks its end.
  void transfer(void* dst, size_t bytes, cudaStream_t stream);
  // Marks the end of the work queued on `stream` so far as the slot's last use: a device reads
  // it there (nvJPEG reads its files from it), and the next reserve waits for that.
  void mark_used(cudaStream_t stream);

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  cudaEvent_t done_ = nullptr;  // recorded after the last transfer out of ptr_
};

class PinnedStaging {
 public:
  void copy(const void* src, void* dst, size_t bytes, cudaStream_t stream);

 private:
  PinnedSlot slots_[2];
  int next_ = 0;
};

class InputCopies {
 public:
  explicit InputCopies(cudaStream_t compute) : compute_(compute) {}
  // Copies `src` into device memory `dst` on the copy stream, once the compute stream has
  // reached `free` (an event; null: at once). Returns timing events recorded on the copy stream
  // just before and just after the transfer, each owned by its pointer. The host waits only if
  // `dst`'s own pinned buffer is still in flight from its previous copy.
  std::pair<std::shared_ptr<void>, std::shared_ptr<void>> copy(const void* src, void* dst,
                                                               size_t bytes, cudaEvent_t free);
  // The compute stream waits for `copied` (from copy()), without a host wait.
  void wait(cudaEvent_t copied) const;
  // The host waits for every copy queued.
  void synchronize() const { copy_stream_.synchronize(); }

 private:
  cudaStream_t compute_;
  Stream copy_stream_;
  // One pinned buffer per destination (double-buffered inputs never share one), the most
  // recently used first; at most kSlots (a trainer's two image and two label buffers), so a
  // later trainer on the same backend does not keep its predecessors' pinned memory alive.
  static constexpr size_t kSlots = 4;
  std::list<std::pair<void*, std::unique_ptr<PinnedSlot>>> slots_;
  PinnedSlot& slot_for(void* dst);
};

// Activation swapping's copies (--swap): each queued on the swap stream after the compute work
// queued so far, timed by events on the swap stream; the compute stream waits for a copy only
// where wait() says so.
class SwapCopies {
 public:
  explicit SwapCopies(cudaStream_t compute);
  ~SwapCopies();
  SwapCopies(const SwapCopies&) = delete;
  SwapCopies& operator=(const SwapCopies&) = delete;
  // Copies `bytes` from `src` to `dst` (device and pinned host memory, either way) once the
  // compute stream has run what is queued on it now. Returns timing events recorded on the swap
  // stream just before and just after the copy, each owned by its pointer.
  std::pair<std::shared_ptr<void>, std::shared_ptr<void>> copy(const void* src, void* dst,
                                                               size_t bytes);
  // The compute stream waits for `copied` (from copy()), without a host wait.
  void wait(cudaEvent_t copied) const;
  // The host waits for every copy queued.
  void synchronize() const { stream_.synchronize(); }

 private:
  cudaStream_t compute_;
  Stream stream_;
  cudaEvent_t queued_ = nullptr;  // the compute stream's position at a copy's start
};

}  // namespace dlb::cuda
