// The magnitudes that bound the rounding of a convolution computed by oneDNN's Winograd
// F(4x4, 3x3) (reference.h, winograd_*_magnitude).
//
// Winograd computes a 4x4 tile of outputs from a 6x6 tile of inputs as Aᵀ[(G g Gᵀ) ⊙ (Bᵀ d B)]A,
// summed over the channels between the Hadamard product and Aᵀ..A. Every value it rounds is a
// sum of terms ±a·g·d, each a product of transform coefficients, one weight and one input, and
// the same terms in absolute value sum to |Aᵀ|[(|G||g||Gᵀ|) ⊙ (|Bᵀ||d||B|)]|A|: that sum plays
// the part Σ|aᵢ||bᵢ| plays for a direct convolution (bounds.h). It is never less, and more by
// the transforms' growth, and by terms that cancel where a direct sum has none (near padding):
// the price of the larger tile (F(2x2, 3x3)'s coefficients are all 0, ±1/2 and ±1; F(4x4, 3x3)'s
// reach 3.375 here). The matrices are oneDNN's for AVX-512 cores
// (jit_wino_4x3), with points scaled to keep that growth low, as its own test reference writes
// them (oneDNN's tests/benchdnn/conv/ref_wino.cpp, trans_I_4x4_3x3, trans_W_4x4_3x3,
// trans_O_4x4_3x3, and the weight update's trans_W_3x3_4x4_wu and trans_O_3x3_4x4_wu). Tiles
// start at multiples of 4 of the pass's output, as there.
#include <cblas.h>

#include <cmath>
#include <vector>

#include "runtime/backend/cpu/parallel.h"
#include "runtime/check/reference.h"
#include "runtime/core/error.h"

