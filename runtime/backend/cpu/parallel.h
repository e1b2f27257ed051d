// The CPU backend's one thread pool: OpenMP's, which OpenBLAS (its OpenMP build) and oneDNN run
// in too, so no two pools spin against each other for the cores. A build without OpenMP (the
// sanitizer and fuzzing builds, under clang) runs the same loops serially.
#pragma once
#include <cstdint>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace dlb {

// Below this many elements an elementwise loop runs on one thread: it takes a few microseconds,
// about what waking the pool costs.
inline constexpr int64_t kParallelElements = int64_t{1} << 15;

// f(i) for i in [0, n), split into contiguous ranges over the pool's threads when the loop is at
// least `serial_below` long (a parallel region costs a few microseconds). Each i is handled by one
// thread, so results do not depend on the thread count.
template <typename F>
void parallel_for(int64_t n, int64_t serial_below, F&& f) {
#ifdef _OPENMP
  if (n >= serial_below) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
#else
  (void)serial_below;
#endif
  for (int64_t i = 0; i < n; ++i) f(i);
}

// f(begin, end) over [0, n) in one contiguous block per thread: for elementwise loops that must
// stay simple enough for the compiler to vectorise.
template <typename F>
void parallel_blocks(int64_t n, int64_t serial_below, F&& f) {
#ifdef _OPENMP
  if (n >= serial_below) {
#pragma omp parallel
    {
      const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
      const int64_t chunk = (n + threads - 1) / threads;
      const int64_t begin = t * chunk < n ? t * chunk : n;
      const int64_t end = begin + chunk < n ? begin + chunk : n;
      f(begin, end);
    }
    return;
  }
#else
  (void)serial_below;
#endif
  f(int64_t{0}, n);
}

}  // namespace dlb
