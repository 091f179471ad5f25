"""Candidate for group_norm_silu: y = silu(GroupNorm(x; G, weight, bias, eps)), fp32 statistics, any x layout.

Six paths; `_plan` picks one per input signature (shape, strides, dtypes, device) and keeps it in `_plans`. Which
path serves which production rows, and what each one gains over the next simpler one, with the ledger entry and the
sweep that show it: solution/README.md. Everything tried and dropped is in docs/ledger.md.

- fused (Triton, one launch): one program per (batch, group), or several small groups per program, reads its group
  twice (statistics, then normalise + SiLU). Groups under 2^18 elements, and under 2^16 when there are fewer than
  256 (batch, group) programs.
- split (Triton, two or three launches): partial statistics per spatial chunk of a group, a finalize kernel merging
  them (or the apply programs merging them themselves when there are few), an apply pass over the same tiles in
  reverse order, so its first tiles are still in the L2. Larger groups, and the fallback of every path below.
- split_rows (Triton, two or three launches): the split pass for channels_last x with C and C / G powers of two,
  statistics over tiles of whole rows of C channels, apply over [channel block, rows] tiles.
- resident (CUDA, csrc/gn_resident.cu, one C++ launch): contiguous x of at most 30 MiB; a team of CTAs holds each
  (batch, group) in shared memory, so x is read from DRAM once.
- team (Triton, H100 only): contiguous 16-bit x of 128 MiB and more; a persistent cooperative grid of three or four
  teams, each on its own units, so a unit's apply re-reads x from the L2 while the other teams stream.
- held (CUDA, csrc/gn_held.cu, H200 only): contiguous 16-bit x of 96 MiB and more; one unit at a time held across
  the whole grid in TMA-filled shared-memory rings, x read once.

x is read in place through its strides, never copied; the output is contiguous, as upstream's is. No path takes
E[x^2] - mean^2 of raw values (cancellation when |mean| >> std): the Triton paths and the held kernel sum x - K and
(x - K)^2 about a pivot K (a first tile's mean, a unit's first element), the resident kernel takes a slice's mean and
then its M2; partials merge with Chan's formula. The team and held grids go out as cooperative launches: a GPU (or an
MPS share) that cannot hold the grid refuses it, and the call takes the plan's Triton fallback.

The constants below are the planner's parameters, each with the measurement behind its value; those mirrored from
csrc/gn_resident.h are the kernels' limits.
"""
import math

import torch
import triton
import triton.language as tl

from kda.runtime.cuda_ext import CudaExtension
from kda.runtime.lean_launch import LaunchCache, Plan, cdiv, next_pow2, resident_blocks

# The CUDA extension's paths (resident, held, and the device limits the team path reads) run from sm_90 on: its held
# kernel uses bulk copies and mbarrier transaction counts, and no path was measured on an older GPU. Below that (an
# A100, an L40S) every input takes the Triton plan. The sm_80/sm_89 builds still compile (kda rules).
_EXT_MIN_CAPABILITY = (9, 0)
_PLANS_MAX = 256  # plans kept (kda rules: bounded caches)
_EXT = CudaExtension("kda_group_norm_silu", __file__, "csrc", ("binding.cpp", "gn_resident.cu", "gn_held.cu"),
                     ("gn_resident.h", "gn_common.cuh"))

# --- fused: one launch ---------------------------------------------------------------------------------------------
_FUSED_MAX_GROUP = 1 << 18   # groups smaller than this: one program per group (one launch)
_TILE = 8192                 # elements per tile of the one-launch path
_FUSED_MIN_ELEMS = 4096      # groups smaller than this share a program
_FUSED_MIN_PROGRAMS = 256    # with fewer (batch, group) programs than this (about 2 per SM) ...
_FUSED_FEW_GROUPS_MAX = 1 << 16   # ... only groups under this size take the one-launch path (v3d: 2^15 -> 2^16;
# the split path's three launches cost ~38 us of host time per call against ~14 us for one, which set device_us on
# the 4-6 MB rows with 32-64 K-element groups; layout-sweep/82099b8-one-launch.json, ledger L0015)

# --- split: partial statistics, finalize (or merged in the apply), apply ------------------------------------------
# Layouts: (elements per apply tile, apply tiles per program, statistics tiles per program, statistics warps, apply
# warps); a program covers tile x tiles elements. H200 sweeps over the large VAE rows (docs/profile/h200/layout-sweep/):
# - one group's CPG channel runs per tile: small tiles (2048 x 8: 2.6 TB/s against 1.9 at 8192 x 2); v3c: 2048 x 4
#   0-6% ahead of 2048 x 8; v4: 8 warps in the apply pass, 4 in the statistics pass (0.5-2%, 0a338e8);
# - channels_last, a tile spanning every group: large tiles (8192 x 4: 1.6 TB/s against 0.6 at 2048 x 8);
# - v4, contiguous groups of at most _FLAT_MAX_CPG channels as one flat range (one contiguous run per tile, w and b
#   one scalar per tile): upstream's apply tiles (4096 x 2, 4 warps; 135 us against 143 for 2048 x 4 on
#   hyvae_c128_t17_256x256) and 1024-element statistics tiles (73 us against 78-95 for 2048-4096).
_SPLIT_CONTIGUOUS = (2048, 4, 4, 4, 8)
_SPLIT_CHANNEL_FAST = (8192, 4, 4, 8, 8)
_SPLIT_FLAT = (4096, 2, 8, 4, 4)
# v7: flat tiles for every group size (v4 had them up to 4 channels). H200 graph replay, 8/16-channel rows
# (layout-sweep/a50c8be-flat-all.json, ledger L0024): hyvae_c256_t5_96x256 64.7 -> 55.4 us, c512_t3_128x128
# 52.6 -> 46.5, c256_t17_96x256 177.5 -> 164.3, c256_t5_256x256 139.8 -> 130.2, c512_t9_128x128 126.3 -> 118.9.
_FLAT_MAX_CPG = 1 << 10
# v4: with at most this many partials per apply program (partials per group x groups per tile), the apply programs
# merge them themselves and the finalize launch goes: two launches instead of three on the rows whose time is host
# time (about 12 us per launch on an H200 host).
_MERGE_IN_APPLY_MAX = 512
# Otherwise a finalize kernel of one program per group merges them: partials per step (at most), warps. v9f: 4096
# and 8 (was 1024 and 4): the finalize kernel 3.4-4.0 -> 2.1-2.6 us on every channels_last row swept, H200
# torch.profiler in both orders (layout-sweep/6b2aad8-fin-ab1.json, -ab2.json, ledger L0055).
_FINALIZE = (4096, 8)

# --- split_rows: channels_last x, C and C / G powers of two --------------------------------------------------------
# v8: statistics over [rows, C] tiles of whole rows (contiguous reads; v7's [groups, channels, rows] tile needed 128
# registers a thread and ran at 24% occupancy), apply over [channel block, rows] tiles that write runs of rows of y.
# (statistics elements per lane and tile (sets the rows per tile), tiles per program (at most), 16-byte vectors per
# lane along a row (sets the warps); apply channels per tile, rows per tile, tiles per program, warps.) H100 sweeps,
# graph replay (docs/profile/h100/layout-sweep/330d064-rows.json, 5944fc2-rows.json, ledger L0025): 128 x 128 apply
# tiles of 8 warps best on every row above 100 MB (c256_t17_256x256 387 us against 412-414 for 64 x 64); statistics
# best at 128 elements per lane (c128_t17_256x256 107 us against 141 at 16 rows) and with at least 2048 programs
# (c256_t5_96x256 29 against 37 us at 512). On an H200 no other apply tile beat it (521a8af-rows-h200.json).
_ROWS_MAX_C = 4096
_SPLIT_ROWS = (128, 16, 1, 128, 128, 1, 8)
_ROWS_MIN_PROGRAMS = 2048    # statistics programs per batch below which a program takes fewer tiles
_ROWS_MERGE_MAX = 64         # with at most this many partials per group the apply programs merge them

