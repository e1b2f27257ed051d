// --decode=gpu on the CUDA backend (image_decoder.h): nvJPEG's batched decoder into interleaved
// RGB on a stream of the decoder's own, then image_kernels.h's two kernels into the step's input
// tensor. nvJPEG's hardware backend (the JPEG engines of an A100, H100 or H200) decodes the
// batch's files it supports (baseline, one scan, not 4:1:0 or 4:1:1); the rest, and a part the
// engines fail, go to its default backend as a batch of their own, whose Huffman decoding runs
// on the calling thread. Both are strict (a corrupt file is an error) and interpolate chroma, as
// libjpeg-turbo does. A CMYK file reaches it already decoded by the loader (EncodedImage::decoded),
// and is only copied. Its buffers are stream-ordered allocations of its own, outside the step's
// memory plan. Built where nvJPEG is found (scripts/install-deps.sh installs it from PyPI); only
// registry.cpp includes this.
#pragma once
#include <memory>

#include "runtime/backend/image_decoder.h"

namespace dlb::cuda {

// The decoder of `backend`, a CUDA backend, on its current device.
std::unique_ptr<ImageDecoder> make_nvjpeg_decoder(Backend& backend);

}  // namespace dlb::cuda
