// Training batches from JPEG files, decoded and augmented by worker threads ahead of the step
// that needs them (a bounded prefetch queue), as PyTorch's DataLoader does with worker processes:
//   - each epoch's order is a shuffle of every sample, the same on every rank (seeded by the
//     epoch); rank r takes the r-th `batch` of each global batch of batch x ranks, and a last
//     partial global batch is dropped (DistributedSampler with drop_last);
//   - each sample is decoded (at the smallest DCT scale that keeps its crop at least the output
//     size; jpeg.h), cropped and resized by RandomResizedCrop, flipped with probability 1/2 and
//     normalised (augment.h), with draws keyed by (seed, epoch, sample) alone: the same bytes
//     whatever the thread count;
//   - a file that does not decode is skipped (noted once, counted) and the next sample of the
//     epoch's order takes its place, or, with `fail_on_bad_image`, ends the run with its name.
// With `encoded` (--decode=gpu) the workers decode nothing: each sample is its file's bytes, its
// crop box and its flip (the same draws), for a device decoder; only a header that does not read
// is skipped here, and a CMYK file, which nvJPEG's batched decoder does not read, is decoded.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "runtime/backend/image_decoder.h"
#include "workloads/data/augment.h"
#include "workloads/data/image_folder.h"

namespace dlb {

// An epoch's order of n samples: a shuffle seeded by (seed, epoch), the same on every rank.
std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch);
// Where rank `rank`'s batch of step `step` starts in that order: the rank-th `batch` of the
// step-th global batch.
inline int64_t batch_start(int64_t step, int64_t rank, int64_t batch, int64_t ranks) {
  return (step * ranks + rank) * batch;
}

// Evaluation's batch: images `indices` of `samples`, each decoded whole, transformed as
// evaluation transforms (Resize and CenterCrop: augment.h's eval_transform) and normalised, NCHW
// f32, on `threads` threads. A file that does not decode is InvalidArgument naming it: an
// evaluation counts every image.
void eval_batch(const std::vector<ImageSample>& samples, const std::vector<int64_t>& indices,
                int64_t size, int64_t threads, float* images, int64_t* labels);

struct ImageLoaderOptions {
  int64_t batch = 32, image_size = 224;
  int64_t rank = 0, ranks = 1;
  int64_t threads = 1, prefetch = 2;  // worker threads; batches decoded ahead
  uint64_t seed = 0;
  bool fail_on_bad_image = false;
  // Decode at the smallest DCT scale that keeps the crop at least the output size; false: decode
  // every image whole, as PIL does without draft mode (the same crops, other pixels).
  bool dct_scaling = true;
  // Leave the decoding to the device: batches of EncodedSample, no images (above).
  bool encoded = false;
};

// One sample of an encoded batch: its file's bytes (or, `decoded`, its RGB pixels), its size, and
// the crop box and flip drawn for it, on the whole image.
struct EncodedSample {
  std::vector<uint8_t> bytes;
  bool decoded = false;
  int64_t width = 0, height = 0;
  CropBox box;
  bool flip = false;
  std::string name;
};

struct LoaderStats {
  int64_t batches = 0, images = 0, skipped = 0;  // handed out by next(); files skipped
  int64_t images_made = 0;                       // by the workers, handed out or not yet
  double waited_s = 0;                           // in next(), for batches not ready yet
  double busy_s = 0;                             // the workers' CPU time making them, summed
  std::vector<std::string> skipped_files;        // each named once
};

// An encoded batch's samples as a device decoder reads them (runtime/backend/image_decoder.h),
// pointing into `encoded`, which must outlive them.
std::vector<EncodedImage> encoded_images(const std::vector<EncodedSample>& encoded);

class ImageLoader {
 public:
  // InvalidArgument when one global batch is more than the samples, or an option is out of range.
  ImageLoader(std::vector<ImageSample> samples, ImageLoaderOptions options);
  ~ImageLoader();
  ImageLoader(const ImageLoader&) = delete;
  ImageLoader& operator=(const ImageLoader&) = delete;

  int64_t steps_per_epoch() const { return steps_; }
  // The next batch, epoch by epoch, step by step: images [batch, 3, size, size] (NCHW f32) and
  // labels; valid until the next call. Blocks while the workers have not made it.
  struct Batch {
    int64_t epoch = 0, step = 0;
    std::vector<float> images;           // empty when encoded
    std::vector<EncodedSample> encoded;  // when encoded
    std::vector<int64_t> labels;
  };
  const Batch& next();
  LoaderStats stats() const;
  // The last kMadeKept batches the workers made, taken or not, in the order they were begun: by
  // which worker (0 to threads - 1) and when (a trace's loader lanes).
  struct Made {
    int64_t epoch = 0, step = 0, worker = 0;
    std::chrono::steady_clock::time_point from, to;
  };
  static constexpr size_t kMadeKept = 4096;
  std::vector<Made> made() const;

 private:
  struct Slot {
    Batch batch;
    int64_t sequence = -1;  // which batch it holds (epoch x steps + step); -1: free
    bool ready = false;
  };
  void work(int64_t worker);
  void fill(Batch& b, int64_t sequence);
  // Sample `position` of the epoch's order (or the next that reads) into `image` (decoded) or
  // `encoded` (when o_.encoded), and its label.
  void load_sample(int64_t epoch, size_t position, const std::vector<int64_t>& order, float* image,
                   EncodedSample* encoded, int64_t& label);
  std::shared_ptr<const std::vector<int64_t>> order_of(int64_t epoch);
  void note_bad(const std::string& path, const std::string& why);

  std::vector<ImageSample> samples_;
  ImageLoaderOptions o_;
  int64_t steps_ = 0;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::vector<Slot> slots_;
  int64_t next_job_ = 0, next_out_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  LoaderStats stats_;
  std::deque<Made> made_;
  std::set<std::string> bad_;
  // The orders of the last two epochs asked for (a prefetch that spans more than an epoch asks
  // for an older one again, shuffled again: the same order).
  std::vector<std::pair<int64_t, std::shared_ptr<const std::vector<int64_t>>>> orders_;
  std::vector<std::thread> workers_;  // last: they use the members above
};

}  // namespace dlb