namespace dlb {
namespace {

constexpr int kAlpha = 6;  // a transformed tile's side
constexpr int kOut = 4;    // an output tile's side
constexpr int kTile = kAlpha * kAlpha;

// A 1-D transform's coefficients in absolute value, `rows` x `cols`, row-major.
struct Transform {
  int rows, cols;
  const double* m;
  double at(int r, int c) const { return m[r * cols + c]; }
};

// The coefficients' table, one row of each matrix per line.
// clang-format off
// |Bᵀ|: the inputs' transform, 6 x 6.
constexpr double kInputM[] = {
    0.87890625, 0,          2.640625, 0,        1, 0,
    0,          1.40625,    2.25,     0.625,    1, 0,
    0,          1.40625,    2.25,     0.625,    1, 0,
    0,          0.5859375,  0.390625, 1.5,      1, 0,
    0,          0.5859375,  0.390625, 1.5,      1, 0,
    0,          0.87890625, 0,        2.640625, 0, 1};
// |G|: the weights' transform, 6 x 3.
constexpr double kWeightsM[] = {
    1.13777777777778,  0,                 0,
    0.688403361344538, 0.430252100840336, 0.26890756302521,
    0.688403361344538, 0.430252100840336, 0.26890756302521,
    0.119514472455649, 0.179271708683473, 0.26890756302521,
    0.119514472455649, 0.179271708683473, 0.26890756302521,
    0,                 0,                 1};
// |Aᵀ|: the outputs' transform, 4 x 6.
constexpr double kOutputM[] = {
    1, 1,           1,           1,     1,     0,
    0, 0.625,       0.625,       1.5,   1.5,   0,
    0, 0.390625,    0.390625,    2.25,  2.25,  0,
    0, 0.244140625, 0.244140625, 3.375, 3.375, 1};
// The weight update's: output gradients' 4 x 4 tiles transformed by a 6 x 4 matrix, and the
// reduced tiles transformed back to 3 x 3 by a 3 x 6 one.
constexpr double kGradientsM[] = {
    1.13777777777778,  0,                 0,                0,
    0.688403361344538, 0.430252100840336, 0.26890756302521, 0.168067226890756,
    0.688403361344538, 0.430252100840336, 0.26890756302521, 0.168067226890756,
    0.119514472455649, 0.179271708683473, 0.26890756302521, 0.403361344537815,
    0.119514472455649, 0.179271708683473, 0.26890756302521, 0.403361344537815,
    0,                 0,                 0,                1};
constexpr double kUpdateM[] = {
    1, 1,        1,        1,    1,    0,
    0, 0.625,    0.625,    1.5,  1.5,  0,
    0, 0.390625, 0.390625, 2.25, 2.25, 1};
// clang-format on

constexpr Transform kInput = {6, 6, kInputM};
constexpr Transform kWeights = {6, 3, kWeightsM};
constexpr Transform kOutput = {4, 6, kOutputM};
constexpr Transform kGradients = {6, 4, kGradientsM};
constexpr Transform kUpdate = {3, 6, kUpdateM};

// |T| x |T|ᵀ for a cols x cols tile `x`: a rows x rows tile.
void sandwich(const Transform& t, const double* x, double* out) {
  double half[kTile];  // |T| x: rows x cols
  for (int r = 0; r < t.rows; ++r) {
    for (int c = 0; c < t.cols; ++c) {
      double s = 0;
      for (int k = 0; k < t.cols; ++k) s += t.at(r, k) * x[k * t.cols + c];
      half[r * t.cols + c] = s;
    }
  }
  for (int r = 0; r < t.rows; ++r) {
    for (int c = 0; c < t.rows; ++c) {
      double s = 0;
      for (int k = 0; k < t.cols; ++k) s += half[r * t.cols + k] * t.at(c, k);
      out[r * t.rows + c] = s;
    }
  }
}

// How a pass's tiles lie over an [N, C, H, W] array: tiles_h x tiles_w tiles per image, each
// reading a `side` x `side` window from (ty·4 - pad_t, tx·4 - pad_l), zero outside.
struct Tiling {
  int64_t tiles_h, tiles_w, pad_t, pad_l;
  int side;
  int64_t per_image() const { return tiles_h * tiles_w; }
};

Tiling tiling_over(int64_t out_h, int64_t out_w, int64_t pad_t, int64_t pad_l, int side) {
  return {(out_h + kOut - 1) / kOut, (out_w + kOut - 1) / kOut, pad_t, pad_l, side};
}

// The transformed tiles of |a| ([N, C, H, W]) in Winograd's domain, as [36][C][N · tiles]: the
// GEMMs' operand layout.
std::vector<double> transformed(const HostArray& a, const Tiling& t, const Transform& tr) {
  const int64_t n = a.shape[0], c = a.shape[1], h = a.shape[2], w = a.shape[3];
  const int64_t p = n * t.per_image();
  std::vector<double> out(static_cast<size_t>(kTile * c * p));
  parallel_for(n * c, 1, [&](int64_t nc) {
    const int64_t img = nc / c, ch = nc % c;
    const double* plane = a.v.data() + nc * h * w;
    double in[kTile], tile[kTile];
    for (int64_t ty = 0; ty < t.tiles_h; ++ty) {
      for (int64_t tx = 0; tx < t.tiles_w; ++tx) {
        for (int j = 0; j < t.side; ++j) {
          for (int k = 0; k < t.side; ++k) {
            const int64_t y = ty * kOut + j - t.pad_t, x = tx * kOut + k - t.pad_l;
            const bool inside = y >= 0 && y < h && x >= 0 && x < w;
            in[j * t.side + k] = inside ? std::fabs(plane[y * w + x]) : 0.0;
          }
        }
        sandwich(tr, in, tile);
        const int64_t col = img * t.per_image() + ty * t.tiles_w + tx;
        for (int pq = 0; pq < kTile; ++pq)
          out[static_cast<size_t>((pq * c + ch) * p + col)] = tile[pq];
      }
    }
  });
  return out;
}

// |G||g||Gᵀ| of each 3x3 filter, as [36][rows][cols]; `filter(r, c, i, j)` reads one weight.
template <typename Filter>
std::vector<double> transformed_filters(int64_t rows, int64_t cols, Filter filter) {
  std::vector<double> out(static_cast<size_t>(kTile * rows * cols));
  parallel_for(rows, 1, [&](int64_t r) {
    double g[9], tile[kTile];
    for (int64_t c = 0; c < cols; ++c) {
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) g[i * 3 + j] = std::fabs(filter(r, c, i, j));
      sandwich(kWeights, g, tile);
      for (int pq = 0; pq < kTile; ++pq)
        out[static_cast<size_t>((pq * rows + r) * cols + c)] = tile[pq];
    }
  });
  return out;
}

// For each of the 36 points: C[pq] (m x n) = A[pq] (m x k) · op(B[pq]).
std::vector<double> pointwise_gemms(const std::vector<double>& a, const std::vector<double>& b,
                                    int64_t m, int64_t n, int64_t k, bool transpose_b) {
  std::vector<double> c(static_cast<size_t>(kTile * m * n));
  for (int pq = 0; pq < kTile; ++pq) {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans,
                static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0,
                a.data() + pq * m * k, static_cast<int>(k), b.data() + pq * k * n,
                static_cast<int>(transpose_b ? k : n), 0.0, c.data() + pq * m * n,
                static_cast<int>(n));
  }
  return c;
}

