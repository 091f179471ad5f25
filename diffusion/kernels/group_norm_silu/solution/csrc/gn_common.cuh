// Device helpers shared by group_norm_silu's CUDA kernels (gn_resident.cu, gn_held.cu): 16-byte vectors of x's dtype
// as floats, a CTA-wide sum, cp.async groups, an acquire load for the spin waits between CTAs, L2 policies,
// mbarriers, the SiLU's approximate ex2 and reciprocal, tagged pairs of floats.
#pragma once
#include "gn_resident.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace kda_gn {

constexpr int kWarps = kThreads / 32;

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// 16 bytes <-> VE floats.
template <typename T> struct Vec;
template <> struct Vec<__half> {
  static constexpr int VE = 8;
  __device__ static void unpack(const uint4& v, float (&f)[VE]) {
    const __half2* h = reinterpret_cast<const __half2*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 t = __half22float2(h[i]);
      f[2 * i] = t.x;
      f[2 * i + 1] = t.y;
    }
  }
  __device__ static uint4 pack(const float (&f)[VE]) {
    uint4 v;
    __half2* h = reinterpret_cast<__half2*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = __floats2half2_rn(f[2 * i], f[2 * i + 1]);
    return v;
  }
};
template <> struct Vec<__nv_bfloat16> {
  static constexpr int VE = 8;
  __device__ static void unpack(const uint4& v, float (&f)[VE]) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 t = __bfloat1622float2(h[i]);
      f[2 * i] = t.x;
      f[2 * i + 1] = t.y;
    }
  }
  __device__ static uint4 pack(const float (&f)[VE]) {
    uint4 v;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
    return v;
  }
};
template <> struct Vec<float> {
  static constexpr int VE = 4;
  __device__ static void unpack(const uint4& v, float (&f)[VE]) {
    f[0] = __uint_as_float(v.x);
    f[1] = __uint_as_float(v.y);
    f[2] = __uint_as_float(v.z);
    f[3] = __uint_as_float(v.w);
  }
  __device__ static uint4 pack(const float (&f)[VE]) {
    return make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]), __float_as_uint(f[3]));
  }
};

// p[i]'s bits (16 or 32 of them), for bits_to_float to convert where the value is needed: a load issued ahead of its
// use is then not waited for where it is issued.
__device__ __forceinline__ unsigned load_bits(const void* p, int i, DType t) {
  if (t == DType::kFP32) return static_cast<const unsigned*>(p)[i];
  return static_cast<const unsigned short*>(p)[i];
}

__device__ __forceinline__ float bits_to_float(unsigned v, DType t) {
  switch (t) {
    case DType::kFP16: return __half2float(__ushort_as_half(static_cast<unsigned short>(v)));
    case DType::kBF16: return __uint_as_float(v << 16);
    default: return __uint_as_float(v);
  }
}

__device__ __forceinline__ float to_float(const void* p, int i, DType t) { return bits_to_float(load_bits(p, i, t), t); }

// Sum over the CTA, returned to every thread. `scratch` holds kWarps floats; two barriers.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // scratch may still be read by the previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float t = lane < kWarps ? scratch[lane] : 0.f;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
  return t;
}

// L2 eviction policies for the .L2::cache_hint loads and stores.
__device__ __forceinline__ uint64_t l2_policy(bool evict_last, bool evict_first) {
  uint64_t pol;
  if (evict_last)
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(pol));
  else if (evict_first)
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
  else
    asm("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;\n" : "=l"(pol));
  return pol;
}

// Two floats and a tag as {a, tag, b, tag}: each aligned 8-byte half is written and read whole (NCCL's LL protocol
// rests on the same), so a reader that finds the tag in both halves has both values, with no fence, counter or
// second round trip. The held kernel's partials and the resident kernel's team partials (v30).
__device__ __forceinline__ void store_tagged(uint4* slot, float a, float b, unsigned tag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"l"(slot), "r"(__float_as_uint(a)), "r"(tag),
               "r"(__float_as_uint(b)), "r"(tag)
               : "memory");
}

__device__ __forceinline__ uint4 load_tagged(const uint4* slot) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(slot)
               : "memory");
  return v;
}

__device__ __forceinline__ float ex2_approx(float v) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(v));
  return r;
}

__device__ __forceinline__ float rcp_approx(float v) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(v));
  return r;
}

