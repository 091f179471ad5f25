"""The static rules: what a solution's source may import, reach and do, as an allowlist.

A solution imports only the modules of `IMPORTS` (and its own package, by relative imports), and reaches from each
only the names `REACH` gives it: a dotted chain rooted at an imported name is walked segment by segment against the
table, so an alias (`os.sys`, `logging.time`), a module handed to another name (`t = torch`) or a name outside the
table (`torch.utils._python_dispatch`) is refused wherever it appears. Below `triton.language` (and `cutlass`) the
table is the live module itself: every object on the chain must be defined there, so `tl.core.builtins` is refused.

Around the table, rules on everything else a file can do: no builtin that looks up, runs or opens something by
string or reaches a namespace (`getattr`, `vars`, `eval`, `open`...), no dunder, private or frame/code attribute, no
attribute assigned or deleted (the solution's own instance in `__init__` aside), no hook on a Triton object (and no
attribute of a Triton kernel but `.warmup`), no foreign base class or metaclass, no torch compute on the host path,
and a CUDA extension's sources beside the solution (`CudaExtension(prefix, __file__, "csrc", ...)`).

Inside a @triton.jit / CuTe kernel, tensor methods are device ops (`x.to(tl.float32)`): that is the one rule
the device code is exempt from. Every violation names file:line and the rule (`RULES`).
"""
from __future__ import annotations

import ast
import importlib
import threading
import types
from functools import lru_cache
from pathlib import Path

# CPython 3.11's AST constructor is not safe across threads ("AST constructor recursion depth mismatch"): the
# exploit zoo and the CPU gate check several candidates at once from a thread pool, so parses take turns.
_PARSE_LOCK = threading.Lock()


def _parse(path: Path) -> ast.AST:
    source = path.read_text()
    with _PARSE_LOCK:
        return ast.parse(source, filename=str(path))


# ---- the allowlist -----------------------------------------------------------------------------------------------

LEAF = None          # a name with nothing reachable below it
OPEN = "open"        # a plain value: any public attribute below it (torch dtypes: itemsize, is_floating_point)
PUBLIC = "public"    # a module of plain functions and constants: any public name, each a leaf (math)
LIVE = "live"        # the live module is the table: every object on the chain must be defined under it


def _leaves(*names: str) -> dict:
    return {n: LEAF for n in names}


_TORCH_DTYPES = ("float32", "float16", "bfloat16", "float64", "float8_e4m3fn", "float8_e5m2", "int8", "int16",
                 "int32", "int64", "uint8", "bool", "half", "float", "double", "long", "int")

