"""group_norm_silu's layout variants for scripts/layout_sweep.py (and the scripts that take its variants:
graph_placement.py, l2_aftermath.py): `variants()` returns (the candidate's module, {name: {attribute: replacement}}).

    python3 scripts/layout_sweep.py group_norm_silu --rows hyvae_c512_t9_128x128_contig --variants default,split

Every variant sets planner parameters the module has (tests/scripts/test_layout_sweep.py checks it). Variants of
features that are gone, and of switches folded into the module at their production values (v28's zeroed counters,
v29's late weight loads, v18's TMA stores, v8d's row kernels for small channels_last x, a plain team launch), went
with them: git history has the sweeps as they ran, the ledger what they measured.
"""
import sys

from kda.definition.task import Task


def _module():
    return sys.modules[Task.load("group_norm_silu").load_solution().__name__ + ".group_norm_silu"]


def variants():
    m = _module()
    out = {"default": {}}
    # Path choices: the Triton paths alone (no CUDA kernel); the Triton split path where the held or team kernel would
    # run; the team kernel off (H100); the resident kernel at every size; v7's channel-fast split tiles for
    # channels_last x instead of the row kernels.
    out["triton"] = {"_plan": m._triton_plan}
    out["split"] = {"_HELD_GPUS": (), "_TEAM_GPUS": ()}
    out["no_team"] = {"_TEAM_GPUS": ()}
    out["resident_all"] = {"_RESIDENT_MAX_BYTES": 1 << 62}
    out["rows_off"] = {"_ROWS_MAX_C": 0}
    # The split path's layouts (_SPLIT_*) around the defaults, for flat and per-channel tiles; flat tiles for groups
    # of 8 and 16 channels at v4's flat layouts and around them (v7); the largest group that still takes the
    # one-launch path when there are few (batch, group) programs.
    for t, i in ((2048, 4), (4096, 2)):
        for st in (2, 4, 8):
            for sw, aw in ((4, 4), (4, 8), (8, 4)):
                lay = (t, i, st, sw, aw)
                out["t{}_i{}_st{}_w{}{}".format(*lay)] = {"_SPLIT_CONTIGUOUS": lay, "_SPLIT_FLAT": lay}
    for lay in ((4096, 2, 8, 4, 4), (2048, 4, 8, 4, 4), (4096, 4, 8, 4, 8), (8192, 2, 16, 4, 8)):
        out["flat_all_t{}_i{}_st{}_w{}{}".format(*lay)] = {"_FLAT_MAX_CPG": 1 << 10, "_SPLIT_FLAT": lay}
    out.update({f"fused_below_2^{k}": {"_FUSED_FEW_GROUPS_MAX": 1 << k} for k in (15, 16, 17)})
    # The finalize kernel (one program per group, split paths with many partials): partials per step and warps.
    out.update({f"fin_p{p}_w{w}": {"_FINALIZE": (p, w)}
                for p, w in ((2048, 4), (2048, 8), (4096, 8), (512, 4), (1024, 4))})
    # v8's row kernels (channels_last): the statistics' elements per lane and tile, tiles per program and 16-byte
    # vectors per lane along a row; the apply's channel block, rows per tile, tiles per program and warps; merging in
    # the apply never or up to 256 partials per group; the program count under which statistics programs take fewer
    # tiles. (5944fc2's sweep named statistics layouts by rows per tile: rows_st16_i16_v1 there is 16 rows.)
    d = m._SPLIT_ROWS
    for st in ((64, 16, 1), (256, 16, 1), (128, 8, 1), (128, 32, 1), (128, 16, 2)):
        out["rows_st{}_i{}_v{}".format(*st)] = {"_SPLIT_ROWS": st + d[3:]}
    for ap in ((64, 64, 4, 4), (128, 128, 2, 8), (64, 128, 2, 4), (128, 64, 2, 8),
               # H200 (the defaults came from H100 sweeps): longer runs of y per channel, more or fewer warps
               (64, 256, 1, 8), (128, 256, 1, 8), (32, 256, 1, 4), (64, 256, 1, 4), (128, 128, 1, 16),
               (128, 128, 1, 4), (256, 64, 1, 8), (64, 512, 1, 8)):
        out["rows_ap{}x{}_t{}_w{}".format(*ap)] = {"_SPLIT_ROWS": d[:3] + ap}
    out.update({f"rows_merge_{k}": {"_ROWS_MERGE_MAX": k} for k in (0, 256)})
    out.update({f"rows_min_programs_{k}": {"_ROWS_MIN_PROGRAMS": k} for k in (512, 8192)})
    # The resident kernel's cost model: a team's wait priced at 0 to 24 KB per CTA or more (teams of fewer CTAs, or
    # of one, on more rows), each round of a team at 0 to 16384 vectors.
    out.update({f"resident_barrier{v}": {"_RESIDENT_BARRIER_VECS": v} for v in (0, 384, 3072, 6144, 12288, 1 << 30)})
    out.update({f"resident_round{v}": {"_RESIDENT_ROUND_VECS": v} for v in (0, 4096, 8192)})
    # The team kernel (H100) around its defaults: units of x in flight, teams, programs per SM, tile, warps; and a
    # grid of 8 programs per SM planned without the occupancy check, which the driver must refuse as a cooperative
    # launch (the call then takes the split path).
    out.update({f"team_l2_{v >> 20}m": {"_TEAM_L2_BYTES": v} for v in (10 << 20, 40 << 20)})
    out["team_max3"] = {"_TEAM_MAX_TEAMS": 3}
    out["team_per_sm2"] = {"_TEAM_PER_SM": 2}
    out["team_per_sm5"] = {"_TEAM_PER_SM": 5}
    out["team_t2048"] = {"_TEAM_BLOCK": 2048}
    out["team_t2048_w4_sm8"] = {"_TEAM_BLOCK": 2048, "_TEAM_WARPS": 4, "_TEAM_PER_SM": 8}

    def oversized(x, weight, bias, G, sms):
        B, C = x.shape[0], x.shape[1]
        S = x.numel() // (B * C)
        tp = m.team_plan(B * G, (C // G) * S, S, x.element_size(), sms * 8)
        return None if tp is None else m.team_launch(x, weight, bias, G, tp)
    out["team_oversized"] = {"_team_fit": oversized}
    # The held kernel (H200) around its defaults: every row in the no-lag configuration (lag 0; since v19 other lags
    # run the same kernel), copies of 16 and 64 KB (default 32), 8 and 16 apply warps (default 12); the no-lag row as
    # v19 ran it (16 KB copies, no registers), at v20's copies without registers and with 2 chunks in registers
    # (default 4); rings of at most 6, 8 or 10 slots; x prefetched into the L2 ahead of the copies, 0 to 192 KB a CTA
    # (default 32).
    out["held_lag0"] = {"_HELD_LAG": 0}
    out.update({f"held_c{v}": {"_HELD_CHUNK_VECS": v} for v in (1024, 4096)})
    out.update({f"held_w{v}": {"_HELD_WARPS": v} for v in (8, 16)})
    out["held_no_lag_v19"] = {"_HELD_NO_LAG": (12, 1024, 0)}
    out["held_no_lag_c768_r0"] = {"_HELD_NO_LAG": (12, 768, 0)}
    out["held_no_lag_c768_r2"] = {"_HELD_NO_LAG": (12, 768, 2)}
    out.update({f"held_slots{n}": {"_HELD_MAX_SLOTS": n} for n in (6, 8, 10)})
    out.update({f"held_pf{k}k": {"_HELD_PREFETCH_BYTES": k << 10} for k in (0, 16, 24, 48, 64, 128, 192)})
    return m, out
