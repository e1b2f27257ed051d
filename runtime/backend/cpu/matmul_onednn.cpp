#include "runtime/backend/cpu/matmul_onednn.h"

#include <fmt/format.h>

#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <tuple>

#include "runtime/backend/cpu/onednn_engine.h"
#include "runtime/backend/cpu/onednn_layouts.h"
#include "runtime/core/error.h"
#include "runtime/core/half.h"

namespace dlb {
namespace {

using dnnl::memory;

dnnl::matmul::primitive_desc product_desc(const MatrixProduct& p, memory::data_type type) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (p.alpha != 1.f) attr.set_output_scales(0, {p.alpha});
  if (p.beta != 0.f) {
    dnnl::post_ops ops;
    ops.append_sum(p.beta);
    attr.set_post_ops(ops);
  }
  return dnnl::matmul::primitive_desc(
      {onednn_matrix(p.m, p.k, type, p.trans_a), onednn_matrix(p.k, p.n, type, p.trans_b),
       onednn_matrix(p.m, p.n, type)},
      attr, onednn_cpu_engine());
}

// alpha and beta by their bits: a NaN orders as any other value.
using Key = std::tuple<DType, bool, bool, int64_t, int64_t, int64_t, uint32_t, uint32_t>;

}  // namespace

struct OnednnProduct::Impl {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul primitive;
};

OnednnProduct::OnednnProduct(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)), workspace_bytes_(impl_->pd.scratchpad_desc().get_size()) {}
OnednnProduct::~OnednnProduct() = default;

// Kept for the process (a model has a few product shapes), behind one lock: ranks in threads
// share it. A product oneDNN would compute with its reference loops is kept as null.
const OnednnProduct* OnednnProduct::find(const MatrixProduct& p, DType type) {
  if (type != DType::kF32 && (type != DType::kBF16 || !cpu_multiplies_bf16())) return nullptr;
  onednn_cpu_engine();  // made before the kept primitives, so destroyed after them at exit
  static std::mutex mu;
  static std::map<Key, std::unique_ptr<OnednnProduct>> kept;
  const Key key{type, p.trans_a, p.trans_b, p.m, p.n, p.k, float_bits(p.alpha), float_bits(p.beta)};
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = kept.find(key); it != kept.end()) return it->second.get();
  std::unique_ptr<OnednnProduct> made;
  try {
    auto pd =
        product_desc(p, type == DType::kF32 ? memory::data_type::f32 : memory::data_type::bf16);
    if (std::string(pd.impl_info_str()).rfind("ref", 0) != 0) {
      made = std::make_unique<OnednnProduct>(std::make_unique<Impl>(Impl{pd, dnnl::matmul(pd)}));
    }
  } catch (const dnnl::error&) {  // no primitive for it: sgemm on f32 (copies) it is
  }
  return kept.emplace(key, std::move(made)).first->second.get();
}

void OnednnProduct::run(const void* a, const void* b, void* c, void* workspace) const {
  try {
    const auto& e = onednn_cpu_engine();
    const auto& pd = impl_->pd;
    dnnl::stream stream(e);
    impl_->primitive.execute(
        stream, {{DNNL_ARG_SRC, memory(pd.src_desc(), e, const_cast<void*>(a))},
                 {DNNL_ARG_WEIGHTS, memory(pd.weights_desc(), e, const_cast<void*>(b))},
                 {DNNL_ARG_DST, memory(pd.dst_desc(), e, c)},
                 {DNNL_ARG_SCRATCHPAD, memory(pd.scratchpad_desc(), e, workspace)}});
    stream.wait();
  } catch (const dnnl::error& e) {
    throw DeviceError(fmt::format("onednn matmul {}: {}", impl_->pd.impl_info_str(), e.what()));
  }
}

}  // namespace dlb