# Root -> {name: LEAF | OPEN | PUBLIC | LIVE | {name: ...}}. A dict is a namespace: it may only be the base of a
# longer chain, never a value of its own (bound, passed, returned).
REACH: dict = {
    "torch": {
        # allocation, views' metadata, dtypes, devices; never compute ops, torch.library (kernels registered over aten
        # ops), torch.ops, torch.utils (_python_dispatch, cpp_extension), torch.nn, or the modules torch imported
        **_leaves("empty", "empty_like", "empty_strided", "Tensor", "Size", "device", "dtype", "is_tensor", "finfo",
                  "iinfo", "no_grad", "inference_mode", "__version__"),
        **{d: OPEN for d in _TORCH_DTYPES},
        "version": _leaves("cuda", "hip", "git_version", "__version__"),
        # device queries only: streams of its own, events, graphs, synchronize and timers belong to the harness
        "cuda": _leaves("current_stream", "current_device", "device_count", "get_device_capability",
                        "get_device_properties", "get_device_name", "is_available", "device"),
        "_C": _leaves("_cuda_getCurrentRawStream"),  # the raw stream a lean launch path needs
    },
    "triton": {
        **_leaves("jit", "autotune", "heuristics", "Config", "cdiv", "next_power_of_2", "__version__"),
        "language": LIVE,  # not triton.runtime, knobs, compiler, backends, testing, tools
    },
    "math": PUBLIC,
    "typing": _leaves("Any", "Callable", "Optional", "Union", "Sequence", "Iterable", "Iterator", "Mapping",
                      "Tuple", "List", "Dict", "Set", "FrozenSet", "NamedTuple", "TYPE_CHECKING", "Final", "ClassVar",
                      "Literal", "TypeVar", "Generic", "NoReturn", "cast", "overload"),
    "dataclasses": _leaves("dataclass", "field", "fields", "replace", "asdict", "astuple", "is_dataclass",
                           "FrozenInstanceError", "InitVar", "KW_ONLY"),
    "functools": _leaves("partial", "lru_cache", "cache", "cached_property", "reduce", "wraps", "total_ordering"),
    "__future__": _leaves("annotations"),
    # the reviewed harness modules shared by every candidate (kda/runtime/): a lean Triton launch path and the CUDA
    # extension loader; `resident_blocks` is the one use of ctypes (the driver's occupancy calculator) a candidate gets
    "kda": {"runtime": {"lean_launch": _leaves("LaunchCache", "Plan", "cdiv", "next_pow2", "resident_blocks"),
                        "cuda_ext": _leaves("CudaExtension")}},
    "cutlass": LIVE,  # CuTe DSL candidates: cutlass, cutlass.cute and what is defined under them
}

# The modules a solution may import (a name it then takes from one must be in REACH); below a LIVE root, any module
# defined under it (triton.language.extra.libdevice, cutlass.cute).
IMPORTS = {"torch", "triton", "triton.language", "math", "typing", "dataclasses", "functools", "__future__",
           "kda.runtime.lean_launch", "kda.runtime.cuda_ext", "cutlass", "cutlass.cute"}

# Builtins that look things up, run or open something by string, reach a namespace or wait for input. `type` is
# allowed with one argument (a class's name: `type(x).__name__`), `hasattr` with a literal public name.
REFUSED_BUILTINS = {"getattr", "setattr", "delattr", "vars", "globals", "locals", "dir", "eval", "exec", "compile",
                    "open", "__import__", "breakpoint", "input", "help", "exit", "quit", "memoryview", "copyright",
                    "credits", "license"}

DUNDER_ATTRS = {"__name__", "__qualname__", "__doc__"}       # plus super().__init__
DUNDER_NAMES = {"__file__", "__name__", "__doc__", "__all__", "__slots__"}
FRAME_ATTRS = {"f_globals", "f_locals", "f_back", "f_builtins", "f_code", "f_trace", "f_lineno", "gi_frame",
               "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "ag_frame", "ag_code", "tb_frame",
               "tb_next", "tb_lineno", "co_code", "co_consts", "co_names", "co_filename"}
# Triton objects a candidate never opens, whatever name holds them (besides any attribute or keyword naming a hook)
TRITON_DOORS = {"get_capture_scope", "device_caches", "used_global_vals", "knobs", "cache_hook", "preload",
                "launch_metadata"}
# Clocks and events, whatever object they are reached through (a stream's record_event, an event's elapsed_time):
# a candidate that times itself can tell timed calls from checked ones
TIMER_ATTRS = {"record_event", "elapsed_time", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns",
               "time_ns", "process_time", "process_time_ns", "thread_time", "thread_time_ns"}
KERNEL_ATTRS = {"warmup"}  # the one attribute of a solution's own Triton kernel it may read (kernel[grid](...) aside)
SPECIAL_METHODS = {"__del__", "__torch_function__", "__torch_dispatch__", "__init_subclass__", "__class_getitem__",
                   "__set_name__"}
BASE_CLASSES = {"object", "Exception", "ValueError", "RuntimeError", "TypeError", "KeyError", "IndexError",
                "NotImplementedError", "ArithmeticError", "LookupError", "typing.NamedTuple", "typing.Generic"}

