#include "runtime/backend/cuda/jpeg_decoder.h"

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nvjpeg.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend/cuda/cuda_check.h"
#include "runtime/backend/cuda/device.h"
#include "runtime/backend/cuda/image_kernels.h"
#include "runtime/backend/cuda/launch.h"
#include "runtime/backend/cuda/staging.h"
#include "runtime/core/nvtx.h"

namespace dlb::cuda {
namespace {

void check_nvjpeg(nvjpegStatus_t s, const char* what) {
  if (s == NVJPEG_STATUS_SUCCESS) return;
  if (s == NVJPEG_STATUS_ALLOCATOR_FAILURE) {
    throw OutOfMemory(fmt::format("nvJPEG: {}: out of memory", what));
  }
  throw DeviceError(fmt::format("nvJPEG: {}: status {}", what, static_cast<int>(s)));
}

// Whether a status is the file's fault (refused by name), not the device's or nvJPEG's.
bool file_fault(nvjpegStatus_t s) {
  return s == NVJPEG_STATUS_BAD_JPEG || s == NVJPEG_STATUS_JPEG_NOT_SUPPORTED ||
         s == NVJPEG_STATUS_INCOMPLETE_BITSTREAM;
}

// A device buffer on one stream that grows (by half again, so that varying image sizes settle)
// and never shrinks: stream-ordered (cudaMallocAsync), so growing neither waits for the device
// nor frees memory the stream's queued work still reads.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(cudaStream_t stream) : stream_(stream) {}
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_) cudaFreeAsync(ptr_, stream_);
  }
  size_t bytes() const { return bytes_; }
  uint8_t* at_least(size_t bytes) {
    if (bytes <= bytes_) return ptr_;
    const size_t grown = std::max(bytes, bytes_ + bytes_ / 2);
    if (ptr_) DLB_CUDA_CHECK(cudaFreeAsync(ptr_, stream_));
    ptr_ = nullptr;
    bytes_ = 0;
    void* p = nullptr;
    DLB_CUDA_CHECK(cudaMallocAsync(&p, grown, stream_));  // failure: OutOfMemory
    ptr_ = static_cast<uint8_t*>(p);
    bytes_ = grown;
    return ptr_;
  }

 private:
  cudaStream_t stream_;
  uint8_t* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// One nvJPEG handle and its batched decoder's state.
struct Nvjpeg {
  nvjpegHandle_t handle = nullptr;
  nvjpegJpegState_t state = nullptr;
  int batch = 0;  // the size nvjpegDecodeBatchedInitialize was last given
  // The end of the last batch queued on the state: nvjpegDecodeBatchedInitialize must not run
  // while a batch on the state still decodes: nvJPEG requires the batch to have finished.
  std::shared_ptr<void> last;
  Nvjpeg() = default;
  Nvjpeg(const Nvjpeg&) = delete;
  Nvjpeg& operator=(const Nvjpeg&) = delete;
  ~Nvjpeg() {
    if (state) nvjpegJpegStateDestroy(state);
    if (handle) nvjpegDestroy(handle);
  }
  // nvJPEG on `backend`, strict (a truncated or corrupt file is an error, as libjpeg-turbo's
  // warnings are on the CPU path) and upsampling chroma by interpolation (as libjpeg-turbo
  // does; nvJPEG's default repeats the nearest sample); false where this GPU has no such backend
  // (the hardware backend without JPEG engines: ARCH_MISMATCH or IMPLEMENTATION_NOT_SUPPORTED).
  // Any other failure (memory, the driver) is an error, not a GPU without engines.
  bool open(nvjpegBackend_t backend) {
    const unsigned flags =
        NVJPEG_FLAGS_BITSTREAM_STRICT | NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION;
    const nvjpegStatus_t s = nvjpegCreateEx(backend, nullptr, nullptr, flags, &handle);
    if (s != NVJPEG_STATUS_SUCCESS) handle = nullptr;
    if (s == NVJPEG_STATUS_ARCH_MISMATCH || s == NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED) {
      return false;
    }
    check_nvjpeg(s, "starting a decoder");
    check_nvjpeg(nvjpegJpegStateCreate(handle, &state), "creating a decoder state");
    return true;
  }
  // The host waits for the last batch queued on the state (none: at once).
  void wait_idle() const {
    if (last) DLB_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(last.get())));
  }
  int64_t batches = 0;  // decoded by this handle
};

