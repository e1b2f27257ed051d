#include "runtime/comm/mpi_communicator.h"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/core/half.h"

namespace dlb {
namespace {

[[noreturn]] void throw_mpi_error(int code, const char* stmt, const char* func, const char* file,
                                  int line) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  throw CommError(fmt::format("MPI error {} ({}) in {} at {}:{}: {}", code, std::string(text, len),
                              func, file, line, stmt));
}

#define DLB_MPI_CHECK(stmt)                                              \
  do {                                                                   \
    const int dlb_mpi_rc_ = (stmt);                                      \
    if (dlb_mpi_rc_ != MPI_SUCCESS)                                      \
      throw_mpi_error(dlb_mpi_rc_, #stmt, __func__, __FILE__, __LINE__); \
  } while (0)

// A buffer's element count as MPI takes it: an int. A larger buffer is refused, never truncated
// (which would reduce only part of it, silently).
int mpi_count(const Tensor& t) {
  if (t.numel() > std::numeric_limits<int>::max()) {
    throw Unsupported(fmt::format("mpi all-reduce of {} elements: MPI counts are int, at most {}",
                                  t.numel(), std::numeric_limits<int>::max()));
  }
  return static_cast<int>(t.numel());
}

// A message's bytes, as MPI counts them.
int byte_count(const Tensor& t) {
  if (t.bytes() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    throw Unsupported(fmt::format("an mpi message of {} bytes: MPI counts are int, at most {}",
                                  t.bytes(), std::numeric_limits<int>::max()));
  }
  return static_cast<int>(t.bytes());
}

void check_host_f32(const Tensor& t) {
  if (t.dtype() != DType::kF32) {
    throw InvalidArgument(
        fmt::format("mpi all-reduce takes f32 buffers, got {}", dtype_name(t.dtype())));
  }
}

// MPI has no 16-bit floats: f16 and bf16 buffers travel as MPI_UINT16_T under these sums, which
// add in f32 and round to nearest even, element by element, as NCCL sums 16-bit types.
template <uint16_t (*Narrow)(float), float (*Widen)(uint16_t)>
void sum_16bit(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = Narrow(Widen(a[i]) + Widen(b[i]));
}

// x *= factor, element by element, in the buffer's type (rounding once for 16-bit types).
void scale_in_place(Tensor& t, float factor) {
  if (t.dtype() == DType::kF32) {
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] *= factor;
    return;
  }
  std::vector<float> wide(static_cast<size_t>(t.numel()));
  dtype_to_floats(t.raw(), t.numel(), t.dtype(), wide.data());
  for (float& x : wide) x *= factor;
  floats_to_dtype(wide.data(), t.numel(), t.dtype(), t.raw());
}

// How a buffer of one element type is summed.
struct Reduction {
  MPI_Datatype type;
  MPI_Op op;
};

// Set once a collective timed out: the job is broken, so nothing may wait for it again.
using FailedFlag = std::shared_ptr<std::atomic<bool>>;

class MpiHandle final : public CommHandle {
 public:
  MpiHandle(MPI_Request request, Tensor buffer, bool average, int size,
            std::chrono::duration<double> timeout, FailedFlag failed,
            std::string what = "all-reduce")
      : request_(request),
        buffer_(std::move(buffer)),
        average_(average),
        size_(size),
        timeout_(timeout),
        failed_(std::move(failed)),
        what_(std::move(what)) {}
  // Never abandons an operation in flight: MPI would go on writing into a buffer the caller is
  // about to reuse or free. A stuck peer still ends the wait at the timeout.
  ~MpiHandle() override {
    if (done_ || failed_->load()) return;
    try {
      wait();
    } catch (const Error&) {
      MPI_Request_free(&request_);
    }
  }
  bool test() override {
    if (done_) return true;
    int flag = 0;
    const int rc = MPI_Test(&request_, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      failed_->store(true);
      throw_mpi_error(rc, "MPI_Test", __func__, __FILE__, __LINE__);
    }
    if (flag) finish();
    return done_;
  }
  void wait() override {
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (!test()) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw CommError(
            fmt::format("{} of {} bytes did not complete within {:.0f} s; a "
                        "peer rank may have died",
                        what_, buffer_.bytes(), timeout_.count()));
      }
      std::this_thread::yield();
    }
  }

 private:
  void finish() {
    done_ = true;
    stamp_completion();
    if (average_) scale_in_place(buffer_, 1.f / static_cast<float>(size_));
  }
  MPI_Request request_;
  Tensor buffer_;
  bool average_;
  int size_;
  std::chrono::duration<double> timeout_;
  FailedFlag failed_;
  std::string what_;
  bool done_ = false;
};