TENSOR_COMPUTE_METHODS = {
    "float", "half", "bfloat16", "double", "to", "type", "mul", "mul_", "add", "add_", "sub", "div", "sum", "mean",
    "clone", "copy_", "contiguous", "fill_", "zero_", "addcmul", "addcmul_", "matmul", "where", "clamp", "exp", "pow",
    "sqrt", "rsqrt", "tanh", "sigmoid", "softmax", "var", "std", "norm", "masked_fill", "masked_fill_", "index_select",
    "gather", "scatter", "cpu", "cuda", "numpy", "tolist", "item", "sign", "abs", "max", "min", "lerp", "baddbmm",
}

JIT_DECORATORS = ("jit", "autotune", "heuristics", "kernel")
DEVICE_MODULES = ("triton", "cutlass")
CUDA_EXTENSION = "kda.runtime.cuda_ext.CudaExtension"

# Each violation names one of these rules: `file:line: what (rule NAME: why)`.
RULES = {
    "syntax": "the file does not parse",
    "import": "a solution imports only " + ", ".join(sorted(IMPORTS)) + " and its own package (from . import ...)",
    "reach": "a module is reached only through the names the allowlist gives it",
    "module-value": "a module is only the base of a chain of allowed names: never bound to another name, passed, "
                    "returned or stored",
    "builtin": "builtins that look up, run or open something by string, reach a namespace or read input are refused "
               "(getattr, setattr, delattr, vars, globals, locals, dir, eval, exec, compile, open, __import__, "
               "breakpoint, input; type with more than one argument; hasattr but with a literal public name)",
    "dunder": "dunder attributes and names reach interpreter internals (allowed: .__name__, .__qualname__, .__doc__, "
              "super().__init__; the names __file__, __name__, __doc__, __all__, __slots__)",
    "private": "private attributes (._name) belong to the code that defines them (self._name in the solution's own "
               "class aside)",
    "frame": "frame, code, generator and traceback internals are off limits",
    "assign": "attributes are never assigned or deleted, on a module, a class, a Triton object or anything else "
              "(self.name in __init__ of the solution's own class aside): state lives in the solution's own dicts",
    "hook": "a Triton kernel is launched and warmed up (.warmup), never hooked or opened",
    "timer": "clocks and events belong to the harness (record_event, elapsed_time, perf_counter, monotonic...)",
    "class": "a class derives from the solution's own classes, object, an exception or NamedTuple, without a "
             "metaclass or a finalizer / torch-function / subclass hook",
    "compute": "tensor compute on the host path (allocation, views and metadata are fine)",
    "cuda-ext": "CudaExtension(prefix, __file__, folder, ...): a CUDA extension's sources live beside the solution",
}

_REACH_WHY = {
    "torch": "torch: allocation, dtypes, devices and device queries only; compute ops, streams, events, timers, "
             "torch.nn, torch.library, torch.ops, torch.utils and internals are off limits",
    "triton": "triton: jit, autotune, heuristics, Config, cdiv, next_power_of_2 and triton.language; never "
              "triton.runtime, knobs, compiler or backends",
    "kda": "kda: only kda.runtime.lean_launch and kda.runtime.cuda_ext",
}


# ---- chains --------------------------------------------------------------------------------------------------------

def _defined_under(obj, prefix: str) -> bool:
    """An object that belongs to module `prefix` (or an immutable constant): the test of a LIVE root."""
    def under(name) -> bool:
        return isinstance(name, str) and (name == prefix or name.startswith(prefix + "."))

    if isinstance(obj, types.ModuleType):
        return under(obj.__name__)
    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
        return True
    try:  # classes, functions, and instances that carry their definer's name (Triton's @jit functions)
        module = obj.__module__
    except AttributeError:
        module = None
    return under(module if isinstance(module, str) else type(obj).__module__)


