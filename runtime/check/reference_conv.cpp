// The float64 convolution and linear references: per image and group, the input's columns
// (im2col, written here for the reference alone) times the weights with OpenBLAS's dgemm, once
// on the values and once on their magnitudes, which gives each output's Σ|aᵢ||bᵢ|.
#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "runtime/backend/cpu/parallel.h"
#include "runtime/check/bounds.h"
#include "runtime/check/reference.h"

namespace dlb {
namespace {

struct Geometry {
  int64_t n, c, h, w, k, r, s, oh, ow, g, cg, kg;
  int64_t crs() const { return cg * r * s; }
  int64_t pixels() const { return oh * ow; }
};

Geometry geometry(const ConvDesc& d) {
  return {d.batch,
          d.in_channels,
          d.height,
          d.width,
          d.out_channels,
          d.kernel_h,
          d.kernel_w,
          d.out_h(),
          d.out_w(),
          d.groups,
          d.in_channels / d.groups,
          d.out_channels / d.groups};
}

// Group `grp` of image `img` of x as columns [cg·r·s, oh·ow] (zero where the window is padding);
// with `magnitude`, the absolute values.
void im2col(const ConvDesc& d, const Geometry& G, const double* x, int64_t img, int64_t grp,
            bool magnitude, std::vector<double>& col) {
  col.assign(static_cast<size_t>(G.crs() * G.pixels()), 0.0);
  for (int64_t c = 0; c < G.cg; ++c) {
    const double* plane = x + ((img * G.c) + grp * G.cg + c) * G.h * G.w;
    for (int64_t r = 0; r < G.r; ++r) {
      for (int64_t s = 0; s < G.s; ++s) {
        double* row = col.data() + ((c * G.r + r) * G.s + s) * G.pixels();
        for (int64_t oy = 0; oy < G.oh; ++oy) {
          const int64_t iy = oy * d.stride_h - d.pad_h + r;
          if (iy < 0 || iy >= G.h) continue;
          for (int64_t ox = 0; ox < G.ow; ++ox) {
            const int64_t ix = ox * d.stride_w - d.pad_w + s;
            if (ix < 0 || ix >= G.w) continue;
            const double v = plane[iy * G.w + ix];
            row[oy * G.ow + ox] = magnitude ? std::fabs(v) : v;
          }
        }
      }
    }
  }
}

// The inverse scatter: adds columns back into group `grp` of image `img` of dx.
void col2im(const ConvDesc& d, const Geometry& G, const std::vector<double>& col, int64_t img,
            int64_t grp, double* dx) {
  for (int64_t c = 0; c < G.cg; ++c) {
    double* plane = dx + ((img * G.c) + grp * G.cg + c) * G.h * G.w;
    for (int64_t r = 0; r < G.r; ++r) {
      for (int64_t s = 0; s < G.s; ++s) {
        const double* row = col.data() + ((c * G.r + r) * G.s + s) * G.pixels();
        for (int64_t oy = 0; oy < G.oh; ++oy) {
          const int64_t iy = oy * d.stride_h - d.pad_h + r;
          if (iy < 0 || iy >= G.h) continue;
          for (int64_t ox = 0; ox < G.ow; ++ox) {
            const int64_t ix = ox * d.stride_w - d.pad_w + s;
            if (ix >= 0 && ix < G.w) plane[iy * G.w + ix] += row[oy * G.ow + ox];
          }
        }
      }
    }
  }
}

std::vector<double> magnitudes(const HostArray& a) {
  std::vector<double> m(a.v.size());
  std::transform(a.v.begin(), a.v.end(), m.begin(), [](double v) { return std::fabs(v); });
  return m;
}

// Row-major C[m, n] (+)= op(A) op(B) in float64.
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

// Turns the magnitude sums held in e.bound into bounds of products summed k at a time: the
// accumulation's (probabilistic, growing with sqrt(k)), the inputs' rounding (fixed per term), and
// the engine's flushes of subnormal numbers, if it flushes (absolute, reference.h).
void finish_products(Expected& e, double k, const Arithmetic& a) {
  const double flushes = a.flush * (2 * k + 1);
  for (double& b : e.bound) b = reduction_bound(k, b, a.math, 0.0, 0.0) + a.inputs * b + flushes;
}

// A Winograd pass's bound (reference.h): the accumulation's over its depth, on the magnitudes of
// its terms, and the rounding of its weight transforms' coefficients to f32 (|G| has two on
// any path, each off by at most f32's unit roundoff: a fixed share of each term, whatever the
// depth).
void finish_winograd(Expected& e, const std::vector<double>& magnitude, double depth,
                     const Arithmetic& a) {
  const double coefficients = 2 * unit_roundoff(DType::kF32);
  for (size_t i = 0; i < e.bound.size(); ++i) {
    e.bound[i] = reduction_bound(depth, magnitude[i], a.math, 0.0, 0.0) +
                 (a.inputs + coefficients) * magnitude[i];
  }
}

}  // namespace

Expected ref_conv_forward(const ConvDesc& d, const HostArray& x, const HostArray& w,
                          const HostArray* b, const Arithmetic& a, ConvArithmetic how) {
  const Geometry G = geometry(d);
  Expected e(Shape{G.n, G.k, G.oh, G.ow});
  const std::vector<double> wm = magnitudes(w);
  std::vector<double> col;
  for (int64_t img = 0; img < G.n; ++img) {
    for (int64_t grp = 0; grp < G.g; ++grp) {
      const int64_t out = (img * G.k + grp * G.kg) * G.pixels();
      const int64_t wo = grp * G.kg * G.crs();
      im2col(d, G, x.v.data(), img, grp, false, col);
      gemm(false, false, G.kg, G.pixels(), G.crs(), w.v.data() + wo, G.crs(), col.data(),
           G.pixels(), 0.0, e.want.v.data() + out, G.pixels());
      im2col(d, G, x.v.data(), img, grp, true, col);
      gemm(false, false, G.kg, G.pixels(), G.crs(), wm.data() + wo, G.crs(), col.data(), G.pixels(),
           0.0, e.bound.data() + out, G.pixels());
    }
  }
  if (how == ConvArithmetic::kWinogradF4x3) {
    finish_winograd(e, winograd_forward_magnitude(d, x, w), G.cg + kWinogradForwardDepth, a);
  } else {
    finish_products(e, static_cast<double>(G.crs()), a);
  }
  if (b) {
    // The bias is added to the f32 sum (one more rounding of both), or, where a backend has no
    // fused engine (the CUDA backend's fallback), to the sum stored in the data type first.
    for (int64_t i = 0; i < e.want.numel(); ++i) {
      const double bias = b->v[static_cast<size_t>((i / G.pixels()) % G.k)];
      e.bound[i] += a.data * std::fabs(e.want.v[i]) +
                    kUlps * a.ops * (std::fabs(e.want.v[i]) + std::fabs(bias));
      e.want.v[i] += bias;
    }
  }
  return e;
}

Expected ref_conv_backward_data(const ConvDesc& d, const HostArray& dy, const HostArray& w,
                                const Arithmetic& a, ConvArithmetic how) {
  const Geometry G = geometry(d);
  Expected e(Shape{G.n, G.c, G.h, G.w});
  const std::vector<double> wm = magnitudes(w), dym = magnitudes(dy);
  std::vector<double> col(static_cast<size_t>(G.crs() * G.pixels()));
  for (int64_t img = 0; img < G.n; ++img) {
    for (int64_t grp = 0; grp < G.g; ++grp) {
      const int64_t in = (img * G.k + grp * G.kg) * G.pixels();
      const int64_t wo = grp * G.kg * G.crs();
      gemm(true, false, G.crs(), G.pixels(), G.kg, w.v.data() + wo, G.crs(), dy.v.data() + in,
           G.pixels(), 0.0, col.data(), G.pixels());
      col2im(d, G, col, img, grp, e.want.v.data());
      gemm(true, false, G.crs(), G.pixels(), G.kg, wm.data() + wo, G.crs(), dym.data() + in,
           G.pixels(), 0.0, col.data(), G.pixels());
      col2im(d, G, col, img, grp, e.bound.data());
    }
  }
  // An input pixel meets at most ceil(r / stride) x ceil(s / stride) windows, each kg terms.
  const int64_t windows =
      ((G.r + d.stride_h - 1) / d.stride_h) * ((G.s + d.stride_w - 1) / d.stride_w);
  if (how == ConvArithmetic::kWinogradF4x3) {
    finish_winograd(e, winograd_backward_data_magnitude(d, dy, w), G.kg + kWinogradForwardDepth, a);
  } else {
    finish_products(e, static_cast<double>(G.kg * windows), a);
  }
  return e;
}

Expected ref_conv_backward_filter(const ConvDesc& d, const HostArray& x, const HostArray& dy,
                                  const Arithmetic& a, ConvArithmetic how) {
  const Geometry G = geometry(d);
  Expected e(Shape{G.k, G.cg, G.r, G.s});
  const std::vector<double> dym = magnitudes(dy);
  std::vector<double> col;
  for (int64_t img = 0; img < G.n; ++img) {
    for (int64_t grp = 0; grp < G.g; ++grp) {
      const int64_t in = (img * G.k + grp * G.kg) * G.pixels();
      const int64_t wo = grp * G.kg * G.crs();
      im2col(d, G, x.v.data(), img, grp, false, col);
      gemm(false, true, G.kg, G.crs(), G.pixels(), dy.v.data() + in, G.pixels(), col.data(),
           G.pixels(), 1.0, e.want.v.data() + wo, G.crs());
      im2col(d, G, x.v.data(), img, grp, true, col);
      gemm(false, true, G.kg, G.crs(), G.pixels(), dym.data() + in, G.pixels(), col.data(),
           G.pixels(), 1.0, e.bound.data() + wo, G.crs());
    }
  }
  if (how == ConvArithmetic::kWinogradF4x3) {
    // The update sums over every image's tiles of 4x4 output gradients.
    const double tiles = static_cast<double>(G.n * ((G.oh + 3) / 4) * ((G.ow + 3) / 4));
    finish_winograd(e, winograd_backward_filter_magnitude(d, x, dy), tiles + kWinogradUpdateDepth,
                    a);
  } else {
    finish_products(e, static_cast<double>(G.n * G.pixels()), a);
  }
  return e;
}

Expected ref_bias_backward(const HostArray& dy, const Arithmetic& a) {
  const int64_t n = dy.shape[0], c = dy.shape[1], inner = dy.numel() / (n * c);
  Expected e(Shape{c});
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const double* row = dy.v.data() + (i * c + ch) * inner;
      for (int64_t k = 0; k < inner; ++k) {
        e.want.v[ch] += row[k];
        e.bound[ch] += std::fabs(row[k]);
      }
    }
  }
  // A sum in f32, no products: ops' roundoff.
  for (double& b : e.bound) b = reduction_bound(static_cast<double>(n * inner), b, a.ops, 0, 0);
  return e;
}

