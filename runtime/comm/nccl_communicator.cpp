#include "runtime/comm/nccl_communicator.h"

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <thread>

#include "runtime/backend/cuda/cuda_check.h"
#include "runtime/backend/cuda/device.h"
#include "runtime/core/error.h"
#include "runtime/memory/allocator.h"

namespace dlb {
namespace {

[[noreturn]] void throw_nccl_error(ncclResult_t r, const char* stmt, const char* func,
                                   const char* file, int line) {
  throw CommError(fmt::format("NCCL error {} ({}) in {} at {}:{}: {}", static_cast<int>(r),
                              ncclGetErrorString(r), func, file, line, stmt));
}

// ncclInProgress is the normal answer of a non-blocking communicator.
#define DLB_NCCL_CHECK(stmt)                                              \
  do {                                                                    \
    const ncclResult_t dlb_nccl_r_ = (stmt);                              \
    if (dlb_nccl_r_ != ncclSuccess && dlb_nccl_r_ != ncclInProgress)      \
      throw_nccl_error(dlb_nccl_r_, #stmt, __func__, __FILE__, __LINE__); \
  } while (0)

using Clock = std::chrono::steady_clock;

// Polls until `done()` or the communicator reports an error; on timeout or error, aborts it.
void poll_or_abort(ncclComm_t comm, std::chrono::duration<double> timeout,
                   const std::function<bool()>& done, const char* what) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    DLB_NCCL_CHECK(ncclCommGetAsyncError(comm, &state));
    if (state != ncclSuccess && state != ncclInProgress) {
      ncclCommAbort(comm);
      throw CommError(fmt::format("{}: NCCL reported {} ({}); communicator aborted", what,
                                  static_cast<int>(state), ncclGetErrorString(state)));
    }
    if (state == ncclSuccess && done()) return;
    if (Clock::now() > deadline) {
      ncclCommAbort(comm);
      throw CommError(
          fmt::format("{} did not complete within {:.0f} s; a peer rank may have "
                      "died; communicator aborted",
                      what, timeout.count()));
    }
    std::this_thread::yield();
  }
}

class NcclHandle final : public CommHandle {
 public:
  NcclHandle(ncclComm_t comm, std::chrono::duration<double> timeout, cudaStream_t stream)
      : comm_(comm), timeout_(timeout) {
    DLB_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    DLB_CUDA_CHECK(cudaEventRecord(event_, stream));
  }
  ~NcclHandle() override { cudaEventDestroy(event_); }
  bool test() override {
    if (done_) return true;
    const cudaError_t state = cudaEventQuery(event_);
    if (state == cudaErrorNotReady) return false;
    DLB_CUDA_CHECK(state);  // a failed kernel is an error, not an all-reduce still running
    done_ = true;
    stamp_completion();
    return true;
  }
  void wait() override {
    poll_or_abort(
        comm_, timeout_, [&] { return test(); }, "NCCL all-reduce");
  }
  // The consumer stream waits on the all-reduce's event: no host synchronisation. An error the
  // communicator already knows of is raised now; one that comes later surfaces at the next
  // wait(), which polls against the timeout.
  void order_before(StreamRef consumer) override {
    if (!consumer.on_device()) return wait();
    ncclResult_t state = ncclSuccess;
    DLB_NCCL_CHECK(ncclCommGetAsyncError(comm_, &state));
    if (state != ncclSuccess && state != ncclInProgress) {
      ncclCommAbort(comm_);
      throw CommError(fmt::format("NCCL all-reduce: NCCL reported {} ({}); communicator aborted",
                                  static_cast<int>(state), ncclGetErrorString(state)));
    }
    DLB_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(consumer.native), event_, 0));
  }

 private:
  ncclComm_t comm_;
  std::chrono::duration<double> timeout_;
  cudaEvent_t event_ = nullptr;
  bool done_ = false;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::unique_ptr<Communicator> bootstrap, const CommOptions& o)
      : boot_(std::move(bootstrap)),
        options_(o),
        host_(std::make_shared<Allocator>(make_host_memory_resource())) {
    const auto devices = cuda::query_devices();
    if (devices.empty()) throw Unsupported("NCCL: no CUDA device is visible on this rank");
    device_ = local_rank(boot_->rank()) % static_cast<int>(devices.size());
    check_one_rank_per_gpu(devices.size());
    DLB_CUDA_CHECK(cudaSetDevice(device_));
    DLB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    DLB_CUDA_CHECK(cudaEventCreateWithFlags(&producer_done_, cudaEventDisableTiming));

    ncclUniqueId id;
    if (boot_->rank() == 0) DLB_NCCL_CHECK(ncclGetUniqueId(&id));
    // Broadcast as raw bytes: sizeof(ncclUniqueId) is a multiple of 4, viewed as floats.
    static_assert(sizeof(ncclUniqueId) % 4 == 0);
    Tensor id_bytes(host_->allocate(sizeof id, MemCategory::kComm, "NCCL unique id"),
                    Shape{static_cast<int64_t>(sizeof id / 4)}, DType::kF32);
    std::memcpy(id_bytes.raw(), &id, sizeof id);
    boot_->broadcast(id_bytes, 0);
    std::memcpy(&id, id_bytes.raw(), sizeof id);

    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // init and collectives return at once; we poll with a deadline
    DLB_NCCL_CHECK(ncclCommInitRankConfig(&comm_, boot_->size(), id, boot_->rank(), &config));
    poll_or_abort(
        comm_, options_.timeout, [] { return true; }, "NCCL initialisation");
  }
  ~NcclCommunicator() override {
    if (comm_) {
      // Flush, then destroy; a communicator that cannot finish in 10 s is aborted instead.
      ncclResult_t state = ncclCommFinalize(comm_);
      const auto deadline = Clock::now() + std::chrono::seconds(10);
      while (state == ncclInProgress && Clock::now() < deadline) {
        ncclCommGetAsyncError(comm_, &state);
      }
      if (state == ncclSuccess) {
        ncclCommDestroy(comm_);
      } else {
        ncclCommAbort(comm_);
      }
    }
    if (producer_done_) cudaEventDestroy(producer_done_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  std::string_view name() const override { return "nccl"; }
  int rank() const override { return boot_->rank(); }
  int size() const override { return boot_->size(); }

  // Host-side control collectives use the MPI bootstrap.
  void broadcast(Tensor& buffer, int root) override { boot_->broadcast(buffer, root); }
  std::vector<uint64_t> allgather(uint64_t value) override { return boot_->allgather(value); }
  void barrier() override { boot_->barrier(); }
  double max_across_ranks(double value) override { return boot_->max_across_ranks(value); }
  // ncclAllReduce with a stream synchronisation after every call: what the pipelined async path
  // (launches back to back, one wait) is compared with.
  double time_reference_allreduce(Tensor& buffer, int iterations) override {
    check_device_f32(buffer);
    boot_->barrier();
    const auto t0 = Clock::now();
    for (int i = 0; i < iterations; ++i) {
      enqueue_allreduce(buffer, ReduceOp::kSum);
      NcclHandle(comm_, options_.timeout, stream_).wait();
    }
    const double t = std::chrono::duration<double>(Clock::now() - t0).count() / iterations;
    return boot_->max_across_ranks(t);
  }
  std::string reference_name() const override {
    return "ncclAllReduce, stream synchronised after each call";
  }
  std::map<std::string, std::string> environment() const override {
    auto env = boot_->environment();
    int v = 0;
    ncclGetVersion(&v);
    env["nccl"] = fmt::format("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
    env["nccl_device"] = std::to_string(device_);
    return env;
  }

 protected:
  // `buffer` must be device memory on this rank's GPU. The all-reduce is queued on the comm
  // stream behind an event recorded on `producer`, so it starts when the gradients are written,
  // and the host does not wait.
  std::unique_ptr<CommHandle> start_allreduce(Tensor& buffer, ReduceOp op,
                                              StreamRef producer) override {
    check_device_f32(buffer);
    if (producer.on_device()) {
      DLB_CUDA_CHECK(cudaEventRecord(producer_done_, static_cast<cudaStream_t>(producer.native)));
      DLB_CUDA_CHECK(cudaStreamWaitEvent(stream_, producer_done_, 0));
    }
    enqueue_allreduce(buffer, op);
    return std::make_unique<NcclHandle>(comm_, options_.timeout, stream_);
  }

 private:
  // A non-blocking communicator may answer ncclInProgress before the operation is in the stream;
  // it is there once ncclCommGetAsyncError stops saying so. Only then may an event recorded on
  // the stream stand for its completion.
  void enqueue_allreduce(Tensor& buffer, ReduceOp op) {
    DLB_NCCL_CHECK(ncclAllReduce(buffer.raw(), buffer.raw(), static_cast<size_t>(buffer.numel()),
                                 ncclFloat, op == ReduceOp::kAverage ? ncclAvg : ncclSum, comm_,
                                 stream_));
    poll_or_abort(
        comm_, options_.timeout, [] { return true; }, "NCCL all-reduce launch");
  }

  void check_device_f32(const Tensor& buffer) const {
    if (buffer.dtype() != DType::kF32) throw InvalidArgument("NCCL all-reduce takes f32 buffers");
    cudaPointerAttributes attr{};
    DLB_CUDA_CHECK(cudaPointerGetAttributes(&attr, buffer.raw()));
    if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) {
      throw InvalidArgument(
          "NCCL all-reduce takes device buffers; this one is host memory (the cpu backend's "
          "gradients need the mpi communicator)");
    }
    if (attr.device != device_) {
      throw InvalidArgument(fmt::format(
          "NCCL all-reduce: the buffer is on GPU {} but this rank's communicator uses GPU {}",
          attr.device, device_));
    }
  }

  // NCCL refuses two ranks on one GPU (and would hang or fail obscurely): say so up front.
  void check_one_rank_per_gpu(size_t device_count) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    const uint64_t key = std::hash<std::string>{}(host)*1000003u + static_cast<uint64_t>(device_);
    const auto keys = boot_->allgather(key);
    for (size_t i = 0; i < keys.size(); ++i) {
      for (size_t j = i + 1; j < keys.size(); ++j) {
        if (keys[i] == keys[j]) {
          throw Unsupported(fmt::format(
              "NCCL refuses two ranks on one GPU: ranks {} and {} both use GPU {} of a host with "
              "{} visible GPU(s); start at most one rank per GPU per node",
              i, j, device_, device_count));
        }
      }
    }
  }

  std::unique_ptr<Communicator> boot_;
  CommOptions options_;
  std::shared_ptr<Allocator> host_;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t producer_done_ = nullptr;  // reused: a stream wait captures its state when issued
  ncclComm_t comm_ = nullptr;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> bootstrap,
                                                     const CommOptions& options) {
  return std::make_unique<NcclCommunicator>(std::move(bootstrap), options);
}

}  // namespace dlb
