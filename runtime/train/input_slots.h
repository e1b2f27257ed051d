// The step's input: the batch and its labels, copied from the host into the tensors the step's
// program reads. Slot 0 is the model's own input and the program's labels; slot 1 (the program's
// second input buffer, StepTarget::second_input) exists on a backend with asynchronous input
// copies, which copies the next batch into the slot the last step did not read, on the copy
// queue, while that step still computes. A batch of JPEG files (--decode=gpu) is decoded into
// the slot by the backend's image decoder (image_decoder.h) on its own queue, in the same turn.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/backend/image_decoder.h"
#include "runtime/nn/bound_step.h"
#include "runtime/trace/tracer.h"
#include "runtime/train/step_program.h"

namespace dlb {

class InputSlots {
 public:
  // Over `step`, `program`'s table bound; both must outlive the slots. Each slot's mark starts
  // at the work queued so far: a buffer may reuse memory that queued work still uses, and a copy
  // queue knows nothing of it.
  InputSlots(Backend& backend, BoundStep& step, const StepProgram& program);
  // Checks the labels (on the host, for every backend: a GPU's loss kernel cannot throw), then
  // copies the batch into a slot and makes the step read it. `tracer` (may be null) gets the
  // copy's span on the copy lane.
  void load(const float* images, const int64_t* labels, Tracer* tracer);
  // The same for a batch of JPEG files, which the backend's image decoder (made at the first
  // such batch; Unsupported where the backend has none) decodes, crops, resizes, flips and
  // normalises into the slot. Its span on the copy lane is "decode batch".
  void load_encoded(const std::vector<EncodedImage>& images, const ImageNormalization& norm,
                    const int64_t* labels, Tracer* tracer);
  // What decodes a batch of files: the decoder's name, or empty before the first.
  std::string decoder_name() const { return decoder_ ? decoder_->name() : std::string(); }
  size_t decoder_bytes() const { return decoder_ ? decoder_->device_bytes() : 0; }
  // Decodes batches of files with `decoder` instead of the backend's own (a test's, on the host).
  void set_decoder(std::unique_ptr<ImageDecoder> decoder) { decoder_ = std::move(decoder); }
  // The batches of files decoded so far, and the decoder's own time for them: the sum of each
  // decode's span on its queue (on a device clock, this waits for the last few to end).
  int64_t decoded_batches() const { return decoded_; }
  double decode_seconds() const;
  // The compute queued so far is the last to read the current slot.
  void mark_read();
  int current() const { return current_; }

 private:
  // Images arrive as NCHW floats; a 16-bit input takes them rounded to its type, and a
  // channels-last one in NHWC order (in buffers of the slots', valid until the next batch).
  const void* stored_images(const float* images);
  void check_labels(const int64_t* labels) const;
  // The slot the next batch goes into: slot 0 first, then the one the step does not read; slot 0
  // always where copies are synchronous (one slot).
  int next_target() {
    const bool first = loaded_++ == 0;
    return first || !backend_.async_input_copies() ? 0 : current_ ^ 1;
  }
  // Makes the step read slot `target` once its images and labels have arrived (the two copies'
  // ends), and records the span from `start` to `end` named `name` on the copy lane.
  void switch_to(int target, const Backend::CopyMarks& images, const Backend::CopyMarks& labels,
                 const std::string& name, Tracer* tracer);

  struct Slot {
    Tensor images, labels;
    Mark read;  // the end of the last compute that read this slot (a mark of the backend's clock)
  };
  Backend& backend_;
  BoundStep& step_;
  int images_id_, labels_id_;
  int64_t classes_;
  Slot slots_[2];
  int current_ = 0;
  int64_t loaded_ = 0;
  std::vector<unsigned char> narrowed_images_;  // a 16-bit input's host copy of the batch
  std::vector<float> channels_last_images_;     // a channels-last input's, in NHWC order
  std::unique_ptr<ImageDecoder> decoder_;       // made at the first batch of files
  // The last few decodes' spans on the decoder's queue, and the older ones' time, summed as they
  // leave (a span kept holds two device events).
  mutable std::deque<Backend::CopyMarks> recent_decodes_;
  mutable double decoded_us_ = 0;
  int64_t decoded_ = 0;
};

}  // namespace dlb