namespace {

// Below this batch the linear references loop over the weight once, with every sample's sum and
// magnitude in one pass, instead of dgemm on copies of it: vgg16's classifier holds 103 million
// weights, and a copy of their magnitudes costs more than the products.
constexpr int64_t kDirectBatch = 16;

}  // namespace

Expected ref_linear_forward(const HostArray& x, const HostArray& w, const HostArray& b,
                            const Arithmetic& a) {
  const int64_t n = x.shape[0], f = x.shape[1], o = w.shape[0];
  Expected e(Shape{n, o});
  if (n <= kDirectBatch) {
    parallel_for(o, 2, [&](int64_t j) {
      const double* wr = w.v.data() + j * f;
      for (int64_t i = 0; i < n; ++i) {
        const double* xr = x.v.data() + i * f;
        double sum = 0, mag = 0;
        for (int64_t k = 0; k < f; ++k) sum += xr[k] * wr[k], mag += std::fabs(xr[k] * wr[k]);
        e.want.v[i * o + j] = sum, e.bound[i * o + j] = mag;
      }
    });
  } else {
    gemm(false, true, n, o, f, x.v.data(), f, w.v.data(), f, 0.0, e.want.v.data(), o);
    const std::vector<double> xm = magnitudes(x), wm = magnitudes(w);
    gemm(false, true, n, o, f, xm.data(), f, wm.data(), f, 0.0, e.bound.data(), o);
  }
  finish_products(e, static_cast<double>(f), a);
  // bias_add after the product was stored (a rounding in the data type), then the sum's own.
  for (int64_t i = 0; i < e.want.numel(); ++i) {
    const double bias = b.v[static_cast<size_t>(i % o)];
    e.bound[i] += a.data * std::fabs(e.want.v[i]) +
                  kUlps * a.ops * (std::fabs(e.want.v[i]) + std::fabs(bias));
    e.want.v[i] += bias;
  }
  return e;
}

