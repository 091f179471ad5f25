"""Candidate v11 for cutedsl_norm_scale_shift: one Triton kernel for both entry points.

A token row of D values is held in registers as K chunks of C lanes (C a power of two, K <= 5; D = 5120 is five
1024-lane chunks, 3072 three, 1536 three of 512): no padding to the next power of two, where v2 wasted 37.5% of its
lanes and registers on a 5120-wide row. Only the last chunk is masked, and only when C does not divide D. Residual
calls of at most 4096 rows, and gate-less residual calls whose block pads D by at most a third, are the exception:
there one masked power-of-two block per row measured faster.

Modulation operands (gate, weight, bias, scale, shift) are loaded where they are used, every row; shared ones hit L1.
v3 kept shared vectors in registers across the rows of a program: 120 registers and two CTAs per SM on the Wan
self-attention rows, 0.74x of upstream. v4 runs the residual form and per-row modulation one row per program, and
loads a per-row scale/shift with the row's inputs, before the reduction (`_layout` says what each choice measured).
Streamed x and residual loads skip L1 (.cg), leaving it to the modulation.

Per row: v = residual + gate * x (written to residual_out), statistics in fp32, y = norm(v) * (1 + scale) + shift.
bf16/fp16 rows take the LayerNorm statistics in one block reduction of (sum, sum of squares) of v - k, where k is the
row's first value (a shift that keeps the one-pass variance accurate when the mean is large against the spread): one
cross-warp reduction per row instead of v2's three. fp32 rows keep two passes from registers, the mean first and the
centred variance second, as upstream and the oracle do. 1/sqrt is rsqrt (rsqrt.approx, as upstream's cute.rsqrt).
v11: fp32 rows (PRECISE) hold v = residual + gate * x in fp64 and keep the mean, the centred values and the variance
in fp64 (1/sqrt in fp64, rounded once); only residual_out and the centred value are rounded to fp32. The 16-bit rows'
code is unchanged (the same PTX for every bf16/fp16 row's launch).
Unlike upstream, r and the normalised value are not rounded to x's dtype
before the modulation: only the stored outputs are rounded.

v6: the chunked residual form stores residual_out with y, after the statistics (`_RES_OUT_LATE` says what it
measured). v7: the residual form without a gate takes the chunks and the late store too where the padded block
would pad D by more than a third (D = 5120; `_padded_res`). v9: the chunked residual form loads weight and bias with
the row, before the statistics (EARLY_WB); per-row modulation skips L1; a per-row gate takes 8 warps (`_V9` says
what each measured). v10: x and residual are loaded with the L2 priority evict_last (`_V10`).

Modulation tensors are reduced on the host to (batch stride, token stride, frame length), which covers every form
upstream accepts: [1], [D], [1|B, D], [1|B, 1|S, D] and per-frame [B, F, 1, D] (token s reads frame s // (S / F));
no broadcast copy is made. A launch Plan is cached per input signature (shapes, strides, dtypes, norm type), so a
repeated call costs a dict lookup and the launch (kda.runtime.lean_launch): on the small rows (Qwen text, 19-55 tokens) the
host path is the cost.
"""
import torch
import triton
import triton.language as tl

from kda.runtime.lean_launch import LaunchCache, Plan, cdiv

