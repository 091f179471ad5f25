// group_norm_silu v17, the held kernel: y = silu(GroupNorm(x)) on a contiguous 16-bit x too large to hold on chip
// whole, with x read from DRAM once. One unit (batch, group) at a time is held across the whole grid: each CTA's
// slice of it stays in a shared-memory ring from its statistics until its apply.
//
// Why: the split path reads x twice and tops out near 2/3 of a copy (ledger L0057); every one-read schedule before
// this one lost to it. v15's held mode, the nearest, was issue-bound at ~30 instructions per element (ledger L0053):
// each thread copied its own ring slots with cp.async and a sixth of the instructions waited. Here one lane copies
// whole chunks with TMA bulk copies (no instruction per element for the copy), the compute warps only wait on
// mbarriers that suspend them, and one sync warp does every cross-CTA exchange. The ring's slots beyond one slice
// keep the next units' copies in flight while the grid exchanges statistics, so DRAM does not idle at the wait.
//
// Roles (v19): kStat statistics warps (each unit's sums as soon as its chunks land), kApply apply warps (a unit once
// its coefficients are in, from the slots the statistics read, releasing each slot), a copy warp (one lane issues
// each chunk's bulk copy when its slot is free), a publishing warp (the CTA's partial of each unit, out as soon as the
// statistics warps leave it) and a preparing warp (reads the grid's partials, writes the coefficients). v17-v18 ran
// statistics then apply on the same warps and both exchange roles on one warp; with every role's wait cycles counted
// per CTA, the statistics' tensor-core latency and the exchange's global round trips set the pace (ledger L0070-L0071).
// v20 (kRegs): where the ring holds one slice and not two, the apply warps also keep a unit's first chunks in
// registers from its statistics to its apply (ledger L0074).
#include "gn_common.cuh"

#include <cstdint>
#include <type_traits>

namespace kda_gn {

#ifdef KDA_GN_TRACE
// A diagnostic build (tools/held_trace.py): each CTA stamps the global timer at kHeldTraceEvents points of a call.
__device__ unsigned long long gn_held_trace[kHeldMaxCtas * kHeldTraceEvents];

cudaError_t held_trace_copy(unsigned long long* host) {
  return cudaMemcpyFromSymbol(host, gn_held_trace, sizeof(gn_held_trace));
}
#define GN_TRACE(event)                                                          \
  do {                                                                           \
    unsigned long long t_;                                                       \
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_));                       \
    gn_held_trace[blockIdx.x * kHeldTraceEvents + static_cast<int>(event)] = t_; \
  } while (0)
#else
#define GN_TRACE(event) \
  do {                  \
  } while (0)
#endif

namespace {

__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, unsigned bytes) {
  asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}

// `bytes` (a multiple of 16) from global to shared memory; completion is counted on `bar` as transaction bytes.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes, uint64_t* bar, uint64_t pol) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n" ::"r"(
          smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar)), "l"(pol)
      : "memory");
}

// `bytes` (a multiple of 16) of global memory into the L2, nothing waiting on it.
__device__ __forceinline__ void bulk_prefetch(const void* src, unsigned bytes, uint64_t pol) {
  asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;\n" ::"l"(src), "r"(bytes), "l"(pol)
               : "memory");
}

// `bytes` (a multiple of 16) from shared to global memory, as one bulk group of its own.
__device__ __forceinline__ void bulk_store(void* dst, const void* src, unsigned bytes, uint64_t pol) {
  asm volatile(
      "cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint [%0], [%1], %2, %3;\n"
      "cp.async.bulk.commit_group;\n" ::"l"(dst),
      "r"(smem_addr(src)), "r"(bytes), "l"(pol)
      : "memory");
}

