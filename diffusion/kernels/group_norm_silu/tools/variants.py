"""group_norm_silu's layout variants for scripts/layout_sweep.py (and the scripts that take its variants:
graph_placement.py, l2_aftermath.py): `variants()` returns (the candidate's module, {name: {attribute: replacement}}).

    python3 scripts/layout_sweep.py group_norm_silu --rows hyvae_c512_t9_128x128_contig --variants default,split
"""
import sys


from kda.definition.task import Task


def _module():
    return sys.modules[Task.load("group_norm_silu").load_solution().__name__ + ".group_norm_silu"]


def variants():
    """The split path's layouts (see _SPLIT_* in the solution) around the defaults, for flat (CPG <= 4) and
    per-channel tiles; and the largest group that still takes the one-launch path when there are few (batch,
    group) programs."""
    m = _module()
    out = {}
    for t, i in ((2048, 4), (4096, 2)):
        for st in (2, 4, 8):
            for sw, aw in ((4, 4), (4, 8), (8, 4)):
                lay = (t, i, st, sw, aw)
                out["t{}_i{}_st{}_w{}{}".format(*lay)] = {"_SPLIT_CONTIGUOUS": lay, "_SPLIT_FLAT": lay}
    out.update({f"fused_below_2^{k}": {"_FUSED_FEW_GROUPS_MAX": 1 << k} for k in (15, 16, 17)})
    # v5: the Triton paths alone (no resident kernel), the resident kernel at every size, and the team wait priced
    # at 0, 6 and 24 KB per CTA
    out["triton"] = {"_plan": m._triton_plan}
    out["resident_all"] = {"_RESIDENT_MAX_BYTES": 1 << 62}
    out.update({f"wait_{v // 64}k": {"_RESIDENT_BARRIER_VECS": v} for v in (0, 384, 1536)})
    # v6's L2 stream kernel (lag_*, span_*, no_hints, no_stream, stream_all) is gone with its knobs (ledger L0094)
    # v7: flat tiles (one contiguous run per tile) for groups of 8 and 16 channels too, at v4's flat layouts and
    # around them (v3b tried flat groups before v4's flat tiles existed)
    for lay in ((4096, 2, 8, 4, 4), (2048, 4, 8, 4, 4), (4096, 4, 8, 4, 8), (8192, 2, 16, 4, 8)):
        out["flat_all_t{}_i{}_st{}_w{}{}".format(*lay)] = {"_FLAT_MAX_CPG": 1 << 10, "_SPLIT_FLAT": lay}
    # v8: channels_last x through the row kernels (v7's channel-fast tiles as `rows_off`): the statistics' elements
    # per lane and tile, tiles per program and 16-byte vectors per lane along a row; the apply's channel block, rows
    # per tile, tiles per program and warps; merging in the apply never or up to 256 partials per group; the program
    # count under which statistics programs take fewer tiles. (5944fc2's sweep named statistics layouts by rows per
    # tile: rows_st16_i16_v1 there is 16 rows.)
    out["rows_off"] = {"_ROWS": False}
    d = m._SPLIT_ROWS
    for st in ((64, 16, 1), (256, 16, 1), (128, 8, 1), (128, 32, 1), (128, 16, 2)):
        out["rows_st{}_i{}_v{}".format(*st)] = {"_SPLIT_ROWS": st + d[3:]}
    for ap in ((64, 64, 4, 4), (128, 128, 2, 8), (64, 128, 2, 4), (128, 64, 2, 8),
               # H200 (the defaults came from H100 sweeps): longer runs of y per channel, more or fewer warps
               (64, 256, 1, 8), (128, 256, 1, 8), (32, 256, 1, 4), (64, 256, 1, 4), (128, 128, 1, 16),
               (128, 128, 1, 4), (256, 64, 1, 8), (64, 512, 1, 8)):
        out["rows_ap{}x{}_t{}_w{}".format(*ap)] = {"_SPLIT_ROWS": d[:3] + ap}
    # the finalize kernel (one program per group, split paths with many partials): partials per step and warps
    out.update({f"fin_p{p}_w{w}": {"_FINALIZE": (p, w)} for p, w in ((2048, 4), (2048, 8), (4096, 8), (512, 4), (1024, 4))})
    out.update({f"rows_merge_{k}": {"_ROWS_MERGE_MAX": k} for k in (0, 256)})
    out.update({f"rows_min_programs_{k}": {"_ROWS_MIN_PROGRAMS": k} for k in (512, 8192)})
    out.update({f"rows_from_{k >> 20}m": {"_ROWS_FROM_BYTES": k} for k in (1 << 20, 2 << 20)})
    out["default"] = {}
    # v9: the team kernel for contiguous 16-bit x of 128 MB and more, off and at its defaults, and around them (units of x in
    # flight, teams, programs per SM, tile, warps)
    out["no_team"] = {"_TEAM": False}
    out["team"] = {"_TEAM": True}
    out.update({f"team_l2_{v >> 20}m": {"_TEAM": True, "_TEAM_L2_BYTES": v} for v in (10 << 20, 20 << 20, 40 << 20)})
    out["team_max3"] = {"_TEAM": True, "_TEAM_MAX_TEAMS": 3}
    out["team_per_sm2"] = {"_TEAM": True, "_TEAM_PER_SM": 2}
    out["team_per_sm5"] = {"_TEAM": True, "_TEAM_PER_SM": 5}
    out["team_t2048"] = {"_TEAM": True, "_TEAM_BLOCK": 2048}
    out["team_t2048_w4_sm8"] = {"_TEAM": True, "_TEAM_BLOCK": 2048, "_TEAM_WARPS": 4, "_TEAM_PER_SM": 8}
    # the team grid as a plain launch (before cooperative launches), and a grid of 8 programs per SM planned without
    # the occupancy check, which the driver must refuse as a cooperative launch (the call then takes the split path;
    # as a plain launch it would hang)
    out["team_plain"] = {"_TEAM": True, "_TEAM_COOPERATIVE": False}

    def oversized(x, weight, bias, G, sms):
        B, C = x.shape[0], x.shape[1]
        S = x.numel() // (B * C)
        tp = m.team_plan(B * G, (C // G) * S, S, x.element_size(), sms * 8)
        return None if tp is None else m.team_launch(x, weight, bias, G, tp)
    out["team_oversized"] = {"_TEAM": True, "_team_fit": oversized}
    # v10 (each member read the team's next unit before waiting on the current one; 62ff4ed-team-overlap.json) and
    # v11 (two or four tiles loaded per loop step; 2878936-team-unroll.json) are gone with their knobs
    # v12 (the queue kernel; docs/profile/h200/layout-sweep/478e671-queue.json) is gone with its knobs
    # v13 (the pipeline of launches; 357b32e-pipe.json, c87f101-pipe-pdl.json) is gone with its knobs
    # v14 (the split pass chunk by chunk; d3713f0-chunks.json) is gone with its knobs
    # v17: the held kernel (one unit at a time held across the whole grid in TMA-filled rings), at its defaults, with
    # every row in the no-lag configuration (lag 0; since v19 other lags run the same kernel), at copies of 16 and 64
    # KB (default 32), and at 8, 12 and 16 apply warps (default 12; v19's statistics warps are four); the split path
    out["held"] = {"_HELD": True}
    out["split"] = {"_HELD": False}
    out["held_lag0"] = {"_HELD": True, "_HELD_LAG": 0}
    out.update({f"held_c{v}": {"_HELD": True, "_HELD_CHUNK_VECS": v} for v in (1024, 4096)})
    out.update({f"held_w{v}": {"_HELD": True, "_HELD_WARPS": v} for v in (8, 12, 16)})
    # v18: y written back into the ring and stored with TMA by the copy warp; the no-lag row as v18 ran it
    out["held_tma_store"] = {"_HELD": True, "_HELD_TMA_STORE": True}
    out["held_no_lag_v18"] = {"_HELD": True, "_HELD_NO_LAG": (12, True, 2048, 0)}
    # v20: the no-lag row with chunks held in registers (default: 4 of 12 KB); as v19 ran it (16 KB copies, no
    # registers), at v20's copies without registers, and with 2 chunks in registers
    out["held_no_lag_v19"] = {"_HELD": True, "_HELD_NO_LAG": (12, False, 1024, 0)}
    out["held_no_lag_c768_r0"] = {"_HELD": True, "_HELD_NO_LAG": (12, False, 768, 0)}
    out["held_no_lag_c768_r2"] = {"_HELD": True, "_HELD_NO_LAG": (12, False, 768, 2)}
    # rings of at most 6, 8 or 10 slots: fewer copies issued at the start, ahead of the first unit's statistics
    out.update({f"held_slots{n}": {"_HELD": True, "_HELD_MAX_SLOTS": n} for n in (6, 8, 10)})
    # v5's resident kernel with a team's wait priced higher (default 1536 vectors): teams of fewer CTAs, or of one
    # (no wait, no counter-zeroing launch) on more rows
    out.update({f"resident_barrier{v}": {"_RESIDENT_BARRIER_VECS": v} for v in (1536, 3072, 6144, 12288, 1 << 30)})
    # v28: the resident kernel's team counters kept on the device (one launch a call; since v30 generations tagging
    # the partials) or zeroed by a kernel before each call (v5), and each round of a team priced at 0 to 16384 vectors
    out["resident_zeroed"] = {"_RESIDENT_GENERATIONS": False}
    out.update({f"resident_gen_r{v}": {"_RESIDENT_GENERATIONS": True, "_RESIDENT_ROUND_VECS": v}
                for v in (0, 4096, 8192, 16384)})
    # v29: the resident kernel's weight and bias loaded before the slice's wait, or after its statistics (v5)
    out["resident_early_wb"] = {"_RESIDENT_EARLY_WB": True}
    out["resident_late_wb"] = {"_RESIDENT_EARLY_WB": False}
    # v21: x prefetched into the L2 ahead of the copies, 0 to 192 KB a CTA (up to 25 MB over 132 CTAs)
    out.update({f"held_pf{k}k": {"_HELD": True, "_HELD_PREFETCH_BYTES": k << 10}
                for k in (0, 16, 24, 32, 48, 64, 128, 192)})


    return m, out
