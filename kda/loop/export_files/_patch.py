"""Swap SGLang's kernel entry points for this package's kernels, and swap them back.

Copied verbatim into the exported package by `kda export` (kda/loop/export.py); kda itself never imports it. It
imports nothing but the standard library, torch (for the ops) and its own package, so it runs wherever the wheel
is installed.

Replacing the function attribute of the entry module is not enough: SGLang's model layers import kernels by name
(`from sglang.jit_kernel.diffusion.triton.scale_shift import fuse_scale_shift_kernel`), so they hold the original
function object in their own namespace. install() therefore also rebinds every name in an already-imported
`sglang.*` module that refers to the original object. Every replacement is remembered as (module, name, original)
so uninstall() puts back exactly what it found, even after an install that stopped half way.

Where an entry point is one of SGLang's custom ops (`torch.library.custom_op`, or a function whose name is an op
under `torch.ops.sglang`), install() also registers the package's kernel as that op's implementation for CUDA
tensors, in a torch.library.Library of its own per task: calls through `torch.ops.sglang.*` reach the kernel, and
torch.compile traces the op by upstream's schema and fake implementation. uninstall() destroys that Library, and
the dispatcher falls back to upstream's implementation.

Not covered (docs/export.md): callers that kept the original in a container or closure, and calls through an op
SGLang registered under another name than the entry point's (group_norm_silu's inner op, for one).
"""
from __future__ import annotations

import importlib
import sys
import threading
import warnings

from ._tasks import SGLANG_VERSION, TASKS

# task -> [(module, name, original)] in the order replaced; a task is in _COMPLETE once all its entry points are.
_SAVED: dict[str, list] = {}
_COMPLETE: set[str] = set()
_LOCK = threading.Lock()  # install and uninstall rebind module globals: one at a time
_LIBS: dict[str, object] = {}  # task -> the torch.library.Library holding its kernels as ops' implementations
DISPATCH_KEY = "CUDA"  # the device SGLang's ops run the kernels on (a CPU test may point it elsewhere)


def _op_of(original, fn: str) -> str | None:
    """The qualified name (`sglang::name`) of the SGLang custom op an entry point is or stands for, else None."""
    import torch

    for attr in ("_qualname", "_qualified_op_name"):  # torch.library.custom_op's object; an op's packet
        qual = getattr(original, attr, None)
        if isinstance(qual, str) and qual.startswith("sglang::"):
            return qual
    # SGLang's register_custom_op leaves the plain function at the entry point and registers it under its name
    return f"sglang::{fn}" if hasattr(torch.ops.sglang, fn) else None


def _register_op(task: str, op: str, kernel) -> str:
    import torch

    lib = _LIBS.get(task)
    if lib is None:
        lib = _LIBS[task] = torch.library.Library("sglang", "IMPL")
    with warnings.catch_warnings():  # replacing upstream's CUDA kernel of the op is the point
        warnings.simplefilter("ignore")
        lib.impl(op.split("::", 1)[1], kernel, DISPATCH_KEY)
    return f"{op} ({DISPATCH_KEY})"


def _task_names(tasks) -> list[str]:
    """`tasks` as a list of known task names (None: all). A bare string is one task, not its characters."""
    if tasks is None:
        return list(TASKS)
    names = [tasks] if isinstance(tasks, str) else list(tasks)
    unknown = [t for t in names if t not in TASKS]
    if unknown:
        raise ValueError(f"unknown task(s) {', '.join(map(repr, unknown))}; known tasks: {', '.join(TASKS)}")
    return names


def _sglang_modules() -> list:
    return [m for name, m in list(sys.modules.items())
            if m is not None and (name == "sglang" or name.startswith("sglang."))]


def _import_entry_module(name: str, entry: str):
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise ImportError(f"kda_diffusion_kernels.install: cannot import {name} (entry point {entry}): {e}; this "
                          f"package patches sglang=={SGLANG_VERSION}, which must be installed", name=name) from e


def _replace(saved: list, module, name: str, new) -> str:
    saved.append((module, name, getattr(module, name)))
    setattr(module, name, new)
    return f"{module.__name__}.{name}"


def _restore(task: str) -> None:
    """Put back every original the task's install replaced (newest first), then the names that picked up one of
    its kernels later: a module imported after install() got the kernel from the patched entry module."""
    saved = _SAVED.pop(task, [])
    _COMPLETE.discard(task)
    lib = _LIBS.pop(task, None)
    if lib is not None:  # its registrations go, and each op dispatches to upstream's implementation again
        lib._destroy()
    back = {}
    for module, name, original in reversed(saved):
        back[id(getattr(module, name))] = (getattr(module, name), original)
        setattr(module, name, original)
    for module in _sglang_modules():
        for name, value in list(vars(module).items()):
            pair = back.get(id(value))
            if pair is not None and pair[0] is value:
                setattr(module, name, pair[1])


def _install_task(task: str) -> list[str]:
    if task in _SAVED:  # an earlier install of this task stopped half way: start again from the originals
        _restore(task)
    kernels = importlib.import_module(f"{__package__}.{task}")
    saved = _SAVED.setdefault(task, [])
    done = []
    for entry in TASKS[task]:
        module_name, fn = entry.split(":")
        module = _import_entry_module(module_name, entry)
        if not hasattr(module, fn):
            raise ImportError(f"kda_diffusion_kernels.install: {module_name} has no {fn!r}: not the module layout "
                              f"of sglang=={SGLANG_VERSION}", name=module_name)
        original, new = getattr(module, fn), getattr(kernels, fn)
        op = _op_of(original, fn)
        if op is not None:
            done.append(_register_op(task, op, new))
        done.append(_replace(saved, module, fn, new))
        for other in _sglang_modules():
            for name, value in list(vars(other).items()):
                if value is original:
                    done.append(_replace(saved, other, name, new))
    _COMPLETE.add(task)
    return done


def install(tasks=None) -> list[str]:
    """Replace the SGLang entry points of `tasks` (names of TASKS; None: all) with this package's kernels, and every
    reference to them in imported sglang modules. Returns the `module.name`s rebound by this call. Installing an
    installed task does nothing; an unknown task raises ValueError; a missing sglang module raises ImportError
    (what was replaced before it stays replaced until uninstall())."""
    names = _task_names(tasks)
    with _LOCK:
        done = []
        for task in names:
            if task not in _COMPLETE:
                done += _install_task(task)
        return done


def uninstall(tasks=None) -> None:
    """Restore what install() replaced for `tasks` (None: all), complete or partial installs alike."""
    names = _task_names(tasks)
    with _LOCK:
        for task in names:
            _restore(task)


def installed() -> list[str]:
    """Tasks whose every entry point is currently replaced."""
    return [t for t in TASKS if t in _COMPLETE]
