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
// Schedule: a CTA's work is one sequence of chunk steps. Step t holds statistics chunk t and apply chunk
// t - chunks - lag, so DRAM reads (statistics) and writes (apply) overlap in every step, and a unit's apply starts
// `lag` chunks after the last CTA could have published its partial: the cross-CTA wait is hidden. Both chunks of a
// step are copied into a shared-memory ring kStreamStages - 1 steps ahead (cp.async), so a step's load latency and
// the block reductions and waits of unit boundaries overlap the loads of later steps (v6a loaded each step into
// registers and ran latency-bound at ~3 us per step). Each thread copies and reads only its own ring slots: no
// barrier per step. Statistics are (count, mean, M2) summaries merged with Chan's formula, per thread about the
// first element it read (no E[x^2] - mean^2 cancellation), per CTA, then over the CTAs by every waiting CTA.
#include "gn_common.cuh"

#include <cstdint>
#include <type_traits>

namespace kda_gn {
namespace {

__device__ __forceinline__ void store_hinted(uint4* p, const uint4& v, uint64_t pol) {
  asm volatile("st.global.L1::no_allocate.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;\n" ::"l"(p), "r"(v.x),
               "r"(v.y), "r"(v.z), "r"(v.w), "l"(pol)
               : "memory");
}

__device__ __forceinline__ void cp_async16_hinted(void* smem, const void* gmem, uint64_t pol) {
  const unsigned s = smem_addr(smem);
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "l"(pol)
               : "memory");
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ int load_volatile(const int* p) { return *static_cast<const volatile int*>(p); }

// The running (count, mean, M2) of one warp's share of a unit. Generic: per thread about its first element
// (no E[x^2] - mean^2 cancellation), merged over the warp at the end.
template <typename T>
struct WarpStats {
  static constexpr int VE = Vec<T>::VE;
  float cnt = 0.f, pivot = 0.f, s1 = 0.f, s2 = 0.f;
  __device__ void start(const uint4&, bool) {}
  __device__ void add(const uint4& v, bool valid) {
    if (!valid) return;
    float f[VE];
    Vec<T>::unpack(v, f);
    if (cnt == 0.f) pivot = f[0];
#pragma unroll
    for (int e = 0; e < VE; ++e) {
      const float d = f[e] - pivot;
      s1 += d;
      s2 = fmaf(d, d, s2);
    }
    cnt += VE;
  }
  __device__ void add_full(const uint4& v) { add(v, true); }
  __device__ Moments finish() {
    const float mean = cnt > 0.f ? pivot + s1 / cnt : 0.f;
    const float m2 = cnt > 0.f ? fmaxf(s2 - s1 * (s1 / cnt), 0.f) : 0.f;
    const Moments m = warp_merge(Moments{cnt, mean, m2});
    cnt = s1 = s2 = 0.f;
    return m;
  }
};

// 16-bit x (v6e): the warp's sums on the tensor cores (TileSums, gn_common.cuh) of d = x - pivot, the pivot one
// element of the warp in x's dtype (a rounding of d, not of the sums). Three mma per 256 elements instead of ~3 FP32
// instructions per element (v6d was issue-bound: ncu, 0.67 warps issued per scheduler).
template <typename T>
struct MmaStats {
  using H = Half2Ops<T>;
  TileSums<T> tile;
  float cnt = 0.f, pivot = 0.f;
  unsigned pivot2 = 0u;  // the pivot twice, as x's 16-bit type

