#include "runtime/comm/nccl_communicator.h"

#include <fmt/format.h>
#include <nccl.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <thread>

#include "runtime/backend/device_queue.h"
#include "runtime/comm/nccl_guard.h"
#include "runtime/core/error.h"
#include "runtime/memory/allocator.h"

namespace dlb {
namespace {

using nccl::Clock;
using nccl::GuardedComm;
using nccl::InFlight;

// NCCL's element type for a buffer: f32, and the 16-bit types, which it sums natively.
ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::kF32:
      return ncclFloat;
    case DType::kF16:
      return ncclHalf;
    case DType::kBF16:
      return ncclBfloat16;
    default:
      throw InvalidArgument(
          fmt::format("NCCL all-reduce takes float buffers, got {}", dtype_name(t)));
  }
}

class NcclHandle final : public CommHandle {
 public:
  // `begin` was recorded on `queue` just before the collective; the end mark is recorded now,
  // just after it.
  NcclHandle(std::shared_ptr<GuardedComm> comm, DeviceQueue& queue, Mark begin = {})
      : comm_(std::move(comm)),
        op_(std::make_shared<InFlight>(queue)),
        begin_(std::move(begin)),
        end_(begin_.device ? queue.timing_mark() : Mark{}) {
    comm_->watch(op_);
  }
  std::optional<std::pair<Mark, Mark>> device_marks() const override {
    if (!begin_.device) return std::nullopt;
    return std::make_pair(begin_, end_);
  }
  bool test() override {
    if (done_) return true;
    if (comm_->aborted()) comm_->throw_aborted();
    if (!op_->event->done()) return false;  // throws for a failed kernel
    done_ = true;
    stamp_completion();
    return true;
  }
  void wait() override {
    comm_->poll([&] { return test(); }, "NCCL all-reduce");
  }
  // The consumer stream waits on the all-reduce's event: no host synchronisation. An error
  // NCCL already knows of is raised now; a peer that dies later is the watchdog's to catch.
  void order_before(StreamRef consumer) override {
    if (!consumer.on_device()) return wait();
    comm_->check("NCCL all-reduce");
    op_->event->order_before(consumer);
  }

 private:
  std::shared_ptr<GuardedComm> comm_;
  std::shared_ptr<InFlight> op_;
  Mark begin_, end_;
  bool done_ = false;
};

class NcclCommunicator final : public Communicator {
 public:
  double timeout_seconds() const override { return options_.timeout.count(); }
  NcclCommunicator(std::unique_ptr<Communicator> bootstrap, const CommOptions& o)
      : boot_(std::move(bootstrap)),
        options_(o),
        host_(std::make_shared<Allocator>(make_host_memory_resource())) {
    const int devices = visible_device_count();
    if (devices == 0) throw Unsupported("NCCL: no CUDA device is visible on this rank");
    device_ = local_rank(boot_->rank()) % devices;
    check_one_rank_per_gpu(static_cast<size_t>(devices));
    queue_ = make_device_queue(device_);  // the device is current from here on

    ncclUniqueId id;
    if (boot_->rank() == 0) DLB_NCCL_CHECK(ncclGetUniqueId(&id));
    // Broadcast as raw bytes: sizeof(ncclUniqueId) is a multiple of 4, viewed as floats.
    static_assert(sizeof(ncclUniqueId) % 4 == 0);
    Tensor id_bytes(host_->allocate(sizeof id, MemCategory::kComm, "NCCL unique id"),
                    Shape{static_cast<int64_t>(sizeof id / 4)}, DType::kF32);
    std::memcpy(id_bytes.raw(), &id, sizeof id);
    boot_->broadcast(id_bytes, 0);
    std::memcpy(&id, id_bytes.raw(), sizeof id);

    comm_ =
        std::make_shared<GuardedComm>(queue_, boot_->size(), id, boot_->rank(), options_.timeout);
  }
  ~NcclCommunicator() override {
    comm_.reset();  // handles still alive keep it (and the queue) until they go
  }

  std::string_view name() const override { return "nccl"; }
  int rank() const override { return boot_->rank(); }
  int size() const override { return boot_->size(); }

  // Host-side control collectives use the MPI bootstrap.
  void broadcast(Tensor& buffer, int root) override { boot_->broadcast(buffer, root); }
  std::vector<uint64_t> allgather(uint64_t value) override { return boot_->allgather(value); }
  void barrier() override { boot_->barrier(); }
  double max_across_ranks(double value) override { return boot_->max_across_ranks(value); }
  double sum_across_ranks(double value) override { return boot_->sum_across_ranks(value); }
  // ncclAllReduce with a stream synchronisation after every call: what the pipelined async path
  // (launches back to back, one wait) is compared with.
  double time_reference_allreduce(Tensor& buffer, int iterations) override {
    check_device_buffer(buffer);
    boot_->barrier();
    const auto t0 = Clock::now();
    for (int i = 0; i < iterations; ++i) {
      enqueue_allreduce(buffer, ReduceOp::kSum);
      NcclHandle(comm_, *queue_).wait();
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
    check_device_buffer(buffer);
    queue_->wait_for(producer);
    Mark begin = queue_->timing_mark();
    enqueue_allreduce(buffer, op);
    return std::make_unique<NcclHandle>(comm_, *queue_, std::move(begin));
  }

 private:
  // A non-blocking communicator may answer ncclInProgress before the operation is in the stream;
  // it is there once ncclCommGetAsyncError stops saying so. Only then may an event recorded on
  // the stream stand for its completion.
  void enqueue_allreduce(Tensor& buffer, ReduceOp op) {
    comm_->call([&](ncclComm_t c) {
      DLB_NCCL_CHECK(ncclAllReduce(buffer.raw(), buffer.raw(), static_cast<size_t>(buffer.numel()),
                                   nccl_type(buffer.dtype()),
                                   op == ReduceOp::kAverage ? ncclAvg : ncclSum, c, stream()));
    });
    comm_->poll([] { return true; }, "NCCL all-reduce launch");
  }

  // The queue's stream, as NCCL takes it.
  cudaStream_t stream() const { return static_cast<cudaStream_t>(queue_->stream().native); }

  void check_device_buffer(const Tensor& buffer) const {
    nccl_type(buffer.dtype());  // throws for a type NCCL does not sum
    const int on = queue_->device_of(buffer.raw());
    if (on < 0) {
      throw InvalidArgument(
          "NCCL all-reduce takes device buffers; this one is host memory (the cpu backend's "
          "gradients need the mpi communicator)");
    }
    if (on != device_) {
      throw InvalidArgument(fmt::format(
          "NCCL all-reduce: the buffer is on GPU {} but this rank's communicator uses GPU {}", on,
          device_));
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
  std::shared_ptr<DeviceQueue> queue_;  // this rank's GPU: its stream and events
  std::shared_ptr<GuardedComm> comm_;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> bootstrap,
                                                     const CommOptions& options) {
  return std::make_unique<NcclCommunicator>(std::move(bootstrap), options);
}

}  // namespace dlb
