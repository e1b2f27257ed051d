// Storage types of tensors and the precision policies that choose among them.
// Precision is a runtime value (a sweep axis), never a template parameter.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace dlb {

enum class DType { kF32, kF16, kBF16, kI64 };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);              // "f32", ...
std::string_view dtype_safetensors_name(DType t);  // "F32", "F16", "BF16", "I64"
std::optional<DType> dtype_from_safetensors(std::string_view s);

// Training precision, as docs/metrics.md names them.
enum class Precision { kFp32, kTf32, kFp16, kBf16 };
inline constexpr Precision kPrecisions[] = {Precision::kFp32, Precision::kTf32, Precision::kFp16,
                                            Precision::kBf16};

std::string_view precision_name(Precision p);
std::optional<Precision> parse_precision(std::string_view s);

// How a 4-D tensor's elements are stored, its shape always the logical NCHW (KCRS) one:
// - kNCHW: row-major over that shape (a weight: KCRS, torchvision's);
// - kNHWC: channels last (a weight: KRSC), the CUDA backend's for 16-bit activations;
// - kOIhw16i16o: a weight in oneDNN's blocks (its ABcd16b16a): [K/16][C/16][R][S][16 c][16 k],
//   the CPU's for convolution weights whose K and C are multiples of 16 (with their gradients,
//   compute copies and momentum). The layout oneDNN's direct convolution reads f32 weights in
//   and writes their gradients in, on AVX-512.
// - kOIhw8i16o2i: the same blocks with pairs of input channels side by side (oneDNN's
//   ABcd8b16a2b): [K/16][C/16][R][S][8 c/2][16 k][2 c%2], the layout its bf16 convolutions read
//   weights in on AVX-512 BF16: the CPU's bf16 compute copies of kOIhw16i16o weights.
// runtime/core/layout_order.h moves bytes between a layout and logical order.
enum class Layout { kNCHW, kNHWC, kOIhw16i16o, kOIhw8i16o2i };
std::string_view layout_name(Layout l);

}  // namespace dlb
