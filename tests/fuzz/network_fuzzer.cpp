// libFuzzer target: a network file (dlbench simulate --network=FILE.json): a preset, or a
// `dlbench bench allreduce --json` record. Any bytes are read or refused with a dlb::Error. A
// network that is read predicts, for every rank count the simulator takes and any message size,
// an all-reduce time that is finite and at least 0.
#include <cmath>
#include <cstdint>

#include "runtime/sim/network.h"
#include "suites/harness/simulate/calibrate.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dlb::fuzz::run_reader([&] {
    const dlb::Network net = dlb::load_network(dlb::fuzz::as_file(data, size, "network.json"));
    for (int64_t ranks :
         {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{8}, int64_t{1000}, dlb::kMaxSimulatedRanks}) {
      for (double bytes : {0.0, 1.0, 4e6, 1e12}) {
        const double us = dlb::fastest_allreduce(net, bytes, ranks).us;
        dlb::fuzz::require(std::isfinite(us) && us >= 0,
                           "a network read whose all-reduce time is not finite and at least 0");
      }
    }
    dlb::network_json(net).dump();
  });
  return 0;
}
