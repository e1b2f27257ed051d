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

enum class Layout { kNCHW, kNHWC };
std::string_view layout_name(Layout l);

}  // namespace dlb
