// qknorm_rope v2, CUDA: per-head RMSNorm then RoPE, in place on q and k.
//
// A group of D/8 lanes owns a head and each lane one 16-byte vector of it (8 bf16/fp16 values), so D 64/128/256
// uses groups of 8/16/32 lanes and a warp holds 4/2/1 heads. The head's sum of squares is a shuffle reduction inside
// the group. A block owns one token, so the position, the cos/sin row and the weights are read once per thread and
// reused for every head that thread holds.
//
// NeoX halves: element e < R/2 pairs with e + R/2, i.e. the lane R/16 further on at the same slot, so the partner
// values come from one xor-shuffle per slot (R >= 16); for R <= 8 both halves sit in lane 0 and rotate in registers.
// Interleaved pairs (2i, 2i+1) always sit inside one lane.
//
// Launched with programmatic dependent launch, as upstream's kernel is: the grid may be scheduled before the previous
// kernel on the stream ends and waits for it (griddepcontrol.wait) before its first global access.
//
// The arithmetic order follows upstream's kernel: x * (rstd * w), then x*cos -/+ partner*sin, rounded once to the
// storage type.
#include "qknorm_rope.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace kda_qknorm_rope {
namespace {

constexpr int kThreads = 128;
constexpr int kVec = 8;  // values per lane: one 16-byte access of a 2-byte type

template <typename T>
struct Cvt;

// bf16 -> fp32 is the 16 bits moved to the top of the word (exact); memcpy through a __nv_bfloat162 left a 32-byte
// stack frame in every bf16 kernel.
template <>
struct Cvt<__nv_bfloat16> {
  static __device__ __forceinline__ float2 load2(uint32_t u) {
    return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
  }
  static __device__ __forceinline__ uint32_t store2(float a, float b) {
    union {
      __nv_bfloat162 h;
      uint32_t u;
    } v;
    v.h = __floats2bfloat162_rn(a, b);
    return v.u;
  }
};

template <>
struct Cvt<__half> {
  static __device__ __forceinline__ float2 load2(uint32_t u) {
    __half2 h;
    memcpy(&h, &u, 4);
    return __half22float2(h);
  }
  static __device__ __forceinline__ uint32_t store2(float a, float b) {
    const __half2 h = __floats2half2_rn(a, b);
    uint32_t u;
    memcpy(&u, &h, 4);
    return u;
  }
};

template <typename T>
__device__ __forceinline__ void unpack(const uint4& r, float (&x)[kVec]) {
  const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = Cvt<T>::load2(w[j]);
    x[2 * j] = f.x;
    x[2 * j + 1] = f.y;
  }
}

template <typename T>
__device__ __forceinline__ uint4 pack(const float (&x)[kVec]) {
  return make_uint4(Cvt<T>::store2(x[0], x[1]), Cvt<T>::store2(x[2], x[3]), Cvt<T>::store2(x[4], x[5]),
                    Cvt<T>::store2(x[6], x[7]));
}

// n consecutive cache floats (n = 4 or 8); vec4: the address is 16-byte aligned.
template <int N>
__device__ __forceinline__ void load_cs(const float* p, bool vec4, float (&v)[N]) {
  if (vec4) {
#pragma unroll
    for (int j = 0; j < N / 4; ++j) {
      const float4 f = __ldg(reinterpret_cast<const float4*>(p) + j);
      v[4 * j] = f.x;
      v[4 * j + 1] = f.y;
      v[4 * j + 2] = f.z;
      v[4 * j + 3] = f.w;
    }
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) v[j] = __ldg(p + j);
  }
}

// NeoX with both halves inside one lane (R = 2 * HALF <= 8).
template <int HALF>
__device__ __forceinline__ void neox_in_lane(float (&x)[kVec], const float* cs) {
#pragma unroll
  for (int i = 0; i < HALF; ++i) {
    const float a = x[i], b = x[i + HALF];
    const float c = __ldg(cs + i), s = __ldg(cs + HALF + i);
    x[i] = a * c - b * s;
    x[i + HALF] = b * c + a * s;
  }
}

// griddepcontrol exists from sm_90 on; on older GPUs the launch attribute is ignored and stream order holds.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel on the stream be scheduled; it still waits for this grid's completion before reading.
__device__ __forceinline__ void launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

template <typename T>
__device__ __forceinline__ T* head_ptr(const Params& p, int t, int h) {
  return h < p.hq ? static_cast<T*>(p.q) + t * p.q_tok + h * p.q_head
                  : static_cast<T*>(p.k) + t * p.k_tok + (h - p.hq) * p.k_head;
}

