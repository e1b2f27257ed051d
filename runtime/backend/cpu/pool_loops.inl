// Included twice by pool_loops.cpp, once in a namespace compiled for AVX-512.

template <typename T>
void window_argmax(const T* x, int64_t width, int64_t c, int64_t ha, int64_t hb, int64_t wa,
                   int64_t wb, int32_t* __restrict arg, float* __restrict best,
                   int32_t* __restrict last_nan) {
  const int32_t first = static_cast<int32_t>(ha * width + wa);
  const T* __restrict start = x + first * c;
  for (int64_t ch = 0; ch < c; ++ch) {
    best[ch] = load(start[ch]);
    arg[ch] = first;
    last_nan[ch] = -1;
  }
  for (int64_t a = ha; a < hb; ++a) {
    for (int64_t b = wa; b < wb; ++b) {
      const int32_t at = static_cast<int32_t>(a * width + b);
      const T* __restrict px = x + at * c;
      for (int64_t ch = 0; ch < c; ++ch) {
        const float v = load(px[ch]);
        const bool greater = v > best[ch];
        best[ch] = greater ? v : best[ch];
        arg[ch] = greater ? at : arg[ch];
        last_nan[ch] = v != v ? at : last_nan[ch];
      }
    }
  }
  for (int64_t ch = 0; ch < c; ++ch) arg[ch] = last_nan[ch] >= 0 ? last_nan[ch] : arg[ch];
}

template <typename T>
constexpr PoolLoops<T> kPoolLoops{&window_argmax<T>};