_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
# x and residual are loaded through L1 (v5): with .cg (past L1) wan_t2v_crossattn_res took 772.6 us by graph_us
# against 761.8 without, and no other row moved (graph-placement/f294e8f.json). A knob for layout_sweep.
_STREAM_CG = False
# v6: the chunked residual form (more than _PADDED_RES_MAX_ROWS rows) stores residual_out with y, after the
# statistics, not while the row is read. H100 graph replay (docs/profile/h100/layout-sweep/69ef63b-res-stores.json;
# torch.compile, the best peer there, in brackets): wan_t2v_selfattn_res 532.0 -> 519.3 us (525.8),
# wan_i2v_selfattn_res 1036.6 -> 1012.8 (1033.6), hunyuanvideo_img_res 226.3 -> 224.1 (222.1), wan_ti2v_selfattn_res
# 224.4 -> 223.0 (238.1); the padded block (wan_t2v_crossattn_res) lost 5% with it (1024.8 -> 1080.4), so it keeps
# the early store. Stores marked evict_first moved nothing by more than 0.6% (not kept).
_RES_OUT_LATE = True
# Residual calls of at most this many rows take the padded block (v5): qwen_image_txt_norm2_res_s47 2.7 us against
# 3.3 chunked, qwen_image_img_norm2_res_s4096 26.8 against 27.2 (graph-placement/f294e8f.json). Larger ones take the
# chunks with the late store, with a gate, and without one where the block would pad D by more than a third (v7,
# D = 5120: the Wan and MOVA cross-attention rows; 3072 -> 4096 pads by a third). Without a gate the
# padded block with its early store had been kept since v4, because chunks with the early store lost to it (878
# against 763 us on wan_t2v_crossattn_res); chunks with the late store beat it on the H200
# (docs/profile/h200/layout-sweep/3bc0389-res.json, graph replay, torch.compile in brackets): wan_t2v_crossattn_res
# 744.3 -> 734.2 us (731.8), mova_video_crossattn_res 437.2 -> 431.0 (428.6). torch.compile's kernel also stores
# both outputs in its last pass over the row. On D = 3072 (wan_ti2v_crossattn_res, per-row fp32 scale and shift) v7
# moved the row the other way, 1.004 -> 0.997 of upstream by device_us (H200 benches at 478e671 and a0d6227; the
# a0d6227 sweep had the padded block 0.25% ahead), so v7b keeps v6's padded block with the early store there.
_PADDED_RES_MAX_ROWS = 4096
# A register cap for more programs an SM (Triton's maxnreg, 40-56) helped no residual row on the H200: on
# wan_ti2v_selfattn_res, 0.985 of upstream, the best was 157.8 against 159.4 us, upstream 154.8
# (docs/profile/h200/layout-sweep/52945b7-nreg.json, ledger L0028). Neither did evict_first or streaming (.cs) stores
# of y and residual_out (ca04c2f-store.json, ledger L0029), nor a CUDA kernel of upstream's launch shape (one 384-thread
# CTA a row, its load path and store order), which took the Triton kernel's time (fcef0f8-cuda-row.json,
# 95d824d-cuda-loads.json, ledger L0030).

# v9 (ledger L0031), H200 graph replay (docs/profile/h200/layout-sweep/5b1129e-knobs.json, c57f27c-knobs2.json and
# c57f27c-knobs3.json; upstream in brackets). ncu of wan_ti2v_selfattn_res back to back (5b1129e-ncu-seq.csv) had
# the same DRAM bytes on both sides but about 1.0 M more L2 read sectors for v7b, all hits: weight and bias pushed out
# of L1 by the streamed rows and fetched again after the statistics. Loading them with the row (EARLY_WB) took
# wan_ti2v_selfattn_res 158.2 -> 156.5 us (154.9) and wan_t2v_selfattn_res 372.6 -> 366.8 (437.9); with 8 warps and
# the per-token gate past L1, wan_ti2v_selfattn_res took 155.8 (157.3 against 157.5 back to back, the device_us
# method). Per-row scale/shift past L1 moved the other per-row rows by at most 0.3 us either way; loading residual
# before x (upstream's order) moved nothing; x and residual past L1 cost the D = 5120 cross-attention rows 0.5%.
# scripts/arm_placement.py (5b1129e-placement.json) had ruled out the buffers: v7b took the same time writing into
# upstream's own outputs, into fresh ones, and on inputs moved to new addresses.
_V9 = "L0031"
# v10 (ledger L0033): x and residual are loaded with the L2 priority evict_last (Triton's eviction_policy: PTX
# L1::evict_last and an L2 evict_last cache policy). H200 graph replay against v9, every row correct
# (docs/profile/h200/layout-sweep/38d29f6-ldel-all.json): the D = 5120 residual rows 2.1-2.3% faster
# (wan_t2v_crossattn_res 733.0 -> 717.5 us, mova_video_crossattn_res 432.5 -> 421.3, wan_i2v_selfattn_res 722.8 ->
# 706.2), hunyuanvideo's three rows 2.7-3.2%, the Wan and MOVA plain rows 0.7-3%, the D = 3072 Wan TI2V and the
# Helios rows within 0.3% either way. First swept (8819d0f-evict.json) with evict_first and evict_last on the loads
# and the stores: evict_first loads cost 2-4% (as in L0027), store hints moved nothing beyond noise. The gain is the
# call's own: it stays after a write of twice the L2 before every call (38d29f6-aftermath.json: mova_video_crossattn_res
# 433.5 -> 420.9 us, wan_t2v_crossattn_res 739.2 -> 719.8). What it leaves the next kernel: a kernel re-reading a
# third of the L2 eight times took 23.0-24.3 us after v10 against 21.0-21.9 after v9, 23.8 after the write of twice
# the L2 and 20.7 back to back, so the next kernel keeps its own data in the L2 (the evict_last lines do not
# stay) and pays about what it pays after any large write.
_V10 = "L0033"

