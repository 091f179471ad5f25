// Shared between the host binding and the CUDA kernel of cutedsl_norm_scale_shift v8.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace kda_nss {

enum class DType : int { kFP16 = 0, kBF16 = 1, kFP32 = 2 };

// One call of the gated residual form over M contiguous rows of D values (D a multiple of 8, D / 8 <= 1024).
// x, residual, residual_out, y: 16-bit, of one dtype; gate: fp32, one value per element; weight, bias: fp32 [D] or
// null; scale, shift: one value each, of scale_type / shift_type.
struct RowArgs {
  const void* x;
  const void* residual;
  const void* gate;
  const void* weight;
  const void* bias;
  const void* scale;
  const void* shift;
  void* residual_out;
  void* y;
  int64_t M;
  int D;
  float eps;
  DType scale_type;
  DType shift_type;
  int flags;  // kPlainLoads, kEarlyWeights
};

// Load choices (a knob for layout_sweep): ordinary global loads instead of the read-only path, and weight and bias
// loaded with the row (before residual_out is stored) instead of after.
constexpr int kPlainLoads = 1;
constexpr int kEarlyWeights = 2;

void launch_res_gate(const RowArgs& a, DType xt, bool layer, cudaStream_t stream);

}  // namespace kda_nss
