#include "runtime/train/input_slots.h"

#include <fmt/format.h>

#include "runtime/core/error.h"
#include "runtime/core/half.h"
#include "runtime/core/nvtx.h"

namespace dlb {

InputSlots::InputSlots(Backend& backend, BoundStep& step, const StepProgram& program)
    : backend_(backend),
      step_(step),
      images_id_(program.ids.images),
      labels_id_(program.ids.labels),
      classes_(program.tensors.at(program.ids.logits).shape[1]) {
  const StepTensorIds& ids = program.ids;
  slots_[0] = {step.tensor(ids.images), step.tensor(ids.labels), {}};
  if (ids.second_images < 0) return;
  slots_[1] = {step.tensor(ids.second_images), step.tensor(ids.second_labels), {}};
  slots_[0].read = slots_[1].read = backend.clock().mark();
}

const void* InputSlots::stored_images(const float* images) {
  const Tensor& input = step_.tensor(images_id_);
  if (input.layout() == Layout::kNHWC) {
    const Shape& s = input.shape();
    channels_last_images_.resize(static_cast<size_t>(input.numel()));
    const int64_t c = s[1], pixels = s[2] * s[3];
    for (int64_t n = 0; n < s[0]; ++n) {
      const float* from = images + n * c * pixels;
      float* to = channels_last_images_.data() + n * c * pixels;
      for (int64_t ch = 0; ch < c; ++ch) {
        for (int64_t p = 0; p < pixels; ++p) to[p * c + ch] = from[ch * pixels + p];
      }
    }
    images = channels_last_images_.data();
  }
  if (input.dtype() == DType::kF32) return images;
  narrowed_images_.resize(input.bytes());
  floats_to_dtype(images, input.numel(), input.dtype(), narrowed_images_.data());
  return narrowed_images_.data();
}

void InputSlots::check_labels(const int64_t* labels) const {
  // An out-of-range label would make a GPU's loss NaN.
  const int64_t batch = step_.tensor(labels_id_).numel();
  for (int64_t i = 0; i < batch; ++i) {
    if (labels[i] < 0 || labels[i] >= classes_) {
      throw InvalidArgument(
          fmt::format("label {} of sample {} is outside [0, {})", labels[i], i, classes_));
    }
  }
}

void InputSlots::load(const float* images, const int64_t* labels, Tracer* tracer) {
  static const std::string kName = "batch to device";
  check_labels(labels);
  const Tensor& input = step_.tensor(images_id_);
  const void* src = stored_images(images);
  if (!backend_.async_input_copies()) {
    TraceScope scope(tracer, kName, kCopyCategory, Lane::kCopy,
                     static_cast<double>(input.bytes() + step_.tensor(labels_id_).bytes()));
    backend_.copy_from_host(src, step_.tensor(images_id_));
    backend_.copy_from_host(labels, step_.tensor(labels_id_));
    ++loaded_;
    return;
  }
  // Double-buffered: into the slot the step does not read now (slot 0 first), after the last
  // compute that read it; the compute queued from here on waits for the copy.
  const int target = next_target();
  Slot& slot = slots_[target];
  NvtxRange range(kName.c_str());
  const Backend::CopyMarks image_copy = backend_.copy_in(src, slot.images, slot.read);
  const Backend::CopyMarks label_copy = backend_.copy_in(labels, slot.labels, slot.read);
  switch_to(target, image_copy, label_copy, kName, tracer);
}

void InputSlots::load_encoded(const std::vector<EncodedImage>& images,
                              const ImageNormalization& norm, const int64_t* labels,
                              Tracer* tracer) {
  static const std::string kName = "decode batch";
  check_labels(labels);
  if (!decoder_) decoder_ = make_image_decoder(backend_);
  const int target = next_target();
  Slot& slot = slots_[target];
  const Backend::CopyMarks decoded = decoder_->decode(images, norm, slot.images, slot.read);
  const Backend::CopyMarks label_copy = backend_.copy_in(labels, slot.labels, slot.read);
  switch_to(target, decoded, label_copy, kName, tracer);
  ++decoded_;
  recent_decodes_.push_back(decoded);
  constexpr size_t kKept = 8;  // batches back: long done, reading their events waits for nothing
  while (recent_decodes_.size() > kKept) {
    const Backend::CopyMarks& m = recent_decodes_.front();
    decoded_us_ += backend_.clock().elapsed_us(m.start, m.end);
    recent_decodes_.pop_front();
  }
}

double InputSlots::decode_seconds() const {
  for (const Backend::CopyMarks& m : recent_decodes_) {
    decoded_us_ += backend_.clock().elapsed_us(m.start, m.end);
  }
  recent_decodes_.clear();
  return decoded_us_ * 1e-6;
}

void InputSlots::switch_to(int target, const Backend::CopyMarks& images,
                           const Backend::CopyMarks& labels, const std::string& name,
                           Tracer* tracer) {
  Slot& slot = slots_[target];
  backend_.wait_for_input(images.end);
  backend_.wait_for_input(labels.end);
  // On the copy lane, at the copy queue's times (a span of the step queued before it).
  if (tracer && tracer->active() && tracer->on_device() == static_cast<bool>(images.start.device)) {
    Span span{name, kCopyCategory, Lane::kCopy};
    span.bytes = static_cast<double>(slot.images.bytes() + slot.labels.bytes());
    tracer->record(std::move(span), images.start, labels.end);
  }
  step_.rebind(images_id_, slot.images);
  step_.rebind(labels_id_, slot.labels);
  current_ = target;
}

void InputSlots::mark_read() {
  if (backend_.async_input_copies()) slots_[current_].read = backend_.clock().mark();
}

}  // namespace dlb
