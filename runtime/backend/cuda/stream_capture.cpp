#include "runtime/backend/cuda/stream_capture.h"

#include <fmt/format.h>

#include <type_traits>

#include "runtime/backend/cuda/cuda_check.h"
#include "runtime/core/error.h"

namespace dlb::cuda {
namespace {

struct GraphDeleter {
  void operator()(cudaGraph_t g) const { cudaGraphDestroy(g); }
};
struct ExecDeleter {
  void operator()(cudaGraphExec_t e) const { cudaGraphExecDestroy(e); }
};
using OwnedGraph = std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, GraphDeleter>;
using OwnedExec = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, ExecDeleter>;

class StreamGraph final : public CapturedWork {
 public:
  StreamGraph(OwnedGraph graph, cudaStream_t stream) : graph_(std::move(graph)), stream_(stream) {
    size_t nodes = 0;
    DLB_CUDA_CHECK(cudaGraphGetNodes(graph_.get(), nullptr, &nodes));
    nodes_ = static_cast<int64_t>(nodes);
    cudaGraphExec_t exec = nullptr;
    const cudaError_t err = cudaGraphInstantiate(&exec, graph_.get(), 0);
    if (err != cudaSuccess) {
      cudaGetLastError();
      if (err == cudaErrorMemoryAllocation) {
        throw OutOfMemory(
            fmt::format("--cuda-graph: no device memory to instantiate the "
                        "captured step ({} operations)",
                        nodes_));
      }
      throw Unsupported(fmt::format(
          "--cuda-graph: the captured step ({} operations) could not be instantiated: {}", nodes_,
          cudaGetErrorString(err)));
    }
    exec_.reset(exec);
    // The graph's resources go onto the device now, not in the first replay.
    DLB_CUDA_CHECK(cudaGraphUpload(exec_.get(), stream_));
  }

  void replay() override { DLB_CUDA_CHECK(cudaGraphLaunch(exec_.get(), stream_)); }
  int64_t operations() const override { return nodes_; }

 private:
  OwnedGraph graph_;
  OwnedExec exec_;  // destroyed before graph_
  cudaStream_t stream_;
  int64_t nodes_ = 0;
};

}  // namespace

void begin_stream_capture(cudaStream_t stream) {
  DLB_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
}

std::unique_ptr<CapturedWork> end_stream_capture(cudaStream_t stream) {
  cudaGraph_t graph = nullptr;
  const cudaError_t err = cudaStreamEndCapture(stream, &graph);
  if (err != cudaSuccess || !graph) {
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();  // the capture's error is reported here, not by the next call
    throw Unsupported(
        fmt::format("--cuda-graph: the step could not be captured: {}", cudaGetErrorString(err)));
  }
  return std::make_unique<StreamGraph>(OwnedGraph(graph), stream);
}

void abandon_stream_capture(cudaStream_t stream) noexcept {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) == cudaSuccess &&
      status == cudaStreamCaptureStatusNone) {
    cudaGetLastError();
    return;
  }
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(stream, &graph);  // ends an invalidated capture too (its error ignored)
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();
}

}  // namespace dlb::cuda
