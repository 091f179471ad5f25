// group_norm_silu v5, the resident kernel: y = silu(GroupNorm(x)) on a contiguous x with x read from DRAM once.
//
// Why: a statistics pass followed by an apply pass reads x twice; on rows beyond the L2 that caps the counted
// bandwidth at 2/3 of a copy (ledger L0011: upstream's three-pass path runs at 98% of copy in DRAM traffic and
// still counts only ~0.6). Here a unit (one batch's group) is split over a team of CTAs that keep their slices in
// shared memory: the whole machine holds 132 x ~200 KB, more than the largest VAE group (17.8 MB). Each member
// loads its slice with cp.async, computes the slice's (mean, M2) from shared memory (two passes there: no
// E[x^2] - mean^2 cancellation), publishes it, and waits for its team; every member then merges the team's
// partials with Chan's formula and writes y from shared memory.
//
// Overlap: the shared memory is a ring. While a member waits for its team and applies the current unit, the next
// unit's slice is already loading into the free part of the ring (all of it when two slices fit, else a prefix);
// the rest is issued once the current slice is written out.
//
// A team's exchange (v30): each member stores its partial tagged with the unit's generation, a counter per unit kept
// on the device between calls (read as the unit starts, advanced by member 0 once it has every partial), and the
// waiting warp polls the partials themselves. v5 counted arrivals in counters that a kernel of their own zeroed
// before each call: two launches a call, and a spin then a load where one poll does (ledger L0090, L0092).
#include "gn_common.cuh"

namespace kda_gn {

// The team counters start at zero: cleared by this kernel, not a memset, so the candidate's path runs only its own
// kernels (the harness flags every other GPU activity on it).
__global__ void gn_zero_kernel(unsigned* counters, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) counters[i] = 0u;
}

