// Shared between the CUDA kernel (gn_resident.cu, built by nvcc without torch headers, so it compiles fast) and the
// host binding (binding.cpp, built by the host compiler against torch).
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

namespace kda_gn {

enum class DType : int { kFP16 = 0, kBF16 = 1, kFP32 = 2 };

// One call of the resident kernel on a contiguous x [B, C, S] (S = product of the spatial dims). A unit is one
// (batch, group): CPG * S contiguous elements, seen as `group_vecs` 16-byte vectors. A team of `team_size` CTAs
// holds one unit at a time in shared memory (each member a slice of `chunk_vecs` vectors), so x is read from DRAM
// once; teams walk units team, team + teams, ...
struct Params {
  const void* x;
  void* y;                 // contiguous, x's shape and dtype
  const void* w;           // [C] or null
  const void* b;           // [C] or null
  float2* partials;        // [units][team_size]: (mean, M2) of each member's slice
  unsigned* counters;      // [units], zero before the launch when team_size > 1
  int group_vecs;          // 16-byte vectors per unit (< 2^31)
  int channel_vecs;        // 16-byte vectors per channel (S * elem / 16: a vector never spans two channels)
  int units;               // B * G
  int groups;              // G
  int cpg;                 // channels per group
  int team_size;
  int teams;               // grid = teams * team_size CTAs, all resident at once
  int chunk_vecs;          // vectors per member slice (the last members may hold fewer or none)
  int ring_vecs;           // shared-memory ring per CTA, in vectors: >= chunk_vecs
  float eps;
};

constexpr int kThreads = 512;
constexpr int kMaxTeam = 256;  // CTAs per team: the merge keeps kMaxTeam / 32 partials per lane in registers
constexpr int kMaxCpg = 1024;  // channels per group: the per-channel (scale, shift) table lives in shared memory

// Queues the kernel on `stream`; when team_size > 1, after a kernel that zeroes the counters, and cooperative (the
// members of a team wait for each other).
cudaError_t launch(const Params& p, DType x_dtype, DType wb_dtype, cudaStream_t stream);

}  // namespace kda_gn
