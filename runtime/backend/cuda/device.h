// CUDA devices, streams and events: the plumbing the CUDA backend's ops will run on.
#pragma once
#include <cuda_runtime.h>

#include <string>
#include <vector>

namespace dlb::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int sm_major = 0, sm_minor = 0;
  size_t total_memory = 0;
  int multiprocessors = 0;
};

// Devices visible to this process; empty (not an error) when there is no GPU or no driver.
std::vector<DeviceInfo> query_devices();
int driver_version();  // 0 without a driver
int runtime_version();

// A non-blocking stream owned for its lifetime.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

// An event for ordering streams and timing regions on them.
class Event {
 public:
  explicit Event(bool timing = true);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(const Stream& s);
  void wait_on(const Stream& s) const;  // s waits for this event, without a host sync
  float elapsed_ms_since(const Event& start) const;

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace dlb::cuda