# Kinds of a modulation operand: absent, one value, one row of D shared by every token row, a row per token.
_NONE, _ONE, _SHARED, _PER_ROW = 0, 1, 2, 3


@triton.jit
def _ld(ptr, j: tl.constexpr, D, C: tl.constexpr, MASKED: tl.constexpr, STREAM: tl.constexpr, EV: tl.constexpr):
    cols = j * C + tl.arange(0, C)
    if MASKED:
        if STREAM:
            v = tl.load(ptr + cols, mask=cols < D, other=0.0, cache_modifier=".cg", eviction_policy=EV)
        else:
            v = tl.load(ptr + cols, mask=cols < D, other=0.0, eviction_policy=EV)
    else:
        if STREAM:
            v = tl.load(ptr + cols, cache_modifier=".cg", eviction_policy=EV)
        else:
            v = tl.load(ptr + cols, eviction_policy=EV)
    return v.to(tl.float32)


@triton.jit
def _st(ptr, val, j: tl.constexpr, D, C: tl.constexpr, MASKED: tl.constexpr):
    cols = j * C + tl.arange(0, C)
    if MASKED:
        tl.store(ptr + cols, val.to(ptr.dtype.element_ty), mask=cols < D)
    else:
        tl.store(ptr + cols, val.to(ptr.dtype.element_ty))


@triton.jit
def _zero_tail(val, j: tl.constexpr, D, C: tl.constexpr, MASKED: tl.constexpr):
    if MASKED:
        val = tl.where(j * C + tl.arange(0, C) < D, val, 0.0)
    return val


@triton.jit
def _mod(ptr, j: tl.constexpr, D, C: tl.constexpr, MASKED: tl.constexpr, KIND: tl.constexpr, PLUS1: tl.constexpr):
    """Chunk j of a modulation operand for this row (ptr already points at the row's own vector for per-row kinds):
    0.0 when absent, one value, or a vector load, which for shared operands comes from L1. A per-row operand is
    read once and skips L1 (.cg), leaving it to the shared ones (v9)."""
    v = 0.0
    if KIND == 1:
        v = tl.load(ptr).to(tl.float32)
    elif KIND != 0:
        v = _ld(ptr, j, D, C, MASKED, KIND == 3, "")
    if PLUS1:
        v = 1.0 + v
    return v


@triton.jit
def _row_in(xo, ro, go, oo, j: tl.constexpr, D, C: tl.constexpr, MASKED: tl.constexpr,
            HAS_RES: tl.constexpr, G_KIND: tl.constexpr, STREAM: tl.constexpr, LATE: tl.constexpr,
            PRECISE: tl.constexpr):
    """Chunk j of v = residual + gate * x (written to residual_out here unless LATE) or of v = x. x and residual are
    loaded with the L2 priority evict_last (v10, `_V10` says why). PRECISE (fp32 rows): v in fp64, where
    gate * x is exact and the sum is r to about 1e-16; only the stored residual_out is rounded to fp32 (v11)."""
    v = _ld(xo, j, D, C, MASKED, STREAM, "evict_last")
    if PRECISE:
        v = v.to(tl.float64)
    if HAS_RES:
        if G_KIND != 0:
            g = _mod(go, j, D, C, MASKED, G_KIND, False)
            if PRECISE:
                g = g.to(tl.float64)
            v = v * g
        r = _ld(ro, j, D, C, MASKED, STREAM, "evict_last")
        if PRECISE:
            r = r.to(tl.float64)
        v = v + r
        if not LATE:
            if PRECISE:
                # fp64 -> fp32 first: a 16-bit residual_out (fp32 residual, 16-bit x) takes fp32's rounding path.
                _st(oo, v.to(tl.float32), j, D, C, MASKED)
            else:
                _st(oo, v, j, D, C, MASKED)
    return v


@triton.jit
def _mods(sco, sho, j: tl.constexpr, D, C: tl.constexpr, MASKED: tl.constexpr, SC_KIND: tl.constexpr,
          SH_KIND: tl.constexpr):
    """(1 + scale, shift) of chunk j of this row."""
    return _mod(sco, j, D, C, MASKED, SC_KIND, True), _mod(sho, j, D, C, MASKED, SH_KIND, False)


