#include "workloads/data/image_loader.h"

#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <numeric>

#include "runtime/core/error.h"
#include "runtime/core/rng.h"
#include "runtime/io/json_text.h"
#include "workloads/data/augment.h"
#include "workloads/data/jpeg.h"

namespace dlb {
namespace {

// This thread's CPU time: what a worker's work took from the cores, not the wall time it waited
// for them.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The sample's bytes (the whole file, or its member of a shard), at most 1 GiB (more is no
// photograph: refused, not read).
std::vector<uint8_t> read_sample(const ImageSample& s) {
  std::ifstream in(s.path, std::ios::binary | std::ios::ate);
  if (!in) throw InvalidArgument(fmt::format("{}: cannot be read", escape_non_utf8(s.path)));
  const std::streamoff file = in.tellg();
  const std::streamoff size = s.size < 0 ? file : s.size;
  if (file < 0 || size > (std::streamoff{1} << 30) || s.offset < 0 || s.offset + size > file) {
    throw InvalidArgument(fmt::format("{}: not a file of at most 1 GiB", escape_non_utf8(s.path)));
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.seekg(s.offset);
  in.read(reinterpret_cast<char*>(bytes.data()), size);
  if (!in) throw InvalidArgument(fmt::format("{}: cannot be read", escape_non_utf8(s.path)));
  return bytes;
}

// How errors and records name a sample: its file, and its place in a shard; a byte of the name
// that is not UTF-8 as \xNN (records are JSON text).
std::string sample_name(const ImageSample& s) {
  const std::string path = escape_non_utf8(s.path);
  return s.size < 0 ? path : fmt::format("{} (bytes {}-{})", path, s.offset, s.offset + s.size);
}

// Decoded at the smallest DCT scale that keeps `box` at least size x size, and only `box` of it
// (decode_jpeg_box: the same bytes there as a whole decode at that scale, and PIL's resize of a
// crop reads nothing outside it).
RgbImage crop_resized(const std::vector<uint8_t>& jpeg, const std::string& path,
                      const JpegHeader& h, CropBox box, int64_t size, bool dct_scaling) {
  if (!dct_scaling) {
    return resized_crop(decode_jpeg(jpeg.data(), jpeg.size(), path), box, size, size);
  }
  const auto need = [&](int64_t side, int64_t crop) {
    return static_cast<int64_t>(
        std::ceil(static_cast<double>(side * size) / static_cast<double>(crop)));
  };
  const RgbImage img = decode_jpeg_box(jpeg.data(), jpeg.size(), path, need(h.width, box.width),
                                       need(h.height, box.height), box);
  return resized_crop(img, {0, 0, img.height, img.width}, size, size);
}

// An encoded batch's sample: the file as it is, or a CMYK one decoded whole (nvJPEG's batched
// decoder reads no four-channel JPEG).
EncodedSample encoded_sample(std::vector<uint8_t> jpeg, const JpegHeader& h, const CropBox& box,
                             bool flip, const std::string& name) {
  EncodedSample e;
  e.width = h.width;
  e.height = h.height;
  e.box = box;
  e.flip = flip;
  e.name = name;
  if (h.cmyk) {
    RgbImage img = decode_jpeg(jpeg.data(), jpeg.size(), name);
    e.bytes = std::move(img.pixels);
    e.decoded = true;
  } else {
    e.bytes = std::move(jpeg);
  }
  return e;
}

}  // namespace

std::vector<EncodedImage> encoded_images(const std::vector<EncodedSample>& encoded) {
  std::vector<EncodedImage> out;
  out.reserve(encoded.size());
  for (const EncodedSample& e : encoded) {
    out.push_back({e.bytes.data(), e.bytes.size(), e.decoded, e.width, e.height, e.box.top,
                   e.box.left, e.box.height, e.box.width, e.flip, e.name});
  }
  return out;
}

void eval_batch(const std::vector<ImageSample>& samples, const std::vector<int64_t>& indices,
                int64_t size, int64_t threads, float* images, int64_t* labels) {
  const auto n = static_cast<int64_t>(indices.size());
  const int64_t elems = 3 * size * size;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(threads));
  auto work = [&](int64_t t) {
    try {
      for (int64_t i = t; i < n; i += threads) {
        const ImageSample& s = samples.at(static_cast<size_t>(indices[static_cast<size_t>(i)]));
        const std::vector<uint8_t> jpeg = read_sample(s);
        normalize_to_planes(
            eval_transform(decode_jpeg(jpeg.data(), jpeg.size(), sample_name(s)), size),
            images + i * elems);
        labels[i] = s.label;
      }
    } catch (...) {
      errors[static_cast<size_t>(t)] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

ImageLoader::ImageLoader(std::vector<ImageSample> samples, ImageLoaderOptions options)
    : samples_(std::move(samples)), o_(options) {
  if (o_.batch < 1 || o_.image_size < 1 || o_.ranks < 1 || o_.rank < 0 || o_.rank >= o_.ranks ||
      o_.threads < 1 || o_.threads > 256 || o_.prefetch < 1 || o_.prefetch > 1024) {
    throw InvalidArgument(
        "image loader: batch, size and ranks >= 1, 1-256 threads, 1-1024 prefetched");
  }
  const int64_t global = o_.batch * o_.ranks, n = static_cast<int64_t>(samples_.size());
  if (n < global) {
    throw InvalidArgument(
        fmt::format("the global batch {} ({} x {} ranks) is larger than the {} training images",
                    global, o_.batch, o_.ranks, n));
  }
  steps_ = n / global;
  slots_.resize(static_cast<size_t>(o_.prefetch));
  for (int64_t t = 0; t < o_.threads; ++t) workers_.emplace_back([this, t] { work(t); });
}

ImageLoader::~ImageLoader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  for (std::thread& t : workers_) t.join();
}

std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  Rng rng = Rng(seed).fork(0x5eed0000ULL + static_cast<uint64_t>(epoch));
  for (int64_t i = n - 1; i > 0; --i) {
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(rng.below(i + 1))]);
  }
  return order;
}