@lru_cache(maxsize=None)
def _live_problem(module: str, rest: tuple[str, ...]) -> str | None:
    """Why the chain `module.rest...` is not all defined under `module` (None: it is)."""
    try:
        obj = importlib.import_module(module)
    except Exception:  # noqa: BLE001 - not installed here: the names are checked by their spelling alone
        obj = None
    name = module
    for seg in rest:
        name = f"{name}.{seg}"
        if seg.startswith("_"):
            return f"{name} is private"
        if obj is None:
            continue
        if hasattr(obj, seg):
            obj = getattr(obj, seg)
        elif isinstance(obj, types.ModuleType):
            try:
                obj = importlib.import_module(name)
            except Exception:  # noqa: BLE001
                return f"{name} does not exist"
        else:
            return f"{name} does not exist"
        if not _defined_under(obj, module):
            what = obj.__name__ if isinstance(obj, types.ModuleType) else type(obj).__name__
            return f"{name} leads outside {module} (to {what})"
    return None


def _is_module_chain(chain: str) -> bool:
    """The chain names a module (a namespace) rather than a value."""
    spec, _ = _walk(chain)
    if isinstance(spec, dict) or spec == PUBLIC:
        return True
    if spec == LIVE:
        try:
            return isinstance(_live_object(chain), types.ModuleType)
        except Exception:  # noqa: BLE001
            return chain in IMPORTS
    return False


def _live_object(chain: str):
    root = _live_root(chain)
    obj = importlib.import_module(root)
    for seg in chain[len(root):].split(".")[1:]:
        obj = getattr(obj, seg) if hasattr(obj, seg) else importlib.import_module(f"{obj.__name__}.{seg}")
    return obj


def _live_roots() -> set[str]:
    out = set()

    def walk(table, prefix):
        for k, v in table.items():
            if v == LIVE:
                out.add(prefix + k)
            elif isinstance(v, dict):
                walk(v, prefix + k + ".")

    walk(REACH, "")
    return out


def _live_root(chain: str) -> str | None:
    for root in sorted(_live_roots(), key=len, reverse=True):
        if chain == root or chain.startswith(root + "."):
            return root
    return None


def _walk(chain: str) -> tuple[object, str | None]:
    """(the table entry the chain ends on, why it is refused or None)."""
    parts = chain.split(".")
    if parts[0] not in REACH:
        return None, f"{parts[0]} is not an allowed module"
    spec = REACH[parts[0]]
    for i, seg in enumerate(parts[1:], start=1):
        if spec == LIVE:
            problem = _live_problem(".".join(parts[:i]), tuple(parts[i:]))
            return LIVE, problem
        if spec == PUBLIC:
            if seg.startswith("_") or i < len(parts) - 1:
                return None, f"{'.'.join(parts[:i + 1])} is not a public name of {parts[0]}"
            return LEAF, None
        if spec == OPEN:
            if seg.startswith("_"):
                return None, f"{'.'.join(parts[:i + 1])} is private"
            continue
        if not isinstance(spec, dict) or seg not in spec:
            return None, f"{'.'.join(parts[:i + 1])} is not in the allowlist"
        spec = spec[seg]
    return spec, None


def chain_problem(chain: str, as_value: bool) -> tuple[str, str] | None:
    """(rule, why) when a resolved dotted chain may not appear; `as_value`: it is used as a value, not as the base
    of a longer chain."""
    spec, problem = _walk(chain)
    if problem:
        root = chain.split(".")[0]
        return "reach", problem + ("; " + _REACH_WHY[root] if root in _REACH_WHY else "")
    if as_value and _is_module_chain(chain):
        return "module-value", f"{chain} is a module"
    return None


def import_problem(module: str) -> str | None:
    if module in IMPORTS:
        return None
    root = _live_root(module)
    if root is not None and _walk(module)[1] is None and _is_module_chain(module):
        return None
    return f"{module} is not an importable module"


# ---- the checker ---------------------------------------------------------------------------------------------------

