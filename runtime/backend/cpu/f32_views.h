// The CPU backend's 16-bit storage: its ops compute in f32 (but native bf16 convolutions and
// matrix products, conv.cpp and matmul.cpp). An op whose tensors hold f16 or bf16
// takes an f32 copy of each one it reads, computes into f32 copies of those it writes, and rounds
// those back on store, to nearest even (runtime/core/half.h), when the views go out of scope.
// f32 tensors pass through untouched: an fp32 run is the same code, and the same bits, as before.
// The copies come from the backend's allocator as workspace and live for one op (not tensors of
// the step's table: Backend::workspace says why). LayoutViews does the same for a tensor stored
// in another layout than the op's.
#pragma once
#include <deque>
#include <exception>

#include "runtime/backend/backend.h"

namespace dlb {

// Element-wise conversion between f32, f16 and bf16 tensors of one element count (rounding to
// nearest even where the destination is narrower; exact where it is wider).
void convert(const Tensor& src, Tensor& dst);
bool is_16bit(DType t);

class F32Views {
 public:
  explicit F32Views(DeviceMemory& memory)
      : memory_(memory), exceptions_(std::uncaught_exceptions()) {}
  F32Views(const F32Views&) = delete;
  F32Views& operator=(const F32Views&) = delete;
  // Rounds every written view back into its tensor, unless the op threw (then the tensors keep
  // what they held: a failed op leaves no half-written scratch behind).
  ~F32Views();

  const Tensor& in(const Tensor& t);  // read only
  Tensor& out(Tensor& t);             // written in full, not read
  Tensor& inout(Tensor& t);           // read and written

 private:
  Tensor& view(const Tensor& t, bool read, Tensor* write_back);
  struct View {
    Tensor wide;
    Tensor* narrow;  // null: read only
  };
  DeviceMemory& memory_;
  int exceptions_;
  std::deque<View> views_;  // stable references
};

// An op's 4-D tensors in one layout: each itself, or, where the graph stores one in another (the
// output of a node that a flatten reads is NCHW beside channels-last inputs, Graph::output_layout,
// and so is its gradient), a copy moved into `layout` bit for bit (Backend::cast, which allocates
// nothing for one type), moved back into the tensor it views when these go out of scope, unless
// the op threw. The copies are workspace, for one op, as F32Views' are.
class LayoutViews {
 public:
  LayoutViews(Backend& backend, Layout layout)
      : backend_(backend), layout_(layout), exceptions_(std::uncaught_exceptions()) {}
  LayoutViews(const LayoutViews&) = delete;
  LayoutViews& operator=(const LayoutViews&) = delete;
  ~LayoutViews();

  const Tensor& in(const Tensor& t) { return moved(t) ? copy(t, true, nullptr) : t; }
  Tensor& out(Tensor& t) { return moved(t) ? copy(t, false, &t) : t; }

 private:
  bool moved(const Tensor& t) const {
    return t.defined() && t.shape().rank() == 4 && t.layout() != layout_;
  }
  Tensor& copy(const Tensor& t, bool read, Tensor* write_back);
  struct Copy {
    Tensor copy;
    Tensor* write_back;  // null: read only
  };
  Backend& backend_;
  Layout layout_;
  int exceptions_;
  std::deque<Copy> copies_;  // stable references
};

}  // namespace dlb
