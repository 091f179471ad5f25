"""Rules the candidate must keep: static (its source) and at run time (what it calls, what it patches).

Static: the solution may not import the baseline, the oracle, the harness or introspection modules, and may not
use torch compute ops on its hot path (allocation, views and metadata are fine). Run time: a profiler hook records
every Python call made during a checked candidate call and flags code of the vendored baseline or the oracle; a
tamper check compares the timing and checking functions with the originals captured before the candidate loaded.
"""
from __future__ import annotations

import ast
import sys
import time
from pathlib import Path

import torch

FORBIDDEN_MODULES = {"sglang", "kda", "gc", "ctypes", "inspect", "oracle", "adapter", "bench", "multiprocessing",
                     "threading", "subprocess", "sys", "concurrent", "_thread", "asyncio", "signal", "importlib",
                     "builtins", "weakref"}
# The harness modules a candidate may import: the reviewed lean launch path (kda/runtime/lean_launch.py) and CUDA extension
# loader (kda/runtime/cuda_ext.py), shared so that no task's solution carries its own copy of either.
HARNESS_ALLOWED = ({"kda.runtime.lean_launch"} | {f"kda.runtime.lean_launch.{n}" for n in ("LaunchCache", "Plan", "cdiv", "next_pow2",
                                                                                 "resident_blocks")}
                   | {"kda.runtime.cuda_ext", "kda.runtime.cuda_ext.CudaExtension"})
TORCH_C_ALLOWED = {"torch._C._cuda_getCurrentRawStream"}  # the raw stream a lean launch path needs
TORCH_ALLOWED = {
    "empty", "empty_like", "empty_strided", "Tensor", "Size", "device", "dtype", "is_tensor", "library", "ops",
    "float32", "float16", "bfloat16", "float64", "float8_e4m3fn", "float8_e5m2", "int8", "int16", "int32", "int64",
    "uint8", "bool", "half", "float", "double", "long", "int", "cuda", "utils", "finfo", "iinfo", "no_grad",
    "inference_mode", "_C", "version", "__version__",
}
TORCH_CUDA_ALLOWED = {"current_stream", "current_device", "get_device_capability", "get_device_properties",
                      "is_available", "device", "_utils"}
TENSOR_COMPUTE_METHODS = {
    "float", "half", "bfloat16", "double", "to", "type", "mul", "mul_", "add", "add_", "sub", "div", "sum", "mean",
    "clone", "copy_", "contiguous", "fill_", "zero_", "addcmul", "addcmul_", "matmul", "where", "clamp", "exp", "pow",
    "sqrt", "rsqrt", "tanh", "sigmoid", "softmax", "var", "std", "norm", "masked_fill", "masked_fill_", "index_select",
    "gather", "scatter", "cpu", "cuda", "numpy", "tolist", "item", "sign", "abs", "max", "min", "lerp", "baddbmm",
}


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


JIT_DECORATORS = ("jit", "autotune", "heuristics", "kernel")
DEVICE_MODULES = ("triton", "cutlass")


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> canonical dotted name, from every import in the file (`import time as clock`, `from torch import add`)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                names[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                names[a.asname or a.name] = f"{node.module}.{a.name}"
    return names


def _resolve(name: str | None, aliases: dict[str, str]) -> str | None:
    if not name:
        return None
    head, _, rest = name.partition(".")
    base = aliases.get(head, head)
    return f"{base}.{rest}" if rest else base


def _device_function_nodes(tree: ast.AST, aliases: dict[str, str]) -> set[int]:
    """Nodes inside functions decorated by a real Triton / CuTe decorator (its root must be an imported module)."""
    inside: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef):
            for dec in fn.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                raw = _dotted(target) or ""
                resolved = _resolve(raw, aliases) or ""
                imported = raw.split(".")[0] in aliases and resolved.split(".")[0] in DEVICE_MODULES
                if imported and resolved.split(".")[-1] in JIT_DECORATORS:
                    inside.update(id(n) for n in ast.walk(fn) if n is not fn)
                    break
    return inside