def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> canonical dotted name, from every import in the file (`import time as clock`, `from torch
    import add`)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                names[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                if a.name != "*":
                    names[a.asname or a.name] = f"{node.module}.{a.name}"
    return names


def _resolve(name: str | None, aliases: dict[str, str]) -> str | None:
    if not name:
        return None
    head, _, rest = name.partition(".")
    base = aliases.get(head, head)
    return f"{base}.{rest}" if rest else base


def _decorated_by_device(fn: ast.AST, aliases: dict[str, str]) -> bool:
    """A function decorated by a real Triton / CuTe decorator (its root must be an imported module)."""
    for dec in getattr(fn, "decorator_list", ()):
        target = dec.func if isinstance(dec, ast.Call) else dec
        raw = _dotted(target) or ""
        resolved = _resolve(raw, aliases) or ""
        if raw.split(".")[0] in aliases and resolved.split(".")[0] in DEVICE_MODULES \
                and resolved.split(".")[-1] in JIT_DECORATORS:
            return True
    return False


class _Package:
    """The solution's own modules, for names that come through a relative import: `from .impl import torch` is torch,
    and `helper.torch.sys` (with `from . import helper`) is a chain from torch like any other."""

    def __init__(self):
        self._aliases: dict[Path, dict[str, str]] = {}

    def aliases(self, path: Path) -> dict[str, str]:
        if path not in self._aliases:
            try:  # the absolute imports first: a cycle of relative imports ends on them
                self._aliases[path] = _aliases(_parse(path))
            except (OSError, SyntaxError, ValueError):
                self._aliases[path] = {}
            self._aliases[path].update(self._relative(path))
        return self._aliases[path]

    def _relative(self, path: Path) -> dict[str, str]:
        """Names a file binds by relative imports that are imported modules' names (canonical) or own modules
        ("own:<file>")."""
        out: dict[str, str] = {}
        try:
            tree = _parse(path)
        except (OSError, SyntaxError, ValueError):
            return out
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                source = _module_file(path.parent, node.module) if node.module else path.parent / "__init__.py"
                for a in node.names:
                    if a.name == "*" or source is None:
                        continue
                    found = self.export(source, a.name)
                    if found:
                        out[a.asname or a.name] = found
        return out

    def export(self, source: Path, name: str, depth: int = 0) -> str | None:
        """What `name` of the own module `source` is: a canonical dotted name, "own:<file>" (a module of the
        package), or None (a value the module defines)."""
        if depth > 8:
            return None
        if source.name == "__init__.py":
            sub = _module_file(source.parent, name)
            if sub is not None:
                return f"own:{sub}"
        if not source.is_file():
            return None
        return self.aliases(source).get(name)

    def resolve(self, head: str, rest: list[str], aliases: dict[str, str]) -> tuple[str, int] | None:
        """A chain `head.rest...` whose head is an own module: (canonical chain, 0) where it reaches an imported
        module's name, ("own:<file>", 0) where it ends on an own module, ("", i) where segment i is a value of an
        own module (the attributes from there on are plain ones)."""
        current = aliases[head]
        for i, seg in enumerate(rest):
            if not current.startswith("own:"):
                return ".".join([current, *rest[i:]]), 0
            found = self.export(Path(current[4:]), seg)
            if found is None:
                return "", i
            current = found
        return current, 0


def _module_file(directory: Path, dotted: str) -> Path | None:
    p = directory.joinpath(*dotted.split("."))
    if p.with_suffix(".py").is_file():
        return p.with_suffix(".py")
    if (p / "__init__.py").is_file():
        return p / "__init__.py"
    return None


class _Checker:
    def __init__(self, path: Path, tree: ast.AST, package: _Package | None = None):
        self.path, self.tree = path, tree
        self.package = package or _Package()
        self.aliases = dict(self.package.aliases(path))
        self.parent: dict[int, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parent[id(child)] = node
        self.device: set[int] = set()
        self.kernels: set[str] = set()
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and _decorated_by_device(fn, self.aliases):
                self.device.update(id(n) for n in ast.walk(fn) if n is not fn)
                self.kernels.add(fn.name)
        self.own_self: dict[int, str] = {}      # Attribute node id -> "store" / "load" where `self` is the own instance
        self._own_instances()
        self.params: set[int] = set()           # Name node ids that read a parameter named like a refused builtin
        self._builtin_named_params()
        self.found: list[tuple[int, int, str]] = []

    def _own_instances(self) -> None:
        """`self` in methods of the file's own classes (a class without foreign bases): private reads anywhere in
        them, stores only in __init__ (a fresh instance: __init__ is never reachable as an attribute)."""
        for cls in ast.walk(self.tree):
            if not isinstance(cls, ast.ClassDef):
                continue
            for fn in cls.body:
                if not isinstance(fn, ast.FunctionDef) or not fn.args.args or fn.decorator_list:
                    continue
                me = fn.args.args[0].arg
                if any(isinstance(n, ast.Name) and n.id == me and not isinstance(n.ctx, ast.Load) or
                       isinstance(n, (ast.Global, ast.Nonlocal)) and me in n.names or
                       isinstance(n, ast.arg) and n.arg == me and n is not fn.args.args[0] for n in ast.walk(fn)):
                    continue  # `self` rebound or shadowed: no exemption
                for n in ast.walk(fn):
                    if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == me:
                        if isinstance(n.ctx, ast.Load):
                            self.own_self[id(n)] = "load"
                        elif fn.name == "__init__" and not n.attr.startswith("__"):
                            self.own_self[id(n)] = "store"

    def _builtin_named_params(self) -> None:
        """A function parameter named like a refused builtin (upstream's `silu_and_mul(input, out=None)`): inside
        that function's body the name is the parameter, not the builtin, so reading it there is exempt. Only where
        the name is never bound otherwise in the file (no assignment, deletion, import, global or nonlocal of it):
        the parameter's value then comes from a call site, where naming the builtin is refused as everywhere.
        Defaults, annotations and decorators lie outside the body and are checked as usual."""
        rebound = set()
        for n in ast.walk(self.tree):
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
                rebound.add(n.id)
            elif isinstance(n, (ast.Global, ast.Nonlocal)):
                rebound.update(n.names)
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                rebound.update((a.asname or a.name).split(".")[0] for a in n.names)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                rebound.add(n.name)
        for fn in ast.walk(self.tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            a = fn.args
            names = {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg] if p is not None}
            names = (names & REFUSED_BUILTINS) - rebound
            if not names:
                continue
            for stmt in fn.body:
                self.params.update(id(n) for n in ast.walk(stmt) if isinstance(n, ast.Name) and n.id in names)

    def add(self, node: ast.AST, what: str, rule: str, why: str | None = None) -> None:
        line = getattr(node, "lineno", 0)
        self.found.append((line, getattr(node, "col_offset", 0),
                           f"{self.path.name}:{line or '?'}: {what} (rule {rule}: {why or RULES[rule]})"))

    def run(self) -> list[str]:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                self.imports(node)
            elif isinstance(node, ast.ImportFrom):
                self.import_from(node)
            elif isinstance(node, ast.Attribute):
                self.attribute(node)
            elif isinstance(node, ast.Name):
                self.name(node)
            elif isinstance(node, ast.Call):
                self.call(node)
            elif isinstance(node, ast.ClassDef):
                self.classdef(node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in SPECIAL_METHODS:
                self.add(node, f"defines {node.name}", "class")
        self.found.sort(key=lambda f: (f[0], f[1]))
        return list(dict.fromkeys(f[2] for f in self.found))

    # imports
    def imports(self, node: ast.Import) -> None:
        for a in node.names:
            problem = import_problem(a.name)
            if problem:
                self.add(node, f"imports {a.name!r}", "import", f"{problem}; {RULES['import']}")
            elif a.asname and (found := chain_problem(a.name, as_value=False)):
                self.add(node, f"imports {a.name!r}", *found)

    def import_from(self, node: ast.ImportFrom) -> None:
        if node.level:
            if node.level > 1:
                self.add(node, f"imports from {'.' * node.level}{node.module or ''}", "import",
                         "a relative import stays inside the solution package (one dot)")
            elif any(a.name == "*" for a in node.names):
                self.add(node, f"imports * from .{node.module or ''}", "import", "names are imported one by one")
            return
        module = node.module or ""
        problem = import_problem(module)
        if problem:
            self.add(node, f"imports {module!r}", "import", f"{problem}; {RULES['import']}")
            return
        for a in node.names:
            if a.name == "*":
                self.add(node, f"imports * from {module!r}", "import", "names are imported one by one")
                continue
            found = chain_problem(f"{module}.{a.name}", as_value=False)
            if found:
                self.add(node, f"imports '{module}.{a.name}'", *found)

    # names and attributes
    def _chain_top(self, node: ast.AST) -> bool:
        """The node is the whole chain (not the base of a longer one)."""
        parent = self.parent.get(id(node))
        return not (isinstance(parent, ast.Attribute) and parent.value is node)

    def name(self, node: ast.Name) -> None:
        if node.id in self.aliases:
            if isinstance(node.ctx, ast.Load) and self._chain_top(node):
                self.chain(node)
            return
        if node.id in REFUSED_BUILTINS:
            if id(node) not in self.params:
                self.add(node, f"uses {node.id}", "builtin")
        elif node.id == "type" and isinstance(node.ctx, ast.Load):
            call = self.parent.get(id(node))
            if not (isinstance(call, ast.Call) and call.func is node and len(call.args) == 1 and not call.keywords):
                self.add(node, "uses type other than type(x)", "builtin")
        elif node.id == "hasattr" and isinstance(node.ctx, ast.Load):
            call = self.parent.get(id(node))
            ok = isinstance(call, ast.Call) and call.func is node and len(call.args) == 2 and not call.keywords \
                and isinstance(call.args[1], ast.Constant) and isinstance(call.args[1].value, str) \
                and not call.args[1].value.startswith("_")
            if not ok:
                self.add(node, "uses hasattr other than with a literal public name", "builtin")
        elif node.id.startswith("__") and node.id.endswith("__") and node.id not in DUNDER_NAMES:
            self.add(node, f"uses the name {node.id}", "dunder")

    def chain(self, node: ast.AST) -> None:
        written = _dotted(node)
        name = self._canonical(written)
        if name is None:
            return
        if name.startswith("own:"):
            self.add(node, f"uses {written}", "module-value", f"{written} is a module of the solution")
            return
        found = chain_problem(name, as_value=True)
        if found:
            shown = written if written == name else f"{written} (= {name})"
            self.add(node, f"uses {shown}", *found)

    def _canonical(self, written: str | None) -> str | None:
        """The canonical chain of a chain rooted at an imported name; None where it ends on an own module's value."""
        if not written:
            return None
        head, *rest = written.split(".")
        base = self.aliases.get(head, head)
        if base.startswith("own:"):
            name, plain = self.package.resolve(head, rest, self.aliases)
            return name or None
        return ".".join([base, *rest])

    def _own_value_depth(self, root: str) -> int | None:
        """For a chain through own modules into a value they define: how many segments after the head name own
        modules (the attribute there and below are plain attributes)."""
        head, *rest = root.split(".")
        if not self.aliases.get(head, "").startswith("own:"):
            return None
        name, plain = self.package.resolve(head, rest, self.aliases)
        return plain if name == "" else None

    def attribute(self, node: ast.Attribute) -> None:
        root = _dotted(node)
        imported = root is not None and root.split(".")[0] in self.aliases
        if not isinstance(node.ctx, ast.Load):
            if self.own_self.get(id(node)) != "store":
                shown = _resolve(root, self.aliases) if root else ast.unparse(node)
                verb = "deletes" if isinstance(node.ctx, ast.Del) else "assigns"
                self.add(node, f"{verb} {shown}", "assign")
            return
        if imported:
            depth = self._own_value_depth(root)
            if depth is None or len(root.split(".")) - 1 <= depth:
                # a chain from an imported module: the allowlist decides, once, on the whole chain
                if self._chain_top(node):
                    self.chain(node)
                return
            # past a value the solution's own module defines: a plain attribute
        attr = node.attr
        if "hook" in attr.lower() or attr in TRITON_DOORS:
            self.add(node, f"reads .{attr}", "hook")
        elif isinstance(node.value, ast.Name) and node.value.id in self.kernels and attr not in KERNEL_ATTRS:
            self.add(node, f"reads .{attr} of the Triton kernel {node.value.id}", "hook")
        elif attr.startswith("__") and attr.endswith("__"):
            if attr in DUNDER_ATTRS:
                return
            if attr == "__init__" and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name) \
                    and node.value.func.id == "super":
                return
            self.add(node, f"reads .{attr}", "dunder")
        elif attr.startswith("_") and self.own_self.get(id(node)) != "load":
            self.add(node, f"reads .{attr}", "private")
        elif attr in FRAME_ATTRS:
            self.add(node, f"reads .{attr}", "frame")
        elif attr in TIMER_ATTRS:
            self.add(node, f"reads .{attr}", "timer")

    # calls and classes
    def call(self, node: ast.Call) -> None:
        for kw in node.keywords:
            if kw.arg and "hook" in kw.arg.lower():
                self.add(node, f"passes {kw.arg}=", "hook")
        func = _resolve(_dotted(node.func), self.aliases) if isinstance(node.func, (ast.Name, ast.Attribute)) else None
        if func == CUDA_EXTENSION:
            given = node.args[1] if len(node.args) > 1 else \
                next((k.value for k in node.keywords if k.arg == "module_file"), None)
            if not (isinstance(given, ast.Name) and given.id == "__file__"):
                self.add(node, "builds a CudaExtension from elsewhere than this module's __file__", "cuda-ext")
        if id(node) in self.device:
            return  # inside a @triton.jit / CuTe kernel: tensor methods there are device ops, not torch
        if isinstance(node.func, ast.Attribute) and node.func.attr in TENSOR_COMPUTE_METHODS:
            owner = _resolve(_dotted(node.func.value), self.aliases) or "<expr>"
            if not owner.startswith(("triton", "math")):
                self.add(node, f"calls .{node.func.attr}() on {owner}", "compute")

    def classdef(self, node: ast.ClassDef) -> None:
        local = {c.name for c in ast.walk(self.tree) if isinstance(c, ast.ClassDef)}
        for kw in node.keywords:
            self.add(node, f"class {node.name} passes {kw.arg}=", "class")
        for base in node.bases:
            own = isinstance(base, ast.Name) and base.id in local and base.id not in self.aliases
            name = _resolve(_dotted(base), self.aliases) if isinstance(base, (ast.Name, ast.Attribute)) else None
            if not own and name not in BASE_CLASSES:
                self.add(node, f"class {node.name} derives from {ast.unparse(base)}", "class")


def static_violations(files: list[Path]) -> list[str]:
    """Human-readable violations, each naming file:line and the rule, in file order then line order."""
    found = []
    package = _Package()
    for path in files:
        if path.suffix != ".py":
            continue
        try:
            tree = _parse(path)
        except SyntaxError as e:
            found.append(f"{path.name}:{e.lineno}: does not parse: {e.msg} (rule syntax: {RULES['syntax']})")
            continue
        found += _Checker(path, tree, package).run()
    return list(dict.fromkeys(found))
