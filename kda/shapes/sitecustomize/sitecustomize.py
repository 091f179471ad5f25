"""Start the kda shapes recorder in any Python process: put this folder first on PYTHONPATH.

    PYTHONPATH=<repo>/kda/shapes/sitecustomize:<repo> KDA_RECORD_SHAPES=/tmp/shapes.jsonl \
    KDA_RECORD_MODEL=wan2.1-t2v python -m sglang.launch_server ...

Env: KDA_RECORD_SHAPES (log path; nothing happens without it), KDA_RECORD_TARGETS (comma-separated
'module:function', default: the SGLang diffusion entry points below), KDA_RECORD_MODEL (label, default
"unknown"), KDA_RECORD_CAP (lines per function, default 64). Any other sitecustomize later on sys.path
still runs. Nothing here raises: problems print one line to stderr.
"""
import os
import sys

DEFAULT_TARGETS = (
    "sglang.jit_kernel.diffusion.triton.scale_shift:fuse_scale_shift_kernel",
    "sglang.jit_kernel.diffusion.triton.norm:norm_infer",
    "sglang.jit_kernel.diffusion.triton.rmsnorm_onepass:triton_one_pass_rms_norm",
    "sglang.jit_kernel.diffusion.triton.rotary:apply_rotary_embedding",
    "sglang.jit_kernel.diffusion.triton.ltx2_rotary:apply_ltx2_split_rotary_emb",
    "sglang.jit_kernel.diffusion.triton.group_norm_silu:triton_group_norm_silu",
    "sglang.jit_kernel.diffusion.group_norm_silu:apply_group_norm_silu",
    "sglang.jit_kernel.diffusion.qknorm_rope:fused_inplace_qknorm_rope",
    "sglang.jit_kernel.diffusion.cutedsl.scale_residual_norm_scale_shift:fused_norm_scale_shift",
    "sglang.jit_kernel.diffusion.cutedsl.scale_residual_norm_scale_shift:fused_scale_residual_norm_scale_shift",
    "sglang.jit_kernel.diffusion.cutedsl.norm_tanh_mul_add_norm_scale:fused_norm_tanh_mul_add",
    "sglang.jit_kernel.diffusion.cutedsl.norm_tanh_mul_add_norm_scale:fused_norm_tanh_mul_add_norm_scale",
)


def _chain_next_sitecustomize() -> None:
    """Run the sitecustomize this file shadows (e.g. a distribution's), if there is one."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


def _start() -> None:
    log = os.environ.get("KDA_RECORD_SHAPES")
    if not log:
        return
    raw = os.environ.get("KDA_RECORD_TARGETS", "")
    targets = [t.strip() for t in raw.split(",") if t.strip()] or list(DEFAULT_TARGETS)
    cap = int(os.environ.get("KDA_RECORD_CAP") or 64)
    from kda.shapes.recorder import install

    install(log, targets, os.environ.get("KDA_RECORD_MODEL") or "unknown", cap)


try:
    _chain_next_sitecustomize()
except Exception as e:  # noqa: BLE001
    sys.stderr.write(f"kda shapes recorder: the shadowed sitecustomize failed: {type(e).__name__}: {e}\n")
try:
    _start()
except Exception as e:  # noqa: BLE001
    sys.stderr.write(f"kda shapes recorder: not recording: {type(e).__name__}: {e}\n")
