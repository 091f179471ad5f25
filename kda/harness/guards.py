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
                     "threading", "subprocess"}
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


def _device_function_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef):
            for dec in fn.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                name = _dotted(target) or ""
                if name.split(".")[-1] in JIT_DECORATORS and name.split(".")[0] in ("triton", "cute", "tl"):
                    inside.update(id(n) for n in ast.walk(fn) if n is not fn)
                    break
    return inside


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
        device_code = _device_function_nodes(tree)
        for node in ast.walk(tree):
            where = f"{path.name}:{getattr(node, 'lineno', '?')}"
            if id(node) in device_code:
                continue  # inside a @triton.jit / CuTe kernel: tensor methods there are device ops, not torch
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                for name in names:
                    top = name.split(".")[0]
                    if isinstance(node, ast.ImportFrom) and node.level:
                        continue  # relative import inside the solution package
                    if top in FORBIDDEN_MODULES or name.startswith("torch.nn"):
                        found.append(f"{where}: imports {name!r} (the baseline, the oracle, the harness and introspection are off limits)")
            elif isinstance(node, ast.Attribute):
                name = _dotted(node)
                if not name:
                    continue
                parts = name.split(".")
                if parts[0] == "torch" and len(parts) >= 2:
                    if parts[1] not in TORCH_ALLOWED:
                        found.append(f"{where}: uses {name} (torch compute ops may not run on the candidate's hot path)")
                    elif parts[1] == "cuda" and len(parts) >= 3 and parts[2] not in TORCH_CUDA_ALLOWED:
                        found.append(f"{where}: uses {name} (streams, events and timers belong to the harness)")
                    elif parts[1] == "ops" and len(parts) >= 3 and parts[2] == "aten":
                        found.append(f"{where}: uses {name} (aten ops are torch compute ops)")
                if parts[0] == "time" or name.endswith("perf_counter"):
                    found.append(f"{where}: uses {name} (timers belong to the harness)")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in TENSOR_COMPUTE_METHODS and _dotted(node.func.value) not in ("triton", "tl", "math"):
                    owner = _dotted(node.func.value) or "<expr>"
                    if not owner.startswith(("tl.", "triton.")):
                        found.append(f"{where}: calls .{node.func.attr}() on {owner} (tensor compute on the hot path)")
    return found


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


def _watched() -> dict[str, object]:
    cuda = torch.cuda
    return {
        "torch.cuda.Event": cuda.Event,
        "torch.cuda.Event.record": cuda.Event.record,
        "torch.cuda.Event.elapsed_time": cuda.Event.elapsed_time,
        "torch.cuda.Event.synchronize": cuda.Event.synchronize,
        "torch.cuda.synchronize": cuda.synchronize,
        "torch.cuda.CUDAGraph.replay": cuda.CUDAGraph.replay,
        "torch.cuda.graph": cuda.graph,
        "time.perf_counter": time.perf_counter,
        "time.perf_counter_ns": time.perf_counter_ns,
        "time.time": time.time,
        "torch.equal": torch.equal,
        "torch.isnan": torch.isnan,
        "torch.isinf": torch.isinf,
        "torch.isfinite": torch.isfinite,
        "torch.Tensor.clone": torch.Tensor.clone,
        "torch.Tensor.fill_": torch.Tensor.fill_,
        "torch.Tensor.to": torch.Tensor.to,
        "torch.Tensor.__sub__": torch.Tensor.__sub__,
        "torch.Tensor.abs": torch.Tensor.abs,
        "sys.setprofile": sys.setprofile,
    }


class TamperWatch:
    """Captures the functions the harness relies on; `changed()` lists any that were replaced since."""

    def __init__(self):
        self.original = _watched()

    def changed(self) -> list[str]:
        now = _watched()
        return [k for k, v in self.original.items() if now[k] is not v]

    def restore(self) -> None:
        """Put the originals back so the rest of the run measures honestly (the row is already failed)."""
        import builtins  # noqa: F401  (keeps restore free of candidate-visible state)

        torch.cuda.Event = self.original["torch.cuda.Event"]
        for key, value in self.original.items():
            owner_path, attr = key.rsplit(".", 1)
            owner = {"torch.cuda.Event": torch.cuda.Event, "torch.cuda.CUDAGraph": torch.cuda.CUDAGraph,
                     "torch.cuda": torch.cuda, "torch": torch, "time": time, "torch.Tensor": torch.Tensor,
                     "sys": sys}[owner_path]
            if getattr(owner, attr) is not value:
                setattr(owner, attr, value)


PYTORCH_KERNEL_MARKERS = ("at::native", "at::cuda", "aten::", "cublas", "cudnn", "triton_poi_", "triton_red_",
                          "triton_per_", "Memcpy", "Memset")


def torch_kernels(kernel_names: list[str]) -> list[str]:
    return [k for k in kernel_names if any(m in k for m in PYTORCH_KERNEL_MARKERS)]
