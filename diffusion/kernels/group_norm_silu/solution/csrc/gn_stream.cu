// group_norm_silu v6, the L2 stream kernel: y = silu(GroupNorm(x)) on a contiguous x too large to be held on chip,
// with x read from DRAM once and its second read served by the L2.
//
// Why: statistics then apply reads x twice; when both reads come from DRAM the counted bandwidth is capped at 2/3 of
// a copy (ledger L0011). Holding a whole group in shared memory (v5, gn_resident.cu) reads x once but a team round
// ran at ~2 TB/s (L0018). Here nothing is held: every CTA of one cooperative grid takes a slice of every unit (one
// batch's group), units in order, so the machine reads one unit at a time and re-reads it about one unit later,
// while it is still in the L2 (the largest VAE group is 17.8 MB of a 50 MB L2). The first read asks the L2 to keep
// the lines (evict_last), the re-read and the y stores to drop theirs first.
//
// Schedule: a CTA's work is one sequence of chunk steps. Step t reads statistics chunk t and applies chunk
// t - chunks - lag, so DRAM reads (statistics) and writes (apply) overlap in every step, and a unit's apply starts
// `lag` chunks after the last CTA could have published the unit's statistics: the cross-CTA wait is hidden. The CTA
// that publishes a unit's last partial merges all partials (shifted sums about the unit's first element: no
// E[x^2] - mean^2 cancellation unless that element is far from the mean in units of the deviation) and raises the
// unit's ready flag.
#include "gn_common.cuh"

#include <cstdint>

