// Host path of qknorm_rope v2: argument checks and one kernel launch, in C++ so that a call costs the pybind11
// argument conversion plus the launch (the Triton path spent ~17 us of Python per call, upstream's tvm-ffi ~8.7 us).
#include <torch/extension.h>

#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>

#include "qknorm_rope.h"

namespace {

// Multiprocessor count per device, read once: the grid heuristic needs it on every call.
int sm_count(int device) {
  static int cache[64] = {0};
  int& n = cache[device & 63];
  if (n == 0) C10_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
  return n;
}

bool aligned16(const at::Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 16 == 0; }

// A stride matters only along a dimension of more than one element.
bool stride_ok(const at::Tensor& t, int dim, int64_t multiple) {
  return t.size(dim) <= 1 || t.stride(dim) % multiple == 0;
}

// Checks the call as upstream's entry point would and launches the kernel. Returns false, having launched nothing,
// when the layout is valid but not one the vector kernel reads (a head not 16-byte aligned, a last dimension that
// is not contiguous): the caller then takes the general Triton path.
bool qknorm_rope(const at::Tensor& q, const at::Tensor& k, const at::Tensor& q_weight, const at::Tensor& k_weight,
                 const at::Tensor& cos_sin_cache, const at::Tensor& positions, bool is_neox, double eps,
                 int64_t head_dim, int64_t rope_dim) {
  TORCH_CHECK_VALUE(q.dim() == 3 && k.dim() == 3, "q and k must be [N, H, head_dim], got q ", q.sizes(), " and k ",
                    k.sizes());
  const int64_t n = q.size(0), d = q.size(2);
  if (head_dim == 0) head_dim = d;
  TORCH_CHECK_VALUE(k.size(0) == n && k.size(2) == d && d == head_dim && (d == 64 || d == 128 || d == 256),
                    "q ", q.sizes(), " / k ", k.sizes(), " must be [N, H, head_dim] with head_dim in (64, 128, 256), "
                    "got head_dim=", head_dim);
  TORCH_CHECK_VALUE(cos_sin_cache.dim() == 2 && cos_sin_cache.scalar_type() == at::kFloat,
                    "cos_sin_cache must be a 2-D float32 tensor, got ", cos_sin_cache.sizes(), " ",
                    cos_sin_cache.scalar_type());
  if (rope_dim == 0) rope_dim = cos_sin_cache.size(1);
  TORCH_CHECK_VALUE(rope_dim > 0 && rope_dim <= d && rope_dim % 2 == 0 && cos_sin_cache.size(1) == rope_dim &&
                        (!is_neox || (rope_dim & (rope_dim - 1)) == 0),
                    "rope_dim ", rope_dim, " must be even (a power of two for NeoX), <= head_dim and equal to the "
                    "cache width ", cos_sin_cache.size(1));
  const auto st = q.scalar_type();
  TORCH_CHECK_VALUE(st == at::kBFloat16 || st == at::kHalf, "q must be bfloat16 or float16, got ", st);
  TORCH_CHECK_VALUE(k.scalar_type() == st && q_weight.scalar_type() == st && k_weight.scalar_type() == st,
                    "k, q_weight and k_weight must have q's dtype ", st);
  TORCH_CHECK_VALUE(q_weight.dim() == 1 && q_weight.size(0) == d && k_weight.dim() == 1 && k_weight.size(0) == d,
                    "q_weight and k_weight must be [head_dim], got ", q_weight.sizes(), " and ", k_weight.sizes());
  TORCH_CHECK_VALUE(positions.dim() == 1 && positions.size(0) == n &&
                        (positions.scalar_type() == at::kInt || positions.scalar_type() == at::kLong),
                    "positions must be [N] int32 or int64, got ", positions.sizes(), " ", positions.scalar_type());
  const auto dev = q.device();
  TORCH_CHECK_VALUE(dev.is_cuda() && k.device() == dev && q_weight.device() == dev && k_weight.device() == dev &&
                        cos_sin_cache.device() == dev && positions.device() == dev,
                    "every tensor must be on q's CUDA device ", dev);
  if (n == 0) return true;
  TORCH_CHECK_VALUE(n < (int64_t{1} << 31), "N must stay below 2^31 (one block per token)");
  // 16 bytes = 8 values of a 2-byte type: every head (and weight) must start on a 16-byte boundary.
  const bool vector_layout = q.stride(2) == 1 && k.stride(2) == 1 && q_weight.stride(0) == 1 &&
                             k_weight.stride(0) == 1 && cos_sin_cache.stride(1) == 1 && aligned16(q) &&
                             aligned16(k) && aligned16(q_weight) && aligned16(k_weight) && stride_ok(q, 0, 8) &&
                             stride_ok(q, 1, 8) && stride_ok(k, 0, 8) && stride_ok(k, 1, 8);
  if (!vector_layout) return false;

  kda_qknorm_rope::Params p;
  p.q = q.data_ptr();
  p.k = k.data_ptr();
  p.q_weight = q_weight.data_ptr();
  p.k_weight = k_weight.data_ptr();
  p.cos_sin = cos_sin_cache.data_ptr<float>();
  p.positions = positions.data_ptr();
  p.q_tok = q.stride(0);
  p.q_head = q.stride(1);
  p.k_tok = k.stride(0);
  p.k_head = k.stride(1);
  p.cs_row = cos_sin_cache.stride(0);
  p.pos_stride = positions.stride(0);
  p.n_tokens = static_cast<int>(n);
  p.hq = static_cast<int>(q.size(1));
  p.hk = static_cast<int>(k.size(1));
  p.rope_dim = static_cast<int>(rope_dim);
  p.pos_is_int32 = positions.scalar_type() == at::kInt;
  p.cs_vec4 = aligned16(cos_sin_cache) && stride_ok(cos_sin_cache, 0, 4) && rope_dim % 8 == 0;
  p.eps = static_cast<float>(eps);

  c10::cuda::OptionalCUDAGuard guard;
  if (dev.index() != c10::cuda::current_device()) guard.set_index(dev.index());
  p.sm_count = sm_count(dev.index());
  const auto dtype = st == at::kBFloat16 ? kda_qknorm_rope::DType::kBF16 : kda_qknorm_rope::DType::kFP16;
  const cudaError_t err =
      kda_qknorm_rope::launch(p, dtype, static_cast<int>(d), is_neox, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "qknorm_rope kernel launch failed: ", cudaGetErrorString(err));
  return true;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("qknorm_rope", &qknorm_rope, "fused per-head RMSNorm + RoPE in place on q and k; False: layout not handled");
}