std::shared_ptr<const std::vector<int64_t>> ImageLoader::order_of(int64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [e, order] : orders_) {
    if (e == epoch) return order;
  }
  auto order = std::make_shared<const std::vector<int64_t>>(
      epoch_order(static_cast<int64_t>(samples_.size()), o_.seed, epoch));
  if (orders_.size() == 2) orders_.erase(orders_.begin());
  orders_.emplace_back(epoch, order);
  return order;
}

void ImageLoader::note_bad(const std::string& path, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.skipped;
  if (bad_.insert(path).second) stats_.skipped_files.push_back(why);
  // Every image has failed: nothing is left to take their places (one read of each, at most).
  if (bad_.size() >= samples_.size()) {
    throw InvalidArgument(fmt::format("none of the {} images decodes; the first: {}",
                                      samples_.size(), stats_.skipped_files.front()));
  }
}

// Sample at `position` of the epoch's order, or (a file that does not decode, skipped) the next
// one that does.
void ImageLoader::load_sample(int64_t epoch, size_t position, const std::vector<int64_t>& order,
                              float* image, EncodedSample* encoded, int64_t& label) {
  for (size_t tries = 0; tries < order.size(); ++tries) {
    const ImageSample& s = samples_[static_cast<size_t>(order[(position + tries) % order.size()])];
    const auto index = static_cast<uint64_t>(order[(position + tries) % order.size()]);
    Rng rng = Rng(o_.seed).fork((static_cast<uint64_t>(epoch) << 32) ^ index);
    const std::string name = sample_name(s);
    try {
      std::vector<uint8_t> jpeg = read_sample(s);
      const JpegHeader h = read_jpeg_header(jpeg.data(), jpeg.size(), name);
      const CropBox box = random_resized_crop_box(h.width, h.height, rng);
      const bool flip = rng.uniform() < 0.5f;
      if (encoded) {
        *encoded = encoded_sample(std::move(jpeg), h, box, flip, name);
      } else {
        RgbImage img = crop_resized(jpeg, name, h, box, o_.image_size, o_.dct_scaling);
        if (flip) flip_horizontally(img);
        normalize_to_planes(img, image);
      }
      label = s.label;
      return;
    } catch (const Error& e) {
      if (o_.fail_on_bad_image) throw;
      note_bad(name, e.what());
    }
  }
  throw InvalidArgument(fmt::format("no image of the {} decodes", samples_.size()));
}

