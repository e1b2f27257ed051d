// The cost of one TraceScope outside the tracing window (tracing off) and inside it (an NVTX
// push/pop, two clock reads and a recorded span). Multiplied by the spans per step, this bounds
// tracing's share of a step far below what timing whole runs on a noisy machine can resolve.
#include <benchmark/benchmark.h>

#include "runtime/trace/tracer.h"

namespace {

const std::string kName = "layer1.0.conv1";

void BM_TraceScopeOff(benchmark::State& state) {
  dlb::Tracer tracer(1000, 3);  // the window is elsewhere: scopes record nothing
  tracer.begin_step(0);
  for (auto _ : state) {
    dlb::TraceScope scope(&tracer, kName, "forward");
    benchmark::DoNotOptimize(&scope);
  }
}
BENCHMARK(BM_TraceScopeOff);

void BM_TraceScopeOn(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    dlb::Tracer tracer(0, 1);  // fresh, so the span vector stays small
    tracer.begin_step(0);
    state.ResumeTiming();
    for (int i = 0; i < 1000; ++i) {
      dlb::TraceScope scope(&tracer, kName, "forward");
      benchmark::DoNotOptimize(&scope);
    }
  }
  state.SetItemsProcessed(state.iterations() * 1000);
}
BENCHMARK(BM_TraceScopeOn);

}  // namespace
