// The communicator factory: the one place that knows which communicators this build has.
#include <fmt/format.h>

#include <cstdlib>

#include "runtime/comm/communicator.h"
#include "runtime/comm/local_communicator.h"
#include "runtime/core/error.h"
#if DLB_HAVE_MPI
#include "runtime/comm/mpi_communicator.h"
#endif
#if DLB_HAVE_NCCL
#include "runtime/comm/nccl_communicator.h"
#endif

namespace dlb {

std::string_view comm_kind_name(CommKind kind) {
  switch (kind) {
    case CommKind::kLocal:
      return "local";
    case CommKind::kMpi:
      return "mpi";
    case CommKind::kNccl:
      return "nccl";
  }
  return "?";
}

std::optional<CommKind> parse_comm_kind(std::string_view s) {
  for (CommKind k : kCommKinds) {
    if (comm_kind_name(k) == s) return k;
  }
  return std::nullopt;
}

std::unique_ptr<CommHandle> Communicator::send_async(const Tensor&, int, int) {
  throw Unsupported(fmt::format("the {} communicator has no point-to-point messages", name()));
}

std::unique_ptr<CommHandle> Communicator::recv_async(Tensor&, int, int) {
  throw Unsupported(fmt::format("the {} communicator has no point-to-point messages", name()));
}

std::optional<int> Communicator::probe(int) {
  throw Unsupported(fmt::format("the {} communicator has no point-to-point messages", name()));
}

double Communicator::timeout_seconds() const { return kDefaultCommTimeoutSeconds; }

std::string_view comm_progress_name(CommProgress p) {
  return p == CommProgress::kPoll ? "poll" : "thread";
}

std::optional<CommProgress> parse_comm_progress(std::string_view s) {
  for (CommProgress p : kCommProgressModes) {
    if (comm_progress_name(p) == s) return p;
  }
  return std::nullopt;
}

bool launched_under_mpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK");
}

int local_rank(int rank) {
  for (const char* v :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK"}) {
    if (const char* s = std::getenv(v)) return std::atoi(s);
  }
  return rank;
}

int launched_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const char* s = std::getenv(v)) return std::atoi(s);
  }
  return 0;
}

std::unique_ptr<Communicator> make_communicator(CommKind kind, const CommOptions& options) {
  if (kind == CommKind::kLocal) return make_local_communicator();
  if (kind == CommKind::kNccl) {
#if DLB_HAVE_NCCL
    // A process that no launcher started is one rank: it makes NCCL's unique id itself and needs
    // no MPI (a GPU machine may have none). Ranks started by mpirun or srun share the id over MPI.
    if (!launched_under_mpi()) return make_nccl_communicator(make_local_communicator(), options);
#if DLB_HAVE_MPI
    return make_nccl_communicator(make_mpi_communicator(options), options);
#else
    throw Unsupported(
        "nccl: this process was started by an MPI launcher, but this build has no MPI to share "
        "NCCL's unique id with the other ranks (Open MPI was not found at configure time)");
#endif
#else
    throw Unsupported(
        "this build has no NCCL communicator (NCCL and CUDA were not found at configure time)");
#endif
  }
#if DLB_HAVE_MPI
  return make_mpi_communicator(options);
#else
  (void)options;
  throw Unsupported(
      fmt::format("this build has no {} communicator (Open MPI was not found at configure time)",
                  comm_kind_name(kind)));
#endif
}

}  // namespace dlb
