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
            out += [f"{name}.{k}" for k in _changed_keys(obj, self.tables[name], _compiler_global)]
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
            _restore_table(self.objects[name], old, _compiler_global)
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


# Attributes of a Triton kernel object (JITFunction, Autotuner, Heuristics) that decide what a launch runs: replaced or
# added on an upstream kernel, they change the baseline arm's launch (a proxy, a hook that launches twice, other
# configs). Other instance attributes (compile caches and the like) legitimately change as kernels compile.
_TRITON_KEYS = ("fn", "run", "__call__", "__getitem__", "configs", "pre_hook", "post_hook", "launch_metadata",
                "pre_run_hooks", "early_config_prune", "perf_model", "prune_configs_by", "do_bench", "keys")
# Triton's process-wide hooks (triton.knobs.runtime): a hook set on them runs around every launch of either arm.
_KNOB_HOOKS = ("launch_enter_hook", "launch_exit_hook", "jit_cache_hook", "jit_post_compile_hook",
               "kernel_load_start_hook", "kernel_load_end_hook")


def _triton_classes() -> dict[str, type]:
    out = {}
    for mod, names in (("triton.runtime.jit", ("JITFunction", "KernelInterface")),
                       ("triton.runtime.autotuner", ("Autotuner", "Heuristics")),
                       ("triton.compiler.compiler", ("CompiledKernel",))):
        try:
            m = __import__(mod, fromlist=list(names))
        except ImportError:
            continue
        out.update({f"{mod}.{n}": getattr(m, n) for n in names if hasattr(m, n)})
    return out


def _knobs():
    try:
        import triton.knobs
        return triton.knobs.runtime
    except (ImportError, AttributeError):
        return None


def _hook_state(hook) -> tuple:
    """A runtime hook as (the object, the functions it chains): Triton 3.9's hooks are HookChain objects, to which
    `.add(fn)` appends in place, so the object alone would not show a hook added."""
    calls = getattr(hook, "calls", None)
    return hook, (tuple(calls) if isinstance(calls, list) else None)


def _is_triton_kernel(obj) -> bool:
    return any(isinstance(obj, cls) for cls in _triton_classes().values() if cls.__name__ != "CompiledKernel")


def pop_torch_modes() -> list[str]:
    """Pop every torch-function and dispatch mode left pushed (a candidate's way to intercept the torch calls made
    after its own), naming each kind popped."""
    import torch

    problems = []
    while torch._C._len_torch_function_stack() > 0:
        torch._C._pop_torch_function_stack()
        problems.append("a TorchFunctionMode left active")
    while torch._C._len_torch_dispatch_stack() > 0:
        torch._C._pop_torch_dispatch_stack()
        problems.append("a TorchDispatchMode left active")
    return problems


