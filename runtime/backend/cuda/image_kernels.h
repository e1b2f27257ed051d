// The device half of --decode=gpu (image_decoder.h): a batch's decoded JPEGs cropped, resized to
// S x S as PIL resizes (runtime/core/resample.h's taps: a horizontal pass over the rows the
// vertical pass reads, each rounded to 8 bits), mirrored where the loader drew a flip, and
// normalised into the step's input tensor, in two kernels for the whole batch. The arithmetic is
// the CPU path's (workloads/data/augment.cpp), so the same decoded pixels give the same bytes and
// floats; tests/unit/image_kernels_test.cpp runs these functors on the host against it.
// Host-compilable (kernel_layout.h says how these headers work).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/backend/cuda/kernel_layout.h"
#include "runtime/backend/cuda/stored.h"
#include "runtime/backend/image_decoder.h"
#include "runtime/core/error.h"
#include "runtime/core/host_device.h"
#include "runtime/core/resample.h"

namespace dlb::cuda {

// One image's part of a batch, as the kernels read it: offsets into the batch's three buffers
// (the decoded pixels, the taps, the horizontal pass's output). An axis's taps are `first` (S),
// `count` (S) and `weights` (S x its size) in a row; the vertical axis's `first` counts from the
// box's row `row0`.
struct ImageJob {
  int64_t pixels = 0, width = 0;  // the decoded image (bytes from the buffer's start; its row)
  int64_t top = 0, left = 0;      // the crop box's corner
  int64_t row0 = 0, rows = 0;     // the box's rows the vertical pass reads: [row0, row0 + rows)
  int64_t across = 0, across_size = 0;  // the horizontal taps (their offset, their size)
  int64_t down = 0, down_size = 0;      // the vertical taps
  int64_t wide = 0;                     // the horizontal pass's S x rows x 3 bytes (offset)
  int32_t flip = 0;
};

// Where a batch's buffers go: the decoded images each at a 256-byte boundary (nvJPEG's output
// planes), the jobs, every job's taps, and the horizontal passes' total bytes.
struct ImageBatchPlan {
  int64_t size = 0;  // S
  std::vector<ImageJob> jobs;
  std::vector<int32_t> taps;
  int64_t pixel_bytes = 0, wide_bytes = 0;
};

// An axis's taps appended to `out`: first (from `base`), count, then the weights. Returns their
// offset.
inline int64_t append_taps(const ResampleTaps& t, int64_t base, std::vector<int32_t>& out) {
  const auto at = static_cast<int64_t>(out.size());
  for (int64_t f : t.first) out.push_back(static_cast<int32_t>(f - base));
  for (int64_t c : t.count) out.push_back(static_cast<int32_t>(c));
  out.insert(out.end(), t.weights.begin(), t.weights.end());
  return at;
}

// The plan of `images` resized to `size` x `size`. InvalidArgument naming an image whose box is
// not inside it, or whose decoded pixels are not width x height x 3 bytes.
inline ImageBatchPlan plan_image_batch(const std::vector<EncodedImage>& images, int64_t size) {
  ImageBatchPlan p;
  p.size = size;
  for (const EncodedImage& im : images) {
    if (im.crop_h < 1 || im.crop_w < 1 || im.top < 0 || im.left < 0 ||
        im.top + im.crop_h > im.height || im.left + im.crop_w > im.width ||
        (im.decoded && im.size != static_cast<size_t>(im.width * im.height * 3))) {
      const auto str = [](int64_t v) { return std::to_string(v); };
      throw InvalidArgument(std::string(im.name) + ": crop (" + str(im.top) + ", " + str(im.left) +
                            ", " + str(im.crop_h) + ", " + str(im.crop_w) + ") of a " +
                            str(im.width) + "x" + str(im.height) + " image" +
                            (im.decoded ? " of other pixels" : ""));
    }
    const ResampleTaps across = resample_taps(im.crop_w, size);
    const ResampleTaps down = resample_taps(im.crop_h, size);
    ImageJob j;
    j.pixels = p.pixel_bytes;
    j.width = im.width;
    j.top = im.top;
    j.left = im.left;
    j.row0 = down.first.front();
    j.rows = down.first.back() + down.count.back() - j.row0;
    j.across = append_taps(across, 0, p.taps);
    j.across_size = across.size;
    j.down = append_taps(down, j.row0, p.taps);
    j.down_size = down.size;
    j.wide = p.wide_bytes;
    j.flip = im.flip ? 1 : 0;
    p.jobs.push_back(j);
    p.pixel_bytes += (im.width * im.height * 3 + 255) / 256 * 256;
    p.wide_bytes += size * j.rows * 3;
  }
  return p;
}

// The job whose part of a buffer holds offset i, among `n` jobs in order of that part: the last
// whose start is at most i (a binary search).
DLB_HD int64_t job_at(const ImageJob* jobs, int64_t n, int64_t i) {
  int64_t lo = 0, hi = n - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (jobs[mid].wide <= i) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// One byte of a job's horizontal pass: (row r of [row0, row0 + rows), output column x, channel
// c), over the batch's wide_bytes.
struct ResizeRows {
  static constexpr const char* kName = "image resize rows";
  const uint8_t* pixels;
  const ImageJob* jobs;
  int64_t jobs_n, size;
  const int32_t* taps;
  uint8_t* wide;
  DLB_HD void operator()(int64_t i) const {
    const ImageJob& j = jobs[job_at(jobs, jobs_n, i)];
    const int64_t l = i - j.wide, c = l % 3, x = (l / 3) % size, r = l / (3 * size);
    const int32_t* first = taps + j.across;
    const int32_t* weights = first + 2 * size + x * j.across_size;
    const uint8_t* src =
        pixels + j.pixels + ((j.top + j.row0 + r) * j.width + j.left + first[x]) * 3 + c;
    int32_t acc = resample_start();
    for (int32_t k = 0; k < first[size + x]; ++k) acc += src[k * 3] * weights[k];
    wide[i] = resample_clip8(acc);
  }
};

// One element of the input tensor ([N, 3, S, S] in its layout, offset o): the vertical pass of
// its image's column (mirrored where the job flips), then ToTensor and Normalize in float, as
// augment.h's normalize_to_planes computes them, stored rounded to T.
template <typename T>
struct ResizeColumnsNormalize {
  static constexpr const char* kName = "image resize columns and normalise";
  const uint8_t* wide;
  const ImageJob* jobs;
  const int32_t* taps;
  Nchw out;
  float mean[3], std[3];
  T* y;
  DLB_HD void operator()(int64_t o) const {
    int64_t n, c, row, col;
    out.coords(o, n, c, row, col);
    const ImageJob& j = jobs[n];
    const int64_t size = out.w, x = j.flip ? size - 1 - col : col;
    const int32_t* first = taps + j.down;
    const int32_t* weights = first + 2 * size + row * j.down_size;
    const uint8_t* src = wide + j.wide + (first[row] * size + x) * 3 + c;
    int32_t acc = resample_start();
    for (int32_t k = 0; k < first[size + row]; ++k) acc += src[k * size * 3] * weights[k];
    const float v = static_cast<float>(resample_clip8(acc));
    y[o] = stored<T>((v / 255.f - mean[c]) / std[c]);
  }
};

}  // namespace dlb::cuda