# --- resident (CUDA): contiguous x up to _RESIDENT_MAX_BYTES ------------------------------------------------------
_RESIDENT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
# v5c: H200 sweep of every contiguous production row (layout-sweep/5053236-resident.json, ledger L0018): up to 28 MB
# the resident kernel beats the Triton paths by back-to-back time (0.42-0.90x: one C++ launch instead of Python +
# Triton's) and ties them by graph replay; from 31 MB on it is 4-45% slower by both (a team's round runs at ~2 TB/s).
_RESIDENT_MAX_BYTES = 30 << 20
_RESIDENT_RESERVE = 9 << 10       # bytes of shared memory left for the kernel's static arrays
_RESIDENT_MAX_TEAM = 256          # kMaxTeam and kMaxCpg of csrc/gn_resident.h
_RESIDENT_MAX_CPG = 1024
# The team size's cost model (resident_plan): a team's wait priced as 24 KB of one CTA's DRAM share (~0.75 us on an
# H200), and each round of a team (its load, statistics and apply one after the other) as 256 KB. v28, a round at
# 16384 vectors against 0 by graph replay (layout-sweep/fc3d26a-resident-gen.json, ledger L0090): one round of
# larger slices instead of two on the 18-31 MB rows, 10-16% faster (c512_t3_48x128 17.9 against 21.3 us), the same
# plans below.
_RESIDENT_BARRIER_VECS = 1536
_RESIDENT_ROUND_VECS = 16384

# --- team (Triton, H100): contiguous 16-bit x of _TEAM_MIN_BYTES and more ------------------------------------------
# v9: `teams` teams of programs; team t takes units (batch, group) t, t + teams, ...: each program reads its slice of
# the unit (statistics), the team waits on a counter, and each program re-reads its own slice, read moments before,
# from the L2 (apply). The grid is _TEAM_PER_SM programs per SM, fewer where the driver's occupancy calculator says
# the compiled kernel does not let an SM hold them (_team_fit, at plan time), so every program is resident at once
# (the waits would hang otherwise); several per SM because one 8-warp program per SM keeps too few bytes in flight.
# A GPU smaller at run time (an MPS share, a green context) refuses the cooperative launch, and the call takes the
# split path (_run_team). That launch costs 2-8% against a plain one on an H100 (layout-sweep/4f0ed7a-coop.json,
# ledger L0051), the price of never hanging on a shared GPU.
_TEAM_DTYPES = (torch.float16, torch.bfloat16)
# GPUs (a substring of the device name) where the team kernel beats the split path. On an H200 it lost to it on five
# of the six large contiguous rows, 1-13% by graph replay (layout-sweep/478e671-team.json, ledger L0047).
_TEAM_GPUS = ("H100",)
# H100 sweeps (docs/profile/h100/layout-sweep/3bc5d8a-team*.json, ledger L0037), graph replay against the split path:
# one team 13-87% slower; two 8% slower to 7% faster; three or four 5-13% faster (c512_t9_128x128: 4 in 20 MB, 148 us
# against 163; c256_t5_256x256: 3 in 20 MB, 162 against 177; c128_t17_256x256: 3 in 30 MB, 277 against 297); five
# to eight worse again. So three or four units in flight, in 20 MB where they fit, else in 30 MB, else the split path.
# Below _TEAM_MIN_BYTES of x (2.5 L2s) the split path's re-read is partly served by the L2 anyway, and the team kernel
# lost or tied there (c512_t3_128x128, 48 MB: 63.6 against 59.8 us).
_TEAM_MIN_BYTES = 128 << 20
_TEAM_L2_BYTES = 20 << 20      # x of the units in flight at once (H100 and H200 L2: 50 and 60 MiB)
_TEAM_L2_MAX_BYTES = 30 << 20
_TEAM_MIN_TEAMS = 3
_TEAM_MAX_TEAMS = 4
_TEAM_BLOCK = 4096             # elements per tile; a unit's channel length must be a multiple of it
_TEAM_WARPS = 8                # 48 registers a thread at 4096 x 8 warps under Triton 3.9: five programs fit an SM
_TEAM_PER_SM = 4

# --- held (CUDA, H200): contiguous 16-bit x of _HELD_MIN_BYTES and more -------------------------------------------
# v17-v21: each CTA owns a slice of every unit, copied by TMA into a shared-memory ring and kept there from its
# statistics to its apply; statistics warps run up to `lag` units ahead of the apply warps, so the grid's exchange of a
# unit's statistics (each CTA's partial, tagged by the call and a device epoch, polled by every CTA) has that much work
# to arrive in. 10-21% ahead of the split path by graph replay on the seven contiguous rows of 96 MB and more, behind it
# below (layout-sweep/956b206-held.json, 687eb84-held.json, ledger L0064); measured on no other GPU.
_HELD_DTYPES = (torch.float16, torch.bfloat16)
_HELD_GPUS = ("H200",)             # a substring of the device name
_HELD_MIN_BYTES = 96 << 20         # x: c128_t17_96x256 (102 MB) 8-10% ahead, c128_t17_256x80 (85 MB) even, less behind
_HELD_CHUNK_VECS = 2048            # 16-byte vectors per TMA copy at most (32 KB: d8b3336-held.json, 3-12% over 16 KB),
_HELD_UNROLL = 4                   # and at most this many per apply thread (kHeldUnroll: a round the kernel unrolls)
_HELD_SPARE_SLOTS = 2              # ring slots beyond the lag + 1 slices held, at least
_HELD_LAG = 2                      # units, at most (kHeldMaxLag); fewer where the ring cannot hold them. Since v19
                                   # the kernel runs its statistics as far ahead as the ring allows whatever the lag;
                                   # a lag of 0 only selects _HELD_NO_LAG's configuration
_HELD_WARPS = 12                   # apply warps per CTA: 8, 12 or 16 (the kernel's instantiations); 12 ahead of 8 by
                                   # 5-13% on three of four rows, 1% behind on one (eda1fe3-warps.json), and of 16 by
                                   # 0-12% (2afff74-held.json)
# (apply warps, copy size in vectors, chunks in registers at most) where the ring holds no lag (the 17.8 MB groups of
# c256_t17_256x256): v19 plain stores and 16 KB copies, 389.5 against v18's TMA stores at 418.1 us by graph replay
# (c3684b9-no-lag.json); v20 12 KB copies, the apply warps holding 4 of a unit's chunks in registers so that ring and
# registers hold two slices. Eight interleaved rounds by graph replay (ba752e3-no-lag-regs-rounds.json, ledger L0075):
# 333.3 us against v19's 373.6, 361.8 at 12 KB copies without registers, 350.0 with 2 chunks.
_HELD_NO_LAG = (12, 768, 4)
_HELD_REG_WARPS = 12               # kHeldRegWarps: the apply warps of the kernel that holds chunks in registers,
_HELD_REG_CHUNKS = 4               # kHeldRegChunks: the chunks it can hold, at most,
_HELD_REG_PER_THREAD = 2           # kHeldRegVecs / kHeldRegChunks: its vectors per thread of a held chunk, at most
# v21: x the copy warp prefetches into the L2 ahead of its copies, per CTA. 32 KB, five interleaved rounds by graph
# replay on the six large contiguous rows (960c43d-prefetch.json, ledger L0077): 0.8-4.4% faster on the five with a
# lag, 10.3% on the no-lag row; 64 KB a little behind it, 128 KB and more slower than none (the L2 evicts them).
_HELD_PREFETCH_BYTES = 32 << 10
_HELD_RESERVE = 3 << 10            # bytes of shared memory left for the kernel's static arrays (2176 under nvcc 13)
_HELD_MAX_SLOTS = 64               # kHeldMaxSlots, kHeldMaxCtas, kHeldMaxLag of csrc/gn_resident.h
_HELD_MAX_CTAS = 256
_HELD_MAX_LAG = 7


