// Whether a schedule's lanes honour its edges (docs/architecture.md, "The lanes honour the
// edges"). The executor issues the passes in list order, iteration after iteration, each on its
// lane, and nothing but the lanes' own rules orders them. The rules are the weakest order any
// backend gives:
//   - compute and copy are queues (a GPU's streams): a pass starts once the pass issued before
//     it on its lane has ended;
//   - comm is no queue: a communicator may finish its reductions in any order (MPI's
//     non-blocking collectives in poll mode), so a comm pass starts after nothing on its lane,
//     and one launched again (of the same turn of what it reduces) before its last launch has
//     ended is a problem;
//   - a pass on comm or copy (a reduction, a swap's copy) starts after the compute passes issued
//     before it: it is launched after an event of the compute stream;
//   - a pass on the host runs when it is issued and ends before the next is issued; so does a
//     Join::kHost pass, which the host waits for; a Join::kHostMemory pass has done with host
//     memory when the next is issued, which orders only what the two touch in host memory;
//   - a Join::kLanes pass (a wait) starts once its predecessors on other lanes (Step::after, and
//     Step::carried into earlier iterations) have ended, and its lane runs what follows after it.
// The CPU backend runs compute and copies on the host, which orders more; nothing else orders
// two lanes. Every edge must follow from these rules, or a pass could read what another lane has
// not finished writing, or overwrite what it still reads.
#pragma once
#include <string>
#include <vector>

#include "runtime/nn/memory_plan.h"
#include "runtime/nn/schedule.h"

namespace dlb {

// One line per edge (a pass and a predecessor) that the rules above do not order, in iterations
// run one after another from the first: "pass 34 (optimizer on compute) starts before pass 36
// (allreduce on comm) of the iteration 2 back has ended". Empty: every edge is honoured. The
// schedule is unrolled until every carried edge and every turn has come round twice.
std::vector<std::string> lane_order_problems(const Schedule& s,
                                             const std::vector<TensorInfo>& tensors);

// The same rules over the bytes `plan` stores the tensors in (the edges are
// lane_order_problems's to check): a pass that writes bytes another pass touched, or touches
// bytes another wrote, starts after it has ended, in the iteration or earlier ones, wherever the
// plan gives two tensors the same bytes ("pass 8 (forward on compute) writes classifier.0 in
// bytes that pass 7 (swap_out on copy) read as features.3, before it has ended"). A tensor used
// in turn (TensorInfo::turns) is touched in its turns only.
std::vector<std::string> plan_lane_problems(const Schedule& s,
                                            const std::vector<TensorInfo>& tensors,
                                            const MemoryPlan& plan);

}  // namespace dlb
