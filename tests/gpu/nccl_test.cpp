// The nccl communicator on real GPUs, under mpirun with one rank per GPU: all-reduces of device
// buffers ordered after the producing stream and before the consuming one (no host wait between),
// several in flight, the refusal of host buffers, and the version in the environment. Without a
// visible GPU the program exits 77, which ctest reports as skipped.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/comm/communicator.h"
#include "runtime/core/error.h"
#include "tests/gpu/skip_without_gpu.h"

namespace dlb {
namespace {

Communicator* comm = nullptr;

class NcclTest : public ::testing::Test {
 protected:
  NcclTest() {
    BackendOptions o;
    o.device = local_rank(comm->rank());
    memory = make_device_memory(BackendKind::kCuda, o);
  }
  std::vector<float> to_host(const Tensor& t) {
    std::vector<float> h(t.numel());
    memory->copy_to_host(t, h.data());  // queued on the compute stream
    return h;
  }
  std::unique_ptr<DeviceMemory> memory;
};

TEST_F(NcclTest, SumOrderedBetweenProducerAndConsumerStreams) {
  const int n = comm->size(), r = comm->rank();
  for (int64_t count : {1, 1000, 1 << 22}) {
    Tensor t = memory->empty({count}, DType::kF32, MemCategory::kComm, "t");
    memory->fill(t, static_cast<float>(r + 1));  // queued, not waited for
    auto h = comm->allreduce_async(t, ReduceOp::kSum, memory->stream());
    h->order_before(memory->stream());  // the copy below waits on the event, not the host
    const auto out = to_host(t);
    for (int64_t i = 0; i < count; ++i) ASSERT_EQ(out[i], n * (n + 1) / 2.f) << count << " " << i;
  }
}

TEST_F(NcclTest, AverageAndSeveralInFlight) {
  const int n = comm->size(), r = comm->rank();
  std::vector<Tensor> bufs;
  std::vector<std::unique_ptr<CommHandle>> handles;
  for (int b = 0; b < 4; ++b) {
    bufs.push_back(memory->empty({5000 + b}, DType::kF32, MemCategory::kComm, "bucket"));
    memory->fill(bufs.back(), static_cast<float>(b + r));
    handles.push_back(comm->allreduce_async(bufs.back(), ReduceOp::kAverage, memory->stream()));
  }
  for (int b = 3; b >= 0; --b) handles[b]->wait();
  for (int b = 0; b < 4; ++b) {
    EXPECT_TRUE(handles[b]->test());
    EXPECT_FLOAT_EQ(to_host(bufs[b])[4999], b + (n - 1) / 2.f);
  }
}

TEST_F(NcclTest, RefusesHostBuffers) {
  auto host = make_device_memory(BackendKind::kCpu, {});
  Tensor t = host->empty({16}, DType::kF32, MemCategory::kComm, "host");
  EXPECT_THROW(comm->allreduce_async(t, ReduceOp::kSum), InvalidArgument);
}

TEST_F(NcclTest, EnvironmentNamesNcclAndTheDevice) {
  const auto env = comm->environment();
  EXPECT_FALSE(env.at("nccl").empty());
  EXPECT_EQ(env.at("nccl_device"), memory->environment().at("device_index"));
}

}  // namespace
}  // namespace dlb

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (dlb::skip_without_gpu()) return dlb::kSkippedExitCode;
  auto communicator = dlb::make_communicator(dlb::CommKind::kNccl);
  dlb::comm = communicator.get();
  if (communicator->rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int rc = RUN_ALL_TESTS();
  return communicator->max_across_ranks(rc) == 0 ? 0 : 1;
}
