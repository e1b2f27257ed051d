#include "runtime/comm/nccl_guard.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "runtime/core/error.h"

namespace dlb::nccl {

void throw_nccl_error(ncclResult_t r, const char* stmt, const char* func, const char* file,
                      int line) {
  throw CommError(fmt::format("NCCL error {} ({}) in {} at {}:{}: {}", static_cast<int>(r),
                              ncclGetErrorString(r), func, file, line, stmt));
}

GuardedComm::GuardedComm(std::shared_ptr<const DeviceQueue> queue, int nranks,
                         const ncclUniqueId& id, int rank, std::chrono::duration<double> timeout)
    : queue_(std::move(queue)), timeout_(timeout) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // init and collectives return at once; we poll with a deadline
  ncclUniqueId copy = id;
  DLB_NCCL_CHECK(ncclCommInitRankConfig(&comm_, nranks, copy, rank, &config));
  poll([] { return true; }, "NCCL initialisation");
  thread_ = std::thread([this] { watchdog(); });
}

GuardedComm::~GuardedComm() {
  {
    std::lock_guard<std::mutex> lock(watch_mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (aborted_.load() || !comm_) return;  // an aborted communicator is already freed
  // Flush, then destroy; one that cannot finish in 10 s is aborted instead.
  ncclResult_t state = ncclCommFinalize(comm_);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (state == ncclInProgress && Clock::now() < deadline) ncclCommGetAsyncError(comm_, &state);
  if (state == ncclSuccess) {
    ncclCommDestroy(comm_);
  } else {
    ncclCommAbort(comm_);
  }
}

void GuardedComm::throw_aborted() const {
  throw CommError(fmt::format("the NCCL communicator was aborted: {}", reason_));
}

void GuardedComm::call(const std::function<void(ncclComm_t)>& f) {
  std::lock_guard<std::mutex> lock(comm_mutex_);
  if (aborted_.load()) throw_aborted();
  f(comm_);
}

ncclResult_t GuardedComm::check(const std::string& what) {
  ncclResult_t state = ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(comm_mutex_);
    if (aborted_.load()) throw_aborted();
    DLB_NCCL_CHECK(ncclCommGetAsyncError(comm_, &state));
  }
  if (state != ncclSuccess && state != ncclInProgress) {
    abort(fmt::format("{}: NCCL reported {} ({})", what, static_cast<int>(state),
                      ncclGetErrorString(state)));
    throw_aborted();
  }
  return state;
}

void GuardedComm::poll(const std::function<bool()>& done, const std::string& what) {
  const auto deadline = Clock::now() + timeout_;
  for (;;) {
    if (check(what) == ncclSuccess && done()) return;
    if (Clock::now() > deadline) {
      abort(fmt::format("{} did not complete within {:.0f} s; a peer rank may have died", what,
                        timeout_.count()));
      throw_aborted();
    }
    std::this_thread::yield();
  }
}

void GuardedComm::abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(comm_mutex_);
  if (aborted_.load()) return;
  reason_ = reason;
  ncclCommAbort(comm_);  // frees comm_; the stuck kernels end
  aborted_.store(true);
}

void GuardedComm::watch(std::shared_ptr<InFlight> op) {
  std::lock_guard<std::mutex> lock(watch_mutex_);
  in_flight_.push_back(std::move(op));
}

void GuardedComm::watchdog() {
  try {
    queue_->make_current_for_watching();  // queries during a capture
  } catch (const std::exception&) {       // the queries below then fail, and count as settled
  }
  constexpr auto kInterval = std::chrono::milliseconds(50);
  std::unique_lock<std::mutex> lock(watch_mutex_);
  while (!stopping_ && !aborted_.load()) {
    wake_.wait_for(lock, kInterval);
    if (stopping_) break;
    // Finished operations leave the list; the oldest unfinished one decides.
    std::optional<Clock::duration> stuck_for;
    in_flight_.erase(std::remove_if(in_flight_.begin(), in_flight_.end(),
                                    [&](const std::shared_ptr<InFlight>& op) {
                                      if (op->event->settled()) {
                                        return true;  // done (or failed: the handle raises it)
                                      }
                                      const auto age = Clock::now() - op->launched;
                                      if (!stuck_for || age > *stuck_for) stuck_for = age;
                                      return false;
                                    }),
                     in_flight_.end());
    lock.unlock();
    try {
      check("NCCL watchdog");
      if (stuck_for && *stuck_for > timeout_) {
        abort(fmt::format(
            "an all-reduce has been in flight for {:.0f} s, past the {:.0f} s timeout; a peer "
            "rank may have died",
            std::chrono::duration<double>(*stuck_for).count(), timeout_.count()));
      }
    } catch (const CommError&) {
      // check() aborted the communicator; the main thread raises it at its next test or wait.
    }
    lock.lock();
  }
}

}  // namespace dlb::nccl