// Whether the phase of `bar` with this parity has completed, without waiting.
__device__ __forceinline__ bool mbar_test(uint64_t* bar, unsigned parity) {
  unsigned done;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.test_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, "
      "p;\n}\n"
      : "=r"(done)
      : "r"(smem_addr(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

// A position in the ring: slot and the parity of its current fill.
struct Slot {
  int s = 0;
  unsigned phase = 0;
  __device__ void next(int slots) {
    if (++s == slots) {
      s = 0;
      phase ^= 1u;
    }
  }
};

// The first 32-bit word of unit u: its first element is the pivot of the unit's sums in every CTA.
__device__ __forceinline__ unsigned unit_word(const void* x, int u, int group_vecs) {
  return __ldg(static_cast<const uint4*>(x) + static_cast<int64_t>(u) * group_vecs).x;
}

// That element as a float.
template <typename T>
__device__ __forceinline__ float pivot_of(unsigned word) {
  return Half2Ops<T>::low_to_float(word);
}

// A round of a chunk for one thread of a group of kThreads (`g`: its index in the group): its vectors g, g + kThreads,
// ... below n, K of them at most (K: the warp's count, so the lanes past n in a warp's last vector only skip their
// stores). The K loads go first and the math runs unconditionally, so the K latency chains interleave (v17e's loop,
// bounded at run time, ran ~3 vectors a thread a chunk, always one at a time in its remainder).

// This thread's vectors of the round, zeros past n.
template <int K, int kThreads>
__device__ __forceinline__ void load_round(const uint4* slot, int n, int g, uint4 (&q)[K]) {
#pragma unroll
  for (int i = 0; i < K; ++i) {
    const int v = g + i * kThreads;
    q[i] = v < n ? slot[v] : make_uint4(0u, 0u, 0u, 0u);
  }
}

// y = silu(x a + c) over a vector's elements, in place; kc = (a, c, -a log2 e, -c log2 e).
template <int VE>
__device__ __forceinline__ void silu_affine(float (&f)[VE], float4 kc) {
#pragma unroll
  for (int e = 0; e < VE; ++e) {
    // silu(z) = z / (1 + 2^(-z log2 e)); 1 + 2^... = inf gives -0, the limit
    const float z = fmaf(f[e], kc.x, kc.y);
    f[e] = z * rcp_approx(1.f + ex2_approx(fmaf(f[e], kc.z, kc.w)));
  }
}

// y = silu(x a + c) into dst; a vector's channel is k0's below `split` (slice-relative: first + v), else k1's.
// kStreaming: y to global memory with st.global.cs (evict first; 1-5% faster on the six large rows than plain stores,
// ledger L0073); else into the ring slot, for the TMA store.
template <typename T, int K, int kThreads, bool kStreaming>
__device__ __forceinline__ void apply_round(const uint4* slot, uint4* dst, int n, int g, int first, int split,
                                            float4 k0, float4 k1) {
  using V = Vec<T>;
  constexpr int VE = V::VE;
  uint4 q[K];
  load_round<K, kThreads>(slot, n, g, q);
#pragma unroll
  for (int i = 0; i < K; ++i) {
    const int v = g + i * kThreads;
    const float4 kc = first + v < split ? k0 : k1;
    float f[VE];
    V::unpack(q[i], f);
    silu_affine(f, kc);
    if (v < n) {
      if constexpr (kStreaming)
        __stcs(dst + v, V::pack(f));
      else
        dst[v] = V::pack(f);
    }
  }
}

// 16-bit x: the warp's tiles of d = x - pivot (zeros past n) into its tensor-core sums.
template <typename T, int K, int kThreads>
__device__ __forceinline__ void tile_round(TileSums<T>& tile, const uint4* slot, int n, int g, unsigned piv2) {
  using H = Half2Ops<T>;
  uint4 q[K];
  load_round<K, kThreads>(slot, n, g, q);
#pragma unroll
  for (int i = 0; i < K; ++i) {
    const bool valid = g + i * kThreads < n;
    tile.add(valid ? H::sub2(q[i].x, piv2) : 0u, valid ? H::sub2(q[i].y, piv2) : 0u,
             valid ? H::sub2(q[i].z, piv2) : 0u, valid ? H::sub2(q[i].w, piv2) : 0u);
  }
}

// A chunk of n vectors in rounds of at most kHeldUnroll vectors a thread: f(base, m, K) for the round's vectors
// [base, base + m), K (a compile-time constant) this warp's count of them a lane.
template <int kThreads, typename F>
__device__ __forceinline__ void for_rounds(int n, int g, F&& f) {
  constexpr int kRound = kThreads * kHeldUnroll;
  for (int base = 0; base < n; base += kRound) {
    const int m = min(kRound, n - base);
    const int cnt = (m - (g / 32) * 32 + kThreads - 1) / kThreads;
    switch (cnt < kHeldUnroll ? cnt : kHeldUnroll) {
      case 1: f(base, m, std::integral_constant<int, 1>{}); break;
      case 2: f(base, m, std::integral_constant<int, 2>{}); break;
      case 3: f(base, m, std::integral_constant<int, 3>{}); break;
      case 4: f(base, m, std::integral_constant<int, 4>{}); break;
      default: break;
    }
  }
}

template <typename T, int kStat, int kApply, bool kRegs>
__global__ void __launch_bounds__((kStat + kApply) * 32 + 96, 1) gn_held_kernel(HeldParams p, DType wb) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  // Bulk copies and mbarrier transaction counts are sm_90 instructions: an sm_80/sm_89 build of the extension keeps
  // this kernel as a trap, and the planner never takes the held path below sm_90 (_EXT_MIN_CAPABILITY).
  __trap();
#else
  constexpr int kStatThreads = kStat * 32, kApplyThreads = kApply * 32;
  constexpr int kCopyWarp = kStat + kApply, kSyncWarp = kCopyWarp + 1, kPubWarp = kSyncWarp + 1;
  using V = Vec<T>;
  constexpr int VE = V::VE;
  extern __shared__ __align__(128) uint4 ring[];  // [ring_slots][chunk_vecs]
  __shared__ uint64_t full[kHeldMaxSlots], empty[kHeldMaxSlots], part_ready[kHeldPartBufs],
      part_free[kHeldPartBufs], coef_ready, coef_taken;
  __shared__ float2 wpart[kHeldPartBufs][kStat];  // each statistics warp's (sum, sum of squares) of x - pivot
  __shared__ float4 coef[2];  // per channel of the slice: (a, c, -a log2 e, -c log2 e), y = silu(x a + c)
  __shared__ unsigned epoch_now;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int lo = blockIdx.x * p.slice_vecs;
  const int len = min(p.slice_vecs, p.group_vecs - lo);  // > 0: the plan leaves no CTA empty
  const int c_first = lo / p.channel_vecs;
  const int split = (c_first + 1) * p.channel_vecs - lo;  // slice-relative first vector of channel c_first + 1
  // Chunks of this slice: the last CTA's shorter slice may need fewer than p.chunks. Every role walks the ring by it.
  const int chunks = (len + p.chunk_vecs - 1) / p.chunk_vecs;
  if (tid == 0) {
    GN_TRACE(HeldTrace::kStart);
    for (int s = 0; s < p.ring_slots; ++s) {
      mbar_init(full + s, 1);
      mbar_init(empty + s, kApply);
    }
    for (int b = 0; b < kHeldPartBufs; ++b) {
      mbar_init(part_ready + b, kStat);
      mbar_init(part_free + b, 1);
    }
    mbar_init(&coef_ready, 1);
    mbar_init(&coef_taken, kApply);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    epoch_now = *static_cast<volatile unsigned*>(p.epoch);
  }
  __syncthreads();  // the only CTA-wide barrier
  if (tid == 0) GN_TRACE(HeldTrace::kReady);
  const unsigned tag = ((p.salt + epoch_now) << 1) | 1u;
  if (warp == kCopyWarp) {
    if (lane != 0) return;
    const uint64_t pol = l2_policy(false, true);  // x is read once, y written once
    const char* x = static_cast<const char*>(p.x);
    if (p.tma_store) {
      // Loads and stores in ring order, neither blocking the other: chunk q is stored once the compute warps have
      // written it back (empty, phase q / slots), and chunk q + slots loaded into its slot once that store has read it.
      char* y = static_cast<char*>(p.y);
      const int total = p.units * chunks;
      int ld = 0, sq = 0, read = 0;  // next chunk to load, next to store; stores before `read` have read their slots
      int lu = 0, lk = 0, su = 0, sk = 0;  // (unit, chunk) of ld and of sq
      Slot la, sa;
      while (sq < total) {
        bool busy = false;
        if (sq < ld && mbar_test(empty + sa.s, sa.phase)) {
          const int n = min(p.chunk_vecs, len - sk * p.chunk_vecs);
          bulk_store(y + (static_cast<int64_t>(su) * p.group_vecs + lo + sk * p.chunk_vecs) * 16,
                     ring + sa.s * p.chunk_vecs, 16u * n, pol);
          ++sq;
          sa.next(p.ring_slots);
          if (++sk == chunks) sk = 0, ++su;
          busy = true;
        }
        if (ld < total && ld - sq < p.ring_slots) {  // the slot's last chunk, ld - slots, is stored
          if (ld - p.ring_slots >= read) {  // ... and has read the slot
            asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
            read = sq;
          }
          const int n = min(p.chunk_vecs, len - lk * p.chunk_vecs);
          mbar_expect_tx(full + la.s, 16u * n);
          bulk_copy(ring + la.s * p.chunk_vecs,
                    x + (static_cast<int64_t>(lu) * p.group_vecs + lo + lk * p.chunk_vecs) * 16, 16u * n, full + la.s,
                    pol);
          ++ld;
          la.next(p.ring_slots);
          if (++lk == chunks) lk = 0, ++lu;
          busy = true;
        }
        if (!busy) __nanosleep(20);
      }
      asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");  // y written before the CTA exits
      return;
    }
    // p.prefetch: before waiting for chunk q's slot, chunk q + prefetch goes into the L2 (kept there until its copy
    // reads it), so that DRAM keeps reading while the ring is full; only chunks that will wait for a slot.
    const uint64_t keep = l2_policy(true, false);
    const int total = p.units * chunks;
    Slot at;
    for (int u = 0, q = 0; u < p.units; ++u) {
      const char* src = x + (static_cast<int64_t>(u) * p.group_vecs + lo) * 16;
      for (int k = 0; k < chunks; ++k, ++q) {
        const int n = min(p.chunk_vecs, len - k * p.chunk_vecs);
        const int f = q + p.prefetch;
        if (p.prefetch > 0 && f >= p.ring_slots && f < total) {
          const int fu = f / chunks, fk = f - fu * chunks;
          bulk_prefetch(x + (static_cast<int64_t>(fu) * p.group_vecs + lo + fk * p.chunk_vecs) * 16,
                        16u * min(p.chunk_vecs, len - fk * p.chunk_vecs), keep);
        }
        mbar_wait(empty + at.s, at.phase ^ 1u);  // a fresh barrier's "previous" phase counts as complete
        mbar_expect_tx(full + at.s, 16u * n);
        bulk_copy(ring + at.s * p.chunk_vecs, src + static_cast<int64_t>(k) * p.chunk_vecs * 16, 16u * n,
                  full + at.s, pol);
        at.next(p.ring_slots);
        if (q == p.ring_slots - 1) GN_TRACE(HeldTrace::kRingIssued);
      }
    }
    GN_TRACE(HeldTrace::kLastCopy);
    return;
  }

  if (warp == kSyncWarp || warp == kPubWarp) {  // the grid's exchange: one warp prepares, one publishes
    const float count = static_cast<float>(p.group_vecs) * VE;  // elements per unit
    // Unit u's inputs besides the partials: the weight and bias bits of this lane's channel (lanes 0, 1: the slice's
    // channels in the group) and the unit's pivot word, loaded a unit before prepare(u) uses them. Loaded in the same
    // step (v17-v19), each was a global-memory round trip that every apply warp of the grid waited on: the sync warp
    // spent about two thirds of its time outside its waits (ledger L0071).
    struct Ahead {
      unsigned w, b, word;
    };
    const int cl = c_first + lane;
    const bool has_channel = lane < 2 && cl < p.cpg;
    auto fetch = [&](int u) {
      Ahead a{0u, 0u, 0u};
      if (u < p.units) {
        a.word = unit_word(p.x, u, p.group_vecs);
        const int c = (u % p.groups) * p.cpg + cl;
        if (has_channel && p.w) a.w = load_bits(p.w, c, wb);
        if (has_channel && p.b) a.b = load_bits(p.b, c, wb);
      }
      return a;
    };
    Ahead next = fetch(0);
    // The grid's statistics of unit u into the coefficients of this CTA's channels (u = 0, 1, ... in turn).
    auto prepare = [&](int u) {
      const Ahead cur = next;
      next = fetch(u + 1);
      const uint4* pu = p.partials + static_cast<int64_t>(u) * p.ctas;
      float s1 = 0.f, s2 = 0.f;
      for (;;) {
        uint4 pv[kHeldMaxCtas / 32];
        bool ok = true;
#pragma unroll
        for (int j = 0; j < kHeldMaxCtas / 32; ++j) {
          const int i = lane + 32 * j;
          pv[j] = i < p.ctas ? load_tagged(pu + i) : make_uint4(0u, tag, 0u, tag);
          ok = ok && pv[j].y == tag && pv[j].w == tag;
        }
        if (__all_sync(0xffffffffu, ok)) {
#pragma unroll
          for (int j = 0; j < kHeldMaxCtas / 32; ++j) {
            s1 += __uint_as_float(pv[j].x);
            s2 += __uint_as_float(pv[j].z);
          }
          break;
        }
        __nanosleep(32);
      }
      if (lane == 0 && u == 0) GN_TRACE(HeldTrace::kFirstExchanged);
      if (lane == 0 && u == p.units - 1) GN_TRACE(HeldTrace::kLastExchanged);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        s1 += __shfl_xor_sync(0xffffffffu, s1, o);
        s2 += __shfl_xor_sync(0xffffffffu, s2, o);
      }
      const float wv = has_channel && p.w ? bits_to_float(cur.w, wb) : 1.f;
      const float bv = has_channel && p.b ? bits_to_float(cur.b, wb) : 0.f;
      const float piv = pivot_of<T>(cur.word);
      const float md = s1 / count;  // mean - pivot
      const float rstd = rsqrtf(fmaxf(s2 / count - md * md, 0.f) + p.eps);
      if (u > 0) mbar_wait(&coef_taken, (u - 1) & 1);
      if (lane < 2) {
        constexpr float kLog2e = 1.4426950408889634f;
        const float sa = rstd * wv, sc = bv - (piv + md) * sa;
        coef[lane] = make_float4(sa, sc, -sa * kLog2e, -sc * kLog2e);
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(&coef_ready);
      if (lane == 0 && u == 0) GN_TRACE(HeldTrace::kFirstCoef);
    };
    // This CTA's partial of unit t, once every statistics warp has left its sums.
    auto publish = [&](int t) {
      const int b = t % kHeldPartBufs;
      mbar_wait(part_ready + b, (t / kHeldPartBufs) & 1);
      float2 a = lane < kStat ? wpart[b][lane] : make_float2(0.f, 0.f);
      __syncwarp();
      if (lane == 0) mbar_arrive(part_free + b);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        a.x += __shfl_xor_sync(0xffffffffu, a.x, o);
        a.y += __shfl_xor_sync(0xffffffffu, a.y, o);
      }
      if (lane == 0) store_tagged(p.partials + static_cast<int64_t>(t) * p.ctas + blockIdx.x, a.x, a.y, tag);
      if (lane == 0 && t == 0) GN_TRACE(HeldTrace::kFirstPublished);
      if (lane == 0 && t == p.units - 1) GN_TRACE(HeldTrace::kLastPublished);
    };
    // Each on its own warp, so that a unit's partial goes out as soon as the CTA has it, whatever the unit the grid
    // is still exchanging (v17c-v19c ran both on one warp, preparing unit t - lag before publishing unit t: a CTA
    // waiting on the grid's slowest partial of unit t - lag held back its own of unit t).
    if (warp == kPubWarp) {
      for (int t = 0; t < p.units; ++t) publish(t);
      return;
    }
    for (int u = 0; u < p.units; ++u) prepare(u);
    // Every CTA has published the last unit's partial, so every CTA has read the epoch: the next call gets another.
    if (blockIdx.x == 0 && lane == 0) *static_cast<volatile unsigned*>(p.epoch) = epoch_now + 1u;
    return;
  }

  if (warp < kStat) {  // statistics of unit t, as soon as its chunks land
    Slot st;
    unsigned word_next = unit_word(p.x, 0, p.group_vecs);
    for (int t = 0; t < p.units; ++t) {
      // Sums of x - pivot, the unit's first element (every CTA's: its sums add up, no E[x^2] - mean^2
      // cancellation), loaded a unit ahead.
      const unsigned word = word_next;
      if (t + 1 < p.units) word_next = unit_word(p.x, t + 1, p.group_vecs);
      // d = x - pivot in x's type (a rounding of d, not of the sums), summed on the tensor cores: three
      // mma per warp-wide tile of 256 elements (v17d's FP32 sums: ~4 instructions an element, and the kernel was
      // latency-bound on its compute warps: ncu-v17/66d8bc0-c512_t9_128x128_contig.txt).
      const unsigned h = word & 0xffffu, piv2 = h | (h << 16);
      TileSums<T> tile;
      for (int k = 0; k < chunks; ++k) {
        mbar_wait(full + st.s, st.phase);
        const uint4* slot = ring + st.s * p.chunk_vecs;
        const int n = min(p.chunk_vecs, len - k * p.chunk_vecs);
        for_rounds<kStatThreads>(n, tid, [&](int base, int m, auto kk) {
          tile_round<T, decltype(kk)::value, kStatThreads>(tile, slot + base, m, tid, piv2);
        });
        st.next(p.ring_slots);
      }
      const float2 sq = tile.take();
      if (lane == 0) {
        const int b = t % kHeldPartBufs;
        mbar_wait(part_free + b, ((t / kHeldPartBufs) & 1) ^ 1u);  // the sync warp has read the buffer's last unit
        wpart[b][warp] = sq;
        mbar_arrive(part_ready + b);
        if (warp == 0 && t == 0) GN_TRACE(HeldTrace::kFirstStats);
      }
    }
    return;
  }

  // Apply warps: unit u once its coefficients are in, from the slots the statistics read, releasing each once every
  // apply warp is done with it: y stored to global memory, or (p.tma_store) written back into the slot for the copy
  // warp to store with TMA.
  const int g = tid - kStatThreads;
  uint4* y = static_cast<uint4*>(p.y);
  // kRegs: the unit's first `held` chunks move into registers as soon as this CTA's statistics have read them, and
  // their slots go back to the copy warp before the grid's exchange. Where the ring holds one slice and less than
  // two (17.8 MB groups), the next unit's copies then finish while this unit's exchange is still out, and the
  // exchange of the next unit overlaps this unit's apply, as a lag of one would.
  constexpr int kPer = kHeldRegVecs / kHeldRegChunks;  // a thread's vectors of a held chunk (the plan's promise)
  uint4 regs[kRegs ? kHeldRegVecs : 1];
  const int held = kRegs ? min(p.reg_chunks, chunks) : 0;
  Slot ap;
  for (int u = 0; u < p.units; ++u) {
    if constexpr (kRegs) {
      mbar_wait(part_ready + u % kHeldPartBufs, (u / kHeldPartBufs) & 1);  // the statistics are done with unit u
#pragma unroll
      for (int r = 0; r < kHeldRegChunks; ++r) {
        if (r < held) {
          mbar_wait(full + ap.s, ap.phase);  // complete: orders the TMA's writes for this warp
          const uint4* slot = ring + ap.s * p.chunk_vecs;
          const int n = min(p.chunk_vecs, len - r * p.chunk_vecs);
#pragma unroll
          for (int i = 0; i < kPer; ++i) {
            const int v = g + i * kApplyThreads;
            regs[r * kPer + i] = v < n ? slot[v] : make_uint4(0u, 0u, 0u, 0u);
          }
          __syncwarp();
          if (lane == 0) mbar_arrive(empty + ap.s);
          ap.next(p.ring_slots);
        }
      }
    }
    mbar_wait(&coef_ready, u & 1);
    const float4 k0 = coef[0], k1 = coef[1];
    __syncwarp();
    if (lane == 0) mbar_arrive(&coef_taken);
    uint4* dst = y + (static_cast<int64_t>(u) * p.group_vecs + lo);
    // The ring's chunks first, so that their slots go back as early as they can.
    for (int k = held; k < chunks; ++k) {
      mbar_wait(full + ap.s, ap.phase);  // long complete (the statistics waited on it): orders the TMA's writes
      uint4* slot = ring + ap.s * p.chunk_vecs;
      const int first = k * p.chunk_vecs;
      const int n = min(p.chunk_vecs, len - first);
      uint4* out = p.tma_store ? slot : dst + first;
      if constexpr (kRegs)  // chunks of kPer vectors a thread at most: one round
        apply_round<T, kPer, kApplyThreads, true>(slot, out, n, g, first, split, k0, k1);
      else if (!p.tma_store)
        for_rounds<kApplyThreads>(n, g, [&](int base, int m, auto kk) {
          apply_round<T, decltype(kk)::value, kApplyThreads, true>(slot + base, out + base, m, g, first + base,
                                                                   split, k0, k1);
        });
      else
        for_rounds<kApplyThreads>(n, g, [&](int base, int m, auto kk) {
          apply_round<T, decltype(kk)::value, kApplyThreads, false>(slot + base, out + base, m, g, first + base,
                                                                    split, k0, k1);
        });
      if (p.tma_store) asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // visible to the TMA store
      __syncwarp();
      if (lane == 0) mbar_arrive(empty + ap.s);
      ap.next(p.ring_slots);
    }
    if (g == 0 && u == 0) GN_TRACE(HeldTrace::kFirstApplied);
    if constexpr (kRegs) {
#pragma unroll
      for (int r = 0; r < kHeldRegChunks; ++r) {
        const int first = r * p.chunk_vecs, n = min(p.chunk_vecs, len - first);
#pragma unroll
        for (int i = 0; i < kPer; ++i) {
          const int v = g + i * kApplyThreads;
          if (r < held && v < n) {
            float f[VE];
            V::unpack(regs[r * kPer + i], f);
            silu_affine(f, first + v < split ? k0 : k1);
            __stcs(dst + first + v, V::pack(f));
          }
        }
      }
    }
  }
  if (g == 0) GN_TRACE(HeldTrace::kApplyDone);
#endif
}

template <typename T, int kStat, int kApply, bool kRegs = false>
cudaError_t launch_held_typed(const HeldParams& p, DType wb, cudaStream_t stream) {
  static size_t opted[64] = {};
  return launch_grid(gn_held_kernel<T, kStat, kApply, kRegs>, opted, p.ctas, (kStat + kApply) * 32 + 96,
                     static_cast<size_t>(p.ring_slots) * p.chunk_vecs * 16, true, stream, p, wb);
}

template <typename T>
cudaError_t launch_held_warps(const HeldParams& p, DType wb, cudaStream_t stream) {
  constexpr int S = kHeldStatWarps;
  if (p.reg_chunks > 0) return launch_held_typed<T, S, kHeldRegWarps, true>(p, wb, stream);  // the binding checks
  switch (p.warps) {
    case 8: return launch_held_typed<T, S, 8>(p, wb, stream);
    case 12: return launch_held_typed<T, S, 12>(p, wb, stream);
    default: return launch_held_typed<T, S, 16>(p, wb, stream);
  }
}

}  // namespace

cudaError_t launch_held(const HeldParams& p, DType x_dtype, DType wb_dtype, cudaStream_t stream) {
  switch (x_dtype) {
    case DType::kFP16: return launch_held_warps<__half>(p, wb_dtype, stream);
    case DType::kBF16: return launch_held_warps<__nv_bfloat16>(p, wb_dtype, stream);
    default: return cudaErrorInvalidValue;  // 16-bit x only (the binding checks)
  }
}

}  // namespace kda_gn