@triton.jit
def _row_mods(sco, sho, D, C: tl.constexpr, K: tl.constexpr, M0: tl.constexpr, M1: tl.constexpr, M2: tl.constexpr,
              M3: tl.constexpr, M4: tl.constexpr, SC_KIND: tl.constexpr, SH_KIND: tl.constexpr):
    """(1 + scale, shift) of each of the row's K chunks (0.0 past K)."""
    a1, h1, a2, h2, a3, h3, a4, h4 = 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    a0, h0 = _mods(sco, sho, 0, D, C, M0, SC_KIND, SH_KIND)
    if K > 1:
        a1, h1 = _mods(sco, sho, 1, D, C, M1, SC_KIND, SH_KIND)
    if K > 2:
        a2, h2 = _mods(sco, sho, 2, D, C, M2, SC_KIND, SH_KIND)
    if K > 3:
        a3, h3 = _mods(sco, sho, 3, D, C, M3, SC_KIND, SH_KIND)
    if K > 4:
        a4, h4 = _mods(sco, sho, 4, D, C, M4, SC_KIND, SH_KIND)
    return a0, h0, a1, h1, a2, h2, a3, h3, a4, h4


@triton.jit
def _wb(w_ptr, b_ptr, j: tl.constexpr, D, C: tl.constexpr, MASKED: tl.constexpr, HAS_W: tl.constexpr,
        HAS_B: tl.constexpr):
    """Chunk j of (weight, bias): 1.0 and 0.0 where absent."""
    w = 1.0
    b = 0.0
    if HAS_W:
        w = _ld(w_ptr, j, D, C, MASKED, False, "")
    if HAS_B:
        b = _ld(b_ptr, j, D, C, MASKED, False, "")
    return w, b


@triton.jit
def _row_out(yo, oo, v, mean, rstd, w, b, a, sh, j: tl.constexpr, D, C: tl.constexpr, MASKED: tl.constexpr,
             IS_LN: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, RES_OUT: tl.constexpr,
             PRECISE: tl.constexpr):
    """Chunk j of y (and of residual_out when RES_OUT: the residual form's LATE store). PRECISE: v and mean are
    fp64; the centred value is rounded to fp32 once, then the same fp32 arithmetic as the 16-bit rows."""
    if RES_OUT:
        if PRECISE:
            _st(oo, v.to(tl.float32), j, D, C, MASKED)
        else:
            _st(oo, v, j, D, C, MASKED)
    if PRECISE:
        if IS_LN:
            n = (v - mean).to(tl.float32) * rstd
        else:
            n = v.to(tl.float32) * rstd
    elif IS_LN:
        n = (v - mean) * rstd
    else:
        n = v * rstd
    if HAS_W:
        n = n * w
    if HAS_B:
        n = n + b
    _st(yo, n * a + sh, j, D, C, MASKED)


@triton.jit
def _add2(a0, b0, a1, b1):
    return a0 + a1, b0 + b1


