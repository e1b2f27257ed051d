// The MPI communicator under mpirun (ctest runs it on 2 and 4 ranks): all-reduce results,
// several all-reduces in flight at once, broadcast and all-gather. Every rank runs every test; a
// failure on any rank fails the job.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "runtime/backend/backend.h"
#include "runtime/comm/communicator.h"
#include "runtime/core/error.h"
#include "runtime/core/half.h"
#include "runtime/core/hash.h"
#include "runtime/train/trainer.h"
#include "suites/harness/core/host_share.h"
#include "workloads/data/dataset.h"
#include "workloads/models/model.h"

namespace dlb {
namespace {

Communicator* comm = nullptr;

class CommTest : public ::testing::Test {
 protected:
  Tensor filled(int64_t n, float v) {
    Tensor t = backend->empty({n}, DType::kF32, MemCategory::kComm, "buffer");
    backend->fill(t, v);
    return t;
  }
  std::unique_ptr<Backend> backend = make_backend(BackendKind::kCpu, {});
};

TEST_F(CommTest, SizeMatchesTheLauncher) {
  const char* world = std::getenv("OMPI_COMM_WORLD_SIZE");
  ASSERT_NE(world, nullptr) << "run under mpirun";
  EXPECT_EQ(comm->size(), std::atoi(world));
  EXPECT_GE(comm->rank(), 0);
  EXPECT_LT(comm->rank(), comm->size());
}

TEST_F(CommTest, SumAndAverageOfRankDependentValues) {
  const int n = comm->size(), r = comm->rank();
  for (int64_t count : {1, 7, 1000, 1 << 18}) {
    Tensor t = backend->empty({count}, DType::kF32, MemCategory::kComm, "buffer");
    for (int64_t i = 0; i < count; ++i) t.data<float>()[i] = static_cast<float>((r + 1) * (i % 13));
    comm->allreduce(t, ReduceOp::kSum);
    for (int64_t i = 0; i < count; ++i) {
      ASSERT_EQ(t.data<float>()[i], static_cast<float>(n * (n + 1) / 2 * (i % 13))) << i;
    }
    Tensor a = filled(count, static_cast<float>(r));
    comm->allreduce(a, ReduceOp::kAverage);
    EXPECT_FLOAT_EQ(a.data<float>()[count - 1], (n - 1) / 2.f);
  }
}

// 16-bit buffers (fp16 and bf16 gradients): sums of small integers are exact in both types, so
// the result is exact whatever order MPI adds in; an average divides each rank's value first (as
// PyTorch DDP does), then sums: (r / n) summed over r, exact for n a power of two.
TEST_F(CommTest, SixteenBitSumsAndAverages) {
  const int n = comm->size(), r = comm->rank();
  for (DType t16 : {DType::kF16, DType::kBF16}) {
    for (int64_t count : {1, 7, 1000, 1 << 16}) {
      std::vector<float> values(count);
      for (int64_t i = 0; i < count; ++i) values[i] = static_cast<float>((r + 1) * (i % 13));
      Tensor t = backend->empty({count}, t16, MemCategory::kComm, "buffer");
      floats_to_dtype(values.data(), count, t16, t.raw());
      comm->allreduce(t, ReduceOp::kSum);
      dtype_to_floats(t.raw(), count, t16, values.data());
      for (int64_t i = 0; i < count; ++i) {
        ASSERT_EQ(values[i], static_cast<float>(n * (n + 1) / 2 * (i % 13)))
            << dtype_name(t16) << " " << i;
      }
      std::fill(values.begin(), values.end(), static_cast<float>(r));
      floats_to_dtype(values.data(), count, t16, t.raw());
      comm->allreduce(t, ReduceOp::kAverage);
      dtype_to_floats(t.raw(), count, t16, values.data());
      for (int64_t i = 0; i < count; ++i) {
        ASSERT_EQ(values[i], (n - 1) / 2.f) << dtype_name(t16) << " " << i;
      }
    }
  }
}

TEST_F(CommTest, SeveralAllReducesInFlight) {
  std::vector<Tensor> bufs;
  std::vector<std::unique_ptr<CommHandle>> handles;
  for (int b = 0; b < 4; ++b)
    bufs.push_back(filled(5000 + b, static_cast<float>(b + comm->rank())));
  for (auto& t : bufs) handles.push_back(comm->allreduce_async(t, ReduceOp::kSum));
  for (int b = 3; b >= 0; --b) handles[b]->wait();  // completion order need not match issue order
  const int n = comm->size();
  for (int b = 0; b < 4; ++b) {
    EXPECT_TRUE(handles[b]->test());
    EXPECT_EQ(bufs[b].data<float>()[0], static_cast<float>(n * b + n * (n - 1) / 2));
  }
}

TEST_F(CommTest, OrderBeforeTheHostWaitsForTheResult) {
  Tensor t = filled(1 << 16, static_cast<float>(comm->rank() + 1));
  auto h = comm->allreduce_async(t, ReduceOp::kSum, backend->stream());
  h->order_before(backend->stream());  // the CPU backend's stream is the host: this waits
  EXPECT_TRUE(h->test());
  const int n = comm->size();
  EXPECT_EQ(t.data<float>()[(1 << 16) - 1], static_cast<float>(n * (n + 1) / 2));
}

TEST_F(CommTest, RefusesADeviceStream) {
  // Open MPI here is not CUDA-aware; a device producer means device buffers. The stream is never
  // dereferenced: the check comes first.
  Tensor t = filled(16, 1.f);
  int not_a_stream = 0;
  EXPECT_THROW(comm->allreduce_async(t, ReduceOp::kSum, StreamRef{&not_a_stream}), InvalidArgument);
  comm->barrier();
}

TEST_F(CommTest, LocalRankComesFromTheLauncher) {
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  ASSERT_NE(local, nullptr) << "run under mpirun";
  EXPECT_EQ(local_rank(comm->rank()), std::atoi(local));
}

TEST_F(CommTest, TheRanksOnThisMachineCountThemselvesAndTheirCpus) {
  // mpirun starts every rank of this test here: each counts them all, and all agree on the CPUs
  // they have between them, which hold each one's own.
  const HostShare s = measure_host_share(*comm);
  EXPECT_EQ(s.ranks, comm->size());
  EXPECT_GE(s.cpus, s.own_cpus);
  EXPECT_GE(s.own_cpus, 1);
  const auto all = comm->allgather(static_cast<uint64_t>(s.cpus));
  EXPECT_EQ(std::set<uint64_t>(all.begin(), all.end()).size(), 1u);
}

TEST_F(CommTest, BroadcastAndAllgather) {
  Tensor t = filled(100, static_cast<float>(comm->rank() * 10 + 3));
  comm->broadcast(t, 0);
  EXPECT_EQ(t.data<float>()[99], 3.f);
  const auto all = comm->allgather(static_cast<uint64_t>(comm->rank()) * 7);
  ASSERT_EQ(all.size(), static_cast<size_t>(comm->size()));
  for (int i = 0; i < comm->size(); ++i) EXPECT_EQ(all[i], static_cast<uint64_t>(i) * 7);
  EXPECT_EQ(comm->max_across_ranks(comm->rank()), comm->size() - 1);
  const int n = comm->size();
  EXPECT_EQ(comm->sum_across_ranks(comm->rank() + 1), n * (n + 1) / 2);
  EXPECT_FALSE(comm->environment().at("mpi").empty());
}

// FNV-1a over every state entry (parameters and batch-norm buffers), and over the buffers alone.
std::pair<uint64_t, uint64_t> state_checksums(Graph& g) {
  std::set<std::string> params;
  for (const auto& np : g.named_params()) params.insert(np.name);
  uint64_t all = kFnv1aOffset, buffers = kFnv1aOffset;
  for (const auto& [name, t] : g.state_dict()) {
    all = fnv1a(t.bytes.data(), t.bytes.size(), all);
    if (!params.count(name)) buffers = fnv1a(t.bytes.data(), t.bytes.size(), buffers);
  }
  return {all, buffers};
}

bool same_on_every_rank(uint64_t x) {
  const auto all = comm->allgather(x);
  return std::all_of(all.begin(), all.end(), [&](uint64_t v) { return v == all[0]; });
}

TEST_F(CommTest, BroadcastBuffersGivesEveryRankRankZerosRunningStatistics) {
  Graph g = build_model("resnet18", ModelConfig{2, 8, 10, 0.f});
  Rng rng(static_cast<uint64_t>(comm->rank()) + 1);  // different weights until the broadcast
  g.declare_for(*backend);
  TrainConfig tc;
  tc.comm = comm;
  Trainer t(*backend, g, tc, rng);
  t.broadcast_weights();
  ASSERT_TRUE(same_on_every_rank(state_checksums(g).first));
  // Each rank's own data moves its running statistics its own way.
  const Dataset d = make_synthetic(2, 3, 8, 10, 100 + static_cast<uint64_t>(comm->rank()));
  t.load_batch(d.images.data(), d.labels.data());
  t.step();
  const auto [all_before, buffers_before] = state_checksums(g);
  if (comm->size() > 1) {
    EXPECT_FALSE(same_on_every_rank(buffers_before));
  }
  EXPECT_TRUE(t.weights_identical_across_ranks());  // the gradients were averaged
  t.broadcast_buffers();
  const auto [all_after, buffers_after] = state_checksums(g);
  EXPECT_TRUE(same_on_every_rank(all_after));
  EXPECT_TRUE(same_on_every_rank(buffers_after));
  if (comm->rank() == 0) {
    EXPECT_EQ(all_after, all_before);  // rank 0 keeps its own
  }
}

// fp16 with an overflow on the last rank only, in one step: the all-reduce carries it to every
// rank, so every rank skips that step (its weights stay as they were), halves its scale and
// counts one skipped step, in every overlap strategy (the skip check completes every bucket's
// reduction before the step's first update, whichever bucket that update is for).
class Fp16Skip : public ::testing::TestWithParam<OverlapStrategy> {};

TEST_P(Fp16Skip, AnOverflowOnOneRankSkipsTheStepOnEveryRank) {
  auto backend = make_backend(BackendKind::kCpu, {});
  Graph g = build_model("digits-cnn", ModelConfig{4, 8, 10, 0.f});
  Rng rng(3);
  g.declare_for(*backend, PrecisionPolicy::for_precision(Precision::kFp16));
  TrainConfig tc;
  tc.comm = comm;
  tc.step.overlap = GetParam();
  tc.step.bucket_mb = 0.1;  // several buckets
  tc.loss_scaling = LossScaleConfig{1024.f, 2.f, 0.5f, 100};
  Trainer t(*backend, g, tc, rng);
  t.broadcast_weights();
  const Dataset d = make_synthetic(4, 1, 8, 10, 40 + static_cast<uint64_t>(comm->rank()));
  std::vector<float> overflowing = d.images;
  overflowing[3] = 1e6f;  // beyond fp16's range
  const bool last = comm->rank() == comm->size() - 1;
  uint64_t before_skip = 0;
  for (int step = 0; step < 4; ++step) {
    t.load_batch(step == 2 && last ? overflowing.data() : d.images.data(), d.labels.data());
    t.step();
    t.flush();  // the forward strategy's deferred updates, so the weights read are this step's
    if (step == 1) before_skip = t.weights_checksum();
    if (step == 2) {
      EXPECT_EQ(t.weights_checksum(), before_skip) << "the overflowing step updated";
    }
  }
  EXPECT_EQ(t.loss_scaler()->scale(), 512.f);
  EXPECT_EQ(t.loss_scaler()->skipped_steps(), 1);
  EXPECT_TRUE(t.weights_identical_across_ranks());
}

INSTANTIATE_TEST_SUITE_P(Strategies, Fp16Skip,
                         ::testing::Values(OverlapStrategy::kNone, OverlapStrategy::kBackward,
                                           OverlapStrategy::kForward),
                         [](const auto& info) { return std::string(overlap_name(info.param)); });

}  // namespace
}  // namespace dlb

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto communicator = dlb::make_communicator(dlb::CommKind::kMpi);
  dlb::comm = communicator.get();
  // Only rank 0 prints results, so the job's output reads as one run.
  if (communicator->rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int rc = RUN_ALL_TESTS();
  const double worst = communicator->max_across_ranks(rc);
  return worst == 0 ? 0 : 1;
}