// A shared-memory pointer as the 32-bit address PTX's shared-memory operands take.
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Shared-memory mbarriers: arrivals release, waits on a phase's parity acquire. try_wait suspends the waiting warp in
// hardware (v6f's lane-0 spin on a flag issued a third of all instructions: ncu SourceCounters, 6ba run).
__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(count)
               : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile(
      "{\n .reg .b64 st;\n mbarrier.arrive.release.cta.shared::cta.b64 st, [%0];\n}\n" ::"r"(smem_addr(bar))
      : "memory");
}

__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned parity) {
  const unsigned a = smem_addr(bar);
  unsigned done = 0;
  while (!done) {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, "
        "p;\n}\n"
        : "=r"(done)
        : "r"(a), "r"(parity)
        : "memory");
  }
}

// Pairs of x's 16-bit type in one register: a - b, the low half as a float, 1.0 twice, and D += A B on the tensor
// cores (m16n8k16, float accumulators).
template <typename T>
struct Half2Ops;
template <>
struct Half2Ops<__half> {
  static constexpr unsigned kOne2 = 0x3C003C00u;
  __device__ static unsigned sub2(unsigned a, unsigned b) {
    unsigned r;
    asm("sub.rn.f16x2 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(b));
    return r;
  }
  __device__ static float low_to_float(unsigned h) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(h & 0xffffu)));
  }
  __device__ static void mma(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                             unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
};
template <>
struct Half2Ops<__nv_bfloat16> {
  static constexpr unsigned kOne2 = 0x3F803F80u;
  __device__ static unsigned sub2(unsigned a, unsigned b) {
    unsigned r;
    asm("sub.rn.bf16x2 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(b));
    return r;
  }
  __device__ static float low_to_float(unsigned h) { return __uint_as_float(h << 16); }
  __device__ static void mma(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                             unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
};

// A warp's sums of 16-bit values and of their squares on the tensor cores. One 16-byte vector per lane is a 16 x 16
// tile X (lane l holds the m16n8k16 A fragment: rows l/4 and l/4 + 8, columns 2 (l%4) + {0, 1} and + 8). Per tile:
// X times ones accumulates the row sums (every column alike), X times X[0:8]^T and X times X[8:16]^T accumulate
// X X^T, whose diagonal holds the row sums of squares; the B fragments of X^T are the A fragment's own registers.
template <typename T>
struct TileSums {
  float sum[4] = {0.f, 0.f, 0.f, 0.f}, q1[4] = {0.f, 0.f, 0.f, 0.f}, q2[4] = {0.f, 0.f, 0.f, 0.f};

  // One tile: every lane of the warp, its vector as (a0, a1, a2, a3) (zeros for a lane with none).
  __device__ void add(unsigned a0, unsigned a1, unsigned a2, unsigned a3) {
    constexpr unsigned k1 = Half2Ops<T>::kOne2;
    Half2Ops<T>::mma(sum, a0, a1, a2, a3, k1, k1);
    Half2Ops<T>::mma(q1, a0, a1, a2, a3, a0, a2);
    Half2Ops<T>::mma(q2, a0, a1, a2, a3, a1, a3);
  }
  // (sum, sum of squares) of every tile added since the last take, in every lane; the accumulators restart.
  __device__ float2 take() {
    const int lane = threadIdx.x % 32, row = lane / 4, col = 2 * (lane % 4);
    // sum: every one of the 8 columns holds the row sums; squares: D1[r][r] (r < 8) and D2[r + 8][r].
    float s = (sum[0] + sum[1] + sum[2] + sum[3]) * 0.125f;
    float q = 0.f;
    if (col == (row & ~1)) q = (row & 1) ? q1[1] + q2[3] : q1[0] + q2[2];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      s += __shfl_xor_sync(0xffffffffu, s, o);
      q += __shfl_xor_sync(0xffffffffu, q, o);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) sum[j] = q1[j] = q2[j] = 0.f;
    return make_float2(s, q);
  }
};

// Queues kernel<<<grid, block, smem>>>(p, wb) on `stream`, as a cooperative launch when `cooperative` (its blocks
// wait for each other, so the driver must refuse a grid the GPU cannot hold whole rather than start part of it). The
// opt-in above 48 KB of shared memory is per function and device: `opted`, one array per kernel, keeps the largest
// size set so far, so later calls skip it.
template <typename P>
cudaError_t launch_grid(void (*kernel)(P, DType), size_t (&opted)[64], int grid, int block, size_t smem,
                        bool cooperative, cudaStream_t stream, const P& p, DType wb) {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  size_t& done = opted[device & 63];
  if (smem > done) {
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (err != cudaSuccess) return err;
    done = smem;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(grid));
  cfg.blockDim = dim3(static_cast<unsigned>(block));
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = cooperative ? 1 : 0;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, p, wb);
}

}  // namespace kda_gn
