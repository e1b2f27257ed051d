// Open MPI on host buffers: MPI_Iallreduce behind a handle whose wait() polls MPI_Test against a
// deadline, so a dead peer surfaces as CommError within the timeout.
#pragma once
#include "runtime/comm/communicator.h"

namespace dlb {

std::unique_ptr<Communicator> make_mpi_communicator(const CommOptions& options);

}  // namespace dlb
