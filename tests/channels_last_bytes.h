// Reordering a tensor's stored bytes between NCHW and NHWC on the host, by plain loops: the
// independent reference that tests of channels-last kernels and ops compare against.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/memory/tensor.h"

namespace dlb {

// The bytes of [N, C, H, W] tensor `t`, read as NCHW, written in NHWC order (or the reverse,
// with `to_nhwc` false: `t`'s bytes read as NHWC, written NCHW).
inline std::vector<uint8_t> reordered_bytes(const Tensor& t, bool to_nhwc = true) {
  const Shape& s = t.shape();
  const size_t e = dtype_size(t.dtype());
  const int64_t c = s[1], pixels = s[2] * s[3];
  const auto* from = static_cast<const uint8_t*>(t.raw());
  std::vector<uint8_t> out(t.bytes());
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < pixels; ++p) {
        const int64_t nchw = (n * c + ch) * pixels + p, nhwc = (n * pixels + p) * c + ch;
        std::memcpy(out.data() + (to_nhwc ? nhwc : nchw) * e, from + (to_nhwc ? nchw : nhwc) * e,
                    e);
      }
  return out;
}

}  // namespace dlb