class UpstreamWatch:
    """Upstream's state as the baseline arm runs it, snapshotted before the candidate is imported (issue 34, attack 3).

    A candidate shares the worker's interpreter with the upstream modules, so it could replace an upstream global
    with a proxy that launches the kernel twice, swap a function's code, hang a hook on an upstream Triton kernel or
    on Triton's own classes or process-wide launch hooks: each slows the baseline arm and so inflates the candidate's
    speedup. Watched: every upstream module's whole global table (by identity), the code, defaults and globals of
    each of its functions, the launch-deciding attributes of each of its Triton kernels, the tables of Triton's
    launch classes and Triton's runtime hooks. `changed()` names what differs; `restore()` puts it back so the rest
    of the run times the real baseline (the row is already failed). What this cannot see (a mutable container
    changed in place, native code) the baseline timed in a process that never imported the candidate catches
    (kda/harness/runner.py, BASELINE_SLOWED)."""

    def __init__(self, modules: dict[str, object]):
        self.modules = dict(modules)
        self.accept()

    def accept(self) -> None:
        """Take the state as it is now as the reference: after a baseline call, whose first run may set a global of
        its own (a lazily built table, a cached device property) while no candidate code runs."""
        self.tables = {name: dict(vars(m)) for name, m in self.modules.items()}
        self.functions = {}
        self.kernels = {}
        for name, m in self.modules.items():
            for k, v in self.tables[name].items():
                for label, fn in ((f"{name}.{k}", v), (f"{name}.{k}.__wrapped__", getattr(v, "__wrapped__", None))):
                    if getattr(fn, "__code__", None) is not None:
                        self.functions[label] = (fn, fn.__code__, fn.__defaults__, fn.__kwdefaults__, fn.__globals__)
                if _is_triton_kernel(v):
                    self.kernels[f"{name}.{k}"] = (v, {a: vars(v).get(a, _MISSING) for a in _TRITON_KEYS})
        self.classes = _triton_classes()
        self.class_tables = {n: dict(vars(c)) for n, c in self.classes.items()}
        knobs = _knobs()
        self.hooks = {h: _hook_state(getattr(knobs, h, _MISSING)) for h in _KNOB_HOOKS} if knobs is not None else {}

    def changed(self) -> list[str]:
        out = []
        for name, m in self.modules.items():
            out += [f"{name}.{k}" for k in _changed_keys(m, self.tables[name], _compiler_global)]
        for label, (fn, code, defaults, kwdefaults, globs) in self.functions.items():
            if fn.__code__ is not code or fn.__defaults__ is not defaults or fn.__kwdefaults__ is not kwdefaults \
                    or fn.__globals__ is not globs:
                out.append(f"{label} (its code, defaults or globals)")
        for label, (obj, attrs) in self.kernels.items():
            now = vars(obj)
            out += [f"{label}.{a}" for a, v in attrs.items() if now.get(a, _MISSING) is not v]
        for n, cls in self.classes.items():
            out += [f"{n}.{k}" for k in _changed_keys(cls, self.class_tables[n], _copyreg_cache)]
        knobs = _knobs()
        out += [f"triton.knobs.runtime.{h}" for h, v in self.hooks.items()
                if _hook_state(getattr(knobs, h, _MISSING)) != v]
        return sorted(out)

    def restore(self) -> None:
        for name, m in self.modules.items():
            _restore_table(m, self.tables[name], _compiler_global)
        for fn, code, defaults, kwdefaults, _globs in self.functions.values():
            # __globals__ is read-only: a function given other globals is a new object, which the table restore
            # above already replaced with the original.
            fn.__code__, fn.__defaults__, fn.__kwdefaults__ = code, defaults, kwdefaults
        for obj, attrs in self.kernels.values():
            for a, v in attrs.items():
                if vars(obj).get(a, _MISSING) is not v:
                    if v is _MISSING:
                        vars(obj).pop(a, None)
                    else:
                        setattr(obj, a, v)
        for n, cls in self.classes.items():
            _restore_table(cls, self.class_tables[n], _copyreg_cache)
        knobs = _knobs()
        for h, (obj, calls) in self.hooks.items():
            if obj is _MISSING or _hook_state(getattr(knobs, h, _MISSING)) == (obj, calls):
                continue
            setattr(knobs, h, obj)
            if calls is not None:
                obj.calls[:] = list(calls)


def _copyreg_cache(key: str, old: dict) -> bool:
    """copyreg caches a class's slot names in `__slotnames__` the first time one of its objects is copied or pickled
    (torch.compile and the profiler do, on an H100 in the first bench with the watch); that is no change to a launch."""
    return key == "__slotnames__" and key not in old


def _changed_keys(obj, old: dict, benign) -> list[str]:
    """Names in obj's attribute table replaced, added or removed since `old`, but for benign(name, old) additions."""
    table = vars(obj)
    return [k for k in set(table) | set(old) if table.get(k, _MISSING) is not old.get(k, _MISSING)
            and not benign(k, old)]


def _restore_table(obj, old: dict, benign) -> None:
    """Put back what _changed_keys(obj, old, benign) names."""
    for k in _changed_keys(obj, old, benign):
        if k not in old:
            delattr(obj, k)
        else:
            setattr(obj, k, old[k])


def candidate_threads(roots: tuple[str, ...]) -> list[str]:
    """Python threads whose code (the target, or a Thread subclass's run) lives in the candidate's files: a thread
    the candidate started keeps running between its calls, while the baseline or a peer is timed."""
    import threading

    out = []
    for t in threading.enumerate():
        fn = getattr(t, "_target", None) or getattr(type(t), "run", None)
        code = getattr(fn, "__code__", None) or getattr(getattr(fn, "__func__", None), "__code__", None)
        if code is not None and code.co_filename.startswith(roots):
            # the file's name only: details go into results files, which name no machine's paths
            out.append(f"thread {t.name!r} started by the candidate (running {code.co_name} from "
                       f"{code.co_filename.rsplit('/', 1)[-1]})")
    return out