class NvjpegDecoder final : public ImageDecoder {
 public:
  explicit NvjpegDecoder(Backend& backend) : backend_(backend) {
    hardware_ = std::make_unique<Nvjpeg>();
    if (!hardware_->open(NVJPEG_BACKEND_HARDWARE)) hardware_.reset();
    if (!general_.open(NVJPEG_BACKEND_DEFAULT)) {
      throw Unsupported("--decode=gpu: nvJPEG does not start on this GPU");
    }
    check_nvjpeg(nvjpegJpegStreamCreate(parser(), &parsed_), "creating a stream");
  }
  ~NvjpegDecoder() override {
    cudaStreamSynchronize(stream_.get());  // its buffers are freed after its work
    if (parsed_) nvjpegJpegStreamDestroy(parsed_);
  }
  NvjpegDecoder(const NvjpegDecoder&) = delete;
  NvjpegDecoder& operator=(const NvjpegDecoder&) = delete;

  // What decoded the batches so far: nvJPEG's hardware backend, its default one, or both (a
  // batch split between them counts in each).
  std::string name() const override {
    const int64_t hw = hardware_ ? hardware_->batches : 0, sw = general_.batches;
    if (hw > 0 && sw > 0) {
      return fmt::format("nvjpeg hardware ({} batches) and default ({} batches)", hw, sw);
    }
    return hw > 0 ? "nvjpeg hardware" : "nvjpeg";
  }

  size_t device_bytes() const override { return pixels_.bytes() + wide_.bytes() + tables_.bytes(); }

  Backend::CopyMarks decode(const std::vector<EncodedImage>& images, const ImageNormalization& norm,
                            Tensor& dst, const Mark& free) override;

 private:
  // The handle whose parse of a file the engines' check reads: theirs, where the GPU has them.
  nvjpegHandle_t parser() const { return hardware_ ? hardware_->handle : general_.handle; }
  std::vector<bool> inspect(const std::vector<EncodedImage>& images);
  std::vector<const uint8_t*> stage(const std::vector<EncodedImage>& images);
  void decode_files(const std::vector<EncodedImage>& images,
                    const std::vector<const uint8_t*>& staged, const ImageBatchPlan& plan,
                    uint8_t* pixels, const std::vector<bool>& engines);
  nvjpegStatus_t decode_batch(Nvjpeg& d, std::vector<const unsigned char*>& data,
                              std::vector<size_t>& sizes, std::vector<nvjpegImage_t>& out);
  void name_bad_file(const std::vector<EncodedImage>& images, nvjpegStatus_t batch_status);
  void resize(const ImageBatchPlan& plan, const ImageNormalization& norm, const uint8_t* pixels,
              Tensor& dst, const Mark& free);

  Backend& backend_;
  Stream stream_;
  std::unique_ptr<Nvjpeg> hardware_;  // null: no JPEG engines
  Nvjpeg general_;
  nvjpegJpegStream_t parsed_ = nullptr;  // inspect's parse of a file
  DeviceBuffer pixels_{stream_.get()}, wide_{stream_.get()}, tables_{stream_.get()};
  // Two of each, used in turn by batch (each waited for before its reuse): a batch's files and
  // tables are staged while the batch before may still be decoding.
  PinnedSlot staged_tables_[2];
  PinnedSlot staged_files_[2];
  int slot_ = 0;
};

// One parse of each file (with JPEG engines, the whole stream: a file they would take is checked
// to its last marker before they see it; without, its header): its size as nvJPEG reads it,
// which must be the loader's, or the file is refused by name (libjpeg-turbo read its header,
// nvJPEG does not; a status that does not blame the file is nvJPEG's error, naming the file);
// and whether the engines decode it (baseline, one scan).
std::vector<bool> NvjpegDecoder::inspect(const std::vector<EncodedImage>& images) {
  std::vector<bool> engines(images.size(), false);
  for (size_t i = 0; i < images.size(); ++i) {
    const EncodedImage& im = images[i];
    if (im.decoded) continue;
    unsigned width = 0, height = 0;
    // The header alone where no engines will read the file.
    const int header_only = hardware_ ? 0 : 1;
    nvjpegStatus_t s = nvjpegJpegStreamParse(parser(), im.data, im.size, 0, header_only, parsed_);
    if (s == NVJPEG_STATUS_SUCCESS) {
      s = nvjpegJpegStreamGetFrameDimensions(parsed_, &width, &height);
    }
    if (s != NVJPEG_STATUS_SUCCESS && !file_fault(s)) {
      check_nvjpeg(s, fmt::format("parsing {}", im.name).c_str());
    }
    if (s != NVJPEG_STATUS_SUCCESS || width != static_cast<unsigned>(im.width) ||
        height != static_cast<unsigned>(im.height)) {
      throw InvalidArgument(fmt::format("{}: nvJPEG does not read it (status {}, {}x{})", im.name,
                                        static_cast<int>(s), width, height));
    }
    int unsupported = 1;  // 0: the engines decode it
    engines[i] = hardware_ &&
                 nvjpegDecodeBatchedSupported(hardware_->handle, parsed_, &unsupported) ==
                     NVJPEG_STATUS_SUCCESS &&
                 unsupported == 0;
  }
  return engines;
}