def _name_problem(name: str) -> str | None:
    """Why a (resolved) dotted name may not appear in a solution, or None."""
    parts = name.split(".")
    if name in HARNESS_ALLOWED:
        return None
    if parts[0] in FORBIDDEN_MODULES or name.startswith("torch.nn"):
        return "the baseline, the oracle, the harness, introspection and torch.nn are off limits"
    if parts[0] == "torch" and len(parts) >= 2:
        if parts[1] not in TORCH_ALLOWED:
            return "torch compute ops may not run on the candidate's hot path"
        if parts[1] == "cuda" and len(parts) >= 3 and parts[2] not in TORCH_CUDA_ALLOWED:
            return "streams, events and timers belong to the harness"
        if parts[1] == "ops" and len(parts) >= 3 and parts[2] == "aten":
            return "aten ops are torch compute ops"
        if parts[1] == "_C" and len(parts) >= 3 and ".".join(parts[:3]) not in TORCH_C_ALLOWED:
            return "torch internals (dispatch modes, torch-function switches) are off limits"
    if parts[0] == "time" or parts[-1].startswith("perf_counter"):
        return "timers belong to the harness"
    return None


def static_violations(files: list[Path]) -> list[str]:
    """Human-readable violations, each naming file:line and the rule."""
    found = []
    for path in files:
        if path.suffix != ".py":
            continue
        try:
            tree = ast.parse(path.read_text(), filename=str(path))
        except SyntaxError as e:
            found.append(f"{path}:{e.lineno}: does not parse: {e.msg}")
            continue
        aliases = _aliases(tree)
        device_code = _device_function_nodes(tree, aliases)
        for node in ast.walk(tree):
            where = f"{path.name}:{getattr(node, 'lineno', '?')}"
            if id(node) in device_code:
                continue  # inside a @triton.jit / CuTe kernel: tensor methods there are device ops, not torch
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                if isinstance(node, ast.ImportFrom) and node.level:
                    continue  # relative import inside the solution package
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
                for name in names:
                    problem = _name_problem(name)
                    if problem:
                        found.append(f"{where}: imports {name!r} ({problem})")
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) or \
                    isinstance(node, ast.Name) and node.id in aliases:
                written = _dotted(node)
                name = _resolve(written, aliases)
                problem = _name_problem(name) if name else None
                if problem:
                    shown = written if written == name else f"{written} (= {name})"
                    found.append(f"{where}: uses {shown} ({problem})")
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                for t in targets:
                    name = _resolve(_dotted(t), aliases) if isinstance(t, ast.Attribute) else None
                    if name and name.split(".")[0] in ("torch", "time", "sys", "triton", "builtins", "os"):
                        found.append(f"{where}: assigns {name} (patching library or harness state is forbidden)")
                    if isinstance(t, ast.Attribute) and t.attr in ("__class__", "__dict__", "__code__", "__globals__"):
                        found.append(f"{where}: assigns .{t.attr} (swapping classes or code is forbidden)")
            if isinstance(node, ast.Call):
                fname = _resolve(_dotted(node.func), aliases) if isinstance(node.func, (ast.Name, ast.Attribute)) else None
                if fname in ("setattr", "delattr", "exec", "eval", "__import__", "builtins.setattr", "importlib.import_module"):
                    found.append(f"{where}: calls {fname}() (dynamic patching or imports are forbidden)")
                if isinstance(node.func, ast.Attribute) and node.func.attr in TENSOR_COMPUTE_METHODS:
                    owner = _resolve(_dotted(node.func.value), aliases) or "<expr>"
                    if not owner.startswith(("triton", "math")):
                        found.append(f"{where}: calls .{node.func.attr}() on {owner} (tensor compute on the hot path)")
    return sorted(set(found), key=found.index)


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
