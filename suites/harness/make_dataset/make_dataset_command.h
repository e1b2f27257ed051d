// `dlbench make-dataset`: a generated data set of real JPEG files (workloads/data/make_dataset.h),
// in ImageNet's folder layout and as WebDataset tar shards.
#pragma once
#include <string>

#include "workloads/data/make_dataset.h"

namespace dlb {

struct MakeDatasetCommandOptions {
  std::string out;
  std::string size = "400x350";
  MakeDatasetOptions data;
};

// Writes the data set into a new folder beside `out` and renames it to `out` once complete, so
// that a failed or interrupted run leaves nothing under that name. `out` must not exist, or be an
// empty folder. Returns 0, or throws dlb::Error (InvalidArgument for the options, IoError for
// the disk).
int make_dataset_command(const MakeDatasetCommandOptions& options);

}  // namespace dlb