@triton.jit
def _nss_kernel(
    y_ptr, ro_ptr, x_ptr, r_ptr, g_ptr, w_ptr, b_ptr, sc_ptr, sh_ptr,
    M, S, D, ROWS,
    sxb, sxs, srb, srs, syb, sys_, sob, sos,
    gb, gs, gf, scb, scs, scf, shb, shs, shf,
    eps,
    IS_LN: tl.constexpr, HAS_RES: tl.constexpr, G_KIND: tl.constexpr, SC_KIND: tl.constexpr,
    SH_KIND: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, PRECISE: tl.constexpr,
    C: tl.constexpr, K: tl.constexpr, TAIL: tl.constexpr, PREFETCH: tl.constexpr, STREAM: tl.constexpr,
    LATE: tl.constexpr, EARLY_WB: tl.constexpr,
):
    # Only the last chunk can be masked; M0..M4 say which chunk that is.
    M0: tl.constexpr = TAIL and K == 1
    M1: tl.constexpr = TAIL and K == 2
    M2: tl.constexpr = TAIL and K == 3
    M3: tl.constexpr = TAIL and K == 4
    M4: tl.constexpr = TAIL and K == 5
    row0 = tl.program_id(0).to(tl.int64) * ROWS
    for i in range(0, ROWS):
        row = row0 + i
        if row < M:
            bi = row // S
            si = row - bi * S
            xo = x_ptr + bi * sxb + si * sxs
            yo = y_ptr + bi * syb + si * sys_
            ro = r_ptr
            oo = ro_ptr
            go = g_ptr
            sco = sc_ptr
            sho = sh_ptr
            if HAS_RES:
                ro = r_ptr + bi * srb + si * srs
                oo = ro_ptr + bi * sob + si * sos
                if G_KIND == 3:
                    go = g_ptr + bi * gb + (si // gf) * gs
            if SC_KIND == 3:
                sco = sc_ptr + bi * scb + (si // scf) * scs
            if SH_KIND == 3:
                sho = sh_ptr + bi * shb + (si // shf) * shs

            v0 = _row_in(xo, ro, go, oo, 0, D, C, M0, HAS_RES, G_KIND, STREAM, LATE, PRECISE)
            if K > 1:
                v1 = _row_in(xo, ro, go, oo, 1, D, C, M1, HAS_RES, G_KIND, STREAM, LATE, PRECISE)
            if K > 2:
                v2 = _row_in(xo, ro, go, oo, 2, D, C, M2, HAS_RES, G_KIND, STREAM, LATE, PRECISE)
            if K > 3:
                v3 = _row_in(xo, ro, go, oo, 3, D, C, M3, HAS_RES, G_KIND, STREAM, LATE, PRECISE)
            if K > 4:
                v4 = _row_in(xo, ro, go, oo, 4, D, C, M4, HAS_RES, G_KIND, STREAM, LATE, PRECISE)
            if EARLY_WB:
                w0, b0 = _wb(w_ptr, b_ptr, 0, D, C, M0, HAS_W, HAS_B)
                if K > 1:
                    w1, b1 = _wb(w_ptr, b_ptr, 1, D, C, M1, HAS_W, HAS_B)
                if K > 2:
                    w2, b2 = _wb(w_ptr, b_ptr, 2, D, C, M2, HAS_W, HAS_B)
                if K > 3:
                    w3, b3 = _wb(w_ptr, b_ptr, 3, D, C, M3, HAS_W, HAS_B)
                if K > 4:
                    w4, b4 = _wb(w_ptr, b_ptr, 4, D, C, M4, HAS_W, HAS_B)
            if PREFETCH:
                # The row's own modulation is loaded with its inputs, before the reduction's barriers, so its bytes
                # are in flight together with x's instead of after them.
                a0, h0, a1, h1, a2, h2, a3, h3, a4, h4 = _row_mods(sco, sho, D, C, K, M0, M1, M2, M3, M4, SC_KIND,
                                                                          SH_KIND)

            mean = 0.0
            if IS_LN and PRECISE:
                # fp32 rows (judged at 1e-5 against an fp64 oracle): v (the unrounded r), the mean, the centred
                # values and the variance all in fp64 (v11). v10 rounded r and the mean to fp32: on a row of mean
                # 32 each is off by up to half an ulp of 32 (1.9e-6), and y near 0 under a 1 + scale of 4 took
                # both, 1.0x the tolerance (reg_srn_fp32_offset_residual_b1_s8_d3072, ledger L0041).
                t = v0
                if K > 1:
                    t += v1
                if K > 2:
                    t += v2
                if K > 3:
                    t += v3
                if K > 4:
                    t += v4
                mean = tl.sum(t, axis=0) / D
                c = _zero_tail(v0 - mean, 0, D, C, M0)
                q = c * c
                if K > 1:
                    c = _zero_tail(v1 - mean, 1, D, C, M1)
                    q += c * c
                if K > 2:
                    c = _zero_tail(v2 - mean, 2, D, C, M2)
                    q += c * c
                if K > 3:
                    c = _zero_tail(v3 - mean, 3, D, C, M3)
                    q += c * c
                if K > 4:
                    c = _zero_tail(v4 - mean, 4, D, C, M4)
                    q += c * c
                var = tl.sum(q, axis=0) / D
            elif IS_LN:
                # One reduction of (sum, sum of squares) of v - k, k = the row's first value (recomputed from
                # scalar loads the same way): shifting by a value of the row keeps the one-pass variance exact
                # enough for 16-bit outputs even when the row's mean is far from zero.
                k = tl.load(xo).to(tl.float32)
                if HAS_RES:
                    if G_KIND != 0:
                        k = k * tl.load(go).to(tl.float32)
                    k = k + tl.load(ro).to(tl.float32)
                c = _zero_tail(v0 - k, 0, D, C, M0)
                s = c
                q = c * c
                if K > 1:
                    c = _zero_tail(v1 - k, 1, D, C, M1)
                    s += c
                    q += c * c
                if K > 2:
                    c = _zero_tail(v2 - k, 2, D, C, M2)
                    s += c
                    q += c * c
                if K > 3:
                    c = _zero_tail(v3 - k, 3, D, C, M3)
                    s += c
                    q += c * c
                if K > 4:
                    c = _zero_tail(v4 - k, 4, D, C, M4)
                    s += c
                    q += c * c
                s, q = tl.reduce((s, q), 0, _add2)
                d = s / D
                mean = k + d
                var = tl.maximum(q / D - d * d, 0.0)
            elif PRECISE:
                q = v0 * v0
                if K > 1:
                    q += v1 * v1
                if K > 2:
                    q += v2 * v2
                if K > 3:
                    q += v3 * v3
                if K > 4:
                    q += v4 * v4
                var = tl.sum(q, axis=0) / D
            else:
                q = v0 * v0
                if K > 1:
                    q += v1 * v1
                if K > 2:
                    q += v2 * v2
                if K > 3:
                    q += v3 * v3
                if K > 4:
                    q += v4 * v4
                var = tl.sum(q, axis=0) / D
            if PRECISE:
                # fp64 1 / sqrt (IEEE-rounded, once a row), rounded to fp32 once.
                rstd = (1.0 / tl.sqrt(var + eps)).to(tl.float32)
            else:
                rstd = tl.math.rsqrt(var + eps)

            if not PREFETCH:
                a0, h0, a1, h1, a2, h2, a3, h3, a4, h4 = _row_mods(sco, sho, D, C, K, M0, M1, M2, M3, M4, SC_KIND,
                                                                          SH_KIND)
            if not EARLY_WB:
                w0, b0 = _wb(w_ptr, b_ptr, 0, D, C, M0, HAS_W, HAS_B)
            _row_out(yo, oo, v0, mean, rstd, w0, b0, a0, h0, 0, D, C, M0, IS_LN, HAS_W, HAS_B,
                     HAS_RES and LATE, PRECISE)
            if K > 1:
                if not EARLY_WB:
                    w1, b1 = _wb(w_ptr, b_ptr, 1, D, C, M1, HAS_W, HAS_B)
                _row_out(yo, oo, v1, mean, rstd, w1, b1, a1, h1, 1, D, C, M1, IS_LN, HAS_W, HAS_B,
                         HAS_RES and LATE, PRECISE)
            if K > 2:
                if not EARLY_WB:
                    w2, b2 = _wb(w_ptr, b_ptr, 2, D, C, M2, HAS_W, HAS_B)
                _row_out(yo, oo, v2, mean, rstd, w2, b2, a2, h2, 2, D, C, M2, IS_LN, HAS_W, HAS_B,
                         HAS_RES and LATE, PRECISE)
            if K > 3:
                if not EARLY_WB:
                    w3, b3 = _wb(w_ptr, b_ptr, 3, D, C, M3, HAS_W, HAS_B)
                _row_out(yo, oo, v3, mean, rstd, w3, b3, a3, h3, 3, D, C, M3, IS_LN, HAS_W, HAS_B,
                         HAS_RES and LATE, PRECISE)
            if K > 4:
                if not EARLY_WB:
                    w4, b4 = _wb(w_ptr, b_ptr, 4, D, C, M4, HAS_W, HAS_B)
                _row_out(yo, oo, v4, mean, rstd, w4, b4, a4, h4, 4, D, C, M4, IS_LN, HAS_W, HAS_B,
                         HAS_RES and LATE, PRECISE)


_launch = LaunchCache(_nss_kernel)


def _chunks(D):
    """(C, K): K <= 5 chunks of C lanes covering D with the least padding (ties: fewer, wider chunks)."""
    best = None
    c = 256
    while c <= 8192:
        k = cdiv(D, c)
        if k <= 5:
            cand = (k * c - D, k, c)
            if best is None or cand < best:
                best = cand
        c *= 2
    return best[2], best[1]


def _warps(C, K):
    # About 16-24 fp32 values per thread per row tensor, and at least 4 lanes per thread per chunk so a thread
    # moves 8-16 byte vectors: D 5120 -> 8 warps (5 x 4), 3072 -> 4 warps (3 x 8), 8192 -> 16 warps (16).
    w = 1
    while w < 16 and C // (32 * (w * 2)) >= 4 and K * C // (32 * (w * 2)) >= 16:
        w *= 2
    return w


def _layout(D, M, has_res, g_kind, sc_kind, sh_kind):
    """(C, K, rows per program, warps, PREFETCH), chosen by H200 sweeps of the production forms (graph_us below;
    scripts/layout_sweep.py, outputs in docs/profile/h200/layout-sweep/):
    - Residual calls of at most 4096 rows read the row as one masked power-of-two block at 32 values per thread
      (_padded_res), and so do gate-less residual rows whose block pads D by at most a third; everything else keeps
      the unpadded chunks (selfattn_res: 412 chunked, 467 padded; upstream 448), the D = 5120 cross-attention rows
      since v7 (with residual_out stored late).
    - One row per program for the residual form and for per-row modulation (selfattn_res 412 against 459 at 8 rows,
      helios 154 against 172); plain rows with shared modulation keep up to 8 rows per program (wan norm1 208-210
      either way, hunyuan img_norm 88 against 91).
    - A per-row scale/shift is loaded with the row's inputs (PREFETCH): helios 154 against 156.
    - A per-row gate takes 8 warps on the chunks (v9, _V9): wan_ti2v_selfattn_res 155.8 against 156.1 at 4.
    No shared vector is kept in registers across rows any more (v3 did: 120 registers, 2 CTAs per SM on
    selfattn_res); the loads hit L1."""
    if has_res and _padded_res(M, g_kind, D):
        C, K = 1 << (D - 1).bit_length(), 1
        warps = max(1, min(16, C // 1024))
    else:
        C, K = _chunks(D)
        warps = _warps(C, K)
        if has_res and g_kind == _PER_ROW:
            warps = max(warps, 8)
    per_row = _PER_ROW in (g_kind, sc_kind, sh_kind)
    rows = 1 if has_res or per_row else _rows_per_program(M)
    return C, K, rows, warps, _PER_ROW in (sc_kind, sh_kind)


def _padded_res(M, g_kind, D):
    """Whether a residual call reads its rows as one masked power-of-two block (else as unpadded chunks)."""
    return M <= _PADDED_RES_MAX_ROWS or (g_kind == _NONE and 3 * (1 << (D - 1).bit_length()) <= 4 * D)


def _rows_per_program(M):
    # Up to 8 rows per program while keeping about 2000+ programs so the last wave is short; small calls keep one
    # row per program.
    return max(1, min(8, M // 2048))


def _check_float(t, what):
    if t.dtype not in _DTYPES:
        raise ValueError(f"{what}: unsupported dtype {t.dtype}")
    if t.stride(-1) != 1:
        raise ValueError(f"{what}: not contiguous on dim D")


def _modulation(t, B, S, D, what):
    """(batch stride, token stride, frame length, kind) of a modulation operand."""
    _check_float(t, what)
    shape, st = t.shape, t.stride()
    nd = len(shape)
    if nd == 1 and shape[0] in (1, D):
        return 0, 0, 1, (_ONE if shape[0] == 1 else _SHARED)
    if nd == 2 and shape[0] in (1, B) and shape[1] == D:
        sb = st[0] if shape[0] > 1 else 0
        return sb, 0, 1, (_PER_ROW if sb else _SHARED)
    if nd == 3 and shape[0] in (1, B) and shape[1] in (1, S) and shape[2] == D:
        sb, ss = (st[0] if shape[0] > 1 else 0), (st[1] if shape[1] > 1 else 0)
        return sb, ss, 1, (_PER_ROW if sb or ss else _SHARED)
    if nd == 4 and shape[0] == B and shape[2] == 1 and shape[3] == D:
        if S % shape[1] != 0:
            raise ValueError(f"{what}: S ({S}) must be divisible by F ({shape[1]})")
        sb, sf = (st[0] if B > 1 else 0), (st[1] if shape[1] > 1 else 0)
        return sb, sf, S // shape[1], (_PER_ROW if sb or sf else _SHARED)
    raise ValueError(f"{what}: unsupported tensor shape {tuple(shape)}")


def _vector(t, D, what):
    if t is None:
        return None
    _check_float(t, what)
    if tuple(t.shape) != (D,):
        raise ValueError(f"{what}: unsupported tensor shape {tuple(t.shape)}")
    return t


def _sig(t):
    return None if t is None else (t.shape, t.stride(), t.dtype)


def _plan(x, residual, gate, weight, bias, scale, shift, norm_type, out, residual_out):
    """Validate one input signature (upstream's rules and messages) and fix its launch."""
    if norm_type not in ("layer", "rms"):
        raise ValueError('norm_type must be one of "layer" and "rms"')
    if x.dim() != 3:
        raise ValueError(f"x: unsupported tensor shape {tuple(x.shape)}")
    B, S, D = x.shape
    _check_float(x, "x")
    if D % 256 != 0 or D > 8192:
        raise ValueError(f"D={D} not supported, must be multiple of 256 and <= 8192")
    _vector(weight, D, "weight")
    _vector(bias, D, "bias")
    sc = _modulation(scale, B, S, D, "scale")
    sh = _modulation(shift, B, S, D, "shift")
    has_res = residual is not None
    rs, os_, g = (0, 0), (0, 0), (0, 0, 1, _NONE)
    if has_res:
        _check_float(residual, "residual")
        if tuple(residual.shape) != (B, S, D):
            raise ValueError(f"residual: unsupported tensor shape {tuple(residual.shape)}")
        rs, os_ = residual.stride()[:2], residual_out.stride()[:2]
        if gate is not None:
            g = _modulation(gate, B, S, D, "gate")
    M = B * S
    if M == 0:
        return None, False, False
    is_ln = norm_type == "layer"
    # Upstream's LayerNorm applies its affine only when both weight and bias are given; its RMS path has no bias.
    has_w = weight is not None and (bias is not None or not is_ln)
    has_b = is_ln and weight is not None and bias is not None
    # fp32 rows are judged at 1e-5: they hold the row in fp64 and take the two-pass statistics in fp64 (v11).
    precise = x.dtype == torch.float32 or (has_res and residual.dtype == torch.float32)
    C, K, rows, warps, prefetch = _layout(D, M, has_res, g[3], sc[3], sh[3])
    late = _RES_OUT_LATE and has_res and not _padded_res(M, g[3], D)
    tensors = (out, residual_out if has_res else x, x, residual if has_res else x,
               gate if g[3] else x, weight if has_w else x, bias if has_b else x, scale, shift)
    return Plan(
        (cdiv(M, rows), 1, 1), [t.dtype for t in tensors],
        (M, S, D, rows, x.stride(0), x.stride(1), rs[0], rs[1], out.stride(0), out.stride(1), os_[0], os_[1],
         g[0], g[1], g[2], sc[0], sc[1], sc[2], sh[0], sh[1], sh[2]),
        (is_ln, has_res, g[3], sc[3], sh[3], has_w, has_b, precise, C, K, K * C != D, prefetch, _STREAM_CG,
         late, late and (has_w or has_b)),
        warps,
    ), has_w, has_b


# Launch plans by input signature: a repeated call (the production case) skips validation and layout analysis. At
# most _PLANS_MAX, first in first out: a server meets a few signatures, a sweep many (kda rules: bounded caches).
_plans = {}
_PLANS_MAX = 256


def _run(x, residual, gate, weight, bias, scale, shift, norm_type, eps, out, residual_out):
    if out is None:
        out = torch.empty_like(x)
    if residual is not None and residual_out is None:
        residual_out = torch.empty_like(x)
    key = (_sig(x), _sig(residual), _sig(gate), _sig(weight), _sig(bias), _sig(scale), _sig(shift), norm_type,
           _sig(out), _sig(residual_out))
    try:
        plan, has_w, has_b = _plans[key]
    except KeyError:
        if len(_plans) >= _PLANS_MAX:
            del _plans[next(iter(_plans))]
        plan, has_w, has_b = _plans[key] = _plan(x, residual, gate, weight, bias, scale, shift, norm_type, out,
                                                 residual_out)
    if plan is not None:
        if residual is None:
            r = ro = g = x
        else:
            r, ro, g = residual, residual_out, (x if gate is None else gate)
        _launch.run(plan, (out, ro, x, r, g, weight if has_w else x, bias if has_b else x, scale, shift),
                    (float(eps),))
    return out, residual_out


def fused_norm_scale_shift(x, weight, bias, scale, shift, norm_type, eps=1e-5, *, out=None):
    """norm(x) * (1 + scale) + shift; upstream's signature plus `out=`."""
    return _run(x, None, None, weight, bias, scale, shift, norm_type, eps, out, None)[0]


def fused_scale_residual_norm_scale_shift(residual, x, gate, weight, bias, scale, shift, norm_type, eps=1e-5, *,
                                          out=None, residual_out=None):
    """r = residual + gate * x (gate None: 1); y = norm(r) * (1 + scale) + shift; returns (y, r)."""
    return _run(x, residual, gate, weight, bias, scale, shift, norm_type, eps, out, residual_out)