// Completed by the progress thread; waited for with a deadline.
class ThreadHandle final : public CommHandle {
 public:
  std::chrono::steady_clock::time_point finished_at{};  // written before done_ is released
  ThreadHandle(std::chrono::duration<double> timeout, FailedFlag failed)
      : timeout_(timeout), failed_(std::move(failed)) {}
  bool failed() const { return failed_->load(); }
  bool test() override { return done_.load(std::memory_order_acquire); }
  void wait() override {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout_, [&] { return done_.load(); })) {
      failed_->store(true);
      throw CommError(
          fmt::format("all-reduce did not complete within {:.0f} s; a peer rank may "
                      "have died",
                      timeout_.count()));
    }
    if (!error_.empty()) throw CommError(error_);
  }
  void finish(std::string error) {
    finished_at = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::move(error);
    done_.store(true, std::memory_order_release);
    cv_.notify_all();
  }

 private:
  std::chrono::duration<double> timeout_;
  FailedFlag failed_;
  std::atomic<bool> done_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::string error_;
};

// The progress thread: runs queued all-reduces one after another, in submission order, which is
// the same on every rank, so the collectives match.
class ProgressThread {
 public:
  ProgressThread(MPI_Comm comm, int size) : comm_(comm), size_(size), thread_([this] { run(); }) {}
  // After a failed collective the thread may be stuck inside MPI forever: let it go.
  void abandon() { thread_.detach(); }
  ~ProgressThread() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void submit(Tensor buffer, Reduction reduction, bool average,
              std::shared_ptr<ThreadHandle> handle) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back({std::move(buffer), reduction, average, std::move(handle)});
    }
    cv_.notify_all();
  }

 private:
  struct Job {
    Tensor buffer;
    Reduction reduction;
    bool average;
    std::shared_ptr<ThreadHandle> handle;
  };
  void run() {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      const int rc =
          MPI_Allreduce(MPI_IN_PLACE, job.buffer.raw(), static_cast<int>(job.buffer.numel()),
                        job.reduction.type, job.reduction.op, comm_);
      if (rc == MPI_SUCCESS && job.average) {
        scale_in_place(job.buffer, 1.f / static_cast<float>(size_));
      }
      job.handle->finish(rc == MPI_SUCCESS ? "" : fmt::format("MPI_Allreduce failed ({})", rc));
    }
  }
  MPI_Comm comm_;
  int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members it uses
};

// Shares the handle's ownership with the progress thread, which may finish after the caller
// stopped waiting.
class SharedThreadHandle final : public CommHandle {
 public:
  explicit SharedThreadHandle(std::shared_ptr<ThreadHandle> h) : h_(std::move(h)) {}
  ~SharedThreadHandle() override {
    if (h_->failed()) return;
    try {
      h_->wait();  // never abandon a buffer MPI is still writing
    } catch (const Error&) {
    }
  }
  bool test() override {
    if (!h_->test()) return false;
    adopt_completion();
    return true;
  }
  void wait() override {
    h_->wait();
    adopt_completion();
  }

 private:
  void adopt_completion() {
    if (completed_at() == std::chrono::steady_clock::time_point{}) stamp_at(h_->finished_at);
  }
  std::shared_ptr<ThreadHandle> h_;
};

