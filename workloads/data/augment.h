// The training and evaluation transforms of an ImageNet input pipeline, as torchvision composes
// them over PIL images, on 8-bit RGB (HWC) images:
//   train: RandomResizedCrop(S) (scale 0.08-1, ratio 3/4-4/3), RandomHorizontalFlip, ToTensor,
//          Normalize(ImageNet's mean and standard deviation);
//   eval:  Resize(S x 256/224) of the shorter side, CenterCrop(S), ToTensor, Normalize.
// The resize is PIL's antialiased bilinear (Image.resize with BILINEAR: a triangle filter widened
// by the reduction factor, separable, horizontal pass first, 22-bit fixed-point weights, each
// pass rounded to 8 bits), which torchvision's functional.resize calls for a PIL image: the same
// arithmetic, so the same bytes.
#pragma once
#include <array>
#include <cstdint>

#include "runtime/core/rng.h"
#include "workloads/data/jpeg.h"

namespace dlb {

// torchvision's RandomResizedCrop.get_params on a width x height image: ten tries of an area
// fraction uniform in [0.08, 1] and a log-uniform aspect ratio in [3/4, 4/3], the first box that
// fits placed uniformly; else the centre crop of the ratio clamped to that range. Draws from
// `rng` (dlbench's generator, not torch's: the same rule, other draws).
CropBox random_resized_crop_box(int64_t width, int64_t height, Rng& rng);

// `box` of `image`, resized to out_width x out_height as PIL resizes (above).
RgbImage resized_crop(const RgbImage& image, const CropBox& box, int64_t out_width,
                      int64_t out_height);

// The image mirrored left to right.
void flip_horizontally(RgbImage& image);

// `box` of `image`, pixels copied.
RgbImage crop(const RgbImage& image, const CropBox& box);

// Evaluation's transform: Resize(size x 256 / 224) of the shorter side (torchvision's rule: the
// longer side becomes int(short x long / short's old length)), then CenterCrop(size) (its offsets
// rounded half to even, as Python rounds).
RgbImage eval_transform(const RgbImage& image, int64_t size);

// ImageNet's per-channel mean and standard deviation (torchvision's reference recipe).
inline constexpr std::array<float, 3> kImageNetMean = {0.485f, 0.456f, 0.406f};
inline constexpr std::array<float, 3> kImageNetStd = {0.229f, 0.224f, 0.225f};

// ToTensor and Normalize: channel c of pixel p is (byte / 255 - mean[c]) / std[c], written as
// 3 planes (NCHW: out[c * height * width + p]).
void normalize_to_planes(const RgbImage& image, float* out);

}  // namespace dlb
