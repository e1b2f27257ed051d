// NCCL on device buffers, bootstrapped through MPI (rank 0's unique id is broadcast). Init and
// every wait are non-blocking and polled against the timeout, and a watchdog thread aborts the
// communicator when an all-reduce that only a stream waits on outlives it (nccl_guard.h): a dead
// peer surfaces as CommError, not a hang. Host-side collectives (broadcast of host buffers,
// all-gather, barrier) go through the MPI bootstrap communicator.
#pragma once
#include "runtime/comm/communicator.h"

namespace dlb {

std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> bootstrap,
                                                     const CommOptions& options);

}  // namespace dlb