def _prev_power_of_2(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


@triton.jit
def _merge(n_a, mean_a, m2_a, n_b, mean_b, m2_b):
    """Chan et al.: merge two (count, mean, M2) summaries; empty summaries (count 0) are neutral."""
    n = n_a + n_b
    frac = tl.where(n > 0, n_b / tl.maximum(n, 1.0), 0.0)
    delta = mean_b - mean_a
    mean = mean_a + delta * frac
    m2 = m2_a + m2_b + delta * delta * n_a * frac
    return n, mean, m2


@triton.jit
def _channels(g0, G, CPG, GPB: tl.constexpr, CPB: tl.constexpr):
    """Channel index [GPB, CPB, 1] of the tile's groups g0 .. g0 + GPB - 1, and which of them exist."""
    g = g0 + tl.arange(0, GPB)[:, None, None]
    c = tl.arange(0, CPB)[None, :, None]
    return g * CPG + c, (g < G) & (c < CPG)


@triton.jit
def _spatial(s0, S, S2, S3, ss1, ss2, ss3, BLOCK_S: tl.constexpr, COLLAPSED: tl.constexpr):
    """Spatial index [1, 1, BLOCK_S] from s0, its offset in x, and whether it exists."""
    s = s0 + tl.arange(0, BLOCK_S)[None, None, :]
    if COLLAPSED:
        xs = s * ss3
    else:
        xs = (s // (S2 * S3)) * ss1 + ((s // S3) % S2) * ss2 + (s % S3) * ss3
    return s, xs, s < S


@triton.jit
def _range_stats(x_base, g0, s_begin, s_end, G, CPG, S2, S3, sxc, ss1, ss2, ss3,
                 GPB: tl.constexpr, CPB: tl.constexpr, BLOCK_S: tl.constexpr, COLLAPSED: tl.constexpr):
    """(count, mean, M2) of each of the GPB groups from g0 over spatial positions s_begin .. s_end - 1
    (s_begin < s_end). The first tile's mean is the pivot K; the loop accumulates x - K and (x - K)^2 per lane (no
    reduction inside the loop), so E[(x-K)^2] - E[x-K]^2 cancels nothing as long as K is near the mean. When one
    tile covers the whole range, this is the exact two-pass formula over registers."""
    ch, cmask = _channels(g0, G, CPG, GPB, CPB)
    x_ch = x_base + ch * sxc
    s, xs, smask = _spatial(s_begin, s_end, S2, S3, ss1, ss2, ss3, BLOCK_S, COLLAPSED)
    mask = cmask & smask
    x = tl.load(x_ch + xs, mask=mask, other=0.0).to(tl.float32)
    cnt0 = CPG * tl.minimum(s_end - s_begin, BLOCK_S)
    pivot = tl.sum(tl.sum(x, axis=2), axis=1) / cnt0
    pivot3 = pivot[:, None, None]
    acc1 = tl.where(mask, x - pivot3, 0.0)
    acc2 = acc1 * acc1
    for s0 in range(s_begin + BLOCK_S, s_end, BLOCK_S):
        s, xs, smask = _spatial(s0, s_end, S2, S3, ss1, ss2, ss3, BLOCK_S, COLLAPSED)
        mask = cmask & smask
        x = tl.load(x_ch + xs, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - pivot3, 0.0)
        acc1 += d
        acc2 += d * d
    n = (CPG * (s_end - s_begin)).to(tl.float32)
    s1 = tl.sum(tl.sum(acc1, axis=2), axis=1)
    s2 = tl.sum(tl.sum(acc2, axis=2), axis=1)
    mean = pivot + s1 / n
    m2 = tl.maximum(s2 - s1 * (s1 / n), 0.0)
    return n, mean, m2


@triton.jit
def _norm_silu(x, mean, rstd, w, b, HAS_W: tl.constexpr, HAS_B: tl.constexpr):
    """silu(((x - mean) * rstd) * w + b) in fp32 (w, b ignored when absent). Same rounding order as the math: folding
    rstd * w first is cheaper by one multiply but rounds differently, which shows when |w| is large and z cancels."""
    z = (x - mean) * rstd
    if HAS_W:
        z = z * w
    if HAS_B:
        z = z + b
    return z * tl.sigmoid(z)


@triton.jit
def _range_apply(x_base, y_base, g0, s_begin, s_end, G, CPG, S, S2, S3, sxc, ss1, ss2, ss3,
                 mean, rstd, w_ptr, b_ptr, S_CH,
                 GPB: tl.constexpr, CPB: tl.constexpr, BLOCK_S: tl.constexpr, COLLAPSED: tl.constexpr,
                 HAS_W: tl.constexpr, HAS_B: tl.constexpr, FLAT: tl.constexpr, EVICT: tl.constexpr):
    """y = silu((x - mean[g]) * (rstd[g] * w[c]) + b[c]) over s_begin .. s_end - 1, stored contiguous.

    FLAT: each group is one contiguous range seen as a single channel of CPG * S_CH positions, and no tile straddles
    two real channels (S_CH is a multiple of BLOCK_S): w and b are one scalar per tile."""
    ch, cmask = _channels(g0, G, CPG, GPB, CPB)
    w3 = 1.0  # placeholders when there is no weight or bias (_norm_silu ignores them)
    b3 = 0.0
    if not FLAT:
        if HAS_W:
            w3 = tl.load(w_ptr + ch, mask=cmask, other=1.0).to(tl.float32)
        if HAS_B:
            b3 = tl.load(b_ptr + ch, mask=cmask, other=0.0).to(tl.float32)
    mean3 = mean[:, None, None]
    rstd3 = rstd[:, None, None]
    x_ch = x_base + ch * sxc
    y_ch = y_base + ch * S
    for s0 in range(s_begin, s_end, BLOCK_S):
        s, xs, smask = _spatial(s0, s_end, S2, S3, ss1, ss2, ss3, BLOCK_S, COLLAPSED)
        mask = cmask & smask
        # Last use of x and the only use of y: neither should push tiles still to be re-read out of L2. Only on the
        # one-launch path: the split path's apply pass streams 1-5% faster without the hints (0999d99 sweep).
        if EVICT:
            x = tl.load(x_ch + xs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        else:
            x = tl.load(x_ch + xs, mask=mask, other=0.0).to(tl.float32)
        wt, bt = w3, b3
        if FLAT:
            c = g0 * (S // S_CH) + s0 // S_CH
            if HAS_W:
                wt = tl.load(w_ptr + c).to(tl.float32)
            if HAS_B:
                bt = tl.load(b_ptr + c).to(tl.float32)
        y = _norm_silu(x, mean3, rstd3, wt, bt, HAS_W, HAS_B)
        if EVICT:
            tl.store(y_ch + s, y.to(y_base.dtype.element_ty), mask=mask, eviction_policy="evict_first")
        else:
            tl.store(y_ch + s, y.to(y_base.dtype.element_ty), mask=mask)


@triton.jit
def _batch_bases(x_ptr, y_ptr, bidx, sxb, CS, WIDE: tl.constexpr):
    if WIDE:
        return x_ptr + bidx.to(tl.int64) * sxb, y_ptr + bidx.to(tl.int64) * CS
    return x_ptr + bidx * sxb, y_ptr + bidx * CS


@triton.jit
def _gn_silu_fused_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr,
    G, C, S, CPG, S2, S3, sxb, sxc, ss1, ss2, ss3, NGB, eps,
    GPB: tl.constexpr, CPB: tl.constexpr, BLOCK_S: tl.constexpr, COLLAPSED: tl.constexpr, WIDE: tl.constexpr,
    HAS_W: tl.constexpr, HAS_B: tl.constexpr,
):
    """Program b * NGB + gb: groups gb*GPB .. +GPB of batch b, whole: statistics, then normalise + SiLU."""
    pid = tl.program_id(0)
    bidx = pid // NGB
    g0 = (pid % NGB) * GPB
    x_base, y_base = _batch_bases(x_ptr, y_ptr, bidx, sxb, C * S, WIDE)
    n, mean, m2 = _range_stats(x_base, g0, 0, S, G, CPG, S2, S3, sxc, ss1, ss2, ss3,
                               GPB, CPB, BLOCK_S, COLLAPSED)
    rstd = tl.rsqrt(m2 / n + eps)
    _range_apply(x_base, y_base, g0, 0, S, G, CPG, S, S2, S3, sxc, ss1, ss2, ss3, mean, rstd, w_ptr, b_ptr, S,
                 GPB, CPB, BLOCK_S, COLLAPSED, HAS_W, HAS_B, False, True)


@triton.jit
def _gn_partial_stats_kernel(
    x_ptr, pmean_ptr, pm2_ptr,
    G, C, S, CPG, S2, S3, sxb, sxc, ss1, ss2, ss3, NGB, NP, SPAN,
    GPB: tl.constexpr, CPB: tl.constexpr, BLOCK_S: tl.constexpr, COLLAPSED: tl.constexpr, WIDE: tl.constexpr,
):
    """Program (p, b * NGB + gb): groups gb*GPB .. +GPB of batch b over spatial chunk p (SPAN positions); writes
    the chunk's (mean, M2) of each group to partials[(b * G + g) * NP + p]."""
    p = tl.program_id(0)
    bg = tl.program_id(1)
    bidx = bg // NGB
    g0 = (bg % NGB) * GPB
    x_base, y_base = _batch_bases(x_ptr, x_ptr, bidx, sxb, 0, WIDE)
    s_begin = p * SPAN
    n, mean, m2 = _range_stats(x_base, g0, s_begin, tl.minimum(s_begin + SPAN, S), G, CPG, S2, S3, sxc,
                               ss1, ss2, ss3, GPB, CPB, BLOCK_S, COLLAPSED)
    g = g0 + tl.arange(0, GPB)
    idx = (bidx * G + g) * NP + p
    tl.store(pmean_ptr + idx, mean, mask=g < G)
    tl.store(pm2_ptr + idx, m2, mask=g < G)


@triton.jit
def _merge_partials(pmean_ptr, pm2_ptr, rows, rmask, S, CPG, NP, SPAN, eps, R: tl.constexpr, PBLOCK: tl.constexpr):
    """(mean, rstd) of the R groups `rows` (b * G + g; those outside rmask get anything) from their NP partial
    (mean, M2) each: PBLOCK partials at a time merged in one step, blocks merged with Chan's formula."""
    n = tl.zeros([R], dtype=tl.float32)
    mean = tl.zeros([R], dtype=tl.float32)
    m2 = tl.zeros([R], dtype=tl.float32)
    for p0 in range(0, NP, PBLOCK):
        p = p0 + tl.arange(0, PBLOCK)[None, :]
        pmask = (p < NP) & rmask[:, None]
        idx = rows[:, None] * NP + p
        pm = tl.load(pmean_ptr + idx, mask=pmask, other=0.0)
        pv = tl.load(pm2_ptr + idx, mask=pmask, other=0.0)
        pn = tl.where(pmask, (CPG * tl.maximum(tl.minimum(S - p * SPAN, SPAN), 0)).to(tl.float32), 0.0)
        bn = tl.sum(pn, axis=1)
        bmean = tl.sum(pn * pm, axis=1) / tl.maximum(bn, 1.0)
        dm = tl.where(pn > 0, pm - bmean[:, None], 0.0)
        bm2 = tl.sum(pv, axis=1) + tl.sum(pn * dm * dm, axis=1)
        n, mean, m2 = _merge(n, mean, m2, bn, bmean, bm2)
    return mean, tl.rsqrt(m2 / tl.maximum(n, 1.0) + eps)


@triton.jit
def _gn_finalize_kernel(pmean_ptr, pm2_ptr, stats_ptr, S, CPG, NP, SPAN, eps, PBLOCK: tl.constexpr):
    """Program r = b * G + g: merges the NP partials of group r into (mean, rstd)."""
    r = tl.program_id(0) + tl.arange(0, 1)
    mean, rstd = _merge_partials(pmean_ptr, pm2_ptr, r, r >= 0, S, CPG, NP, SPAN, eps, 1, PBLOCK)
    tl.store(stats_ptr + r * 2, mean)
    tl.store(stats_ptr + r * 2 + 1, rstd)


@triton.jit
def _gn_apply_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, stats_ptr, pmean_ptr, pm2_ptr,
    G, C, S, CPG, S2, S3, sxb, sxc, ss1, ss2, ss3, NGB, SPAN, S_CH, NP, eps,
    GPB: tl.constexpr, CPB: tl.constexpr, BLOCK_S: tl.constexpr, COLLAPSED: tl.constexpr, WIDE: tl.constexpr,
    HAS_W: tl.constexpr, HAS_B: tl.constexpr, FLAT: tl.constexpr, MERGE: tl.constexpr, PBLOCK: tl.constexpr,
):
    """MERGE: each program merges its groups' NP partials itself (no finalize launch: one launch less of host
    time, for few partials); otherwise (mean, rstd) come from stats_ptr."""
    # Programs run in the reverse order of the statistics pass, so the first tiles re-read are the ones that pass
    # read last and that are still in L2 (up to ~50 MB of x on an H200 is served from there, not DRAM).
    p = tl.num_programs(0) - 1 - tl.program_id(0)
    bg = tl.num_programs(1) - 1 - tl.program_id(1)
    bidx = bg // NGB
    g0 = (bg % NGB) * GPB
    x_base, y_base = _batch_bases(x_ptr, y_ptr, bidx, sxb, C * S_CH, WIDE)
    g = g0 + tl.arange(0, GPB)
    gmask = g < G
    if MERGE:
        mean, rstd = _merge_partials(pmean_ptr, pm2_ptr, bidx * G + g, gmask, S, CPG, NP, SPAN, eps, GPB, PBLOCK)
    else:
        mean = tl.load(stats_ptr + (bidx * G + g) * 2, mask=gmask, other=0.0)
        rstd = tl.load(stats_ptr + (bidx * G + g) * 2 + 1, mask=gmask, other=0.0)
    s_begin = p * SPAN
    _range_apply(x_base, y_base, g0, s_begin, tl.minimum(s_begin + SPAN, S), G, CPG, S, S2, S3, sxc, ss1, ss2,
                 ss3, mean, rstd, w_ptr, b_ptr, S_CH, GPB, CPB, BLOCK_S, COLLAPSED, HAS_W, HAS_B, FLAT, False)


@triton.jit
def _rows_tile(x_base, s0, s_end, ss, C: tl.constexpr, BLOCK_S: tl.constexpr, WIDE: tl.constexpr):
    """Rows s0 .. s0 + BLOCK_S - 1 (those before s_end) of C contiguous channels at row stride ss, in fp32 (0 past
    s_end), and which of them exist."""
    s = s0 + tl.arange(0, BLOCK_S)[:, None]
    c = tl.arange(0, C)[None, :]
    mask = (s < s_end) & (c < C)
    if WIDE:
        s = s.to(tl.int64)
    return tl.load(x_base + s * ss + c, mask=mask, other=0.0).to(tl.float32), mask


@triton.jit
def _gn_rows_partial_stats_kernel(
    x_ptr, pmean_ptr, pm2_ptr,
    G, S, sxb, ss, NP, SPAN,
    C: tl.constexpr, CPG: tl.constexpr, BLOCK_S: tl.constexpr, WIDE: tl.constexpr,
):
    """v8, channels_last: x of batch b is S rows of C contiguous channels (row stride ss). Program (p, b): every
    group over rows p*SPAN .. +SPAN in [BLOCK_S, C] tiles of whole rows. Launched with as few warps as cover one
    row (16 bytes a lane), so a lane holds the same channels of every row of a tile and the column sums of x - K_c
    and (x - K_c)^2 (K_c: the first tile's channel mean) are taken in registers every tile: no per-element
    accumulators, registers left for loads in flight. Then (mean, M2) per channel, merged into each group's (equal
    counts: M2 = sum M2_c + n_c sum (mean_c - mean)^2). Writes partials[(b * G + g) * NP + p] as the other split
    paths do."""
    p = tl.program_id(0)
    bidx = tl.program_id(1)
    x_base, _ = _batch_bases(x_ptr, x_ptr, bidx, sxb, 0, WIDE)
    s_begin = p * SPAN
    s_end = tl.minimum(s_begin + SPAN, S)
    x, mask = _rows_tile(x_base, s_begin, s_end, ss, C, BLOCK_S, WIDE)
    n0 = tl.minimum(s_end - s_begin, BLOCK_S).to(tl.float32)
    pivot = tl.sum(x, axis=0) / n0
    d = tl.where(mask, x - pivot[None, :], 0.0)
    s1 = tl.sum(d, axis=0)
    s2 = tl.sum(d * d, axis=0)
    for s0 in range(s_begin + BLOCK_S, s_end, BLOCK_S):
        x, mask = _rows_tile(x_base, s0, s_end, ss, C, BLOCK_S, WIDE)
        d = tl.where(mask, x - pivot[None, :], 0.0)
        s1 += tl.sum(d, axis=0)
        s2 += tl.sum(d * d, axis=0)
    n_c = (s_end - s_begin).to(tl.float32)
    mean_c = tl.reshape(pivot + s1 / n_c, (C // CPG, CPG))
    m2_c = tl.reshape(tl.maximum(s2 - s1 * (s1 / n_c), 0.0), (C // CPG, CPG))
    mean = tl.sum(mean_c, axis=1) / CPG
    dm = mean_c - mean[:, None]
    m2 = tl.sum(m2_c, axis=1) + n_c * tl.sum(dm * dm, axis=1)
    g = tl.arange(0, C // CPG)
    idx = (bidx * G + g) * NP + p
    tl.store(pmean_ptr + idx, mean)
    tl.store(pm2_ptr + idx, m2)


@triton.jit
def _gn_rows_apply_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, stats_ptr, pmean_ptr, pm2_ptr,
    G, C, S, CPG, sxb, ss, NP, SPAN, TILES, eps,
    CBLK: tl.constexpr, BLOCK_S: tl.constexpr, WIDE: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
    MERGE: tl.constexpr, PBLOCK: tl.constexpr,
):
    """v8, channels_last: program (cb, t, b) normalises channels cb*CBLK .. +CBLK of rows t*TILES*BLOCK_S .. in
    [CBLK, BLOCK_S] tiles: reads runs of CBLK channels, writes runs of BLOCK_S positions of the contiguous y (the
    transpose goes through shared memory). Channel blocks are the fastest grid axis, so neighbouring programs read
    the same rows of x. MERGE: each program merges its channels' groups' NP partials itself."""
    cb = tl.program_id(0)
    # Row blocks in the reverse order of the statistics pass: the rows it read last are still in L2.
    t = tl.num_programs(1) - 1 - tl.program_id(1)
    bidx = tl.program_id(2)
    x_base, y_base = _batch_bases(x_ptr, y_ptr, bidx, sxb, C * S, WIDE)
    c = cb * CBLK + tl.arange(0, CBLK)
    rows = bidx * G + c // CPG
    if MERGE:
        mean, rstd = _merge_partials(pmean_ptr, pm2_ptr, rows, c < C, S, CPG, NP, SPAN, eps, CBLK, PBLOCK)
    else:
        mean = tl.load(stats_ptr + rows * 2)
        rstd = tl.load(stats_ptr + rows * 2 + 1)
    mean2 = mean[:, None]
    rstd2 = rstd[:, None]
    w2 = 1.0  # placeholders when there is no weight or bias (_norm_silu ignores them)
    b2 = 0.0
    if HAS_W:
        w2 = tl.load(w_ptr + c).to(tl.float32)[:, None]
    if HAS_B:
        b2 = tl.load(b_ptr + c).to(tl.float32)[:, None]
    c2 = c[:, None]
    if WIDE:
        c2 = c2.to(tl.int64)
    for i in range(TILES):
        s = (t * TILES + i) * BLOCK_S + tl.arange(0, BLOCK_S)[None, :]
        mask = (s < S) & (c2 < C)
        if WIDE:
            s = s.to(tl.int64)
        x = tl.load(x_base + s * ss + c2, mask=mask, other=0.0).to(tl.float32)
        y = _norm_silu(x, mean2, rstd2, w2, b2, HAS_W, HAS_B)
        tl.store(y_base + c2 * S + s, y.to(y_base.dtype.element_ty), mask=mask)


@triton.jit
def _apply_tile(x_ptr, w_ptr, b_ptr, y_ptr, base, off, g, CPG, S, mean, rstd, BLOCK: tl.constexpr,
                HAS_W: tl.constexpr, HAS_B: tl.constexpr):
    """y = silu(norm(x)) over the BLOCK elements at base + off of a contiguous unit of group g: one channel's run
    (S a multiple of BLOCK), so one weight and one bias; x read with evict_first, as is y written (both are done)."""
    lanes = tl.arange(0, BLOCK)
    c = g * CPG + off // S
    w = 1.0
    b = 0.0
    if HAS_W:
        w = tl.load(w_ptr + c).to(tl.float32)
    if HAS_B:
        b = tl.load(b_ptr + c).to(tl.float32)
    v = tl.load(x_ptr + base + off + lanes, eviction_policy="evict_first").to(tl.float32)
    y = _norm_silu(v, mean, rstd, w, b, HAS_W, HAS_B)
    tl.store(y_ptr + base + off + lanes, y.to(y_ptr.dtype.element_ty), eviction_policy="evict_first")


@triton.jit
def _team_arrive(x_ptr, part_ptr, cnt_ptr, u, M, lo, n_tiles, rank, TEAM: tl.constexpr, BLOCK: tl.constexpr):
    """A team member's statistics of unit u: sums of x - K over its slice (K, the unit's first element, returned),
    stored as its partial, then its arrival at the unit's counter."""
    base = u.to(tl.int64) * M
    lanes = tl.arange(0, BLOCK)
    pivot = tl.load(x_ptr + base).to(tl.float32)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    acc2 = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(0, n_tiles):
        v = tl.load(x_ptr + base + lo + i * BLOCK + lanes, eviction_policy="evict_last").to(tl.float32) - pivot
        acc += v
        acc2 += v * v
    slot = (u * TEAM + rank) * 2
    tl.store(part_ptr + slot, tl.sum(acc, axis=0))
    tl.store(part_ptr + slot + 1, tl.sum(acc2, axis=0))
    # Whichever threads stored the partials, the CTA barrier orders their stores before the release.
    tl.debug_barrier()
    tl.atomic_add(cnt_ptr + u, 1, sem="release")
    return pivot


@triton.jit
def _team_finish(x_ptr, w_ptr, b_ptr, y_ptr, part_ptr, cnt_ptr, done_ptr, u, pivot, G, CPG, M, S, lo, n_tiles, eps,
                 TEAM: tl.constexpr, TEAM_P2: tl.constexpr, BLOCK: tl.constexpr, HAS_W: tl.constexpr,
                 HAS_B: tl.constexpr):
    """A team member's wait for every partial of unit u, the unit's (mean, rstd), and the apply over its slice, read
    again (from the L2, newest tiles first). The last member to read the partials returns the counters to zero."""
    base = u.to(tl.int64) * M
    seen = tl.atomic_add(cnt_ptr + u, 0, sem="acquire")
    while seen < TEAM:
        seen = tl.atomic_add(cnt_ptr + u, 0, sem="acquire")
    # The acquire before every thread's loads of the team's partials.
    tl.debug_barrier()
    r = tl.arange(0, TEAM_P2)
    rmask = r < TEAM
    s1 = tl.sum(tl.load(part_ptr + (u * TEAM + r) * 2, mask=rmask, other=0.0, cache_modifier=".cg"), axis=0)
    s2 = tl.sum(tl.load(part_ptr + (u * TEAM + r) * 2 + 1, mask=rmask, other=0.0, cache_modifier=".cg"), axis=0)
    d = s1 / M
    mean = pivot + d
    rstd = 1.0 / tl.sqrt(tl.maximum(s2 / M - d * d, 0.0) + eps)
    if tl.atomic_add(done_ptr + u, 1, sem="acq_rel") == TEAM - 1:
        tl.atomic_xchg(cnt_ptr + u, 0)
        tl.atomic_xchg(done_ptr + u, 0)
    for i in range(0, n_tiles):
        _apply_tile(x_ptr, w_ptr, b_ptr, y_ptr, base, lo + (n_tiles - 1 - i) * BLOCK, u % G, CPG, S, mean, rstd,
                    BLOCK, HAS_W, HAS_B)


@triton.jit
def _gn_team_kernel(x_ptr, w_ptr, b_ptr, y_ptr, part_ptr, cnt_ptr, done_ptr,
                    U, G, CPG, M, S, SLICE, eps,
                    TEAM: tl.constexpr, TEAMS: tl.constexpr, TEAM_P2: tl.constexpr, BLOCK: tl.constexpr,
                    HAS_W: tl.constexpr, HAS_B: tl.constexpr):
    """v9: teams of programs over units of M contiguous elements (one batch's group; channels of S elements, S a
    multiple of BLOCK). Statistics are sums of x - K, K the unit's first element (no E[x^2] - mean^2 cancellation
    when |mean| >> std).

    Teams are runs of block indices, which the block scheduler spreads over the SMs, so every SM holds a member of
    each team and a team waiting at its counter leaves no SM idle. (v9b took places by a ticket drawn at start, which
    would never hang on a GPU that holds fewer programs than the grid; the tickets went out SM by SM, teams landed on
    a quarter of the SMs each, and c512_t9_128x128 took 161 us instead of 148: layout-sweep/64d2c0b-team.json.)"""
    pid = tl.program_id(0)
    team = pid // TEAM
    rank = pid % TEAM
    lo = rank * SLICE
    hi = tl.minimum(lo + SLICE, M)
    n_tiles = tl.maximum(hi - lo, 0) // BLOCK
    n_units = (U - team + TEAMS - 1) // TEAMS
    for k in range(0, n_units):
        u = team + k * TEAMS
        pivot = _team_arrive(x_ptr, part_ptr, cnt_ptr, u, M, lo, n_tiles, rank, TEAM, BLOCK)
        _team_finish(x_ptr, w_ptr, b_ptr, y_ptr, part_ptr, cnt_ptr, done_ptr, u, pivot, G, CPG, M, S, lo,
                     n_tiles, eps, TEAM, TEAM_P2, BLOCK, HAS_W, HAS_B)


@triton.jit
def _zero_kernel(p_ptr, N, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(p_ptr + i, tl.zeros([BLOCK], dtype=tl.int32), mask=i < N)


def _spatial_layout(x):
    """(S2, S3, ss1, ss2, ss3, collapsed): the spatial dims of x merged where memory allows, as at most three
    (sizes S1 x S2 x S3, strides ss1, ss2, ss3); collapsed means one dim (index s at stride ss3)."""
    dims = [(n, st) for n, st in zip(x.shape[2:], x.stride()[2:]) if n != 1]
    merged = []
    for n, st in dims:
        if merged and merged[-1][1] == st * n:
            merged[-1] = (merged[-1][0] * n, st)
        else:
            merged.append((n, st))
    if len(merged) <= 1:
        st = merged[0][1] if merged else 1
        return 1, 1, 0, 0, st, True
    if len(merged) > 3:
        raise ValueError(f"x of shape {tuple(x.shape)} and strides {x.stride()}: more than three spatial dims "
                         f"that do not merge")
    while len(merged) < 3:
        merged.insert(0, (1, 0))
    (_, st1), (n2, st2), (n3, st3) = merged
    return n2, n3, st1, st2, st3, False


def resident_plan(units, group_elems, channel_elems, elem, sms, smem_optin):
    """(team_size, teams, chunk_vecs, ring_vecs) for the resident kernel, or None when it cannot hold a group.

    A unit (one batch's group, `group_elems` contiguous elements) is split over a team of `team_size` CTAs, one per
    SM, each holding a slice of `chunk_vecs` 16-byte vectors in a shared-memory ring of `ring_vecs`. The team size
    minimises one CTA's work: rounds x (slice + the part of the next slice that cannot load before the wait + the
    wait itself when the team has more than one member + a round's fixed cost)."""
    if (channel_elems * elem) % 16 or group_elems * elem >= 16 * 2**31 or units < 1 \
            or group_elems // channel_elems > _RESIDENT_MAX_CPG:
        return None
    group_vecs = group_elems * elem // 16
    budget = (smem_optin - _RESIDENT_RESERVE) // 16
    best = None
    for k in range(1, min(sms, _RESIDENT_MAX_TEAM) + 1):
        chunk = cdiv(group_vecs, k)
        if chunk > budget:
            continue
        teams = min(sms // k, units)
        cost = cdiv(units, teams) * (chunk + max(0, 2 * chunk - budget) + (_RESIDENT_BARRIER_VECS if k > 1 else 0)
                                     + _RESIDENT_ROUND_VECS)
        if best is None or cost < best[0]:
            best = (cost, k, teams, chunk)
    if best is None:
        return None
    _, k, teams, chunk = best
    return k, teams, chunk, min(budget, 2 * chunk)


def held_plan(units, group_elems, channel_elems, elem, sms, smem_optin):
    """(ctas, slice_vecs, chunks, chunk_vecs, ring_slots, lag, warps, tma_store, reg_chunks, prefetch) for the held
    kernel, or None when it cannot take x. tma_store is always 0: the apply warps store y (the kernel's mode that
    stores it from the ring with TMA, v18, lost to plain stores: ledger L0066, L0071).

    One CTA per SM, each owning `slice_vecs` 16-byte vectors of every unit (one batch's group, `group_elems`
    contiguous elements; the last CTA fewer, none empty), a multiple of 32 vectors so that every copy starts on a
    512-byte boundary, and at most one channel long so that a slice spans at most two channels. A slice is copied in
    `chunks` near-equal chunks of `chunk_vecs` (at most _HELD_CHUNK_VECS, and _HELD_UNROLL per apply thread) into a
    ring of `ring_slots` chunk slots, which must hold lag + 1 slices and _HELD_SPARE_SLOTS more; the lag is the
    largest up to _HELD_LAG that fits. Where none fits, the kernel runs as _HELD_NO_LAG says, its apply warps holding
    `reg_chunks` of each unit's chunks in registers: as many as ring and registers need to hold two slices and
    _HELD_SPARE_SLOTS more, up to _HELD_NO_LAG's last entry and _HELD_REG_CHUNKS (16-bit x, chunks of
    _HELD_REG_PER_THREAD vectors a thread at most). The copy warp prefetches `prefetch` chunks ahead into the L2
    (_HELD_PREFETCH_BYTES, rounded up to whole chunks)."""
    if (channel_elems * elem) % 16 or units < 1 or sms < 1 or group_elems * elem >= 16 * 2**31:
        return None
    group_vecs, channel_vecs = group_elems * elem // 16, channel_elems * elem // 16
    slice_vecs = cdiv(cdiv(group_vecs, min(sms, _HELD_MAX_CTAS)), 32) * 32
    ctas = cdiv(group_vecs, slice_vecs)
    if slice_vecs > channel_vecs:
        return None

    def geometry(warps, most=_HELD_CHUNK_VECS):
        chunks = cdiv(slice_vecs, min(most, warps * 32 * _HELD_UNROLL))
        chunk_vecs = cdiv(cdiv(slice_vecs, chunks), 32) * 32
        ring_slots = min(_HELD_MAX_SLOTS, (smem_optin - _HELD_RESERVE) // (16 * chunk_vecs))
        lag = min(_HELD_LAG, _HELD_MAX_LAG, (ring_slots - _HELD_SPARE_SLOTS) // chunks - 1)
        return chunks, chunk_vecs, ring_slots, lag

    warps, reg_chunks = _HELD_WARPS, 0
    chunks, chunk_vecs, ring_slots, lag = geometry(warps)
    if lag == 0:
        warps, most, reg_most = _HELD_NO_LAG
        chunks, chunk_vecs, ring_slots, lag = geometry(warps, most)
        if elem == 2 and warps == _HELD_REG_WARPS and chunk_vecs <= _HELD_REG_PER_THREAD * warps * 32:
            reg_chunks = max(0, min(reg_most, _HELD_REG_CHUNKS, 2 * chunks + _HELD_SPARE_SLOTS - ring_slots))
    if lag < 0:
        return None
    prefetch = cdiv(_HELD_PREFETCH_BYTES, 16 * chunk_vecs)
    return ctas, slice_vecs, chunks, chunk_vecs, ring_slots, lag, warps, 0, reg_chunks, prefetch


def team_plan(units, group_elems, channel_elems, elem, programs):
    """(team, teams, slice) for the team kernel, or None when it cannot take x: `programs` programs (all resident) in
    `teams` teams of `team`, as many teams as units of x fit in _TEAM_L2_BYTES (in _TEAM_L2_MAX_BYTES where that
    holds fewer than _TEAM_MIN_TEAMS), at most _TEAM_MAX_TEAMS and the units, None below _TEAM_MIN_TEAMS (unless x
    has fewer units);
    each program owns `slice` elements of a unit, a multiple of _TEAM_BLOCK (the last programs of a team may own
    fewer, or none)."""
    if channel_elems % _TEAM_BLOCK or units < 1 or programs < 1 or group_elems >= 2**31:
        return None
    held = group_elems * elem  # x of one team's unit in the L2
    fit = _TEAM_L2_BYTES // held
    if fit < _TEAM_MIN_TEAMS:
        fit = _TEAM_L2_MAX_BYTES // held
    teams = max(1, min(units, programs, _TEAM_MAX_TEAMS, fit))
    if teams < min(units, _TEAM_MIN_TEAMS):
        return None
    team = programs // teams
    tiles = group_elems // _TEAM_BLOCK
    return team, teams, cdiv(tiles, team) * _TEAM_BLOCK


def _zeroed_ints(cache, device, numel, least=1):
    """An int32 buffer of at least `numel` elements (max(numel, least) when made), one per device in `cache`, zeroed
    once by a kernel of this module when made (a PyTorch memset on the candidate's path is flagged by the harness)."""
    key = device.index if device.type == "cuda" else -1
    buf = cache.get(key)
    if buf is None or buf.numel() < numel:
        size = max(numel, least)
        buf = torch.empty(size, dtype=torch.int32, device=device)
        _launch_zero(((size + 1023) // 1024, 1, 1), (buf,), (size,), (), (1024,), 4)
        cache[key] = buf
    return buf


def _team_counters(device, units):
    """The per-unit arrival and release counters (int32, zero between calls), per device, grown as needed."""
    buf = _zeroed_ints(_counters, device, 2 * units, 128)
    return buf[:units], buf[units:2 * units]


def _held_epoch(device):
    """The held kernel's epoch (one int32 per device): each call reads it and advances it, so every run of a call, a
    CUDA graph's replays included, tags its partials apart (csrc/gn_resident.h, HeldParams)."""
    return _zeroed_ints(_epochs, device, 1)


def _resident_counters(device, units):
    """The resident kernel's generations (int32, one per unit, advanced by each team call), per device, grown as
    needed: calls on one device must run one at a time, as stream order runs them (two team calls running at once on
    two streams of a device would share them)."""
    return _zeroed_ints(_generations, device, units, 128)


_counters = {}  # bounded: one buffer per CUDA device (_zeroed_ints keys by device index)
_epochs = {}  # bounded: one buffer per CUDA device
_generations = {}  # bounded: one buffer per CUDA device


def team_launch(x, weight, bias, G, tp):
    """(launch plan, units, partials) of the team kernel for one input signature and tp = team_plan(...): built
    once per signature with the other plans, so a call only allocates the partials and launches."""
    team, teams, slice_ = tp
    B, C = x.shape[0], x.shape[1]
    units, cpg = B * G, C // G
    S = x.numel() // (B * C)
    f32, i32 = torch.float32, torch.int32
    dt = (x.dtype, (weight if weight is not None else x).dtype, (bias if bias is not None else x).dtype, x.dtype,
          f32, i32, i32)
    plan = Plan((team * teams, 1, 1), dt, (units, G, cpg, cpg * S, S, slice_),
                (team, teams, next_pow2(team), _TEAM_BLOCK, weight is not None, bias is not None),
                _TEAM_WARPS, (("launch_cooperative_grid", True),))
    return plan, units, units * team * 2


def team_programs(sms, per_sm, resident):
    """Programs of the team grid: `per_sm` per SM, fewer when only `resident` blocks of the compiled kernel fit one
    SM (registers, shared memory); 0 when none does."""
    return sms * max(0, min(per_sm, resident))


def _team_fit(x, weight, bias, G, sms):
    """team_launch(...) for the largest team grid whose programs are all resident at once, or None. Each try compiles
    the kernel of its plan (no launch) and asks the driver how many of its blocks fit an SM: a team waits for all
    its members, so a grid the GPU cannot hold whole would never finish. A plan with fewer programs has different
    constexprs, hence its own binary, so the check repeats until it holds."""
    B, C = x.shape[0], x.shape[1]
    S = x.numel() // (B * C)
    programs = sms * _TEAM_PER_SM
    while programs > 0:
        tp = team_plan(B * G, (C // G) * S, S, x.element_size(), programs)
        if tp is None:
            return None
        launch = team_launch(x, weight, bias, G, tp)
        plan = launch[0]
        cnt = torch.empty((2,), dtype=torch.int32, device=x.device)
        part = torch.empty((1,), dtype=torch.float32, device=x.device)
        kernel = _gn_team_kernel.warmup(x, weight if weight is not None else x, bias if bias is not None else x, x,
                                        part, cnt, cnt, *plan.ints, 1e-5, *plan.constexprs,
                                        grid=plan.grid, num_warps=plan.num_warps)
        fit = team_programs(sms, _TEAM_PER_SM, resident_blocks(kernel, plan.num_warps))
        if fit >= plan.grid[0]:
            return launch
        programs = min(fit, programs - sms)
    return None


def _run_team(x, weight, bias, out, eps, launch):
    """One call of the team kernel with launch = team_launch(...): True, or False when the driver refused the
    cooperative grid (more programs than the GPU, or its MPS share, holds at once; nothing ran)."""
    plan, units, n_part = launch
    cnt, done = _team_counters(x.device, units)
    part = torch.empty((n_part,), dtype=torch.float32, device=x.device)
    w_arg = weight if weight is not None else out
    b_arg = bias if bias is not None else out
    try:
        _launch_team.run(plan, (x, w_arg, b_arg, out, part, cnt, done), (float(eps),))
    except RuntimeError as e:
        # CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, as Triton's launcher words it; anything else is a real failure
        if "cooperative launch" not in str(e):
            raise
        return False
    return True


_limits = {}  # bounded: one entry per CUDA device index


def _device_limits(device):
    """(multiprocessors, opt-in shared memory per block) of a CUDA device, read once."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _limits:
        _limits[index] = tuple(_EXT.load().device_limits(index))
    return _limits[index]


def _gpu_named(device, names):
    """Whether the device's name contains one of `names`: the GPUs a kernel was measured faster on (_HELD_GPUS,
    _TEAM_GPUS)."""
    return any(k in torch.cuda.get_device_properties(device).name for k in names)


def _plan(x, weight, bias, G):
    """How to run one input signature: ("resident", (team_size, teams, chunk_vecs, ring_vecs), triton plan) for a
    contiguous x on a GPU up to _RESIDENT_MAX_BYTES, ("held", held_plan(...), triton plan), ("team",
    team_launch(...), triton plan) above, else the Triton plan."""
    fallback = _triton_plan(x, weight, bias, G)
    wb = [t.dtype for t in (weight, bias) if t is not None]
    if fallback is None or not x.is_cuda or not x.is_contiguous() or x.dtype not in _RESIDENT_DTYPES \
            or any(d not in _RESIDENT_DTYPES or d != wb[0] for d in wb):
        return fallback
    if torch.cuda.get_device_capability(x.device) < _EXT_MIN_CAPABILITY:
        return fallback  # the extension's kernels were written and measured for sm_90 (its held kernel traps below)
    B, C = x.shape[0], x.shape[1]
    S = x.numel() // (B * C)
    sms, smem = _device_limits(x.device)
    if x.numel() * x.element_size() > _RESIDENT_MAX_BYTES:
        hp = held_plan(B * G, (C // G) * S, S, x.element_size(), sms, smem) if x.dtype in _HELD_DTYPES \
            and x.numel() * x.element_size() >= _HELD_MIN_BYTES and _gpu_named(x.device, _HELD_GPUS) else None
        if hp is not None:
            return ("held", hp, fallback)
        launch = _team_fit(x, weight, bias, G, sms) if x.dtype in _TEAM_DTYPES \
            and x.numel() * x.element_size() >= _TEAM_MIN_BYTES and _gpu_named(x.device, _TEAM_GPUS) else None
        return fallback if launch is None else ("team", launch, fallback)
    rp = resident_plan(B * G, (C // G) * S, S, x.element_size(), sms, smem)
    return fallback if rp is None else ("resident", rp, fallback)


def _triton_plan(x, weight, bias, G):
    """How to run one input signature through Triton: ("fused", plan), ("split" or "split_rows", partial, finalize or
    None, apply, n_partials, n_groups) or None (x is empty)."""
    if x.dim() < 2:
        raise ValueError(f"x must be [B, C, *spatial], got shape {tuple(x.shape)}")
    B, C = x.shape[0], x.shape[1]
    if G <= 0 or C % G != 0:
        raise ValueError(f"num_groups {G} must divide the {C} channels")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.dim() != 1 or t.shape[0] != C or t.stride(0) != 1):
            raise ValueError(f"{name} must be a dense [C] = [{C}] vector, got {tuple(t.shape)}")
    S = math.prod(x.shape[2:]) if x.dim() > 2 else 1
    if x.numel() == 0:
        return None
    CPG = C // G
    S2, S3, ss1, ss2, ss3, collapsed = _spatial_layout(x)
    sxb, sxc = x.stride(0), x.stride(1)
    span_x = sum((n - 1) * st for n, st in zip(x.shape, x.stride())) + 1
    wide = max(span_x, x.numel()) >= 2**31 - 1
    has_w, has_b = weight is not None, bias is not None
    dt = (x.dtype, (weight if has_w else x).dtype, (bias if has_b else x).dtype, x.dtype)
    cpb = next_pow2(CPG)
    group_size = CPG * S

    # One program per group leaves most SMs idle when there are few groups (B = 1, G = 32 in the VAE): there, only
    # small groups stay on the one-launch path; v0 lost to torch.compile by 2-3x (graph_us) on 15-50 MB rows.
    channel_fast = sxc == 1 and collapsed
    rows = channel_fast and _rows_fit(B, C, CPG)
    if group_size < _FUSED_MAX_GROUP and (B * G >= _FUSED_MIN_PROGRAMS or group_size < _FUSED_FEW_GROUPS_MAX):
        # Tiny groups share a program (a few thousand elements each); otherwise one program per group.
        gpb = min(next_pow2(G), max(1, _prev_power_of_2(_FUSED_MIN_ELEMS // group_size)))
        ngb = cdiv(G, gpb)
        block_s = max(1, min(next_pow2(S), _TILE // (gpb * cpb)))
        return ("fused", Plan((B * ngb, 1, 1), dt, (G, C, S, CPG, S2, S3, sxb, sxc, ss1, ss2, ss3, ngb),
                              (gpb, cpb, block_s, collapsed, wide, has_w, has_b),
                              4 if gpb * cpb * block_s <= 2048 else 8))

    # Split pass. Channel-fast layouts (channels_last) take every group in one tile; others one group per tile.
    f32 = torch.float32
    if rows:
        return _rows_plan(x, B, C, G, CPG, S, sxb, ss3, wide, dt, has_w, has_b)
    gpb = next_pow2(G) if channel_fast else 1
    ngb = cdiv(G, gpb)
    layout = _SPLIT_CHANNEL_FAST if channel_fast else _SPLIT_CONTIGUOUS
    # Contiguous x: a group's CPG channels are one range of CPG * S elements; seen as one channel of that length,
    # a tile is one contiguous run instead of CPG runs S apart (needs every tile inside one real channel).
    s_ch, flat = S, False
    if (not channel_fast and 1 < CPG <= _FLAT_MAX_CPG and collapsed and ss3 == 1 and sxc == S
            and S % _SPLIT_FLAT[0] == 0):
        flat, layout = True, _SPLIT_FLAT
        S, CPG, cpb, sxc = CPG * S, 1, 1, CPG * S
    tile, iters, stats_tiles, stats_warps, apply_warps = layout
    block_s = max(1, min(next_pow2(S), tile // (gpb * cpb)))
    span = block_s * max(1, min(iters, cdiv(S, block_s)))
    n_part = cdiv(S, span)
    grid = (n_part, B * ngb, 1)
    stats_block_s = next_pow2(cdiv(span, stats_tiles))
    partial = Plan(grid, (x.dtype, f32, f32), (G, C, S, CPG, S2, S3, sxb, sxc, ss1, ss2, ss3, ngb, n_part, span),
                   (gpb, cpb, stats_block_s, collapsed, wide), stats_warps)
    merge = n_part * gpb <= _MERGE_IN_APPLY_MAX
    finalize = None if merge else Plan((B * G, 1, 1), (f32, f32, f32), (S, CPG, n_part, span),
                                       (min(_FINALIZE[0], next_pow2(n_part)),), _FINALIZE[1])
    apply = Plan(grid, dt + (f32, f32, f32), (G, C, S, CPG, S2, S3, sxb, sxc, ss1, ss2, ss3, ngb, span, s_ch, n_part),
                 (gpb, cpb, block_s, collapsed, wide, has_w, has_b, flat, merge, next_pow2(n_part) if merge else 1),
                 apply_warps)
    return ("split", partial, finalize, apply, B * G * n_part, B * G)


def _rows_fit(B, C, CPG):
    """Whether v8's row kernels take a channels_last x of C channels in groups of CPG: powers of two (a row is one
    tile, a group a power-of-two slice of it) and a batch that fits the apply grid's third axis."""
    return C == next_pow2(C) and CPG == next_pow2(CPG) and C <= _ROWS_MAX_C and B <= 65535


def _rows_plan(x, B, C, G, CPG, S, sxb, ss, wide, dt, has_w, has_b):
    """v8's split pass for channels_last x (rows of C contiguous channels): ("split_rows", partial, finalize or
    None, apply, n_partials, n_groups)."""
    lane_elems, st_iters, cpw, cblk, ap_s, ap_tiles, ap_warps = _SPLIT_ROWS
    f32 = torch.float32
    # Warps side by side along the channels, none along the rows: a tile's column sums stay inside each lane. Rows
    # per tile: `lane_elems` elements of x per lane.
    st_warps = max(1, min(8, C * x.element_size() // (16 * 32 * cpw)))
    block_s = max(1, lane_elems * 32 * st_warps // C)
    # Fewer tiles per program when that leaves too few programs to fill the machine (small x).
    iters = max(1, min(st_iters, S // (block_s * _ROWS_MIN_PROGRAMS)))
    span = block_s * iters
    n_part = cdiv(S, span)
    partial = Plan((n_part, B, 1), (x.dtype, f32, f32), (G, S, sxb, ss, n_part, span), (C, CPG, block_s, wide),
                   st_warps)
    merge = n_part <= _ROWS_MERGE_MAX
    finalize = None if merge else Plan((B * G, 1, 1), (f32, f32, f32), (S, CPG, n_part, span),
                                       (min(_FINALIZE[0], next_pow2(n_part)),), _FINALIZE[1])
    cblk = min(cblk, C)
    tiles = max(ap_tiles, cdiv(S, ap_s * 65535))  # the grid's second axis holds at most 65535 row blocks
    apply = Plan((C // cblk, cdiv(S, ap_s * tiles), B), dt + (f32, f32, f32),
                 (G, C, S, CPG, sxb, ss, n_part, span, tiles),
                 (cblk, ap_s, wide, has_w, has_b, merge, min(16, next_pow2(n_part)) if merge else 1), ap_warps)
    return ("split_rows", partial, finalize, apply, B * G * n_part, B * G)


# Plans by input signature: v1's split path cost ~80 us of host time per call (three plans and three allocations
# built every call; H200 device_us of d12926e) against ~20 us of GPU time on mid-size rows.
_plans = {}


def _plan_key(x, weight, bias, G):
    """The input signature a plan is kept under in _plans."""
    return (x.shape, x.stride(), x.dtype, x.device,
            None if weight is None else (weight.shape, weight.stride(), weight.dtype),
            None if bias is None else (bias.shape, bias.stride(), bias.dtype), G)


def _group_norm_silu(x, weight, bias, num_groups, eps, out):
    G = int(num_groups)
    key = _plan_key(x, weight, bias, G)
    plan = _plans.get(key, False)
    if plan is False:
        if len(_plans) >= _PLANS_MAX:  # first in, first out: a server meets a few signatures, a sweep many
            del _plans[next(iter(_plans))]
        plan = _plans[key] = _plan(x, weight, bias, G)
    if out is None:
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    elif tuple(out.shape) != tuple(x.shape) or out.dtype != x.dtype or not out.is_contiguous():
        raise ValueError("out must be a contiguous tensor with x's shape and dtype")
    if plan is None:
        return out
    if plan[0] == "resident":
        # a team's generations (Params.generations; a one-CTA team has no exchange), weight and bias loaded early
        counters = _resident_counters(x.device, x.shape[0] * G) if plan[1][0] > 1 else None
        if _EXT.load().run(x, weight, bias, out, G, float(eps), *plan[1], counters, True):
            return out
        plan = plan[2]  # this call's tensors are not 16-byte aligned
    elif plan[0] == "team":
        if _run_team(x, weight, bias, out, eps, plan[1]):
            return out
        plan = _plans[key] = plan[2]  # refused: this GPU (share) holds fewer programs than at plan time
    elif plan[0] == "held":
        if _EXT.load().run_held(x, weight, bias, out, G, float(eps), *plan[1], _held_epoch(x.device)):
            return out
        plan = plan[2]  # not 16-byte aligned, or the driver refused the grid
    w_arg = weight if weight is not None else out
    b_arg = bias if bias is not None else out
    if plan[0] == "fused":
        _launch_fused.run(plan[1], (x, w_arg, b_arg, out), (float(eps),))
        return out
    kind, partial, finalize, apply, n, groups = plan
    # One allocation for the partial means, partial M2 and the per-group (mean, rstd).
    ws = torch.empty((2 * n + 2 * groups,), dtype=torch.float32, device=x.device)
    pmean, pm2, stats = ws[:n], ws[n:2 * n], ws[2 * n:]
    rows = kind == "split_rows"
    (_launch_rows_partial if rows else _launch_partial).run(partial, (x, pmean, pm2), ())
    if finalize is not None:
        _launch_finalize.run(finalize, (pmean, pm2, stats), (float(eps),))
    (_launch_rows_apply if rows else _launch_apply).run(apply, (x, w_arg, b_arg, out, stats, pmean, pm2),
                                                        (float(eps),))
    return out


_launch_fused = LaunchCache(_gn_silu_fused_kernel)
_launch_partial = LaunchCache(_gn_partial_stats_kernel)
_launch_finalize = LaunchCache(_gn_finalize_kernel)
_launch_apply = LaunchCache(_gn_apply_kernel)
_launch_rows_partial = LaunchCache(_gn_rows_partial_stats_kernel)
_launch_rows_apply = LaunchCache(_gn_rows_apply_kernel)
_launch_team = LaunchCache(_gn_team_kernel)
_launch_zero = LaunchCache(_zero_kernel)


def triton_group_norm_silu(x, weight, bias, num_groups, eps=1e-5, *, out=None):
    """Drop-in for sglang's triton_group_norm_silu; writes `out` (contiguous, x's shape and dtype) when given."""
    return _group_norm_silu(x, weight, bias, num_groups, eps, out)


def apply_group_norm_silu(x, norm, activation, *, out=None):
    """Drop-in for sglang's apply_group_norm_silu(x, norm: nn.GroupNorm, activation: nn.SiLU)."""
    if type(activation).__name__ != "SiLU" or (hasattr(activation, "inplace") and activation.inplace):
        raise ValueError("apply_group_norm_silu: activation must be a non-inplace nn.SiLU")
    if not hasattr(norm, "num_groups") or not hasattr(norm, "eps"):
        raise ValueError("apply_group_norm_silu: norm must be an nn.GroupNorm")
    affine = norm.affine if hasattr(norm, "affine") else True
    weight = norm.weight if affine else None
    bias = norm.bias if affine else None
    return _group_norm_silu(x, weight, bias, norm.num_groups, norm.eps, out)
