// dlbench's micro-benchmarks (Google Benchmark), registered at start-up for each backend with a
// device here. Every row carries its rate and its fraction of the machine's measured peak
// (suites/harness/core/machine_peak.h) as counters, so Google Benchmark's JSON holds both:
//   gemm/<backend>/<precision>/<M>x<N>x<K>/<pass>   the models' linear layers (FLOP/s)
//   conv/<backend>/<precision>/<algorithm>/<model>.<layer>/<pass>   every distinct convolution
//                                                   of resnet50 and vgg16 (FLOP/s)
//   copy/cuda/<pinned|pageable>/<bytes>             host-to-device copies (bytes/s; GPU only),
//                                                   a fraction of the link's measured peak
// Counters: "FLOP/s" or "bytes/s", and "of_peak" (the row's rate over the peak's).
#pragma once
#include <benchmark/benchmark.h>

#include <functional>
#include <string>

#include "suites/harness/core/machine_peak.h"

namespace dlb::micro {

// Batch and image size of the rows on each backend: small enough for two CPU cores to time
// every row in minutes, the sizes people train at on a GPU.
struct MicroShape {
  int64_t gemm_batch, conv_batch, conv_image_size;
};
MicroShape micro_shape(BackendKind kind);

// The precisions a backend's rows are timed in (those it supports for convolutions).
std::vector<Precision> micro_precisions(BackendKind kind);

void register_gemm_benchmarks(BackendKind kind, const std::vector<MachinePeak>& peaks);
void register_conv_benchmarks(BackendKind kind, const std::vector<MachinePeak>& peaks);
// Host-to-device copies, pinned and pageable: CUDA builds with a visible GPU only. Returns why
// none were registered, or "" when they were.
std::string register_copy_benchmarks(const std::vector<MachinePeak>& peaks);

// Runs a row's body; an exception (a plan the library refuses, memory it cannot get) makes the
// row a Google Benchmark error with the message, and the other rows still run.
void guarded(benchmark::State& state, const std::function<void()>& body);

// The peak a row of `backend` at `precision` is a fraction of (find_peak on this host).
MachinePeak peak_for(const std::vector<MachinePeak>& peaks, Backend& backend, Precision precision);

}  // namespace dlb::micro
