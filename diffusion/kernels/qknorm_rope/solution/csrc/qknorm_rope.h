// Shared between the CUDA kernels (qknorm_rope.cu, built by nvcc without torch headers, so it compiles fast) and
// the host binding (binding.cpp, built by the host compiler against torch).
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

namespace kda_qknorm_rope {

enum class DType : int { kBF16 = 0, kFP16 = 1 };

struct Params {
  void* q;                 // [N, Hq, D], last dim contiguous, every head 16-byte aligned
  void* k;                 // [N, Hk, D], same
  const void* q_weight;    // [D], contiguous, 16-byte aligned
  const void* k_weight;
  const float* cos_sin;    // [max_pos, R] fp32: cos half then sin half of each row
  const void* positions;   // [N] int32 or int64
  int64_t q_tok, q_head;   // strides in elements
  int64_t k_tok, k_head;
  int64_t cs_row;          // cos_sin row stride in floats
  int64_t pos_stride;      // positions stride in elements
  int n_tokens, hq, hk;
  int rope_dim;            // R: even, <= D (NeoX: a power of two)
  int pos_is_int32;
  int cs_vec4;             // 1 when every cos/sin read of 4 floats is 16-byte aligned
  int sm_count;            // multiprocessors of the device: sizes the grid
  float eps;
};

// Returns the launch status (cudaSuccess when the kernel was queued on `stream`).
cudaError_t launch(const Params& p, DType dtype, int head_dim, bool neox, cudaStream_t stream);

}  // namespace kda_qknorm_rope
