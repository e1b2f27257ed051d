// Decoding JPEG batches on the device (--decode=gpu; docs/input.md): the training images of a
// batch, as the loader's threads left them (a file's bytes, its crop box and its flip, drawn on
// the host as the CPU path draws them), decoded, cropped and resized, flipped and normalised into
// the step's input tensor, on a queue of the decoder's own. The CUDA backend's decoder is nvJPEG's
// batched decoder (on the GPU's hardware JPEG engines where it has them) followed by our kernels
// (backend/cuda/image_kernels.h: PIL's resize, the arithmetic of the CPU path's
// workloads/data/augment.h). make_image_decoder (backend/registry.cpp) makes one.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/backend/backend.h"

namespace dlb {

// One image of a batch. `data` is the JPEG file's bytes, or (decoded) its pixels already decoded
// on the host: width x height x 3 bytes of RGB, rows top to bottom (a file the device's decoder
// does not read, such as a CMYK JPEG).
struct EncodedImage {
  const uint8_t* data = nullptr;
  size_t size = 0;
  bool decoded = false;
  int64_t width = 0, height = 0;                      // the image's, from its header
  int64_t top = 0, left = 0, crop_h = 0, crop_w = 0;  // its crop box (torchvision's i, j, h, w)
  bool flip = false;                                  // mirrored left to right after the resize
  std::string_view name;                              // how an error names it
};

// ToTensor's division by 255, then Normalize's mean and standard deviation, per channel.
struct ImageNormalization {
  std::array<float, 3> mean{}, std{};
};

class ImageDecoder {
 public:
  virtual ~ImageDecoder() = default;
  // What decodes ("nvjpeg hardware", "nvjpeg"), for records.
  virtual std::string name() const = 0;
  // The device memory the decoder holds of its own (decoded images, scratch), outside the step's
  // memory plan; not a library's internal buffers.
  virtual size_t device_bytes() const { return 0; }
  // Decodes `images` into `dst` ([N, 3, S, S] of N images: its dtype and layout), each cropped,
  // resized to S x S as PIL resizes, flipped and normalised, once the compute work before `free`
  // (a mark of the backend's clock) has run. Returns marks of its start and end on the decoder's
  // queue; the backend's wait_for_input(end) orders the step after it. `images`' bytes may be
  // reused when it returns. InvalidArgument naming an image the decoder cannot read.
  virtual Backend::CopyMarks decode(const std::vector<EncodedImage>& images,
                                    const ImageNormalization& norm, Tensor& dst,
                                    const Mark& free) = 0;
};

// The device decoder of `backend` (which must outlive it). Unsupported on a backend without one
// (the CPU: its loader decodes), and where this build has no nvJPEG.
std::unique_ptr<ImageDecoder> make_image_decoder(Backend& backend);

}  // namespace dlb
