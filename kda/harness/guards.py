"""Rules the candidate must keep: static (its source) and at run time (what it calls, what it patches).

Static (kda/harness/static_rules.py): an allowlist of what the solution may import and reach, and no lookups by
string, internals, patching or hooks; no torch compute ops on its hot path (allocation, views and metadata are
fine). Run time: a profiler hook records
every Python call made during a checked candidate call and flags code of the vendored baseline or the oracle; a
tamper check compares the timing and checking functions with the originals captured before the candidate loaded.
"""
from __future__ import annotations

import sys
import time

import torch

# The static rules (an allowlist of imports and reachable names, file:line and rule per violation) live in
# kda/harness/static_rules.py; re-exported here for the callers that know them as guards' own.
from kda.harness.static_rules import RULES, static_violations  # noqa: E402,F401


class CallTracer:
    """Records calls into forbidden code during one candidate call.

    Python functions are seen through sys.setprofile (by the file their code lives in). Triton kernels are launched
    through their JIT objects, whose Python frames live in Triton's own files, so the launch entry points of
    Triton's runtime classes are wrapped for the duration of the call and the kernel's defining file is checked.
    (The hook never reads frame locals: materialising them from a profile hook corrupts Triton's interpreter.)
    """

    def __init__(self, forbidden_files: set[str], forbidden_prefixes: tuple[str, ...]):
        self.files = forbidden_files
        self.prefixes = forbidden_prefixes
        self.hits: list[str] = []
        self._old = None
        self._patched: list[tuple[type, object]] = []

    def _forbidden(self, filename: str) -> bool:
        return filename in self.files or (bool(self.prefixes) and filename.startswith(self.prefixes))

    def _hook(self, frame, event, arg):
        if event == "call" and len(self.hits) < 10 and self._forbidden(frame.f_code.co_filename):
            self.hits.append(f"{frame.f_code.co_name} in {frame.f_code.co_filename}")

    def _launch_classes(self) -> list[type]:
        classes = []
        try:
            from triton.runtime.jit import JITFunction
            classes.append(JITFunction)
        except ImportError:
            pass
        try:
            from triton.runtime.autotuner import Autotuner, Heuristics
            classes += [Autotuner, Heuristics]
        except ImportError:
            pass
        try:
            from triton.runtime.interpreter import InterpretedFunction
            classes.append(InterpretedFunction)
        except ImportError:
            pass
        return classes

    def _wrap(self, original):
        tracer = self

        def run(obj, *args, **kwargs):
            fn = obj
            for _ in range(5):  # Autotuner -> JITFunction -> python function
                fn = getattr(fn, "fn", None)
                code = getattr(fn, "__code__", None)
                if code is not None:
                    if tracer._forbidden(code.co_filename) and len(tracer.hits) < 10:
                        tracer.hits.append(f"Triton kernel {code.co_name} from {code.co_filename}")
                    break
            return original(obj, *args, **kwargs)

        return run

    def __enter__(self):
        for cls in self._launch_classes():
            if "run" in cls.__dict__:
                self._patched.append((cls, cls.__dict__["run"]))
                cls.run = self._wrap(cls.__dict__["run"])
        self._old = sys.getprofile()
        sys.setprofile(self._hook)
        return self

    def __exit__(self, *exc):
        sys.setprofile(self._old)
        for cls, original in self._patched:
            cls.run = original
        self._patched.clear()
        return False


_MISSING = object()


def _namespaces() -> dict[str, object]:
    """Objects whose whole attribute tables are watched: the classes and modules the harness times and checks with."""
    return {"torch.Tensor": torch.Tensor, "torch.cuda.Event": torch.cuda.Event,
            "torch.cuda.CUDAGraph": torch.cuda.CUDAGraph, "time": time}


# Module-level functions watched by name (whole torch / torch.cuda tables grow legitimately as submodules load).
_MODULE_KEYS = {
    "torch": ("equal", "isnan", "isinf", "isfinite", "where", "sign", "abs", "empty", "empty_like", "compile"),
    "torch.cuda": ("Event", "CUDAGraph", "graph", "synchronize", "Stream", "stream", "current_stream"),
    "sys": ("setprofile", "getprofile"),
}


def _module(name: str):
    return {"torch": torch, "torch.cuda": torch.cuda, "sys": sys}[name]


def _compiler_global(key: str, old: dict) -> bool:
    """torch.compile adds dunder globals (__compiled_fn_*, __import_*, __builtins_dict_*) to the module that defines
    a compiled function; a new dunder name is that, not tampering (harness code never reads unknown names)."""
    return key not in old and key.startswith("__")


class TamperWatch:
    """Snapshots the attribute tables the harness relies on; `changed()` lists anything replaced, added or removed."""

    def __init__(self):
        self.tables = {k: dict(vars(obj)) for k, obj in _namespaces().items()}
        self.keys = {m: {k: getattr(_module(m), k, _MISSING) for k in keys} for m, keys in _MODULE_KEYS.items()}
        self.objects = _namespaces()
        self.extra: dict[str, object] = {}

    def watch(self, name: str, obj: object) -> None:
        """Also watch obj's whole attribute table (harness modules and classes, the oracle, the adapter)."""
        self.extra[name] = obj
        self.objects[name] = obj
        self.tables[name] = dict(vars(obj))

    def changed(self) -> list[str]:
        out = []
        now = {**_namespaces(), **self.extra}
        for name, obj in now.items():
            if obj is not self.objects[name]:
                out.append(name)
                continue
            table, old = vars(obj), self.tables[name]
            for k in set(table) | set(old):
                if table.get(k, _MISSING) is not old.get(k, _MISSING) and not _compiler_global(k, old):
                    out.append(f"{name}.{k}")
        for m, keys in self.keys.items():
            mod = _module(m)
            for k, v in keys.items():
                if getattr(mod, k, _MISSING) is not v:
                    out.append(f"{m}.{k}")
        return sorted(out)

    def restore(self) -> None:
        """Put the originals back so the rest of the run measures honestly (the row is already failed)."""
        torch.cuda.Event = self.objects["torch.cuda.Event"]
        torch.cuda.CUDAGraph = self.objects["torch.cuda.CUDAGraph"]
        torch.Tensor = self.objects["torch.Tensor"]
        for name, old in self.tables.items():
            obj = self.objects[name]
            table = vars(obj)
            for k in set(table) | set(old):
                if table.get(k, _MISSING) is old.get(k, _MISSING) or _compiler_global(k, old):
                    continue
                if k not in old:
                    delattr(obj, k)
                else:
                    setattr(obj, k, old[k])
        for m, keys in self.keys.items():
            mod = _module(m)
            for k, v in keys.items():
                if getattr(mod, k, _MISSING) is not v:
                    if v is _MISSING:
                        delattr(mod, k)
                    else:
                        setattr(mod, k, v)


PYTORCH_KERNEL_MARKERS = ("at::native", "at::cuda", "aten::", "cublas", "cudnn", "triton_poi_", "triton_red_",
                          "triton_per_", "Memcpy", "Memset")


def torch_kernels(kernel_names: list[str]) -> list[str]:
    return [k for k in kernel_names if any(m in k for m in PYTORCH_KERNEL_MARKERS)]
