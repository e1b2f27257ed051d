// A tensor's bytes between the order its layout stores them in and logical order (row-major over
// its NCHW, or KCRS, shape), which the host sees: state_dict entries, initial weights, step dumps.
// Pure index arithmetic: no backend, no allocation beyond the result.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/core/dtype.h"
#include "runtime/core/shape.h"

namespace dlb {

// The block of Layout::kOIhw16i16o and kOIhw8i16o2i, of output and of input channels.
constexpr int64_t kWeightBlock = 16;

// kOIhw16i16o or kOIhw8i16o2i: a weight in oneDNN's blocks of 16 by 16 channels, which differ
// only in where each element of a block sits.
bool is_blocked(Layout layout);

// Whether a tensor of `shape` can be stored in `layout`: any shape in NCHW; a 4-D one in NHWC (any
// other rank is stored NCHW); the blocked ones need 4-D with both leading dims multiples of 16.
bool layout_holds(Layout layout, const Shape& shape);

// Where logical element (k, c, r, s) of a 4-D `shape` is stored in `layout`, in elements.
int64_t stored_offset(Layout layout, const Shape& shape, int64_t k, int64_t c, int64_t r,
                      int64_t s);

// `stored` (a tensor of `shape` in `layout`, `element_bytes` per element) into logical order, and
// back. NCHW, and any tensor that is not 4-D, is copied as it is. Throws InvalidArgument where
// the layout cannot hold the shape, or the sizes differ.
// (The bytes are taken by value: where the orders agree they come back as they went in, moved.)
std::vector<uint8_t> to_logical_order(Layout layout, const Shape& shape, size_t element_bytes,
                                      std::vector<uint8_t> stored);
std::vector<uint8_t> to_stored_order(Layout layout, const Shape& shape, size_t element_bytes,
                                     std::vector<uint8_t> logical);

// Every f32 element of `from` (in `from_layout`) into `to` (in `to_layout`), both of `shape`:
// one layout's weights for an algorithm that reads the other's.
void relayout_floats(const Shape& shape, Layout from_layout, const float* from, Layout to_layout,
                     float* to);
// The same for elements of any size (`element_bytes`), moved bit for bit: one layout's tensor
// into another's of its type, without widening it.
void relayout_elements(const Shape& shape, size_t element_bytes, Layout from_layout,
                       const void* from, Layout to_layout, void* to);

}  // namespace dlb
