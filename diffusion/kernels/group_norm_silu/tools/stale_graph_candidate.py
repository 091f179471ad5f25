"""A group_norm_silu candidate that fails under CUDA graphs as v17-v18 did (for `kda check --candidate`).

It is the real solution with the held kernel's epoch made fresh and zeroed on every call, as the tags of v17-v18
were: a graph freezes the call's salt and captures the zeroing, so every replay tags its partials alike and may read
its last replay's partials as its own. Eager calls stay correct (each gets a new salt), so only the harness's replay
on shifted inputs (phase 3, kda/harness/worker.py check_replay_shifted) can catch it:

    kda check group_norm_silu --candidate diffusion/kernels/group_norm_silu/tools/stale_graph_candidate.py \
        --rows hyvae_c512_t9_128x128_contig
"""
import sys

import torch

from kda.definition.task import Task

_sol = Task.load("group_norm_silu").load_solution()
_m = sys.modules[_sol.__name__ + ".group_norm_silu"]


def _frozen_epoch(device):
    buf = torch.empty(1, dtype=torch.int32, device=device)
    _m._launch_zero((1, 1, 1), (buf,), (1,), (), (1024,), 4)
    return buf


_m._held_epoch = _frozen_epoch
triton_group_norm_silu = _sol.triton_group_norm_silu
apply_group_norm_silu = _sol.apply_group_norm_silu