namespace kda_gn {
namespace {

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

__device__ __forceinline__ uint4 load_hinted(const uint4* p, uint64_t pol) {
  uint4 v;
  asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(pol));
  return v;
}

__device__ __forceinline__ void store_hinted(uint4* p, const uint4& v, uint64_t pol) {
  asm volatile("st.global.L1::no_allocate.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;\n" ::"l"(p), "r"(v.x),
               "r"(v.y), "r"(v.z), "r"(v.w), "l"(pol)
               : "memory");
}

__device__ __forceinline__ void store_release(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

// (sum of .x, sum of .y) over the CTA, returned to every thread; two barriers.
__device__ __forceinline__ float2 block_sum2(float2 v, float2* scratch) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    v.x += __shfl_xor_sync(0xffffffffu, v.x, o);
    v.y += __shfl_xor_sync(0xffffffffu, v.y, o);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // scratch may still be read by the previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float2 t = lane < kWarps ? scratch[lane] : make_float2(0.f, 0.f);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    t.x += __shfl_xor_sync(0xffffffffu, t.x, o);
    t.y += __shfl_xor_sync(0xffffffffu, t.y, o);
  }
  return t;
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 2) gn_stream_kernel(StreamParams p, DType wb) {
  using V = Vec<T>;
  constexpr int VE = V::VE;
  constexpr int U = kStreamUnroll;
  __shared__ float2 scratch[kWarps];
  __shared__ float2 coef[kMaxCpg];
  __shared__ float2 unit_stat;
  __shared__ int publisher;

  const int tid = threadIdx.x, me = blockIdx.x;
  const int lo = me * p.slice_vecs;  // this CTA's slice of every unit: vectors [lo, lo + len)
  const int left = p.group_vecs - lo;
  const int len = left <= 0 ? 0 : (left < p.slice_vecs ? left : p.slice_vecs);
  const int c_first = lo / p.channel_vecs;  // the slice's channels within its group: c_first .. c_last
  const int c_last = len > 0 ? (lo + len - 1) / p.channel_vecs : c_first;
  const uint4* x = static_cast<const uint4*>(p.x);
  uint4* y = static_cast<uint4*>(p.y);
  const uint64_t keep = l2_policy(p.hints != 0, false);
  const uint64_t drop = l2_policy(false, p.hints != 0);

  const int total = p.units * p.chunks;
  const int delay = p.chunks + p.lag;
  float s1 = 0.f, s2 = 0.f, shift = 0.f;

  for (int t = 0; t < total + delay; ++t) {
    const bool stats = t < total;
    const int ta = t - delay;
    const bool apply = ta >= 0 && len > 0;
    const int us = stats ? t / p.chunks : 0, ks = t - us * p.chunks;
    const int ua = ta >= 0 ? ta / p.chunks : 0, ka = ta - ua * p.chunks;

    if (apply && ka == 0) {
      // Wait for the unit's (mean, rstd), then the (scale, shift) of the slice's channels.
      if (tid == 0) {
        while (load_acquire(p.counters + p.units + ua) == 0u) {
        }
        unit_stat = __ldcg(p.stats + ua);
      }
      __syncthreads();
      const float2 ms = unit_stat;
      const int c0 = (ua % p.groups) * p.cpg + c_first;
      for (int c = tid; c <= c_last - c_first; c += kThreads) {
        const float a = ms.y * (p.w ? to_float(p.w, c0 + c, wb) : 1.f);
        coef[c] = make_float2(a, (p.b ? to_float(p.b, c0 + c, wb) : 0.f) - ms.x * a);
      }
      __syncthreads();
    }

    const int64_t base_s = static_cast<int64_t>(us) * p.group_vecs + lo;
    const int64_t base_a = static_cast<int64_t>(ua) * p.group_vecs + lo;
    if (stats && ks == 0) {
      float f[VE];
      V::unpack(__ldcg(x + static_cast<int64_t>(us) * p.group_vecs), f);
      shift = f[0];
    }
    const int end_s = min((ks + 1) * p.chunk_vecs, len), end_a = min((ka + 1) * p.chunk_vecs, len);
    uint4 vs[U], va[U];
#pragma unroll
    for (int i = 0; i < U; ++i) {
      const int is = ks * p.chunk_vecs + i * kThreads + tid;
      if (stats && is < end_s) vs[i] = load_hinted(x + base_s + is, keep);
      const int ia = ka * p.chunk_vecs + i * kThreads + tid;
      if (apply && ia < end_a) va[i] = load_hinted(x + base_a + ia, drop);
    }
#pragma unroll
    for (int i = 0; i < U; ++i) {
      const int is = ks * p.chunk_vecs + i * kThreads + tid;
      if (stats && is < end_s) {
        float f[VE];
        V::unpack(vs[i], f);
#pragma unroll
        for (int e = 0; e < VE; ++e) {
          const float d = f[e] - shift;
          s1 += d;
          s2 = fmaf(d, d, s2);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < U; ++i) {
      const int ia = ka * p.chunk_vecs + i * kThreads + tid;
      if (apply && ia < end_a) {
        const float2 ac = coef[static_cast<unsigned>(lo + ia) / static_cast<unsigned>(p.channel_vecs) - c_first];
        float f[VE];
        V::unpack(va[i], f);
#pragma unroll
        for (int e = 0; e < VE; ++e) {
          const float z = fmaf(f[e], ac.x, ac.y);
          f[e] = __fdividef(z, 1.f + __expf(-z));
        }
        store_hinted(y + base_a + ia, V::pack(f), drop);
      }
    }

    if (stats && ks == p.chunks - 1) {
      // Publish this CTA's partial of unit us; the CTA that brings the count to `ctas` merges them.
      const float2 mine = block_sum2(make_float2(s1, s2), scratch);
      s1 = s2 = 0.f;
      if (tid == 0) {
        p.partials[static_cast<int64_t>(us) * p.ctas + me] = mine;
        __threadfence();
        publisher = atomicAdd(p.counters + us, 1u) == static_cast<unsigned>(p.ctas - 1);
      }
      __syncthreads();
      if (publisher) {
        __threadfence();
        float2 q = make_float2(0.f, 0.f);
        for (int i = tid; i < p.ctas; i += kThreads) {
          const float2 v = __ldcg(p.partials + static_cast<int64_t>(us) * p.ctas + i);
          q.x += v.x;
          q.y += v.y;
        }
        q = block_sum2(q, scratch);
        if (tid == 0) {
          const float n = static_cast<float>(p.group_vecs) * VE;
          const float m = q.x / n;
          const float var = fmaxf(q.y / n - m * m, 0.f);
          p.stats[us] = make_float2(shift + m, rsqrtf(var + p.eps));
          __threadfence();
          store_release(p.counters + p.units + us, 1u);
        }
      }
    }
  }
}

template <typename T>
cudaError_t launch_stream_typed(const StreamParams& p, DType wb, cudaStream_t stream) {
  cudaError_t err = zero_counters(p.counters, 2 * p.units, stream);
  if (err != cudaSuccess) return err;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(p.ctas));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;  // every CTA waits for every other one
  attr[0].val.cooperative = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, gn_stream_kernel<T>, p, wb);
}

template <typename T>
cudaError_t occupancy(int* out) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(out, gn_stream_kernel<T>, kThreads, 0);
}

}  // namespace

cudaError_t launch_stream(const StreamParams& p, DType x_dtype, DType wb_dtype, cudaStream_t stream) {
  switch (x_dtype) {
    case DType::kFP16: return launch_stream_typed<__half>(p, wb_dtype, stream);
    case DType::kBF16: return launch_stream_typed<__nv_bfloat16>(p, wb_dtype, stream);
    default: return launch_stream_typed<float>(p, wb_dtype, stream);
  }
}

cudaError_t stream_ctas_per_sm(DType x_dtype, int* out) {
  switch (x_dtype) {
    case DType::kFP16: return occupancy<__half>(out);
    case DType::kBF16: return occupancy<__nv_bfloat16>(out);
    default: return occupancy<float>(out);
  }
}

}  // namespace kda_gn
