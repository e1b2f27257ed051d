// The roofline (runtime/sim/roofline.h) against passes worked by hand, and the roofline
// calibration (suites/harness/simulate/calibrate.h): which of a device file's references a model is
// fitted to, the fit itself, and the files and references refused.
#include "runtime/sim/roofline.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "runtime/core/error.h"
#include "runtime/nn/layers/elementwise.h"
#include "runtime/nn/layers/linear.h"
#include "suites/harness/core/source_dir.h"
#include "suites/harness/simulate/calibrate.h"

namespace dlb {
namespace {

// fc1 (8 -> 8) -> relu -> fc2 (8 -> 4) at batch 4, in fp32.
Graph fc_graph() {
  Graph g(Shape{4, 8});
  g.add("fc1", std::make_unique<Linear>(8, 8), {g.input()});
  g.add("relu", std::make_unique<Relu>(), {g.output()});
  g.add("fc2", std::make_unique<Linear>(8, 4), {g.output()});
  g.declare(PrecisionPolicy{}, BackendTraits{});
  return g;
}

const LayerTimes& layer(const RooflineTimes& t, const std::string& name) {
  for (const LayerTimes& l : t.layers) {
    if (l.name == name) return l;
  }
  throw std::runtime_error("no layer " + name);
}

TEST(Roofline, BoundByFlopsEachPassIsItsFlopsOverThePeak) {
  // 1 GFLOP/s and memory without limit: a pass's time is its FLOPs / 1e9 s.
  const RooflineTimes t = roofline_times(fc_graph(), DevicePeaks{1e9, 1e30});
  // fc2: 2 * 4 * 8 * 4 = 256 FLOPs forward, and as many for each backward pass.
  EXPECT_DOUBLE_EQ(layer(t, "fc2").forward_ms, 256e-6);
  EXPECT_DOUBLE_EQ(layer(t, "fc2").backward_data_ms, 256e-6);
  EXPECT_DOUBLE_EQ(layer(t, "fc2").backward_weights_ms, 256e-6);
  // fc1: 2 * 4 * 8 * 8 = 512 FLOPs; no gradient flows into the input, so no backward-data.
  EXPECT_DOUBLE_EQ(layer(t, "fc1").forward_ms, 512e-6);
  EXPECT_EQ(layer(t, "fc1").backward_data_ms, 0);
  EXPECT_DOUBLE_EQ(layer(t, "fc1").backward_weights_ms, 512e-6);
  // SGD with momentum: 2 FLOPs per parameter, 72 + 36 of them.
  EXPECT_DOUBLE_EQ(t.optimizer_ms, 216e-6);
}

TEST(Roofline, BoundByBytesEachPassIsWhatItReadsAndWritesOverTheBandwidth) {
  // 1 GB/s and FLOPs without limit: a pass's time is its bytes / 1e9 s.
  const RooflineTimes t = roofline_times(fc_graph(), DevicePeaks{1e30, 1e9});
  // fc2 forward: its input (4 x 8), output (4 x 4) and parameters (36), 4 bytes each: 336 bytes.
  EXPECT_DOUBLE_EQ(layer(t, "fc2").forward_ms, 336e-6);
  // Its backward-weights: the output's gradient, the input and the parameters' gradients.
  EXPECT_DOUBLE_EQ(layer(t, "fc2").backward_weights_ms, 336e-6);
  // The loss: the 4 x 4 logits read twice and written twice (probabilities, gradient).
  EXPECT_DOUBLE_EQ(t.loss_ms, 4 * 64e-6);
  // SGD with momentum: weights, gradient and momentum read, weights and momentum written.
  EXPECT_DOUBLE_EQ(t.optimizer_ms, 108 * 5 * 4e-6);
}

DeviceReference ref(const std::string& model, const std::string& precision, int64_t batch,
                    double img_s) {
  return {model, precision, "by hand", batch, 224, img_s};
}

DeviceFile device() {
  DeviceFile d;
  d.name = d.device = d.path = "test-gpu";
  d.peak_flops = {{"fp32", 10e12}, {"bf16", 40e12}};
  d.peak_bytes_per_s = 1e12;
  d.references = {ref("resnet18", "fp32", 64, 500), ref("vgg16", "fp32", 32, 40),
                  ref("vgg16", "fp32", 64, 45), ref("vgg16", "bf16", 64, 120)};
  d.sources = {"by hand"};
  return d;
}

TEST(RooflineCalibration, AModelIsFittedToItsOwnReferenceInItsPrecisionThenBatch) {
  const DeviceFile d = device();
  EXPECT_EQ(&reference_for(d, "vgg16", "fp32", 64), &d.references[2]);
  EXPECT_EQ(&reference_for(d, "vgg16", "fp32", 128), &d.references[1]);   // the first in fp32
  EXPECT_EQ(&reference_for(d, "vgg16", "bf16", 32), &d.references[3]);    // precision first
  EXPECT_EQ(&reference_for(d, "vgg16", "fp16", 32), &d.references[1]);    // then batch
  EXPECT_EQ(&reference_for(d, "alexnet", "fp32", 64), &d.references[0]);  // none: the first
}

TEST(RooflineCalibration, TheReferencePointTakesExactlyItsReferenceTime) {
  const DeviceFile d = device();
  const Calibration c = roofline_calibration(d, "vgg16", 64, 224, "fp32");
  EXPECT_NEAR(c.step_ms, 1e3 * 64 / 45, 1e-9 * c.step_ms);
  EXPECT_EQ(c.source["reference"]["img_s"], 45);
  // A batch without a reference of its own: the model's first in the precision.
  const Calibration other = roofline_calibration(d, "vgg16", 128, 224, "fp32");
  EXPECT_EQ(other.source["reference"]["batch"], 32);
}

TEST(RooflineCalibration, AReferenceBeyondWhatWinogradSavesIsRefused) {
  DeviceFile d = device();
  // The efficiency is the roofline's time over the reference's: the roofline's own throughput is
  // the reference's over it.
  const double roofline_img_s =
      45 / roofline_calibration(d, "vgg16", 64, 224, "fp32").source["efficiency"].get<double>();
  d.references[2].img_s = roofline_img_s * 3.9;  // an efficiency of 3.9: Winograd can do it
  EXPECT_NO_THROW(roofline_calibration(d, "vgg16", 64, 224, "fp32"));
  d.references[2].img_s = roofline_img_s * 4.1;
  EXPECT_THROW(roofline_calibration(d, "vgg16", 64, 224, "fp32"), InvalidArgument);
  EXPECT_THROW(roofline_calibration(d, "vgg16", 64, 224, "fp16"), InvalidArgument);  // no peak
}

std::string write(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path) << text;
  return path;
}

TEST(RooflineCalibration, DeviceFilesWithoutAUsableReferenceAreRefused) {
  const std::string head =
      R"({"name": "x", "device": "x", "peak_flops": {"fp32": 1e13}, "peak_bytes_per_s": 1e12,
          "sources": ["by hand"], "reference": )";
  const std::string one =
      R"({"model": "resnet18", "batch": 8, "image_size": 224, "precision": "fp32",
          "img_s": 100, "source": "by hand"})";
  EXPECT_EQ(load_device(write("dlb-dev-one.json", head + one + "}")).references.size(), 1u);
  EXPECT_EQ(load_device(write("dlb-dev-two.json", head + "[" + one + ", " + one + "]}"))
                .references.size(),
            2u);
  EXPECT_THROW(load_device(write("dlb-dev-none.json", head + "[]}")), InvalidArgument);
  std::string unknown = one;
  unknown.replace(unknown.find("resnet18"), 8, "resnet99");
  EXPECT_THROW(load_device(write("dlb-dev-unknown.json", head + unknown + "}")), InvalidArgument);
}

TEST(RooflineCalibration, EveryShippedDeviceFitsEachOfItsReferences) {
  // suites/devices/*.json: each loads, and each reference gives an efficiency in (0, 4].
  int files = 0;
  for (const auto& f : std::filesystem::directory_iterator(source_dir() + "/suites/devices")) {
    if (f.path().extension() != ".json") continue;
    ++files;
    const DeviceFile d = load_device(f.path().string());
    for (const DeviceReference& r : d.references) {
      SCOPED_TRACE(f.path().string() + ": " + r.model);
      const Calibration c = roofline_calibration(d, r.model, r.batch, r.image_size, r.precision);
      EXPECT_NEAR(c.step_ms, 1e3 * static_cast<double>(r.batch) / r.img_s, 1e-9 * c.step_ms);
    }
  }
  EXPECT_GE(files, 3);
}

}  // namespace
}  // namespace dlb
