// --data=folder and --data=shards: a run's training images from JPEG files (docs/input.md). A
// folder's train/ is scanned as torchvision's ImageFolder scans it; shards are indexed as
// WebDataset reads them (key.jpg beside key.cls). The model's classes are the source's, and the
// loader's threads decode and augment each rank's batches ahead of its steps.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>

#include "runtime/trace/tracer.h"
#include "suites/harness/core/host_share.h"
#include "suites/harness/core/run_options.h"
#include "suites/harness/run/convergence.h"
#include "workloads/data/image_loader.h"
#include "workloads/models/model.h"

namespace dlb {

struct ImageInput {
  ImageFolderIndex index;
  std::unique_ptr<ImageLoader> loader;
  int64_t threads = 0;
  LoaderStats at_timed_start;  // the loader's counts when the timed steps began
  // The trainer's batches of files decoded, and the decoder's time, when the timed steps began.
  int64_t decodes_at_timed_start = 0;
  double decode_s_at_timed_start = 0;
};

// The loader's next batch into `trainer`: its images (--decode=cpu), or its files, decoded on the
// device (--decode=gpu).
void load_next_batch(ImageInput& in, Trainer& trainer);

// The decoding threads of `o`: its loader_threads, or (0) what this rank's share of the CPUs its
// machine gave the run (host.cpus_per_rank()) leaves after its compute (`compute_threads`), at
// least one.
int64_t loader_threads_of(const RunOptions& o, const HostShare& host, int64_t compute_threads);

// Scans DIR/train (folder) or indexes the shards --data-path names (shards), takes the source's
// class count as the model's (InvalidArgument where --num-classes says otherwise), notes what it
// skipped on stderr (rank 0: empty classes, link loops, samples without an image or a label),
// and starts the loader for this rank with `threads` threads.
std::unique_ptr<ImageInput> open_image_input(const RunOptions& o, int rank, int ranks,
                                             int64_t threads, ModelConfig& mc);

// Epochs over the folder (--epochs): DIR/train through the loader, evaluation over DIR/val (as
// ImageFolder reads it, with the training set's classes), each rank its round-robin share of its
// batches (a short last batch padded with its first image, only the real ones counted), decoded
// by the loader's threads count of threads.
std::unique_ptr<EpochData> folder_epochs(ImageInput& in, const RunOptions& o, Shard shard,
                                         int64_t image_size);

// The loader's batches made during `tracer`'s window, each on its worker's loader lane, the part
// inside the window, attributed to the traced step it began in (the first where it began before
// them). After the traced steps. Not on a device's clock, whose times are the device's, not the
// host's.
void trace_loader(Tracer& tracer, const ImageLoader& loader);

// The record's metrics.input, before the verdict record_json adds: where images were decoded
// (cpu, or gpu and its decoder), the loader's threads and prefetch, the folder's images and
// classes, and since the timed steps began its batches, images, time waited for them and busy time;
// the files skipped (the first ten named).
nlohmann::json image_input_json(const ImageInput& in, const RunOptions& o, const Trainer& trainer);

}  // namespace dlb