// The 4x4 output tiles of m ([36][K][N · tiles]) through |Aᵀ|..|A|, into [N, K, oh, ow].
std::vector<double> untiled(const std::vector<double>& m, const Tiling& t, int64_t n, int64_t k,
                            int64_t oh, int64_t ow) {
  std::vector<double> out(static_cast<size_t>(n * k * oh * ow));
  const int64_t p = n * t.per_image();
  parallel_for(n * k, 1, [&](int64_t nk) {
    const int64_t img = nk / k, ch = nk % k;
    double tile[kTile], o[kTile];
    for (int64_t ty = 0; ty < t.tiles_h; ++ty) {
      for (int64_t tx = 0; tx < t.tiles_w; ++tx) {
        const int64_t col = img * t.per_image() + ty * t.tiles_w + tx;
        for (int pq = 0; pq < kTile; ++pq)
          tile[pq] = m[static_cast<size_t>((pq * k + ch) * p + col)];
        sandwich(kOutput, tile, o);
        for (int i = 0; i < kOut && ty * kOut + i < oh; ++i) {
          for (int j = 0; j < kOut && tx * kOut + j < ow; ++j) {
            out[static_cast<size_t>(((nk * oh) + ty * kOut + i) * ow + tx * kOut + j)] =
                o[i * kOut + j];
          }
        }
      }
    }
  });
  return out;
}

void require_winograd_shape(const ConvDesc& d) {
  if (d.kernel_h != 3 || d.kernel_w != 3 || d.stride_h != 1 || d.stride_w != 1 || d.groups != 1) {
    throw InvalidArgument(
        "a Winograd F(4x4, 3x3) pass takes 3x3 kernels at stride 1 in one group only");
  }
}

}  // namespace

std::vector<double> winograd_forward_magnitude(const ConvDesc& d, const HostArray& x,
                                               const HostArray& w) {
  require_winograd_shape(d);
  const int64_t n = d.batch, c = d.in_channels, k = d.out_channels;
  const Tiling t = tiling_over(d.out_h(), d.out_w(), d.pad_h, d.pad_w, kAlpha);
  const std::vector<double> v = transformed(x, t, kInput);
  const std::vector<double> u = transformed_filters(k, c, [&](int64_t r, int64_t ch, int i, int j) {
    return w.v[static_cast<size_t>(((r * c + ch) * 3 + i) * 3 + j)];
  });
  const std::vector<double> m = pointwise_gemms(u, v, k, n * t.per_image(), c, false);
  return untiled(m, t, n, k, d.out_h(), d.out_w());
}

std::vector<double> winograd_backward_data_magnitude(const ConvDesc& d, const HostArray& dy,
                                                     const HostArray& w) {
  require_winograd_shape(d);
  // dx is the convolution of dy, padded by kernel - 1 - pad, with the weights turned by 180
  // degrees and their channels swapped.
  const int64_t n = d.batch, c = d.in_channels, k = d.out_channels;
  const Tiling t = tiling_over(d.height, d.width, 2 - d.pad_h, 2 - d.pad_w, kAlpha);
  const std::vector<double> v = transformed(dy, t, kInput);
  const std::vector<double> u = transformed_filters(c, k, [&](int64_t ch, int64_t r, int i, int j) {
    return w.v[static_cast<size_t>(((r * c + ch) * 3 + 2 - i) * 3 + 2 - j)];
  });
  const std::vector<double> m = pointwise_gemms(u, v, c, n * t.per_image(), k, false);
  return untiled(m, t, n, c, d.height, d.width);
}

std::vector<double> winograd_backward_filter_magnitude(const ConvDesc& d, const HostArray& x,
                                                       const HostArray& dy) {
  require_winograd_shape(d);
  const int64_t c = d.in_channels, k = d.out_channels;
  const Tiling inputs = tiling_over(d.out_h(), d.out_w(), d.pad_h, d.pad_w, kAlpha);
  const Tiling gradients = tiling_over(d.out_h(), d.out_w(), 0, 0, kOut);
  const int64_t p = d.batch * inputs.per_image();
  const std::vector<double> v = transformed(x, inputs, kInput);          // [36][C][P]
  const std::vector<double> g = transformed(dy, gradients, kGradients);  // [36][K][P]
  const std::vector<double> u = pointwise_gemms(g, v, k, c, p, true);    // [36][K][C]
  std::vector<double> out(static_cast<size_t>(k * c * 9));
  parallel_for(k * c, 16, [&](int64_t kc) {
    double tile[kTile], o[9];
    for (int pq = 0; pq < kTile; ++pq) tile[pq] = u[static_cast<size_t>(pq * k * c + kc)];
    sandwich(kUpdate, tile, o);
    for (int i = 0; i < 9; ++i) out[static_cast<size_t>(kc * 9 + i)] = o[i];
  });
  return out;
}

}  // namespace dlb
