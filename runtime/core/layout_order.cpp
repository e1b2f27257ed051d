#include "runtime/core/layout_order.h"

#include <fmt/format.h>

#include <cstring>
#include <utility>

#include "runtime/core/error.h"

namespace dlb {
namespace {

void check_holds(Layout layout, const Shape& shape) {
  if (!layout_holds(layout, shape)) {
    throw InvalidArgument(
        fmt::format("a {} tensor cannot be stored {}", shape.str(), layout_name(layout)));
  }
}

// Calls f(a, b) for every element of a 4-D `shape`, in logical order: its offsets in layouts
// `a` and `b`.
template <typename F>
void for_each_element(const Shape& shape, Layout a, Layout b, F f) {
  for (int64_t k = 0; k < shape[0]; ++k)
    for (int64_t c = 0; c < shape[1]; ++c)
      for (int64_t r = 0; r < shape[2]; ++r)
        for (int64_t s = 0; s < shape[3]; ++s)
          f(stored_offset(a, shape, k, c, r, s), stored_offset(b, shape, k, c, r, s));
}

std::vector<uint8_t> reorder(Layout layout, const Shape& shape, size_t element_bytes,
                             std::vector<uint8_t> from, bool into_logical) {
  check_holds(layout, shape);
  if (from.size() != static_cast<size_t>(shape.numel()) * element_bytes) {
    throw InvalidArgument(fmt::format("{} bytes for a {} tensor of {}-byte elements", from.size(),
                                      shape.str(), element_bytes));
  }
  if (layout == Layout::kNCHW || shape.rank() != 4) return from;
  std::vector<uint8_t> out(from.size());
  for_each_element(shape, Layout::kNCHW, layout, [&](int64_t logical, int64_t stored) {
    const size_t src = static_cast<size_t>(into_logical ? stored : logical) * element_bytes;
    const size_t dst = static_cast<size_t>(into_logical ? logical : stored) * element_bytes;
    std::memcpy(out.data() + dst, from.data() + src, element_bytes);
  });
  return out;
}

}  // namespace

bool is_blocked(Layout layout) {
  return layout == Layout::kOIhw16i16o || layout == Layout::kOIhw8i16o2i;
}

bool layout_holds(Layout layout, const Shape& shape) {
  if (!is_blocked(layout)) return true;
  return shape.rank() == 4 && shape[0] % kWeightBlock == 0 && shape[1] % kWeightBlock == 0;
}

int64_t stored_offset(Layout layout, const Shape& shape, int64_t k, int64_t c, int64_t r,
                      int64_t s) {
  const int64_t cc = shape[1], rr = shape[2], ss = shape[3];
  switch (layout) {
    case Layout::kNCHW:
      return ((k * cc + c) * rr + r) * ss + s;
    case Layout::kNHWC:
      return ((k * rr + r) * ss + s) * cc + c;
    case Layout::kOIhw16i16o:
    case Layout::kOIhw8i16o2i: {
      const int64_t block =
          ((k / kWeightBlock) * (cc / kWeightBlock) + c / kWeightBlock) * rr * ss + r * ss + s;
      const int64_t ci = c % kWeightBlock, ki = k % kWeightBlock;
      const int64_t within = layout == Layout::kOIhw16i16o
                                 ? ci * kWeightBlock + ki
                                 : (ci / 2) * 2 * kWeightBlock + ki * 2 + ci % 2;
      return block * kWeightBlock * kWeightBlock + within;
    }
  }
  return 0;
}

std::vector<uint8_t> to_logical_order(Layout layout, const Shape& shape, size_t element_bytes,
                                      std::vector<uint8_t> stored) {
  return reorder(layout, shape, element_bytes, std::move(stored), true);
}

std::vector<uint8_t> to_stored_order(Layout layout, const Shape& shape, size_t element_bytes,
                                     std::vector<uint8_t> logical) {
  return reorder(layout, shape, element_bytes, std::move(logical), false);
}

void relayout_floats(const Shape& shape, Layout from_layout, const float* from, Layout to_layout,
                     float* to) {
  relayout_elements(shape, sizeof(float), from_layout, from, to_layout, to);
}

void relayout_elements(const Shape& shape, size_t element_bytes, Layout from_layout,
                       const void* from, Layout to_layout, void* to) {
  check_holds(from_layout, shape);
  check_holds(to_layout, shape);
  const auto* src = static_cast<const uint8_t*>(from);
  auto* dst = static_cast<uint8_t*>(to);
  if (shape.rank() != 4 || from_layout == to_layout) {
    std::memcpy(dst, src, static_cast<size_t>(shape.numel()) * element_bytes);
    return;
  }
  for_each_element(shape, from_layout, to_layout, [&](int64_t source, int64_t target) {
    std::memcpy(dst + static_cast<size_t>(target) * element_bytes,
                src + static_cast<size_t>(source) * element_bytes, element_bytes);
  });
}

}  // namespace dlb
