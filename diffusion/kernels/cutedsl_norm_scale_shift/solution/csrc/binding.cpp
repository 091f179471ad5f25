// Host path of cutedsl_norm_scale_shift v8's CUDA row kernel: which calls it takes, and the launch.
#include <torch/extension.h>

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>

#include "nss_row.h"

namespace {

bool aligned16(const at::Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 16 == 0; }

bool dtype_of(at::ScalarType t, kda_nss::DType* out) {
  switch (t) {
    case at::kHalf: *out = kda_nss::DType::kFP16; return true;
    case at::kBFloat16: *out = kda_nss::DType::kBF16; return true;
    case at::kFloat: *out = kda_nss::DType::kFP32; return true;
    default: return false;
  }
}

bool dense_like(const at::Tensor& t, const at::Tensor& x, at::ScalarType dtype) {
  return t.device() == x.device() && t.scalar_type() == dtype && t.sizes() == x.sizes() && t.is_contiguous() &&
         aligned16(t);
}

bool vector_of(const c10::optional<at::Tensor>& t, const at::Tensor& x, int64_t D) {
  return !t.has_value() || (t->device() == x.device() && t->scalar_type() == at::kFloat && t->dim() == 1 &&
                            t->size(0) == D && t->is_contiguous() && aligned16(*t));
}

// y = (norm(residual + gate * x) * weight + bias) * (1 + scale) + shift and residual_out = residual + gate * x, for
// the one form the kernel has (see nss_row.h). Returns false, having launched nothing, for any other call: the
// caller then takes the Triton path. weight and bias are passed as the Python side decided upstream's rules apply
// them (either may be absent).
bool run_res_gate(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& gate,
                  const c10::optional<at::Tensor>& weight, const c10::optional<at::Tensor>& bias,
                  const at::Tensor& scale, const at::Tensor& shift, bool layer, double eps, const at::Tensor& out,
                  const at::Tensor& residual_out, int64_t flags) {
  kda_nss::DType xt, sct, sht;
  if (!x.is_cuda() || x.dim() != 3 || !dtype_of(x.scalar_type(), &xt) || xt == kda_nss::DType::kFP32 ||
      !x.is_contiguous() || !aligned16(x))
    return false;
  const int64_t D = x.size(2), M = x.size(0) * x.size(1);
  if (D % 256 != 0 || D / 8 > 1024 || M <= 0 || M >= (int64_t{1} << 31)) return false;
  if (!dense_like(residual, x, x.scalar_type()) || !dense_like(out, x, x.scalar_type()) ||
      !dense_like(residual_out, x, x.scalar_type()) || !dense_like(gate, x, at::kFloat) || !vector_of(weight, x, D) ||
      !vector_of(bias, x, D))
    return false;
  if (scale.numel() != 1 || shift.numel() != 1 || scale.device() != x.device() || shift.device() != x.device() ||
      !dtype_of(scale.scalar_type(), &sct) || !dtype_of(shift.scalar_type(), &sht))
    return false;
  c10::cuda::CUDAGuard guard(x.device());
  kda_nss::RowArgs a{x.data_ptr(), residual.data_ptr(), gate.data_ptr(),
                     weight.has_value() ? weight->data_ptr() : nullptr, bias.has_value() ? bias->data_ptr() : nullptr,
                     scale.data_ptr(), shift.data_ptr(), residual_out.data_ptr(), out.data_ptr(), M,
                     static_cast<int>(D), static_cast<float>(eps), sct, sht, static_cast<int>(flags)};
  kda_nss::launch_res_gate(a, xt, layer, c10::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return true;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("run_res_gate", &run_res_gate, "cutedsl_norm_scale_shift v8: the gated residual form, one CTA a row");
}
