// The simulator's inputs from the harness's files (docs/simulation.md): a calibration from a
// measured one-rank record and the per-layer profile it wrote, and a network preset by name.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/sim/calibration.h"
#include "runtime/sim/network.h"

namespace dlb {

// The calibration of an ok, measured, one-rank record of dlbench's with a profile
// (paths.profile; looked for under `dir`/profiles/ when its path no longer exists). `where`
// names the record in messages. InvalidArgument when the record is not such a point, or its
// profile is missing or malformed.
Calibration calibration_from_record(const nlohmann::json& record, const std::string& dir,
                                    const std::string& where);
// Whether `record` is a point calibration_from_record takes.
bool calibrates(const nlohmann::json& record);
// "resnet50-b32-64px-fp32-cpu": a calibration's file stem.
std::string calibration_key(const Calibration& c);
// The calibrations of `dir`/results.jsonl's calibrating points, one per key (the first), each
// written to `dir`/calibration/<key>.json. InvalidArgument when there is none.
std::vector<Calibration> calibrate_results(const std::string& dir);
Calibration read_calibration(const std::string& path);

// A measured or published single-device throughput, with where it comes from.
struct DeviceReference {
  std::string model, precision, source;
  int64_t batch = 0, image_size = 0;
  double img_s = 0;
};
// A device's peaks and the single-device throughputs its roofline efficiency is fitted to
// (suites/devices/<name>.json: `reference`, an object, or a list of them).
struct DeviceFile {
  std::string name, device, path;
  std::map<std::string, double> peak_flops;  // by precision name
  double peak_bytes_per_s = 0;
  std::vector<DeviceReference> references;  // at least one
  std::vector<std::string> sources;
};
// suites/devices/<name>.json, or a .json path. InvalidArgument naming the file and field.
DeviceFile load_device(const std::string& name_or_path);
// The reference a roofline of `model` in `precision` at `batch` is fitted to: the model's own,
// in that precision and then at that batch where the file has them; else the file's first.
const DeviceReference& reference_for(const DeviceFile& device, const std::string& model,
                                     const std::string& precision, int64_t batch);

// The largest roofline efficiency a reference may give. A reference faster than the roofline
// (an efficiency above 1) does fewer multiplies than direct convolution counts: cuDNN's Winograd
// F(4x4, 3x3) computes a 3x3 convolution with 4 times fewer (36 for 144), so nothing real exceeds
// 4, and a reference that does has the device's peaks wrong.
inline constexpr double kMaxRooflineEfficiency = 4;

// A calibration of `model` at `batch`, `image_size` and `precision` on `device` by the roofline
// (runtime/sim/roofline.h), its efficiency fitted to the device's reference throughput
// (reference_for). The calibration's source records the efficiency, the reference and where it
// comes from.
Calibration roofline_calibration(const DeviceFile& device, const std::string& model, int64_t batch,
                                 int64_t image_size, const std::string& precision);

// suites/networks/<name>.json, or the file a name ending in .json is the path of: a preset, or a
// `dlbench bench allreduce --json` record (network_from_bench). An unknown name is refused,
// naming the presets.
Network load_network(const std::string& name_or_path);
std::vector<std::string> list_networks();

}  // namespace dlb