  __device__ void start(const uint4& v, bool valid) {
    const unsigned lanes = __ballot_sync(0xffffffffu, valid);
    const unsigned h = __shfl_sync(0xffffffffu, v.x, lanes ? __ffs(lanes) - 1 : 0) & 0xffffu;
    pivot2 = lanes ? (h | (h << 16)) : 0u;
    pivot = H::low_to_float(pivot2);
  }
  __device__ void add(const uint4& v, bool valid) {
    const unsigned lanes = __ballot_sync(0xffffffffu, valid);
    if (lanes == 0u) return;
    cnt += static_cast<float>(8 * __popc(lanes));
    tile.add(valid ? H::sub2(v.x, pivot2) : 0u, valid ? H::sub2(v.y, pivot2) : 0u,
             valid ? H::sub2(v.z, pivot2) : 0u, valid ? H::sub2(v.w, pivot2) : 0u);
  }
  // Every lane's vector in the unit: no vote.
  __device__ void add_full(const uint4& v) {
    cnt += 256.f;
    tile.add(H::sub2(v.x, pivot2), H::sub2(v.y, pivot2), H::sub2(v.z, pivot2), H::sub2(v.w, pivot2));
  }
  __device__ Moments finish() {
    const float2 sq = tile.take();
    const float s = sq.x, q = sq.y;
    const Moments m = {cnt, cnt > 0.f ? pivot + s / cnt : 0.f, cnt > 0.f ? fmaxf(q - s * (s / cnt), 0.f) : 0.f};
    cnt = 0.f;
    return m;
  }
};

template <>
struct WarpStats<__half> : MmaStats<__half> {};
template <>
struct WarpStats<__nv_bfloat16> : MmaStats<__nv_bfloat16> {};

// The sync warp: publishes the CTA's partial of each unit once its data warps have left theirs in shared memory,
// and, for each unit, once every CTA has published, merges the partials into the (scale, shift) of this CTA's
// channels. It never blocks: it polls both in turn, so neither waits on the other, and its fences and L2 round trips
// stall no data warp.
struct SyncState {
  float (*wpart)[kWarps][3];  // [kStreamPartBufs][data warp]: (count, mean, M2) of the warp's share of a unit
  float2 (*coef)[kMaxCpg];    // [2][channel of the slice]: y = silu(x * .x + .y)
  int* arrived;               // [kStreamPartBufs]: data warps whose partial of the buffer's unit is in wpart
  int* published;             // units whose CTA partial is published (data warps reuse wpart buffers behind it)
  uint64_t* coef_full;        // [2]: mbarrier of each coef buffer; phase k of buffer b completes with unit b + 2k
  int* applied;               // [data warp]: units whose apply the warp has finished (coef buffers are reused
                              // behind the slowest warp: warps drift apart by up to a unit)
};

template <int VE>
__device__ void sync_warp(const StreamParams& p, DType wb, const SyncState& sh, int me, int len, int c_first,
                          int c_last) {
  const int lane = threadIdx.x % 32;
  const int n_prep = len > 0 ? p.units : 0;
  int pub = 0, prep = 0;
  while (pub < p.units || prep < n_prep) {
    bool busy = false;
    const int b = pub % kStreamPartBufs;
    if (pub < p.units && load_volatile(sh.arrived + b) == kWarps) {
      __threadfence_block();
      Moments m = lane < kWarps ? Moments{sh.wpart[b][lane][0], sh.wpart[b][lane][1], sh.wpart[b][lane][2]}
                                : Moments{0.f, 0.f, 0.f};
      m = warp_merge(m);
      if (lane == 0) {
        p.partials[static_cast<int64_t>(pub) * p.ctas + me] = make_float2(m.mean, m.m2);
        sh.arrived[b] = 0;
        __threadfence();
        atomicAdd(p.counters + pub, 1u);
        *static_cast<volatile int*>(sh.published) = pub + 1;
      }
      __syncwarp();
      ++pub;
      busy = true;
    }
    int slowest = lane < kWarps ? load_volatile(sh.applied + lane) : 1 << 30;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) slowest = min(slowest, __shfl_xor_sync(0xffffffffu, slowest, o));
    if (prep < pub && prep < n_prep && slowest >= prep - 1) {
      unsigned arrivals = 0;
      if (lane == 0) arrivals = load_acquire(p.counters + prep);
      arrivals = __shfl_sync(0xffffffffu, arrivals, 0);
      if (arrivals >= static_cast<unsigned>(p.ctas)) {
        // Every partial loaded at once (up to kStreamMaxCtas / 32 per lane), then merged.
        const float2* part = p.partials + static_cast<int64_t>(prep) * p.ctas;
        float2 pv[kStreamMaxCtas / 32];
#pragma unroll
        for (int j = 0; j < kStreamMaxCtas / 32; ++j) {
          const int i = lane + 32 * j;
          pv[j] = i < p.ctas ? __ldcg(part + i) : make_float2(0.f, 0.f);
        }
        Moments m = {0.f, 0.f, 0.f};
#pragma unroll
        for (int j = 0; j < kStreamMaxCtas / 32; ++j) {
          const int i = lane + 32 * j;
          const int l = p.group_vecs - i * p.slice_vecs;
          const float n = i >= p.ctas || l <= 0 ? 0.f : static_cast<float>(l < p.slice_vecs ? l : p.slice_vecs) * VE;
          m = merge(m, Moments{n, pv[j].x, pv[j].y});
        }
        m = warp_merge(m);
        const float rstd = rsqrtf(m.m2 / m.n + p.eps);
        const int c0 = (prep % p.groups) * p.cpg + c_first;
        float2* cf = sh.coef[prep % 2];
        for (int c = lane; c <= c_last - c_first; c += 32) {
          const float a = rstd * (p.w ? to_float(p.w, c0 + c, wb) : 1.f);
          cf[c] = make_float2(a, (p.b ? to_float(p.b, c0 + c, wb) : 0.f) - m.mean * a);
        }
        mbar_arrive(sh.coef_full + prep % 2);  // every lane: each releases its own coefficient stores
        ++prep;
        busy = true;
      }
    }
    if (!busy) __nanosleep(100);
  }
}

template <typename T>
__global__ void __launch_bounds__(kStreamBlock, 1) gn_stream_kernel(StreamParams p, DType wb) {
  using V = Vec<T>;
  constexpr int VE = V::VE;
  constexpr int U = kStreamUnroll;
  constexpr int NS = kStreamStages;
  constexpr int kStage = 2 * U * kThreads;  // vectors per ring stage
  extern __shared__ uint4 ring[];  // [NS][2 (statistics, apply)][U][kThreads]: each data thread's own slots
  __shared__ float wpart[kStreamPartBufs][kWarps][3];
  __shared__ float2 coef[2][kMaxCpg];
  __shared__ uint64_t coef_full[2];
  __shared__ int arrived[kStreamPartBufs], published, applied[kWarps];

  const int tid = threadIdx.x, me = blockIdx.x, warp = tid / 32, lane = tid % 32;
  const int lo = me * p.slice_vecs;  // this CTA's slice of every unit: vectors [lo, lo + len)
  const int left = p.group_vecs - lo;
  const int len = left <= 0 ? 0 : (left < p.slice_vecs ? left : p.slice_vecs);
  const int c_first = lo / p.channel_vecs;  // the slice's channels within its group: c_first .. c_last
  const int c_last = len > 0 ? (lo + len - 1) / p.channel_vecs : c_first;
  if (tid < kStreamPartBufs) arrived[tid] = 0;
  if (tid < kWarps) applied[tid] = 0;
  if (tid == 0) {
    published = 0;
    mbar_init(coef_full, 32);
    mbar_init(coef_full + 1, 32);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();  // the only CTA-wide barrier
  if (warp == kWarps) {
    sync_warp<VE>(p, wb, SyncState{wpart, coef, arrived, &published, coef_full, applied}, me, len, c_first, c_last);
    return;
  }

  const uint4* x = static_cast<const uint4*>(p.x);
  uint4* y = static_cast<uint4*>(p.y);
  const uint64_t keep = l2_policy(p.hints != 0, false);
  const uint64_t drop = l2_policy(false, p.hints != 0);
  const int total = p.units * p.chunks;
  const int delay = p.chunks + p.lag;
  const int steps = total + delay;
  // A slice within at most two channels (every stream row's: channels are tens of thousands of vectors) takes its
  // coefficients from registers, chosen by one compare; otherwise one division per vector.
  const bool two = c_last - c_first <= 1;
  const int split = (c_first + 1) * p.channel_vecs - lo;  // first vector of the slice in channel c_first + 1

  // Step positions, advanced without divisions: (unit, chunk) of the statistics and of the apply being copied
  // (issue) and being computed (use), and the ring stage.
  struct Pos {
    int u, k;
    __device__ void next(int chunks) {
      if (++k == chunks) {
        k = 0;
        ++u;
      }
    }
  };
  // A chunk is `full` for this warp when all U vectors of each of its lanes are in the slice: the common case,
  // compiled without a bound check per vector (v6f spent about a third of its non-waiting instructions on per-vector
  // branches). Decided per warp (its last lane), so the statistics' mma.sync never diverges.
  auto full = [&](int k) {
    return k * p.chunk_vecs + (tid | 31) + (U - 1) * kThreads < min((k + 1) * p.chunk_vecs, len);
  };

  // Copies step s's chunks into ring stage s % NS; one commit group per step, empty or not (wait_group counts them).
  Pos is = {0, 0}, ia = {0, 0};
  int issued = 0, istage = 0;
  auto issue = [&]() {
    const int s = issued++;
    uint4* stage = ring + istage * kStage + tid;
    istage = istage == NS - 1 ? 0 : istage + 1;
    if (s < total) {
      if (len > 0) {
        const int base = is.k * p.chunk_vecs + tid, end = min((is.k + 1) * p.chunk_vecs, len);
        const uint4* src = x + (static_cast<int64_t>(is.u) * p.group_vecs + lo + base);
        if (full(is.k)) {
#pragma unroll
          for (int i = 0; i < U; ++i) cp_async16_hinted(stage + i * kThreads, src + i * kThreads, keep);
        } else {
#pragma unroll
          for (int i = 0; i < U; ++i)
            if (base + i * kThreads < end) cp_async16_hinted(stage + i * kThreads, src + i * kThreads, keep);
        }
      }
      is.next(p.chunks);
    }
    if (s >= delay && s - delay < total) {
      if (len > 0) {
        const int base = ia.k * p.chunk_vecs + tid, end = min((ia.k + 1) * p.chunk_vecs, len);
        const uint4* src = x + (static_cast<int64_t>(ia.u) * p.group_vecs + lo + base);
        if (full(ia.k)) {
#pragma unroll
          for (int i = 0; i < U; ++i) cp_async16_hinted(stage + (U + i) * kThreads, src + i * kThreads, drop);
        } else {
#pragma unroll
          for (int i = 0; i < U; ++i)
            if (base + i * kThreads < end) cp_async16_hinted(stage + (U + i) * kThreads, src + i * kThreads, drop);
        }
      }
      ia.next(p.chunks);
    }
    cp_async_commit();
  };

#pragma unroll
  for (int s = 0; s < NS - 1; ++s) issue();

  WarpStats<T> acc;  // the warp's running summary of the current statistics unit
  // The apply's coefficients when `two`: z = x * a + c, and -z * log2(e) = x * na + nc, per channel of the slice.
  float4 k0 = make_float4(0.f, 0.f, 0.f, 0.f), k1 = k0;
  Pos us = {0, 0}, ua = {0, 0};
  int ustage = 0;

  // One chunk's apply: y = silu(x * a + c) for this thread's vectors of ring stage `stage`.
  // kFull and kTwo are template-level so that each of the four cases compiles without the others' work (v6g: nvcc
  // hoisted the table path's division out of its branch and ran it for every vector).
  auto apply = [&](const uint4* stage, uint4* dst, int base, int end, const float2* cf, auto full_tag, auto two_tag) {
    constexpr bool kFull = decltype(full_tag)::value, kTwo = decltype(two_tag)::value;
#pragma unroll
    for (int i = 0; i < U; ++i) {
      const int v = base + i * kThreads;
      if (kFull || v < end) {
        float4 kc;
        if (kTwo) {
          kc = v < split ? k0 : k1;
        } else {
          constexpr float kLog2e = 1.4426950408889634f;
          const float2 ac = cf[static_cast<unsigned>(lo + v) / static_cast<unsigned>(p.channel_vecs) - c_first];
          kc = make_float4(ac.x, ac.y, -ac.x * kLog2e, -ac.y * kLog2e);
        }
        const uint4 w = stage[(U + i) * kThreads];
        float f[VE];
        V::unpack(w, f);
#pragma unroll
        for (int e = 0; e < VE; ++e) {
          // silu(z) = z / (1 + 2^(-z log2 e)); 1 + 2^... = inf gives -0, the limit
          const float z = fmaf(f[e], kc.x, kc.y);
          f[e] = z * rcp_approx(1.f + ex2_approx(fmaf(f[e], kc.z, kc.w)));
        }
        store_hinted(dst + i * kThreads, V::pack(f), drop);
      }
    }
  };

  for (int t = 0; t < steps; ++t) {
    issue();
    cp_async_wait<NS - 1>();  // step t's copies (this thread's) have landed
    const uint4* stage = ring + ustage * kStage + tid;
    ustage = ustage == NS - 1 ? 0 : ustage + 1;

    if (t < total) {
      const int base = us.k * p.chunk_vecs + tid, end = min((us.k + 1) * p.chunk_vecs, len);
      uint4 w[U];  // one 16-byte shared-memory load each
#pragma unroll
      for (int i = 0; i < U; ++i) w[i] = stage[i * kThreads];
      if (us.k == 0) acc.start(w[0], base < end);
      if (full(us.k)) {
#pragma unroll
        for (int i = 0; i < U; ++i) acc.add_full(w[i]);
      } else {
#pragma unroll
        for (int i = 0; i < U; ++i) acc.add(w[i], base + i * kThreads < end);
      }
      if (us.k == p.chunks - 1) {
        // The warp's (count, mean, M2) of the unit, left for the sync warp once it has published the unit
        // kStreamPartBufs before.
        const Moments m = acc.finish();
        if (lane == 0) {
          while (load_volatile(&published) <= us.u - kStreamPartBufs) {
          }
          const int b = us.u % kStreamPartBufs;
          wpart[b][warp][0] = m.n;
          wpart[b][warp][1] = m.mean;
          wpart[b][warp][2] = m.m2;
          __threadfence_block();
          atomicAdd(arrived + b, 1);
        }
      }
      us.next(p.chunks);
    }

    if (t >= delay) {
      if (len > 0) {
        const float2* cf = coef[ua.u & 1];
        if (ua.k == 0) {
          mbar_wait(coef_full + (ua.u & 1), (ua.u >> 1) & 1);
          if (two) {
            constexpr float kLog2e = 1.4426950408889634f;
            const float2 a0 = cf[0], a1 = cf[c_last - c_first];
            k0 = make_float4(a0.x, a0.y, -a0.x * kLog2e, -a0.y * kLog2e);
            k1 = make_float4(a1.x, a1.y, -a1.x * kLog2e, -a1.y * kLog2e);
          }
        }
        const int base = ua.k * p.chunk_vecs + tid, end = min((ua.k + 1) * p.chunk_vecs, len);
        uint4* dst = y + (static_cast<int64_t>(ua.u) * p.group_vecs + lo + base);
        if (full(ua.k)) {
          if (two)
            apply(stage, dst, base, end, cf, std::true_type{}, std::true_type{});
          else
            apply(stage, dst, base, end, cf, std::true_type{}, std::false_type{});
        } else {
          if (two)
            apply(stage, dst, base, end, cf, std::false_type{}, std::true_type{});
          else
            apply(stage, dst, base, end, cf, std::false_type{}, std::false_type{});
        }
        if (ua.k == p.chunks - 1) {
          __syncwarp();  // every lane is done reading this unit's coefficients
          if (lane == 0) *static_cast<volatile int*>(applied + warp) = ua.u + 1;
        }
      }
      ua.next(p.chunks);
    }
  }
  cp_async_wait<0>();
}

template <typename T>
cudaError_t launch_stream_typed(const StreamParams& p, DType wb, cudaStream_t stream) {
  const cudaError_t err = zero_counters(p.counters, p.units, stream);
  if (err != cudaSuccess) return err;
  static size_t opted[64] = {};
  return launch_grid(gn_stream_kernel<T>, opted, p.ctas, kStreamBlock, kStreamSmem, true, stream, p, wb);
}

template <typename T>
cudaError_t occupancy(int* out) {
  cudaError_t err = cudaFuncSetAttribute(gn_stream_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, kStreamSmem);
  if (err != cudaSuccess) return err;
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(out, gn_stream_kernel<T>, kStreamBlock, kStreamSmem);
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
