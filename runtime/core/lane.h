// Where a pass of the step runs (docs/architecture.md, "The step"): the compute queue, the
// communicator's, the copy queue, or the host itself. The schedule gives every pass a lane, the
// executor records each pass's marks on it, and a trace draws one row per lane. The input
// pipeline's worker threads are a lane of no pass: a trace draws loader thread k at kLoader + k.
#pragma once

namespace dlb {

enum class Lane { kCompute = 0, kComm = 1, kCopy = 2, kHost = 3, kLoader = 4 };
inline constexpr Lane kLanes[] = {Lane::kCompute, Lane::kComm, Lane::kCopy, Lane::kHost,
                                  Lane::kLoader};

// "compute", "comm", "copy", "host", "loader": suites/schema/result.schema.json exports them.
constexpr const char* lane_name(Lane lane) {
  switch (lane) {
    case Lane::kCompute:
      return "compute";
    case Lane::kComm:
      return "comm";
    case Lane::kCopy:
      return "copy";
    case Lane::kHost:
      return "host";
    case Lane::kLoader:
      return "loader";
  }
  return "?";
}

}  // namespace dlb