// A block owns one token (blockIdx.x) and up to G * U of its Hq + Hk heads (blockIdx.y); lane group g takes heads
// g, g + G, ... Every DRAM load of a thread (U head vectors) is issued before the first reduction, and the token's
// position, cos/sin and both weights are read once per thread, not once per head. The first CUDA build (one head
// per group, everything reloaded per head) stalled on long scoreboard at 58% of DRAM peak with one 16-byte load in
// flight per thread (flux2_image_n4096_h48, H200, ncu). With 256 threads and up to 4 heads per thread (v2c) the
// same row still ran at 2.8 TB/s against the Triton v1 kernel's 3.5 (8 head vectors per thread in flight), so a
// block is 128 threads and a thread holds up to 8 heads.
template <typename T, int D, bool NEOX, int U>
__global__ void __launch_bounds__(kThreads) qknorm_rope_kernel(const __grid_constant__ Params p) {
  constexpr int LPH = D / kVec;        // lanes per head
  constexpr int G = kThreads / LPH;    // lane groups per block
  constexpr int CS = NEOX ? kVec : kVec / 2;  // cos (and sin) values a lane needs
  const int lane = threadIdx.x % LPH;
  const int warp_lane = threadIdx.x % 32;
  const unsigned mask = LPH == 32 ? 0xffffffffu : (((1u << LPH) - 1u) << (warp_lane & ~(LPH - 1)));
  const int t = blockIdx.x;
  const int H = p.hq + p.hk;
  const int h0 = blockIdx.y * (G * U) + threadIdx.x / LPH;

  // Programmatic dependent launch (as upstream's kernel): this grid may be scheduled while the previous kernel on the
  // stream is still running, and waits here, before its first global access, until that kernel has finished and
  // its writes are visible. A few-token call (2-5 us) no longer pays the whole launch gap after its predecessor.
  grid_dependency_wait();
  uint4 raw[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int h = h0 + u * G;
    if (h < H) raw[u] = *reinterpret_cast<const uint4*>(head_ptr<T>(p, t, h) + lane * kVec);
  }
  if (h0 >= H) {  // a whole lane group leaves together
    launch_dependents();
    return;
  }
  const uint4 qwr = __ldg(reinterpret_cast<const uint4*>(static_cast<const T*>(p.q_weight) + lane * kVec));
  const uint4 kwr = __ldg(reinterpret_cast<const uint4*>(static_cast<const T*>(p.k_weight) + lane * kVec));
  const int64_t pos = p.pos_is_int32
                          ? static_cast<int64_t>(__ldg(static_cast<const int*>(p.positions) + t * p.pos_stride))
                          : __ldg(static_cast<const long long*>(p.positions) + t * p.pos_stride);
  const float* cs = p.cos_sin + pos * p.cs_row;
  const int R = p.rope_dim;
  const int half = R / 2;

  // This lane's cos/sin values. NeoX (R >= 16): the lane's 8 slots; interleaved: its 4 pairs (cos 1, sin 0 past
  // R/2, so a partial rotary leaves those pairs normalised only).
  float c[CS] = {}, s[CS] = {};
  bool rotates;
  int hl = 0;  // NeoX: lanes per half, a power of two
  if constexpr (NEOX) {
    hl = R / (2 * kVec);
    rotates = R >= 2 * kVec && lane < 2 * hl;
    if (rotates) {
      const int c0 = (lane & (hl - 1)) * kVec;
      load_cs<kVec>(cs + c0, p.cs_vec4, c);
      load_cs<kVec>(cs + half + c0, p.cs_vec4, s);
    }
  } else {
    const int p0 = lane * (kVec / 2);  // first pair index this lane holds
    rotates = p0 < half;
    if (rotates) {
      if (p0 + kVec / 2 <= half) {
        load_cs<kVec / 2>(cs + p0, p.cs_vec4, c);
        load_cs<kVec / 2>(cs + half + p0, p.cs_vec4, s);
      } else {
#pragma unroll
        for (int j = 0; j < kVec / 2; ++j) {
          const bool rot = p0 + j < half;
          c[j] = rot ? __ldg(cs + p0 + j) : 1.f;
          s[j] = rot ? __ldg(cs + half + p0 + j) : 0.f;
        }
      }
    }
  }

#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int h = h0 + u * G;
    if (h >= H) break;  // uniform across the lanes of a group: the shuffles below stay inside it
    float x[kVec];
    unpack<T>(raw[u], x);
    float ss = 0.f;
#pragma unroll
    for (int i = 0; i < kVec; ++i) ss += x[i] * x[i];
#pragma unroll
    for (int o = LPH / 2; o > 0; o >>= 1) ss += __shfl_xor_sync(mask, ss, o);
    const float rstd = rsqrtf(ss / static_cast<float>(D) + p.eps);
    float w[kVec];
    unpack<T>(h < p.hq ? qwr : kwr, w);
#pragma unroll
    for (int i = 0; i < kVec; ++i) x[i] *= rstd * w[i];

    if constexpr (NEOX) {
      if (R >= 2 * kVec) {
        float px[kVec];
#pragma unroll
        for (int i = 0; i < kVec; ++i) px[i] = __shfl_xor_sync(mask, x[i], hl);
        if (rotates) {
          if (lane < hl) {
#pragma unroll
            for (int i = 0; i < kVec; ++i) x[i] = x[i] * c[i] - px[i] * s[i];
          } else {
#pragma unroll
            for (int i = 0; i < kVec; ++i) x[i] = x[i] * c[i] + px[i] * s[i];
          }
        }
      } else if (lane == 0) {
        if (R == 8) neox_in_lane<4>(x, cs);
        else if (R == 4) neox_in_lane<2>(x, cs);
        else if (R == 2) neox_in_lane<1>(x, cs);
      }
    } else if (rotates) {
#pragma unroll
      for (int j = 0; j < kVec / 2; ++j) {
        const float a = x[2 * j], b = x[2 * j + 1];
        x[2 * j] = a * c[j] - b * s[j];
        x[2 * j + 1] = b * c[j] + a * s[j];
      }
    }
    *reinterpret_cast<uint4*>(head_ptr<T>(p, t, h) + lane * kVec) = pack<T>(x);
  }
  launch_dependents();
}