class MpiCommunicator final : public Communicator {
 public:
  double timeout_seconds() const override { return options_.timeout.count(); }
  explicit MpiCommunicator(const CommOptions& o) : options_(o) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      DLB_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
      thread_level_ = provided;
      owns_mpi_ = true;
    } else {
      MPI_Query_thread(&thread_level_);
    }
    // Errors come back as codes (-> CommError) instead of aborting the job.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    DLB_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
    DLB_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
    DLB_MPI_CHECK(MPI_Op_create(&sum_16bit<float_to_f16, f16_to_float>, 1, &f16_sum_));
    DLB_MPI_CHECK(MPI_Op_create(&sum_16bit<float_to_bf16, bf16_to_float>, 1, &bf16_sum_));
    if (o.progress == CommProgress::kThread) {
      if (thread_level_ < MPI_THREAD_MULTIPLE) {
        throw Unsupported("--comm-progress=thread needs an MPI library with MPI_THREAD_MULTIPLE");
      }
      // Its own communicator: the thread's collectives cannot interleave with this thread's.
      DLB_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &progress_comm_));
      progress_ = std::make_unique<ProgressThread>(progress_comm_, size_);
    }
    // Point-to-point messages on their own communicator: no collective can match them.
    DLB_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &p2p_comm_));
    MPI_Comm_set_errhandler(p2p_comm_, MPI_ERRORS_RETURN);
  }
  ~MpiCommunicator() override {
    // During unwinding from an error a peer may be dead or stuck, and finalising would block.
    if (failed_->load() || std::uncaught_exceptions() > 0) {
      // A peer is dead or stuck: finalising would block on it. Exit without it; the launcher
      // then ends the job (Open MPI notes the missing MPI_Finalize).
      if (progress_) progress_->abandon();
      progress_.release();  // its thread may still use it
      return;
    }
    progress_.reset();
    if (progress_comm_ != MPI_COMM_NULL) MPI_Comm_free(&progress_comm_);
    if (p2p_comm_ != MPI_COMM_NULL) MPI_Comm_free(&p2p_comm_);
    if (f16_sum_ != MPI_OP_NULL) MPI_Op_free(&f16_sum_);
    if (bf16_sum_ != MPI_OP_NULL) MPI_Op_free(&bf16_sum_);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_mpi_ && !finalized) MPI_Finalize();
  }
  std::string_view name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void broadcast(Tensor& buffer, int root) override {
    // In pieces of 1 GiB: MPI counts bytes in an int, and every rank's buffer has the same size.
    constexpr size_t kPiece = size_t{1} << 30;
    auto* bytes = static_cast<unsigned char*>(buffer.raw());
    for (size_t done = 0; done < buffer.bytes(); done += kPiece) {
      const int n = static_cast<int>(std::min(kPiece, buffer.bytes() - done));
      DLB_MPI_CHECK(MPI_Bcast(bytes + done, n, MPI_BYTE, root, MPI_COMM_WORLD));
    }
  }
  std::unique_ptr<CommHandle> send_async(const Tensor& buffer, int to, int tag) override {
    MPI_Request request = MPI_REQUEST_NULL;
    DLB_MPI_CHECK(
        MPI_Isend(buffer.raw(), byte_count(buffer), MPI_BYTE, to, tag, p2p_comm_, &request));
    return std::make_unique<MpiHandle>(request, buffer, false, size_, options_.timeout, failed_,
                                       fmt::format("a message to rank {}", to));
  }
  std::unique_ptr<CommHandle> recv_async(Tensor& buffer, int from, int tag) override {
    MPI_Request request = MPI_REQUEST_NULL;
    DLB_MPI_CHECK(
        MPI_Irecv(buffer.raw(), byte_count(buffer), MPI_BYTE, from, tag, p2p_comm_, &request));
    return std::make_unique<MpiHandle>(request, buffer, false, size_, options_.timeout, failed_,
                                       fmt::format("a message from rank {}", from));
  }
  std::optional<int> probe(int tag) override {
    int flag = 0;
    MPI_Status status;
    DLB_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, tag, p2p_comm_, &flag, &status));
    if (!flag) return std::nullopt;
    return status.MPI_SOURCE;
  }
  std::vector<uint64_t> allgather(uint64_t value) override {
    std::vector<uint64_t> out(size_);
    DLB_MPI_CHECK(
        MPI_Allgather(&value, 1, MPI_UINT64_T, out.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD));
    return out;
  }
  void barrier() override { DLB_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD)); }
  double max_across_ranks(double value) override { return reduce_double(value, MPI_MAX); }
  double sum_across_ranks(double value) override { return reduce_double(value, MPI_SUM); }
  double time_reference_allreduce(Tensor& buffer, int iterations) override {
    check_host_f32(buffer);
    barrier();
    const double t0 = MPI_Wtime();
    for (int i = 0; i < iterations; ++i) {
      DLB_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buffer.raw(), mpi_count(buffer), MPI_FLOAT, MPI_SUM,
                                  MPI_COMM_WORLD));
    }
    return max_across_ranks((MPI_Wtime() - t0) / iterations);
  }
  std::string reference_name() const override { return "MPI_Allreduce, blocking, same buffer"; }
  std::map<std::string, std::string> environment() const override {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    std::string v(version, len);
    if (const auto nl = v.find_first_of("\n,"); nl != std::string::npos) v.resize(nl);
    return {{"mpi", v},
            {"mpi_thread_level", std::to_string(thread_level_)},
            {"comm_progress", std::string(comm_progress_name(options_.progress))}};
  }

 protected:
  std::unique_ptr<CommHandle> start_allreduce(Tensor& buffer, ReduceOp op,
                                              StreamRef producer) override {
    const Reduction reduction = reduction_for(buffer);
    mpi_count(buffer);  // refused here, on the caller's thread, not in the progress thread
    if (producer.on_device()) {
      // Open MPI here is not CUDA-aware: it would read device pointers as host memory.
      throw InvalidArgument(
          "the mpi communicator reduces host buffers; a device backend's gradients need nccl");
    }
    bool average = op == ReduceOp::kAverage;
    if (average && buffer.dtype() != DType::kF32) {
      // 16 bits divide before they sum, as PyTorch DDP does: the sum of the ranks' gradients
      // stays within fp16's range where each one is.
      scale_in_place(buffer, 1.f / static_cast<float>(size_));
      average = false;
    }
    if (progress_) {
      auto h = std::make_shared<ThreadHandle>(options_.timeout, failed_);
      progress_->submit(buffer, reduction, average, h);
      return std::make_unique<SharedThreadHandle>(h);
    }
    MPI_Request request = MPI_REQUEST_NULL;
    DLB_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buffer.raw(), mpi_count(buffer), reduction.type,
                                 reduction.op, MPI_COMM_WORLD, &request));
    return std::make_unique<MpiHandle>(request, buffer, average, size_, options_.timeout, failed_);
  }

 private:
  Reduction reduction_for(const Tensor& t) const {
    switch (t.dtype()) {
      case DType::kF32:
        return {MPI_FLOAT, MPI_SUM};
      case DType::kF16:
        return {MPI_UINT16_T, f16_sum_};
      case DType::kBF16:
        return {MPI_UINT16_T, bf16_sum_};
      default:
        throw InvalidArgument(
            fmt::format("mpi all-reduce takes float buffers, got {}", dtype_name(t.dtype())));
    }
  }
  double reduce_double(double value, MPI_Op op) {
    double out = 0;
    DLB_MPI_CHECK(MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, op, MPI_COMM_WORLD));
    return out;
  }

  CommOptions options_;
  int rank_ = 0, size_ = 1, thread_level_ = 0;
  MPI_Comm progress_comm_ = MPI_COMM_NULL, p2p_comm_ = MPI_COMM_NULL;
  MPI_Op f16_sum_ = MPI_OP_NULL, bf16_sum_ = MPI_OP_NULL;
  FailedFlag failed_ = std::make_shared<std::atomic<bool>>(false);
  std::unique_ptr<ProgressThread> progress_;
  bool owns_mpi_ = false;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(const CommOptions& options) {
  return std::make_unique<MpiCommunicator>(options);
}

}  // namespace dlb
