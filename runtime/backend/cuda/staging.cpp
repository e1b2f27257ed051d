#include "runtime/backend/cuda/staging.h"

#include <algorithm>
#include <cstring>

#include "runtime/backend/cuda/cuda_check.h"

namespace dlb::cuda {

PinnedSlot::~PinnedSlot() {
  if (done_) {
    cudaEventSynchronize(done_);  // no throwing in a destructor
    cudaEventDestroy(done_);
  }
  if (ptr_) cudaFreeHost(ptr_);
}

void* PinnedSlot::reserve(size_t bytes) {
  if (done_) {
    DLB_CUDA_CHECK(cudaEventSynchronize(done_));
  } else {
    DLB_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  }
  if (bytes_ < bytes) {  // by half again at least, so that varying sizes settle
    const size_t grown = std::max(bytes, bytes_ + bytes_ / 2);
    if (ptr_) DLB_CUDA_CHECK(cudaFreeHost(ptr_));
    ptr_ = nullptr;
    bytes_ = 0;
    DLB_CUDA_CHECK(cudaMallocHost(&ptr_, grown));  // failure: OutOfMemory
    bytes_ = grown;
  }
  return ptr_;
}

void PinnedSlot::transfer(void* dst, size_t bytes, cudaStream_t stream) {
  DLB_CUDA_CHECK(cudaMemcpyAsync(dst, ptr_, bytes, cudaMemcpyHostToDevice, stream));
  mark_used(stream);
}

void PinnedSlot::mark_used(cudaStream_t stream) { DLB_CUDA_CHECK(cudaEventRecord(done_, stream)); }

void PinnedStaging::copy(const void* src, void* dst, size_t bytes, cudaStream_t stream) {
  PinnedSlot& s = slots_[next_];
  next_ ^= 1;
  s.fill(src, bytes);
  s.transfer(dst, bytes, stream);
}

std::shared_ptr<void> record_event(cudaStream_t stream) {
  cudaEvent_t e = nullptr;
  DLB_CUDA_CHECK(cudaEventCreate(&e));
  std::shared_ptr<void> owned(e, [](void* p) { cudaEventDestroy(static_cast<cudaEvent_t>(p)); });
  DLB_CUDA_CHECK(cudaEventRecord(e, stream));
  return owned;
}

std::pair<std::shared_ptr<void>, std::shared_ptr<void>> InputCopies::copy(const void* src,
                                                                          void* dst, size_t bytes,
                                                                          cudaEvent_t free) {
  PinnedSlot& s = slot_for(dst);
  s.fill(src, bytes);
  // The copy stream waits for the compute that last read `dst`; the compute stream does not
  // wait for the copy until wait() says so.
  if (free) DLB_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_.get(), free, 0));
  std::shared_ptr<void> start = record_event(copy_stream_.get());
  s.transfer(dst, bytes, copy_stream_.get());
  return {std::move(start), record_event(copy_stream_.get())};
}

PinnedSlot& InputCopies::slot_for(void* dst) {
  auto it = slots_.begin();
  while (it != slots_.end() && it->first != dst) ++it;
  if (it != slots_.end()) {
    slots_.splice(slots_.begin(), slots_, it);  // most recently used first
  } else {
    if (slots_.size() == kSlots) slots_.pop_back();  // its destructor waits for its transfer
    slots_.emplace_front(dst, std::make_unique<PinnedSlot>());
  }
  return *slots_.front().second;
}

void InputCopies::wait(cudaEvent_t copied) const {
  DLB_CUDA_CHECK(cudaStreamWaitEvent(compute_, copied, 0));
}

SwapCopies::SwapCopies(cudaStream_t compute) : compute_(compute) {
  DLB_CUDA_CHECK(cudaEventCreateWithFlags(&queued_, cudaEventDisableTiming));
}

SwapCopies::~SwapCopies() {
  cudaStreamSynchronize(stream_.get());  // no throwing in a destructor
  cudaEventDestroy(queued_);
}

std::pair<std::shared_ptr<void>, std::shared_ptr<void>> SwapCopies::copy(const void* src, void* dst,
                                                                         size_t bytes) {
  // The wait takes the event's state now: recording it again for the next copy is safe.
  DLB_CUDA_CHECK(cudaEventRecord(queued_, compute_));
  DLB_CUDA_CHECK(cudaStreamWaitEvent(stream_.get(), queued_, 0));
  std::shared_ptr<void> start = record_event(stream_.get());
  DLB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_.get()));
  return {std::move(start), record_event(stream_.get())};
}

void SwapCopies::wait(cudaEvent_t copied) const {
  DLB_CUDA_CHECK(cudaStreamWaitEvent(compute_, copied, 0));
}

}  // namespace dlb::cuda