// The kernel launched with programmatic stream serialization (PDL): see grid_dependency_wait.
cudaError_t launch_pdl(void (*kernel)(Params), dim3 grid, const Params& p, cudaStream_t stream) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(kThreads);
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, p);
}

template <typename T, int D, bool NEOX>
cudaError_t launch_typed(const Params& p, cudaStream_t stream) {
  constexpr int G = kThreads / (D / kVec);
  const int H = p.hq + p.hk;
  const int64_t min_blocks = 2 * static_cast<int64_t>(p.sm_count);
  // The most heads per lane group (bytes in flight) that still leaves two blocks per SM: few-token calls (19-512
  // tokens) spread a token over several blocks instead of running 8 heads back to back in one (v2d ran
  // qwen_image_n19_h24 in 4.1 us by graph_us against upstream's 2.2).
  int units = 8;
  while (units > 1 && p.n_tokens * static_cast<int64_t>((H + G * units - 1) / (G * units)) < min_blocks) units /= 2;
  const dim3 grid(static_cast<unsigned>(p.n_tokens), static_cast<unsigned>((H + G * units - 1) / (G * units)));
  switch (units) {
    case 1: return launch_pdl(qknorm_rope_kernel<T, D, NEOX, 1>, grid, p, stream);
    case 2: return launch_pdl(qknorm_rope_kernel<T, D, NEOX, 2>, grid, p, stream);
    case 4: return launch_pdl(qknorm_rope_kernel<T, D, NEOX, 4>, grid, p, stream);
    default: return launch_pdl(qknorm_rope_kernel<T, D, NEOX, 8>, grid, p, stream);
  }
}

template <typename T>
cudaError_t launch_dtype(const Params& p, int head_dim, bool neox, cudaStream_t stream) {
  switch (head_dim) {
    case 64: return neox ? launch_typed<T, 64, true>(p, stream) : launch_typed<T, 64, false>(p, stream);
    case 128: return neox ? launch_typed<T, 128, true>(p, stream) : launch_typed<T, 128, false>(p, stream);
    case 256: return neox ? launch_typed<T, 256, true>(p, stream) : launch_typed<T, 256, false>(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t launch(const Params& p, DType dtype, int head_dim, bool neox, cudaStream_t stream) {
  return dtype == DType::kBF16 ? launch_dtype<__nv_bfloat16>(p, head_dim, neox, stream)
                               : launch_dtype<__half>(p, head_dim, neox, stream);
}

}  // namespace kda_qknorm_rope
