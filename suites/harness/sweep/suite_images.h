// The JPEG images a suite's points train on (data folder or shards, docs/input.md): the sweep's
// --data-path, or the suite's dataset block, made by make-dataset's code into the output folder
// before the first point.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "suites/harness/core/run_options.h"
#include "suites/harness/core/suite.h"
#include "suites/harness/core/sweep_options.h"

namespace dlb {

// InvalidArgument, before anything is written, where a point reads images and neither
// --data-path nor the suite's dataset block names them, naming the suite, or where --data-path
// names nothing.
void check_suite_images(const SweepOptions& opt, const Suite& suite,
                        const std::vector<nlohmann::json>& points);

// Where the points of `points` that read images find them (check_suite_images has passed them): ""
// where none does; --data-path where given; else OUT/dataset, made from the suite's dataset block
// unless a run before
// (--resume) made it.
std::string prepare_suite_images(const SweepOptions& opt, const Suite& suite,
                                 const std::vector<nlohmann::json>& points, const std::string& out);

// A point's --data-path: `images` for data=folder; for data=shards, its shards/ folder where it
// has one (a made dataset's), else `images` itself; "" for any other source.
std::string data_path_of(DataSource data, const std::string& images);

}  // namespace dlb
