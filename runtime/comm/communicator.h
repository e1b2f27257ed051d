// The Communicator seam: rank, size and an asynchronous all-reduce of a buffer that returns a
// waitable handle, and point-to-point messages for the parameter server. `local` serves one
// rank; `mpi` reduces host buffers with Open MPI's non-blocking collectives and sends its
// messages. Only the factory knows which communicators this build has.
#pragma once
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/clock.h"
#include "runtime/core/stream_ref.h"
#include "runtime/memory/tensor.h"

namespace dlb {

enum class ReduceOp { kSum, kAverage };

// An all-reduce in flight. wait() throws CommError if it does not finish within the
// communicator's timeout (a dead or stuck peer), instead of hanging.
class CommHandle {
 public:
  virtual ~CommHandle() = default;
  virtual bool test() = 0;  // true once complete; also drives progress
  virtual void wait() = 0;
  // Work queued on `consumer` after this call runs after the operation. For the host (a null
  // StreamRef) that means waiting here; a device communicator instead makes the stream wait on
  // the operation's event, and the host goes on at once.
  virtual void order_before(StreamRef consumer) {
    (void)consumer;
    wait();
  }
  // When the operation was seen to finish (valid once test() or wait() succeeded): the progress
  // thread stamps it as it finishes; polling stamps it at the first successful test.
  std::chrono::steady_clock::time_point completed_at() const { return completed_at_; }
  // Marks of the operation's start and end on the device's clock (events on the communicator's
  // stream), for traces; none for host communicators, whose times are the host's.
  virtual std::optional<std::pair<Mark, Mark>> device_marks() const { return std::nullopt; }

 protected:
  void stamp_completion() { completed_at_ = std::chrono::steady_clock::now(); }
  void stamp_at(std::chrono::steady_clock::time_point t) { completed_at_ = t; }

 private:
  std::chrono::steady_clock::time_point completed_at_{};
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string_view name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place over the tensor (f32, f16 or bf16): a host buffer for mpi, a device buffer for nccl.
  // The reduction starts after the work already queued on `producer` (the backend's stream that
  // wrote the buffer); the tensor must stay alive and untouched until the handle completes.
  std::unique_ptr<CommHandle> allreduce_async(Tensor& buffer, ReduceOp op,
                                              StreamRef producer = {}) {
    return start_allreduce(buffer, op, producer);
  }
  void allreduce(Tensor& buffer, ReduceOp op, StreamRef producer = {}) {
    allreduce_async(buffer, op, producer)->wait();
  }
  virtual void broadcast(Tensor& buffer, int root) = 0;
  // Point-to-point on host buffers, for the parameter server of --sync=async
  // (runtime/overlap/param_server.h): a message of the buffer's bytes to or from one rank, with
  // a tag; those of one tag between two ranks arrive in order. The buffer must stay alive and
  // untouched until the handle completes. Unsupported where the communicator has none.
  virtual std::unique_ptr<CommHandle> send_async(const Tensor& buffer, int to, int tag);
  virtual std::unique_ptr<CommHandle> recv_async(Tensor& buffer, int from, int tag);
  // The rank a message of `tag` is waiting from, if one is (it is not received).
  virtual std::optional<int> probe(int tag);
  // How long a wait on another rank may last before it is a CommError (--comm-timeout): also
  // what a parameter server allows a rank between two pushes.
  virtual double timeout_seconds() const;
  virtual std::vector<uint64_t> allgather(uint64_t value) = 0;
  virtual void barrier() = 0;
  virtual double max_across_ranks(double value) = 0;
  virtual double sum_across_ranks(double value) = 0;
  // Seconds per call of the library's own blocking in-place all-reduce (sum) on `buffer`, the
  // mean of `iterations` calls, slowest rank: the baseline the async path is compared with.
  virtual double time_reference_allreduce(Tensor& buffer, int iterations) = 0;
  // What time_reference_allreduce times, for the benchmark's header.
  virtual std::string reference_name() const = 0;
  // e.g. {"mpi": "Open MPI v4.1.4 ..."} for result records.
  virtual std::map<std::string, std::string> environment() const = 0;

 protected:
  virtual std::unique_ptr<CommHandle> start_allreduce(Tensor& buffer, ReduceOp op,
                                                      StreamRef producer) = 0;
};

enum class CommKind { kLocal, kMpi, kNccl };
inline constexpr CommKind kCommKinds[] = {CommKind::kLocal, CommKind::kMpi, CommKind::kNccl};
std::string_view comm_kind_name(CommKind kind);
std::optional<CommKind> parse_comm_kind(std::string_view s);

// How an MPI all-reduce makes progress while the caller computes: `poll` issues MPI_Iallreduce
// and relies on test calls (between layers); `thread` hands buckets to a progress thread that
// runs the blocking MPI_Allreduce on a duplicated communicator, in submission order.
enum class CommProgress { kPoll, kThread };
inline constexpr CommProgress kCommProgressModes[] = {CommProgress::kPoll, CommProgress::kThread};
std::string_view comm_progress_name(CommProgress p);
std::optional<CommProgress> parse_comm_progress(std::string_view s);

// How long any one collective may take when a run does not say.
constexpr double kDefaultCommTimeoutSeconds = 300.0;

struct CommOptions {
  std::chrono::duration<double> timeout{kDefaultCommTimeoutSeconds};  // for any one collective
  CommProgress progress = CommProgress::kThread;
};

// The factory. kMpi initialises MPI (once per process); kNccl also bootstraps NCCL through it.
// Throws Unsupported when this build lacks the library, CommError when initialisation fails.
std::unique_ptr<Communicator> make_communicator(CommKind kind, const CommOptions& options = {});
// Whether this process was started by an MPI launcher (mpirun, srun with PMI).
bool launched_under_mpi();
// This rank's index among the ranks on its node, from the launcher's environment (Open MPI,
// Slurm, torchrun's LOCAL_RANK); `rank` when none is set. Ranks pick their GPU by it.
int local_rank(int rank);
// This process's rank in its job, from the launcher's environment (Open MPI, PMIx, PMI, Slurm);
// 0 when none is set. For what must be decided before (or without) a communicator.
int launched_rank();

}  // namespace dlb