// A batch the general decoder failed: each file decoded alone, by it, to name the first that
// fails; where none does, the batch's own failure. A CUDA error is the device's, not a file's.
void NvjpegDecoder::name_bad_file(const std::vector<EncodedImage>& images,
                                  nvjpegStatus_t batch_status) {
  general_.wait_idle();
  DeviceBuffer one(stream_.get());
  for (const EncodedImage& im : images) {
    if (im.decoded) continue;
    nvjpegImage_t out{};
    out.channel[0] = one.at_least(static_cast<size_t>(im.width * im.height * 3));
    out.pitch[0] = static_cast<size_t>(im.width * 3);
    const nvjpegStatus_t s = nvjpegDecode(general_.handle, general_.state, im.data, im.size,
                                          NVJPEG_OUTPUT_RGBI, &out, stream_.get());
    general_.last = record_event(stream_.get());  // the state's use, until it has ended
    if (file_fault(s)) {
      throw InvalidArgument(
          fmt::format("{}: nvJPEG cannot decode it (status {})", im.name, static_cast<int>(s)));
    }
    check_nvjpeg(s, "decoding one file");
    DLB_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
  }
  check_nvjpeg(batch_status, "decoding a batch");
}

// Every image's bytes in a pinned buffer of the decoder's (two, used in turn, each until the
// device's decode of it has ended): nvJPEG may read them after its call returns, and the loader
// reuses its own. Returns where each image's bytes went.
std::vector<const uint8_t*> NvjpegDecoder::stage(const std::vector<EncodedImage>& images) {
  size_t total = 0;
  for (const EncodedImage& im : images) total += im.size;
  PinnedSlot& slot = staged_files_[slot_];
  auto* at = static_cast<uint8_t*>(slot.reserve(total));
  std::vector<const uint8_t*> out;
  for (const EncodedImage& im : images) {
    std::memcpy(at, im.data, im.size);
    out.push_back(at);
    at += im.size;
  }
  return out;
}

// `data` decoded into `out` by `d`, in one batch (initialised again when its size changes).
nvjpegStatus_t NvjpegDecoder::decode_batch(Nvjpeg& d, std::vector<const unsigned char*>& data,
                                           std::vector<size_t>& sizes,
                                           std::vector<nvjpegImage_t>& out) {
  const auto n = static_cast<int>(data.size());
  if (d.batch != n) {
    d.wait_idle();
    check_nvjpeg(nvjpegDecodeBatchedInitialize(d.handle, d.state, n, 1, NVJPEG_OUTPUT_RGBI),
                 "starting a batch");
    d.batch = n;
  }
  const nvjpegStatus_t s =
      nvjpegDecodeBatched(d.handle, d.state, data.data(), sizes.data(), out.data(), stream_.get());
  d.last = record_event(stream_.get());
  if (s == NVJPEG_STATUS_SUCCESS) {
    ++d.batches;
  } else {
    d.batch = 0;  // a failed batched state is initialised again before its next batch
  }
  return s;
}

// The files into their places in `pixels` (interleaved RGB), those `engines` marks by the
// hardware decoder and the rest by the general one, each part one batch; the images the loader
// decoded copied there, from `staged`. A part the engines fail goes to the general decoder; one
// that fails there names its file.
void NvjpegDecoder::decode_files(const std::vector<EncodedImage>& images,
                                 const std::vector<const uint8_t*>& staged,
                                 const ImageBatchPlan& plan, uint8_t* pixels,
                                 const std::vector<bool>& engines) {
  struct Part {
    std::vector<const unsigned char*> data;
    std::vector<size_t> sizes;
    std::vector<nvjpegImage_t> out;
  } parts[2];  // [0]: the general decoder's, [1]: the engines'
  for (size_t i = 0; i < images.size(); ++i) {
    const EncodedImage& im = images[i];
    uint8_t* to = pixels + plan.jobs[i].pixels;
    if (im.decoded) {
      DLB_CUDA_CHECK(
          cudaMemcpyAsync(to, staged[i], im.size, cudaMemcpyHostToDevice, stream_.get()));
      continue;
    }
    Part& p = parts[engines[i] ? 1 : 0];
    p.data.push_back(staged[i]);
    p.sizes.push_back(im.size);
    nvjpegImage_t o{};
    o.channel[0] = to;
    o.pitch[0] = static_cast<size_t>(im.width * 3);
    p.out.push_back(o);
  }
  const auto run = [&](Part& p, bool on_hardware) {
    if (p.data.empty()) return;
    if (on_hardware && decode_batch(*hardware_, p.data, p.sizes, p.out) == NVJPEG_STATUS_SUCCESS) {
      return;
    }
    const nvjpegStatus_t s = decode_batch(general_, p.data, p.sizes, p.out);
    if (s != NVJPEG_STATUS_SUCCESS) name_bad_file(images, s);
  };
  run(parts[1], true);
  run(parts[0], false);
}

