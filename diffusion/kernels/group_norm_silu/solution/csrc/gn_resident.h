// Shared between the CUDA kernels (gn_resident.cu, gn_held.cu: built by nvcc without torch headers, so they compile
// fast) and the host binding (binding.cpp, built by the host compiler against torch).
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

namespace kda_gn {

enum class DType : int { kFP16 = 0, kBF16 = 1, kFP32 = 2 };

// What every kernel's parameters start with: the tensors of one call on a contiguous x [B, C, S] and its units. A
// unit is one (batch, group): CPG * S contiguous elements, seen as `group_vecs` 16-byte vectors.
struct GroupCall {
  const void* x;
  void* y;                 // contiguous, x's shape and dtype
  const void* w;           // [C] or null
  const void* b;           // [C] or null
  int group_vecs;          // 16-byte vectors per unit (< 2^31)
  int channel_vecs;        // 16-byte vectors per channel (S * elem / 16: a vector never spans two channels)
  int units;               // B * G
  int groups;              // G
  int cpg;                 // channels per group
  float eps;
};

// One call of the resident kernel (S = product of the spatial dims). A team of `team_size` CTAs holds one unit at a
// time in shared memory (each member a slice of `chunk_vecs` vectors), so x is read from DRAM once; teams walk units
// team, team + teams, ...
struct Params : GroupCall {
  float2* partials;        // [units][team_size]: (mean, M2) of each member's slice
  unsigned* counters;      // [units]: arrivals, zero before the launch when team_size > 1; or, with `generations`,
                           // a persistent buffer of the device's, one generation per unit, advanced by each call
  int generations;         // v30: the members' partials tagged with their unit's generation (`partials` then holds
                           // 16 bytes a member: {mean, tag, M2, tag}) and polled, no arrival counted, so a call is
                           // one launch (0: arrivals counted in zeroed counters, a zeroing launch first)
  unsigned salt;           // v30: from the host call, in every tag
  int early_wb;            // v29: the unit's weight and bias loaded before the slice's wait (0: after its statistics)
  int team_size;
  int teams;               // grid = teams * team_size CTAs, all resident at once
  int chunk_vecs;          // vectors per member slice (the last members may hold fewer or none)
  int ring_vecs;           // shared-memory ring per CTA, in vectors: >= chunk_vecs
};

constexpr int kThreads = 512;
constexpr int kMaxTeam = 256;  // CTAs per team: the merge keeps kMaxTeam / 32 partials per lane in registers
constexpr int kMaxCpg = 1024;  // channels per group: the per-channel (scale, shift) table lives in shared memory

// Queues the kernel on `stream`; when team_size > 1, cooperative (the members of a team wait for each other) and,
// unless the counters are generations, after a kernel that zeroes them.
cudaError_t launch(const Params& p, DType x_dtype, DType wb_dtype, cudaStream_t stream);

// Queues a kernel that sets counters[0 .. n) to zero (the harness allows only the candidate's own kernels on its
// path, so no cudaMemsetAsync).
cudaError_t zero_counters(unsigned* counters, int n, cudaStream_t stream);

// v17: one call of the held kernel on a contiguous 16-bit x [B, C, S] too large to be held on chip whole, one unit
// (batch, group) at a time held across the whole grid instead. Each of `ctas` CTAs (one per SM, resident at once:
// a cooperative launch) owns vectors [i * slice_vecs, (i + 1) * slice_vecs) of every unit (the last CTA fewer, none
// empty, at most two channels each), copied by TMA in `chunks` chunks of up to `chunk_vecs` vectors into a ring of
// `ring_slots` chunk slots. A slice stays in the ring from its statistics until its apply, so x is read from DRAM
// once. The statistics run ahead of the apply as far as the ring allows, so the grid's exchange of unit u's statistics
// has the later units' work to arrive in; `lag` is the planner's promise that the ring holds lag + 1 slices.
struct HeldParams : GroupCall {
  uint4* partials;         // [units][ctas]: {s1, tag, s2, tag}: sums of x - pivot (the unit's first element) and of
                           // their squares over each CTA's slice (floats as bits)
  // A call's partials carry its tag, ((salt + epoch) << 1) | 1 (never 0): `salt` from the host call (unlike another
  // process's leftovers in the same memory), `epoch` read from device memory when the kernel starts and advanced by
  // CTA 0 once every CTA has read it (each has published a partial of the last unit). A tag from the host alone is
  // frozen into a CUDA graph: each replay found its last replay's partials in the same memory, under its own tag.
  unsigned salt;
  unsigned* epoch;
  int ctas;
  int slice_vecs;
  int chunks;
  int chunk_vecs;
  int ring_slots;
  int lag;
  int warps;               // apply warps: 8, 12 or 16 (with kHeldStatWarps statistics warps)
  int tma_store;           // 1: y written back into the ring and stored by TMA; 0: stored by the apply warps
  int reg_chunks;          // v20: a unit's first chunks the apply warps hold in registers from its statistics to its
                           // apply (0: none); at most kHeldRegVecs vectors a thread, at kHeldRegWarps apply warps
  int prefetch;            // v21: the copy warp prefetches x into the L2 this many chunks ahead of its copies (0: none)
};

// Per CTA: kHeldStatWarps statistics warps, 8, 12 or 16 apply warps (instantiations), a copy warp, a warp that
// publishes the CTA's partials and one that prepares the grid's coefficients.
constexpr int kHeldStatWarps = 4;
constexpr int kHeldMaxSlots = 64;
constexpr int kHeldMaxCtas = 256;                // the preparing warp merges up to 8 CTA partials per lane
constexpr int kHeldMaxLag = 7;
constexpr int kHeldUnroll = 4;                   // vectors per thread in a round of a chunk
constexpr int kHeldPartBufs = 8;                 // units of warp partials the statistics may run ahead of the publisher
constexpr int kHeldRegVecs = 8;                  // vectors an apply thread holds in registers (reg_chunks > 0),
constexpr int kHeldRegChunks = 4;                // of this many chunks at most (so chunk_vecs <= 2 a thread)
constexpr int kHeldRegWarps = 12;                // the apply warps of the instantiation that holds them

cudaError_t launch_held(const HeldParams& p, DType x_dtype, DType wb_dtype, cudaStream_t stream);

// The points of a held call a KDA_GN_TRACE build stamps per CTA (tools/held_trace.py reads them back).
enum class HeldTrace : int {
  kStart,            // the CTA began
  kReady,            // its barriers set up, the epoch read
  kRingIssued,       // the copy warp issued the copies that fill the ring
  kFirstStats,       // statistics warp 0 left unit 0
  kFirstPublished,   // the CTA's partial of unit 0 stored
  kFirstExchanged,   // every CTA's partial of unit 0 seen
  kFirstCoef,        // unit 0's coefficients out to the apply warps
  kFirstApplied,     // apply warp 0 done with unit 0's ring chunks
  kLastCopy,         // the copy warp issued its last copy
  kLastPublished,    // the CTA's partial of the last unit stored
  kLastExchanged,    // every CTA's partial of the last unit seen
  kApplyDone,        // apply warp 0 done with every unit
};
constexpr int kHeldTraceEvents = 12;
#ifdef KDA_GN_TRACE
cudaError_t held_trace_copy(unsigned long long* host);  // kHeldMaxCtas * kHeldTraceEvents stamps, nanoseconds
#endif

}  // namespace kda_gn
