// Peers: other training systems, run on a sweep's points beside dlbench so that the ratio of
// their throughputs comes from one run on one machine. A peer is a program that reads the point
// file the harness writes (its "resolved" config: every key, with the model's defaults filled
// in; and "record", where to write) and writes one record in dlbench's result schema
// (suites/schema/result.schema.json) whose config.system names it. reports/peers/ holds them.
#pragma once
#include <string>
#include <vector>

#include "suites/harness/core/launcher.h"
#include "suites/harness/core/run_options.h"

namespace dlb {

// How `system`'s peer runs one rank of a point. Throws Unsupported, naming what is missing,
// when the peer cannot run here: no Python that imports its framework.
std::vector<std::string> peer_argv(System system, const std::string& point_file);

// How a peer's input pipeline reads a folder for `dlbench bench input`: `pytorch`, PyTorch's
// DataLoader (reports/peers/torch_input.py), or `dali`, NVIDIA DALI's CPU pipeline
// (reports/peers/dali_input.py): its Python and script. Unsupported as peer_argv.
std::vector<std::string> input_peer_argv(const std::string& system);

// What a peer's ranks need to find each other (torch.distributed's MASTER_ADDR and MASTER_PORT):
// a free port here, and this host as the address when every rank runs on it. A MASTER_ADDR or
// MASTER_PORT the user set is kept. mpirun passes both on with -x.
void add_peer_rendezvous(LaunchCommand& cmd, const LaunchHost& host);

}  // namespace dlb
