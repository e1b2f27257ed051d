// The loops of resample_loops.h, included once for x86-64 and once for AVX-512
// (resample_loops.cpp), each time after kTransposedRows is defined: whether the horizontal pass
// runs as the vertical one over the rows' transpose (which pays where the vertical loop's
// 32-bit multiplies are one instruction a vector, as AVX-512's vpmulld; SSE2 has no low 32-bit
// multiply of a vector (pmulld is SSE4.1's), and there the transposes cost more than they save).
// Both copies define every function here, so every template instance they use (std::vector,
// std::fill, std::copy_n, std::max) is used by the portable copy too: none is left for the
// AVX-512 copy's code alone, which the portable one could be linked against.

// Down each column: `in` (width x 3 bytes a row) into out_h rows of `out`, a whole row at a time
// (each output row a weighted sum of input rows: vectorised over the row).
void columns(const uint8_t* in, int64_t width, uint8_t* out, int64_t out_h, const ResampleTaps& t) {
  const int64_t n = width * 3;
  std::vector<int32_t> acc(static_cast<size_t>(n));
  for (int64_t y = 0; y < out_h; ++y) {
    std::fill(acc.begin(), acc.end(), resample_start());
    const int32_t* k = &t.weights[static_cast<size_t>(y * t.size)];
    for (int64_t i = 0; i < t.count[static_cast<size_t>(y)]; ++i) {
      const uint8_t* src = in + (t.first[static_cast<size_t>(y)] + i) * n;
      const int32_t w = k[i];
      for (int64_t j = 0; j < n; ++j) acc[static_cast<size_t>(j)] += src[j] * w;
    }
    uint8_t* dst = out + y * n;
    for (int64_t j = 0; j < n; ++j) dst[j] = resample_clip8(acc[static_cast<size_t>(j)]);
  }
}

// Along each row, pixel by pixel: each output pixel a sum of its few taps.
void rows_direct(const uint8_t* in, int64_t in_w, int64_t first_row, int64_t rows, uint8_t* out,
                 int64_t out_w, const ResampleTaps& t) {
  for (int64_t y = 0; y < rows; ++y) {
    const uint8_t* row = in + (first_row + y) * in_w * 3;
    uint8_t* dst = out + y * out_w * 3;
    for (int64_t x = 0; x < out_w; ++x) {
      const uint8_t* src = row + t.first[static_cast<size_t>(x)] * 3;
      const int32_t* k = &t.weights[static_cast<size_t>(x * t.size)];
      int32_t r = resample_start(), g = r, b = r;
      for (int64_t i = 0; i < t.count[static_cast<size_t>(x)]; ++i) {
        r += src[i * 3] * k[i];
        g += src[i * 3 + 1] * k[i];
        b += src[i * 3 + 2] * k[i];
      }
      dst[x * 3] = resample_clip8(r);
      dst[x * 3 + 1] = resample_clip8(g);
      dst[x * 3 + 2] = resample_clip8(b);
    }
  }
}

// Along each row, as `columns` over the rows' transpose (each output column a weighted sum of
// whole input columns, vectorised over the rows), then transposed back.
void rows_transposed(const uint8_t* in, int64_t in_w, int64_t first_row, int64_t rows, uint8_t* out,
                     int64_t out_w, const ResampleTaps& t) {
  int64_t cols = 0;  // the columns the taps read
  for (size_t x = 0; x < t.first.size(); ++x) cols = std::max(cols, t.first[x] + t.count[x]);
  std::vector<uint8_t> across(static_cast<size_t>(cols * rows * 3));  // column by column
  for (int64_t y = 0; y < rows; ++y) {
    const uint8_t* row = in + (first_row + y) * in_w * 3;
    for (int64_t x = 0; x < cols; ++x) {
      std::copy_n(row + x * 3, 3, &across[static_cast<size_t>((x * rows + y) * 3)]);
    }
  }
  std::vector<uint8_t> resized(static_cast<size_t>(out_w * rows * 3));  // column by column
  columns(across.data(), rows, resized.data(), out_w, t);
  for (int64_t y = 0; y < rows; ++y) {
    uint8_t* dst = out + y * out_w * 3;
    for (int64_t x = 0; x < out_w; ++x) {
      std::copy_n(&resized[static_cast<size_t>((x * rows + y) * 3)], 3, dst + x * 3);
    }
  }
}

constexpr ResampleLoops kResampleLoops{kTransposedRows ? rows_transposed : rows_direct, columns};
