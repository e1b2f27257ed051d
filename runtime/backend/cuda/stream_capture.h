// CUDA graphs of one stream's work (--cuda-graph): the work queued on the stream between
// begin_stream_capture and end_stream_capture is recorded, not run, then instantiated once, and
// each replay is one cudaGraphLaunch on the same stream.
#pragma once
#include <cuda_runtime.h>

#include <memory>

#include "runtime/backend/backend.h"

namespace dlb::cuda {

// Starts capturing `stream` in global mode: a call from any thread that could wait for the
// device or allocate on it (cudaStreamSynchronize, cudaMalloc, a copy to pageable memory) fails
// and invalidates the capture, rather than running outside the graph.
void begin_stream_capture(cudaStream_t stream);
// Ends the capture and instantiates its graph. Throws Unsupported, with CUDA's reason, when
// the capture was invalidated or the graph cannot be instantiated.
std::unique_ptr<CapturedWork> end_stream_capture(cudaStream_t stream);
// Ends a capture that failed midway, discards its graph, and clears the error it left.
void abandon_stream_capture(cudaStream_t stream) noexcept;

}  // namespace dlb::cuda
