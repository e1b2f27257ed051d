// The one owner of an ncclComm_t (nccl_communicator.cpp's only helper). Every NCCL call on it
// goes through one lock, so an abort cannot free it under a running call; it is aborted at most
// once, and afterwards every use raises CommError with the reason. A watchdog thread watches the
// all-reduces in flight, as PyTorch's NCCL watchdog does: with no host wait inside a step, a
// stream can wait on a reduction that a dead peer never completes, and the host then blocks in a
// stream synchronisation that no timeout of ours covers. Aborting the communicator ends the
// stuck kernels, the streams move on, and the next test or wait raises CommError.
#pragma once
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/backend/device_queue.h"

namespace dlb::nccl {

using Clock = std::chrono::steady_clock;

[[noreturn]] void throw_nccl_error(ncclResult_t r, const char* stmt, const char* func,
                                   const char* file, int line);

// ncclInProgress is the normal answer of a non-blocking communicator.
#define DLB_NCCL_CHECK(stmt)                                                           \
  do {                                                                                 \
    const ncclResult_t dlb_nccl_r_ = (stmt);                                           \
    if (dlb_nccl_r_ != ncclSuccess && dlb_nccl_r_ != ncclInProgress)                   \
      ::dlb::nccl::throw_nccl_error(dlb_nccl_r_, #stmt, __func__, __FILE__, __LINE__); \
  } while (0)

// An operation's completion event, recorded on its queue at construction, and when it began:
// shared by its handle and the watchdog.
struct InFlight {
  explicit InFlight(DeviceQueue& queue) : event(queue.record()), launched(Clock::now()) {}
  std::shared_ptr<DeviceEvent> event;
  Clock::time_point launched;
};

class GuardedComm {
 public:
  // ncclCommInitRankConfig, non-blocking, polled to completion against `timeout`; then the
  // watchdog starts.
  // `queue`: the device's, which the watchdog thread makes current.
  GuardedComm(std::shared_ptr<const DeviceQueue> queue, int nranks, const ncclUniqueId& id,
              int rank, std::chrono::duration<double> timeout);
  // Stops the watchdog; finalises and destroys the communicator unless it was aborted.
  ~GuardedComm();
  GuardedComm(const GuardedComm&) = delete;
  GuardedComm& operator=(const GuardedComm&) = delete;

  // Runs `f(comm)` under the lock; CommError if the communicator was aborted.
  void call(const std::function<void(ncclComm_t)>& f);
  // ncclSuccess or ncclInProgress; CommError if aborted, or (aborting it) if NCCL reports an
  // asynchronous error.
  ncclResult_t check(const std::string& what);
  // Until done() with the communicator idle; aborts and raises CommError past the timeout.
  void poll(const std::function<bool()>& done, const std::string& what);
  // Aborts once and remembers why; later calls do nothing.
  void abort(const std::string& reason);
  bool aborted() const { return aborted_.load(); }
  [[noreturn]] void throw_aborted() const;
  // The watchdog aborts the communicator if `op` is not complete within the timeout.
  void watch(std::shared_ptr<InFlight> op);
  std::chrono::duration<double> timeout() const { return timeout_; }

 private:
  void watchdog();

  std::shared_ptr<const DeviceQueue> queue_;
  std::chrono::duration<double> timeout_;
  ncclComm_t comm_ = nullptr;
  std::mutex comm_mutex_;  // every NCCL call on comm_, and the abort
  std::atomic<bool> aborted_{false};
  std::string reason_;  // written once, under comm_mutex_, before aborted_ is set

  std::mutex watch_mutex_;  // in_flight_ and stopping_
  std::condition_variable wake_;
  std::vector<std::shared_ptr<InFlight>> in_flight_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace dlb::nccl
