// libFuzzer target: a tar shard (--data=shards). Any bytes are read as members or refused with a
// dlb::Error; every member read lies inside the bytes.
#include <cstdint>
#include <cstdlib>

#include "tests/fuzz/fuzz_target.h"
#include "workloads/data/tar_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return dlb::fuzz::run_reader([&] {
    for (const dlb::TarMember& m : dlb::tar_members(data, size, "shard.tar")) {
      if (m.offset > size || m.size > size - m.offset) std::abort();
    }
  });
}
