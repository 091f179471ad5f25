"""Record the call signatures (tensor layouts and scalar arguments) of named functions into a JSON-lines log.

`install(log_path, ["pkg.mod:fn", ...], model_label)` wraps each target: already-imported modules at once, the
others right after their module executes (a meta-path finder proxies the module's loader). Each call whose
signature (function, model, tensors, scalars) was not logged yet appends one line, at most `cap_per_function`
lines per function. The recorder never raises into the caller: its first error prints one warning to stderr,
later ones are swallowed. It imports nothing heavy: torch is only looked up in sys.modules.
"""
from __future__ import annotations

import functools
import importlib.abc
import inspect
import json
import os
import sys
import threading
from datetime import datetime, timezone
from typing import Any, Callable

SCALAR_TYPES = (int, float, bool, str, type(None))
_MARK = "__kda_shapes_recorder__"


def parse_target(target: str) -> tuple[str, str]:
    module, sep, attr = target.strip().partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"recorder target {target!r} must look like 'module.path:function'")
    return module, attr


def _is_tensor(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def tensor_record(t: Any) -> dict:
    return {"shape": [int(n) for n in t.shape], "dtype": str(t.dtype).removeprefix("torch."),
            "stride": [int(s) for s in t.stride()], "storage_offset": int(t.storage_offset())}


def _mentions_tensor(annotation: Any) -> bool:
    if annotation is inspect.Parameter.empty:
        return False
    return "Tensor" in (annotation if isinstance(annotation, str) else repr(annotation))


def describe_call(sig: inspect.Signature, args: tuple, kwargs: dict) -> tuple[dict, dict]:
    """Split bound arguments into tensors (layout, or null for None where the annotation says Tensor) and scalars.

    Arguments of other types (lists, dtypes, objects) are left out; *args items are named `name[i]`.
    """
    bound = sig.bind_partial(*args, **kwargs)
    bound.apply_defaults()
    tensors: dict[str, Any] = {}
    scalars: dict[str, Any] = {}

    def put(name: str, value: Any, param: inspect.Parameter) -> None:
        if _is_tensor(value):
            tensors[name] = tensor_record(value)
        elif value is None and _mentions_tensor(param.annotation):
            tensors[name] = None
        elif isinstance(value, SCALAR_TYPES):
            scalars[name] = value

    for name, value in bound.arguments.items():
        param = sig.parameters[name]
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            for i, v in enumerate(value):
                put(f"{name}[{i}]", v, param)
        elif param.kind is inspect.Parameter.VAR_KEYWORD:
            for k, v in value.items():
                put(k, v, param)
        else:
            put(name, value, param)
    return tensors, scalars


def signature_key(line: dict) -> str:
    """Dedup key of a log line: everything except time_utc and pid."""
    return json.dumps({k: v for k, v in line.items() if k not in ("time_utc", "pid")}, sort_keys=True)


def _now_utc() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Recorder:
    def __init__(self, log_path: str | os.PathLike, targets: list[str], model_label: str, cap_per_function: int = 64):
        self.log_path = os.fspath(log_path)
        self.model = model_label
        self.cap = int(cap_per_function)
        self.targets: dict[str, list[str]] = {}  # module -> attribute paths
        for t in targets:
            module, attr = parse_target(t)
            self.targets.setdefault(module, []).append(attr)
        self._lock = threading.Lock()
        self._seen: set[str] = set()
        self._count: dict[str, int] = {}
        self._warned = False
        self._patched: list[tuple[Any, str, Any]] = []  # (owner, name, original) for uninstall
        self.finder = _PostImportFinder(self)
        self._load_existing()

    # -- failures -----------------------------------------------------------------------------------------------
    def warn(self, what: str, exc: BaseException | None = None) -> None:
        if self._warned:
            return
        self._warned = True
        try:
            detail = f": {type(exc).__name__}: {exc}" if exc is not None else ""
            sys.stderr.write(f"kda shapes recorder: {what}{detail} (recording continues silently)\n")
            sys.stderr.flush()
        except Exception:  # noqa: BLE001
            pass

    def _load_existing(self) -> None:
        """Seed dedup and caps from an existing log, so a restarted process does not repeat lines."""
        try:
            with open(self.log_path) as f:
                for raw in f:
                    try:
                        line = json.loads(raw)
                        key = signature_key(line)
                    except Exception:  # noqa: BLE001
                        continue
                    if key not in self._seen and line.get("model") == self.model:
                        self._seen.add(key)
                        fn = line.get("function")
                        self._count[fn] = self._count.get(fn, 0) + 1
        except FileNotFoundError:
            pass
        except Exception as e:  # noqa: BLE001
            self.warn(f"cannot read existing log {self.log_path}", e)

    # -- recording ----------------------------------------------------------------------------------------------
    def record(self, name: str, sig: inspect.Signature, args: tuple, kwargs: dict) -> None:
        try:
            if self._count.get(name, 0) >= self.cap:
                return
            tensors, scalars = describe_call(sig, args, kwargs)
            line = {"function": name, "model": self.model, "tensors": tensors, "scalars": scalars}
            key = signature_key(line)
            with self._lock:
                if key in self._seen or self._count.get(name, 0) >= self.cap:
                    return
                self._seen.add(key)
                self._count[name] = self._count.get(name, 0) + 1
                line["time_utc"] = _now_utc()
                line["pid"] = os.getpid()
                with open(self.log_path, "a") as f:
                    f.write(json.dumps(line) + "\n")
                    f.flush()
        except Exception as e:  # noqa: BLE001
            self.warn(f"cannot record a call of {name} into {self.log_path}", e)

    def wrap(self, fn: Callable, name: str) -> Callable:
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            self.record(name, sig, args, kwargs)
            return fn(*args, **kwargs)

        setattr(wrapper, _MARK, self)
        return wrapper

    # -- patching -----------------------------------------------------------------------------------------------
    def patch_module(self, module: Any) -> None:
        for attr in self.targets.get(module.__name__, []):
            name = f"{module.__name__}:{attr}"
            try:
                owner = module
                *parents, last = attr.split(".")
                for p in parents:
                    owner = getattr(owner, p)
                original = getattr(owner, last)
                if getattr(original, _MARK, None) is self:
                    continue
                setattr(owner, last, self.wrap(original, name))
                self._patched.append((owner, last, original))
            except Exception as e:  # noqa: BLE001
                self.warn(f"cannot wrap {name}", e)

    def install(self) -> "Recorder":
        sys.meta_path.insert(0, self.finder)
        for module_name in self.targets:
            module = sys.modules.get(module_name)
            if module is not None:
                self.patch_module(module)
        return self

    def uninstall(self) -> None:
        """Remove the import hook and restore the wrapped attributes (tests)."""
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        for owner, last, original in reversed(self._patched):
            try:
                setattr(owner, last, original)
            except Exception:  # noqa: BLE001
                pass
        self._patched.clear()


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Finds target modules through the other finders and proxies their loader to wrap after exec_module."""

    def __init__(self, recorder: Recorder):
        self.recorder = recorder
        self._busy = threading.local()

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.recorder.targets or getattr(self._busy, "on", False):
            return None
        self._busy.on = True
        try:
            for finder in list(sys.meta_path):
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._busy.on = False
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _PatchingLoader(spec.loader, self.recorder)
        return spec


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader, recorder: Recorder):
        self._loader = loader
        self._recorder = recorder

    def __getattr__(self, name):  # get_source, get_filename, is_package, resource readers ...
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)  # the module's own errors propagate as usual
        try:
            self._recorder.patch_module(module)
        except Exception as e:  # noqa: BLE001
            self._recorder.warn(f"cannot wrap functions of {module.__name__}", e)


def install(log_path: str | os.PathLike, targets: list[str], model_label: str, cap_per_function: int = 64) -> Recorder:
    """Wrap `targets` ('module.path:function') so new call signatures are appended to log_path; returns the Recorder."""
    return Recorder(log_path, targets, model_label, cap_per_function).install()
