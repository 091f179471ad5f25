// v8: the gated residual form, one CTA per row of D values and D / 8 threads, each thread one 16-byte vector of
// x, residual, residual_out and y (two of the fp32 gate, weight and bias): the launch shape of upstream's CuTe DSL
// kernel, which Triton cannot express for D = 3072 (12 warps). Chosen per D by measurement (_CUDA_ROW_D).
//
//   residual_out = residual + gate * x
//   y = (norm(residual_out) * weight + bias) * (1 + scale) + shift      (scale, shift: one value each)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "nss_row.h"

namespace kda_nss {
namespace {

constexpr int kVec = 8;  // values a thread owns: one 16-byte vector of a 16-bit row

template <typename T>
struct Pack;
template <>
struct Pack<__nv_bfloat16> {
  static __device__ __forceinline__ void to_float(const uint4& u, float* f) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float2 p = __bfloat1622float2(h[i]);
      f[2 * i] = p.x;
      f[2 * i + 1] = p.y;
    }
  }
  static __device__ __forceinline__ uint4 from_float(const float* f) {
    uint4 u;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
    return u;
  }
  static __device__ __forceinline__ float scalar(const void* p) {
    return __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(p));
  }
};
template <>
struct Pack<__half> {
  static __device__ __forceinline__ void to_float(const uint4& u, float* f) {
    const __half2* h = reinterpret_cast<const __half2*>(&u);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float2 p = __half22float2(h[i]);
      f[2 * i] = p.x;
      f[2 * i + 1] = p.y;
    }
  }
  static __device__ __forceinline__ uint4 from_float(const float* f) {
    uint4 u;
    __half2* h = reinterpret_cast<__half2*>(&u);
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = __floats2half2_rn(f[2 * i], f[2 * i + 1]);
    return u;
  }
  static __device__ __forceinline__ float scalar(const void* p) {
    return __half2float(*reinterpret_cast<const __half*>(p));
  }
};

__device__ __forceinline__ float scalar_of(const void* p, DType t) {
  switch (t) {
    case DType::kBF16: return Pack<__nv_bfloat16>::scalar(p);
    case DType::kFP16: return Pack<__half>::scalar(p);
    default: return *reinterpret_cast<const float*>(p);
  }
}

// `plain`: an ordinary global load (through L1, as upstream's kernel loads); else the read-only path (ld.global.nc).
__device__ __forceinline__ uint4 load16(const void* p, bool plain) {
  return plain ? *reinterpret_cast<const uint4*>(p) : __ldg(reinterpret_cast<const uint4*>(p));
}

__device__ __forceinline__ void load8(const float* p, float* f, bool plain) {
  const uint4 ua = load16(p, plain), ub = load16(p + 4, plain);
  const float4 a = *reinterpret_cast<const float4*>(&ua), b = *reinterpret_cast<const float4*>(&ub);
  f[0] = a.x; f[1] = a.y; f[2] = a.z; f[3] = a.w;
  f[4] = b.x; f[5] = b.y; f[6] = b.z; f[7] = b.w;
}

// Sum over the CTA: warp shuffles, then one value a warp through shared memory. Every thread gets the total.
__device__ __forceinline__ float block_sum(float v, float* red) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  __syncthreads();  // red[] may still be read by the previous reduction
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < warps ? red[lane] : 0.f;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename T, bool LN>
__global__ void __launch_bounds__(1024) res_gate_kernel(RowArgs a) {
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  const int col = threadIdx.x * kVec;
  const int64_t off = row * a.D + col;
  const bool plain = a.flags & kPlainLoads, early_wb = a.flags & kEarlyWeights;
  float x[kVec], r[kVec], g[kVec], w[kVec], b[kVec];
  Pack<T>::to_float(load16(static_cast<const T*>(a.x) + off, plain), x);
  Pack<T>::to_float(load16(static_cast<const T*>(a.residual) + off, plain), r);
  load8(static_cast<const float*>(a.gate) + off, g, plain);
  if (early_wb && a.weight) load8(static_cast<const float*>(a.weight) + col, w, plain);
  if (early_wb && a.bias) load8(static_cast<const float*>(a.bias) + col, b, plain);
  float v[kVec], s = 0.f;
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    v[i] = r[i] + g[i] * x[i];
    s += v[i];
  }
  *reinterpret_cast<uint4*>(static_cast<T*>(a.residual_out) + off) = Pack<T>::from_float(v);
  if (!early_wb && a.weight) load8(static_cast<const float*>(a.weight) + col, w, plain);
  if (!early_wb && a.bias) load8(static_cast<const float*>(a.bias) + col, b, plain);
  float mean = 0.f;
  if (LN) {
    mean = block_sum(s, red) / a.D;
    s = 0.f;
#pragma unroll
    for (int i = 0; i < kVec; ++i) s += (v[i] - mean) * (v[i] - mean);
  } else {
    s = 0.f;
#pragma unroll
    for (int i = 0; i < kVec; ++i) s += v[i] * v[i];
  }
  const float rstd = rsqrtf(block_sum(s, red) / a.D + a.eps);
  const float scale1 = 1.f + scalar_of(a.scale, a.scale_type);
  const float shift = scalar_of(a.shift, a.shift_type);
  float y[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    float n = (v[i] - mean) * rstd;
    if (a.weight) n *= w[i];
    if (a.bias) n += b[i];
    y[i] = n * scale1 + shift;
  }
  *reinterpret_cast<uint4*>(static_cast<T*>(a.y) + off) = Pack<T>::from_float(y);
}

template <typename T>
void launch_typed(const RowArgs& a, bool layer, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(a.M)), block(static_cast<unsigned>(a.D / kVec));
  if (layer)
    res_gate_kernel<T, true><<<grid, block, 0, stream>>>(a);
  else
    res_gate_kernel<T, false><<<grid, block, 0, stream>>>(a);
}

}  // namespace

void launch_res_gate(const RowArgs& a, DType xt, bool layer, cudaStream_t stream) {
  if (xt == DType::kBF16)
    launch_typed<__nv_bfloat16>(a, layer, stream);
  else
    launch_typed<__half>(a, layer, stream);
}

}  // namespace kda_nss