void ImageLoader::fill(Batch& b, int64_t sequence) {
  b.epoch = sequence / steps_;
  b.step = sequence % steps_;
  const int64_t elems = o_.encoded ? 0 : 3 * o_.image_size * o_.image_size;
  b.images.resize(static_cast<size_t>(o_.batch * elems));
  b.encoded.resize(o_.encoded ? static_cast<size_t>(o_.batch) : 0);
  b.labels.resize(static_cast<size_t>(o_.batch));
  const std::shared_ptr<const std::vector<int64_t>> order = order_of(b.epoch);
  const int64_t first = batch_start(b.step, o_.rank, o_.batch, o_.ranks);
  for (int64_t i = 0; i < o_.batch; ++i) {
    load_sample(b.epoch, static_cast<size_t>(first + i), *order, b.images.data() + i * elems,
                o_.encoded ? &b.encoded[static_cast<size_t>(i)] : nullptr,
                b.labels[static_cast<size_t>(i)]);
  }
}

void ImageLoader::work(int64_t worker) {
  for (;;) {
    int64_t sequence = 0;
    Slot* slot = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // The next batch to make, once its slot is free (its last batch taken and released).
      changed_.wait(lock, [&] {
        return stop_ || slots_[static_cast<size_t>(next_job_ % o_.prefetch)].sequence == -1;
      });
      if (stop_) return;
      sequence = next_job_++;
      slot = &slots_[static_cast<size_t>(sequence % o_.prefetch)];
      slot->sequence = sequence;
      slot->ready = false;
    }
    const double cpu0 = thread_cpu_seconds();
    const auto from = std::chrono::steady_clock::now();
    std::exception_ptr failed;
    try {
      fill(slot->batch, sequence);
    } catch (...) {
      failed = std::current_exception();
    }
    const auto to = std::chrono::steady_clock::now();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (made_.size() == kMadeKept) made_.pop_front();
      made_.push_back({sequence / steps_, sequence % steps_, worker, from, to});
      stats_.busy_s += thread_cpu_seconds() - cpu0;
      if (!failed) stats_.images_made += o_.batch;
      if (failed && !error_) error_ = failed;
      slot->ready = true;
    }
    changed_.notify_all();
  }
}

std::vector<ImageLoader::Made> ImageLoader::made() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Made> out(made_.begin(), made_.end());
  std::sort(out.begin(), out.end(), [](const Made& a, const Made& b) { return a.from < b.from; });
  return out;
}

const ImageLoader::Batch& ImageLoader::next() {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  if (next_out_ > 0) {  // the last batch handed out is done with: its slot is free again
    slots_[static_cast<size_t>((next_out_ - 1) % o_.prefetch)].sequence = -1;
    changed_.notify_all();
  }
  Slot& slot = slots_[static_cast<size_t>(next_out_ % o_.prefetch)];
  changed_.wait(lock, [&] { return error_ || (slot.sequence == next_out_ && slot.ready); });
  if (error_) std::rethrow_exception(error_);
  stats_.waited_s += seconds_since(t0);
  ++stats_.batches;
  stats_.images += o_.batch;
  ++next_out_;
  return slot.batch;
}

LoaderStats ImageLoader::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace dlb
