#include "runtime/backend/cpu/matmul_onednn.h"

#include <fmt/format.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "runtime/core/error.h"

namespace dlb {
namespace {

using dnnl::memory;
constexpr auto kBf16 = memory::data_type::bf16;

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// A row-major rows x cols operand, or the transpose of one stored cols x rows.
memory::desc operand(int64_t rows, int64_t cols, bool transposed) {
  return transposed ? memory::desc({rows, cols}, kBf16, {1, rows})
                    : memory::desc({rows, cols}, kBf16, {cols, 1});
}

// oneDNN keeps made primitives in its own cache (keyed by description and attributes), so
// making one per call costs a lookup once a shape has been seen.
dnnl::matmul::primitive_desc product_desc(const Bf16Product& p) {
  dnnl::primitive_attr attr;
  if (p.alpha != 1.f) attr.set_output_scales(0, {p.alpha});
  if (p.beta != 0.f) {
    dnnl::post_ops ops;
    ops.append_sum(p.beta);
    attr.set_post_ops(ops);
  }
  return dnnl::matmul::primitive_desc(
      {operand(p.m, p.k, p.trans_a), operand(p.k, p.n, p.trans_b), operand(p.m, p.n, false)}, attr,
      cpu_engine());
}

}  // namespace

bool onednn_multiplies_bf16() {
  static const bool native = [] {
    try {
      const std::string impl = product_desc({false, false, 64, 64, 64, 1.f, 0.f}).impl_info_str();
      return impl.rfind("ref", 0) != 0;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return native;
}

void onednn_matmul_bf16(const Bf16Product& p, const void* a, const void* b, void* c) {
  try {
    const auto pd = product_desc(p);
    dnnl::stream stream(cpu_engine());
    const auto& e = cpu_engine();
    dnnl::matmul(pd).execute(
        stream, {{DNNL_ARG_SRC, memory(pd.src_desc(), e, const_cast<void*>(a))},
                 {DNNL_ARG_WEIGHTS, memory(pd.weights_desc(), e, const_cast<void*>(b))},
                 {DNNL_ARG_DST, memory(pd.dst_desc(), e, c)}});
    stream.wait();
  } catch (const dnnl::error& e) {
    throw DeviceError(fmt::format("onednn bf16 matmul {}x{}x{}: {}", p.m, p.n, p.k, e.what()));
  }
}

}  // namespace dlb