Expected ref_linear_backward_data(const HostArray& dy, const HostArray& w, const Arithmetic& a) {
  const int64_t n = dy.shape[0], o = dy.shape[1], f = w.shape[1];
  Expected e(Shape{n, f});
  if (n <= kDirectBatch) {
    // Blocks of input features, each summed over every output: one pass over the weight.
    constexpr int64_t kBlock = 256;
    parallel_for((f + kBlock - 1) / kBlock, 2, [&](int64_t blk) {
      const int64_t k0 = blk * kBlock, k1 = std::min(f, k0 + kBlock);
      for (int64_t j = 0; j < o; ++j) {
        const double* wr = w.v.data() + j * f;
        for (int64_t i = 0; i < n; ++i) {
          const double g = dy.v[i * o + j];
          double* want = e.want.v.data() + i * f;
          double* mag = e.bound.data() + i * f;
          for (int64_t k = k0; k < k1; ++k) want[k] += g * wr[k], mag[k] += std::fabs(g * wr[k]);
        }
      }
    });
  } else {
    gemm(false, false, n, f, o, dy.v.data(), o, w.v.data(), f, 0.0, e.want.v.data(), f);
    const std::vector<double> dym = magnitudes(dy), wm = magnitudes(w);
    gemm(false, false, n, f, o, dym.data(), o, wm.data(), f, 0.0, e.bound.data(), f);
  }
  finish_products(e, static_cast<double>(o), a);
  return e;
}

Expected ref_linear_backward_weights(const HostArray& dy, const HostArray& x, const Arithmetic& a) {
  const int64_t n = dy.shape[0], o = dy.shape[1], f = x.shape[1];
  Expected e(Shape{o, f});
  if (n <= kDirectBatch) {
    parallel_for(o, 2, [&](int64_t j) {
      double* want = e.want.v.data() + j * f;
      double* mag = e.bound.data() + j * f;
      for (int64_t i = 0; i < n; ++i) {
        const double g = dy.v[i * o + j];
        const double* xr = x.v.data() + i * f;
        for (int64_t k = 0; k < f; ++k) want[k] += g * xr[k], mag[k] += std::fabs(g * xr[k]);
      }
    });
  } else {
    gemm(true, false, o, f, n, dy.v.data(), o, x.v.data(), f, 0.0, e.want.v.data(), f);
    const std::vector<double> dym = magnitudes(dy), xm = magnitudes(x);
    gemm(true, false, o, f, n, dym.data(), o, xm.data(), f, 0.0, e.bound.data(), f);
  }
  finish_products(e, static_cast<double>(n), a);
  return e;
}

}  // namespace dlb