// The plan's jobs and taps to the device, then the two passes into `dst`.
void NvjpegDecoder::resize(const ImageBatchPlan& plan, const ImageNormalization& norm,
                           const uint8_t* pixels, Tensor& dst, const Mark& free) {
  const size_t job_bytes = plan.jobs.size() * sizeof(ImageJob);
  const size_t tap_bytes = plan.taps.size() * sizeof(int32_t);
  std::vector<uint8_t> tables(job_bytes + tap_bytes);
  std::memcpy(tables.data(), plan.jobs.data(), job_bytes);
  std::memcpy(tables.data() + job_bytes, plan.taps.data(), tap_bytes);
  uint8_t* on_device = tables_.at_least(tables.size());
  staged_tables_[slot_].fill(tables.data(), tables.size());
  staged_tables_[slot_].transfer(on_device, tables.size(), stream_.get());
  const auto* jobs = reinterpret_cast<const ImageJob*>(on_device);
  const auto* taps = reinterpret_cast<const int32_t*>(on_device + job_bytes);
  uint8_t* wide = wide_.at_least(static_cast<size_t>(plan.wide_bytes));
  const StreamRef stream{stream_.get()};
  const auto n = static_cast<int64_t>(plan.jobs.size());
  launch_for_each(stream, plan.wide_bytes, ResizeRows{pixels, jobs, n, plan.size, taps, wide});
  // Only the last kernel writes `dst`: it waits for the compute that last read it (`free`; none
  // given: everything queued on the compute stream so far).
  const Mark queued = free.device ? free : backend_.clock().mark();
  if (queued.device) {
    DLB_CUDA_CHECK(
        cudaStreamWaitEvent(stream_.get(), static_cast<cudaEvent_t>(queued.device.get()), 0));
  }
  const Nchw out{3, plan.size, plan.size, dst.layout() == Layout::kNHWC};
  with_storage(dst.dtype(), "the decoded images", [&](auto t) {
    using T = decltype(t);
    ResizeColumnsNormalize<T> f{wide, jobs, taps, out, {}, {}, static_cast<T*>(dst.raw())};
    std::copy(norm.mean.begin(), norm.mean.end(), f.mean);
    std::copy(norm.std.begin(), norm.std.end(), f.std);
    launch_for_each(stream, dst.numel(), f);
  });
}

Backend::CopyMarks NvjpegDecoder::decode(const std::vector<EncodedImage>& images,
                                         const ImageNormalization& norm, Tensor& dst,
                                         const Mark& free) {
  const Shape& s = dst.shape();
  if (s.rank() != 4 || s[0] != static_cast<int64_t>(images.size()) || s[1] != 3 || s[2] != s[3]) {
    throw InvalidArgument(
        fmt::format("--decode=gpu: {} images into a tensor of shape {}", images.size(), s.str()));
  }
  NvtxRange range("decode batch");
  // Everything that can refuse the batch, before anything is queued.
  const ImageBatchPlan plan = plan_image_batch(images, s[2]);
  const std::vector<bool> engines = inspect(images);
  const double now = backend_.clock().now_us();
  const Mark start{now, record_event(stream_.get())};
  uint8_t* pixels = pixels_.at_least(static_cast<size_t>(plan.pixel_bytes));
  const std::vector<const uint8_t*> staged = stage(images);
  try {
    decode_files(images, staged, plan, pixels, engines);
  } catch (...) {
    staged_files_[slot_].mark_used(stream_.get());  // its copies may still read it
    throw;
  }
  staged_files_[slot_].mark_used(stream_.get());
  resize(plan, norm, pixels, dst, free);
  slot_ ^= 1;
  return {start, Mark{now, record_event(stream_.get())}};
}

}  // namespace

std::unique_ptr<ImageDecoder> make_nvjpeg_decoder(Backend& backend) {
  return std::make_unique<NvjpegDecoder>(backend);
}

}  // namespace dlb::cuda