namespace {

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned s = smem_addr(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// v30: a member's (mean, M2) as {mean, tag, M2, tag} (store_tagged, gn_common.cuh). The tag mixes the unit's
// generation (advanced once a call), the host's salt (told apart from the partials of another process, or of an
// earlier buffer of generations, left in the same memory) and the unit; never 0.
__device__ __forceinline__ unsigned unit_tag(unsigned gen, unsigned salt, int u) {
  return ((gen * 2654435761u) ^ (salt * 40503u) ^ (static_cast<unsigned>(u) * 2246822519u)) | 1u;
}

// Vectors [from, to) of a slice into the ring at `start` (wrapping), one cp.async of 16 bytes each.
__device__ __forceinline__ void issue_loads(uint4* ring, int ring_vecs, int start, const uint4* src, int from,
                                            int to) {
  for (int i = from + static_cast<int>(threadIdx.x); i < to; i += kThreads) {
    int pos = start + i;
    if (pos >= ring_vecs) pos -= ring_vecs;
    cp_async16(ring + pos, src + i);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 1) gn_resident_kernel(Params p, DType wb) {
  using V = Vec<T>;
  constexpr int VE = V::VE;
  extern __shared__ uint4 ring[];
  __shared__ float scratch[kWarps];
  __shared__ float stat[2];
  __shared__ float2 coef[kMaxCpg];

  const int tid = threadIdx.x;
  const int team = blockIdx.x / p.team_size, member = blockIdx.x % p.team_size;
  int u = team;
  if (u >= p.units) return;  // this team has no unit; no other team waits for it

  const int v_begin = member * p.chunk_vecs;  // group_vecs < 2^31 (the plan's condition)
  const int left = p.group_vecs - v_begin;
  const int len = left <= 0 ? 0 : (left < p.chunk_vecs ? left : p.chunk_vecs);
  const float n_mine = static_cast<float>(len) * VE;
  const float n_group = static_cast<float>(p.group_vecs) * VE;
  const uint4* x = static_cast<const uint4*>(p.x);
  uint4* y = static_cast<uint4*>(p.y);

  int start = 0;  // ring position of the current slice
  issue_loads(ring, p.ring_vecs, start, x + static_cast<int64_t>(u) * p.group_vecs + v_begin, 0, len);
  cp_async_commit();

  for (; u < p.units; u += p.teams) {
    const int next = u + p.teams;
    const bool has_next = next < p.units;
    // v29: the unit's weight and bias into the coefficient table now, their loads under the slice's wait; the apply's
    // table is made from them in place by the same threads (the last unit's table was read before the last barrier).
    const int c0 = (u % p.groups) * p.cpg;
    // v30: the unit's generation, read before this CTA publishes, so every member's tag is the same
    unsigned tag = 0u;
    if (p.generations && p.team_size > 1 && tid == 0)
      tag = unit_tag(*static_cast<volatile unsigned*>(p.counters + u), p.salt, u);
    if (p.early_wb)
      for (int c = tid; c < p.cpg; c += kThreads)
        coef[c] = make_float2(p.w ? to_float(p.w, c0 + c, wb) : 1.f, p.b ? to_float(p.b, c0 + c, wb) : 0.f);
    cp_async_wait_all();
    __syncthreads();

    // The slice's mean, then its M2 about that mean, both from shared memory.
    float s = 0.f;
    for (int i = tid; i < len; i += kThreads) {
      int pos = start + i;
      if (pos >= p.ring_vecs) pos -= p.ring_vecs;
      float f[VE];
      V::unpack(ring[pos], f);
#pragma unroll
      for (int e = 0; e < VE; ++e) s += f[e];
    }
    const float cmean = block_sum(s, scratch) / fmaxf(n_mine, 1.f);
    float q = 0.f;
    for (int i = tid; i < len; i += kThreads) {
      int pos = start + i;
      if (pos >= p.ring_vecs) pos -= p.ring_vecs;
      float f[VE];
      V::unpack(ring[pos], f);
#pragma unroll
      for (int e = 0; e < VE; ++e) {
        const float d = f[e] - cmean;
        q = fmaf(d, d, q);
      }
    }
    const float m2 = block_sum(q, scratch);

    if (p.team_size > 1 && tid == 0 && p.generations) {
      // v30: the partial and its tag in one 16-byte store, so a reader that finds the tag has the values: no counter
      store_tagged(reinterpret_cast<uint4*>(p.partials) + static_cast<int64_t>(u) * p.team_size + member, cmean, m2,
                   tag);
    } else if (p.team_size > 1 && tid == 0) {
      p.partials[static_cast<int64_t>(u) * p.team_size + member] = make_float2(cmean, m2);
      __threadfence();
      atomicAdd(p.counters + u, 1u);
    }

    // The next slice starts loading into the free part of the ring before this unit's wait.
    int next_start = start + len;
    if (next_start >= p.ring_vecs) next_start -= p.ring_vecs;
    const int pre = has_next ? min(len, p.ring_vecs - len) : 0;
    const uint4* next_src = x + static_cast<int64_t>(next) * p.group_vecs + v_begin;
    if (pre > 0) {
      issue_loads(ring, p.ring_vecs, next_start, next_src, 0, pre);
      cp_async_commit();
    }

    float mean, rstd;
    if (p.team_size > 1) {
      if (!p.generations) {
        if (tid == 0) {
          while (load_acquire(p.counters + u) < static_cast<unsigned>(p.team_size)) {
          }
        }
        __syncthreads();
      }
      if (tid < 32) {
        // Every partial of the team loaded at once (up to kMaxTeam / 32 per lane), then two shuffle reductions.
        float2 pi[kMaxTeam / 32];
        float ni[kMaxTeam / 32];
#pragma unroll
        for (int j = 0; j < kMaxTeam / 32; ++j) {
          const int i = tid + 32 * j;
          const int l = p.group_vecs - i * p.chunk_vecs;
          ni[j] = i < p.team_size && l > 0 ? static_cast<float>(l < p.chunk_vecs ? l : p.chunk_vecs) * VE : 0.f;
        }
        if (p.generations) {
          // v30: polled until every member's tag is in; then the unit's next generation, from member 0 (every
          // member read this one before it published)
          const uint4* part = reinterpret_cast<const uint4*>(p.partials) + static_cast<int64_t>(u) * p.team_size;
          tag = __shfl_sync(0xffffffffu, tag, 0);
          for (;;) {
            bool ok = true;
#pragma unroll
            for (int j = 0; j < kMaxTeam / 32; ++j) {
              const int i = tid + 32 * j;
              const uint4 v = i < p.team_size ? load_tagged(part + i) : make_uint4(0u, tag, 0u, tag);
              pi[j] = make_float2(__uint_as_float(v.x), __uint_as_float(v.z));
              ok = ok && v.y == tag && v.w == tag;
            }
            if (__all_sync(0xffffffffu, ok)) break;
            __nanosleep(32);
          }
          if (member == 0 && tid == 0) *static_cast<volatile unsigned*>(p.counters + u) += 1u;
        } else {
          const float2* part = p.partials + static_cast<int64_t>(u) * p.team_size;
#pragma unroll
          for (int j = 0; j < kMaxTeam / 32; ++j) {
            const int i = tid + 32 * j;
            pi[j] = i < p.team_size ? __ldcg(part + i) : make_float2(0.f, 0.f);
          }
        }
        float sum_nm = 0.f;
#pragma unroll
        for (int j = 0; j < kMaxTeam / 32; ++j) sum_nm = fmaf(ni[j], pi[j].x, sum_nm);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) sum_nm += __shfl_xor_sync(0xffffffffu, sum_nm, o);
        const float gmean = sum_nm / n_group;
        float gm2 = 0.f;
#pragma unroll
        for (int j = 0; j < kMaxTeam / 32; ++j) {
          const float d = pi[j].x - gmean;
          gm2 += pi[j].y + ni[j] * d * d;
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) gm2 += __shfl_xor_sync(0xffffffffu, gm2, o);
        if (tid == 0) {
          stat[0] = gmean;
          stat[1] = rsqrtf(gm2 / n_group + p.eps);
        }
      }
      __syncthreads();
      mean = stat[0];
      rstd = stat[1];
    } else {
      mean = cmean;
      rstd = rsqrtf(m2 / n_group + p.eps);
    }

    // y = silu(x * a + c) per channel, a = rstd * w, c = b - mean * a (a table of the unit's CPG channels), written
    // straight from shared memory.
    for (int c = tid; c < p.cpg; c += kThreads) {
      const float2 w_b = p.early_wb ? coef[c]
                                    : make_float2(p.w ? to_float(p.w, c0 + c, wb) : 1.f,
                                                  p.b ? to_float(p.b, c0 + c, wb) : 0.f);
      const float a = rstd * w_b.x;
      coef[c] = make_float2(a, w_b.y - mean * a);
    }
    __syncthreads();
    uint4* dst = y + static_cast<int64_t>(u) * p.group_vecs + v_begin;
    for (int i = tid; i < len; i += kThreads) {
      int pos = start + i;
      if (pos >= p.ring_vecs) pos -= p.ring_vecs;
      const float2 ac = coef[static_cast<unsigned>(v_begin + i) / static_cast<unsigned>(p.channel_vecs)];
      float f[VE];
      V::unpack(ring[pos], f);
#pragma unroll
      for (int e = 0; e < VE; ++e) {
        const float z = fmaf(f[e], ac.x, ac.y);
        f[e] = __fdividef(z, 1.f + __expf(-z));
      }
      __stcs(dst + i, V::pack(f));
    }
    __syncthreads();  // every read of this slice is done: its part of the ring is free

    if (has_next && pre < len) {
      issue_loads(ring, p.ring_vecs, next_start, next_src, pre, len);
      cp_async_commit();
    }
    start = next_start;
  }
}

template <typename T>
cudaError_t launch_typed(const Params& p, DType wb, cudaStream_t stream) {
  if (p.team_size > 1 && !p.generations) {
    const cudaError_t err = zero_counters(p.counters, p.units, stream);
    if (err != cudaSuccess) return err;
  }
  static size_t opted[64] = {};
  return launch_grid(gn_resident_kernel<T>, opted, p.teams * p.team_size, kThreads,
                     static_cast<size_t>(p.ring_vecs) * 16, p.team_size > 1, stream, p, wb);
}

}  // namespace

cudaError_t zero_counters(unsigned* counters, int n, cudaStream_t stream) {
  gn_zero_kernel<<<(n + 255) / 256, 256, 0, stream>>>(counters, n);
  return cudaGetLastError();
}

cudaError_t launch(const Params& p, DType x_dtype, DType wb_dtype, cudaStream_t stream) {
  switch (x_dtype) {
    case DType::kFP16: return launch_typed<__half>(p, wb_dtype, stream);
    case DType::kBF16: return launch_typed<__nv_bfloat16>(p, wb_dtype, stream);
    default: return launch_typed<float>(p, wb_dtype, stream);
  }
}

}  // namespace kda_gn
