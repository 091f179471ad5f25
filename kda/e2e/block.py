"""An e2e block: a model block of the pinned upstream release, written in plain PyTorch, as a benchmark subject.

A block lives in `diffusion/e2e/<name>/`: `block.toml` (what it follows in the wheel, its kernel call sites, its
shapes from the catalog) and `block.py` (the block itself). block.toml is validated here; every error names the
file, the block and the site or workload. The module must define

    class Block(torch.nn.Module): __init__(self, dims), forward(self, k, **inputs) -> tuple of tensors
        k is a KernelSet (kda.e2e.kernels): `k.<site>(...)` at every call site, with the entry point's signature
    make_inputs(dims, dtype, generator) -> dict of tensors (on the CPU; the caller moves them)
    output_shapes(dims) -> tuple of shapes, one per output
    check_dims(dims) -> str | None: why the wheel would not take the kernel path at these sizes (None: it would)

Dimensions (`dims`) are the catalog model file's `[dims]` plus what each workload reads from catalog rows of the
block's own call sites: token counts (`tokens = { name = "row id" }`, the row's `S`) and, for blocks over
[B, C, T, H, W] activations (a VAE stage), tensor shapes (`shapes = { name = "row id" }`: the row's C, T, H, W as
`name_C` .. `name_W`, and `name_cl3d` 1 when the row's layout is channels_last_3d, else 0), plus the literal `dims`
a workload states that no catalog row carries (FFN width, text length, which up block of a decoder, a latent size
the catalog only gives as a token count). A literal may not shadow a dimension the catalog gives.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import ModuleType

from kda.core.errors import KdaError
from kda.core.paths import repo_root
from kda.core.schema import Field, ListOf, MapOf, one_of, positive, validate
from kda.definition.task import Task, load_module
from kda.shapes.catalog import CatalogRow, ModelEntry, catalog_dir, load_model_file

E2E_DIR = "diffusion/e2e"
MODULE_API = ("Block", "make_inputs", "output_shapes", "check_dims")
TOKEN_PARAM = "S"  # the catalog parameter a token count is read from (every task's rows name it S)
WIDTH_PARAMS = ("D", "C")  # a row's hidden width, by the name its task uses
BATCH_PARAM = "B"  # a row's batch, where its task names one (rotary_embedding's LTX-2 rows)
SHAPE_PARAMS = ("C", "T", "H", "W")  # a [B, C, T, H, W] row's tensor shape (group_norm_silu's rows name them so)
LAYOUT_PARAM, CL3D = "layout", "cl3d"  # a row's memory layout, and the value that means channels_last_3d
GROUPS_PARAM = "G"  # a GroupNorm row's group count, held to the model's `groups`

MIRROR = {
    "file": Field(str, doc="path inside the wheel"),
    "line": Field(int, check=positive, doc="1-based line the text starts on"),
    "text": Field(str, doc="source text found on that line (a substring, whitespace as in the file)"),
}
SITE = {
    "name": Field(str, doc="the attribute the block calls: k.<name>(...)"),
    "task": Field(str, doc="task folder whose kernels run here"),
    "entry": Field(str, doc="the task's entry point called here (a name in its config.toml entry_points)"),
    "mirrors": Field(ListOf(MIRROR), doc="the wheel's lines this call follows: the model's call, the layer's call"),
}
WORKLOAD = {
    "id": Field(str),
    "model": Field(str, doc="catalog model file, e.g. 'qwen-image.toml'"),
    "tokens": Field(MapOf(str), required=False, default={}, doc="dimension name -> catalog row id whose S it takes"),
    "shapes": Field(MapOf(str), required=False, default={},
                    doc="name -> catalog row id whose C, T, H, W (and layout) it takes, as name_C .. name_W, name_cl3d"),
    "dims": Field(MapOf((int, float)), required=False, default={},
                  doc="literal dimensions no catalog row carries (each says why in a comment)"),
    "batch": Field(int, required=False, default=1, check=positive),
    "dims": Field(MapOf((int, float)), required=False, default={},
                  doc="model constants the catalog's [dims] does not hold (FFN width, text length), each cited in "
                      "block.toml; a name the catalog holds is refused"),
}
BLOCK_FILE = {
    "block": Field({
        "name": Field(str),
        "description": Field(str),
        "dtype": Field(str, check=one_of("bfloat16", "float16")),
        "tolerance": Field(float, check=positive, doc="relative RMS error of each output against the fp32 path"),
        "interpret": Field(bool, required=False, default=False,
                           doc="small enough for the candidate arm through Triton's interpreter on the CPU"),
        "seed": Field(int, required=False, default=0),
        "follows": Field(MIRROR | {"class": Field(str)}),
    }),
    "wheel": Field({
        "package": Field(str),
        "version": Field(str),
        "files": Field(ListOf({"path": Field(str), "sha256": Field(str)})),
    }),
    "sites": Field(ListOf(SITE)),
    "cpu": Field(MapOf((int, float)), doc="reduced dimensions for the CPU: every name dims holds"),
    "workloads": Field(ListOf(WORKLOAD)),
    "trajectory": Field({
        "latent": Field(str, doc="the input the sampler steps (kda.e2e.trajectory): the image or video latent"),
        "carry": Field(MapOf(int), doc="input name -> index of the output that feeds it in the next block of the "
                                       "stack (the latent's among them)"),
    }, required=False, default={}, doc="a DiT block's stack under a sampler (issue 40's trajectory check)"),
}


@dataclass(frozen=True)
class Mirror:
    file: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class Site:
    name: str
    task: str
    entry: str
    mirrors: tuple[Mirror, ...]


@dataclass(frozen=True)
class Workload:
    id: str
    dims: dict
    rows: dict[str, CatalogRow]  # dimension -> the catalog row it came from


@dataclass
class BlockDef:
    path: Path  # the block folder
    data: dict

    @property
    def file(self) -> Path:
        return self.path / "block.toml"

    @property
    def name(self) -> str:
        return self.data["block"]["name"]

    @property
    def label(self) -> str:
        return f"{self.file} (block {self.name!r})"

    @property
    def dtype(self) -> str:
        return self.data["block"]["dtype"]

    @property
    def follows(self) -> Mirror:
        f = self.data["block"]["follows"]
        return Mirror(f["file"], f["line"], f["text"])

    @cached_property
    def sites(self) -> list[Site]:
        return [Site(s["name"], s["task"], s["entry"], tuple(Mirror(**m) for m in s["mirrors"]))
                for s in self.data["sites"]]

    @property
    def tasks(self) -> list[str]:
        return sorted({s.task for s in self.sites})

    @property
    def wheel_files(self) -> dict[str, str]:
        return {f["path"]: f["sha256"] for f in self.data["wheel"]["files"]}

    @cached_property
    def module(self) -> ModuleType:
        mod = load_module(self.path / "block.py", f"kda_e2e_{self.name}_block")
        missing = [n for n in MODULE_API if not hasattr(mod, n)]
        if missing:
            raise KdaError(f"{self.path / 'block.py'} (block {self.name!r}): missing {', '.join(missing)} "
                           f"(the block API is {', '.join(MODULE_API)})")
        return mod

    def cpu_dims(self) -> dict:
        dims = dict(self.data["cpu"])
        self._check_dims(dims, "key 'cpu'")
        return dims

    def workloads(self, directory: Path | None = None) -> list[Workload]:
        return [self._workload(w, directory) for w in self.data["workloads"]]

    def _check_dims(self, dims: dict, where: str) -> None:
        why = self.module.check_dims(dims)
        if why:
            raise KdaError(f"{self.label} {where}: the block cannot take these sizes: {why}")

    def _workload(self, w: dict, directory: Path | None) -> Workload:
        where = f"{self.label} workload {w['id']!r}"
        model_path = catalog_dir(directory) / w["model"]
        if not model_path.is_file():
            raise KdaError(f"{where}: no catalog model file {model_path}")
        model: ModelEntry = load_model_file(model_path)
        clash = sorted(set(w["dims"]) & (set(model.dims) | {"batch"}))
        if clash:
            raise KdaError(f"{where}: key 'dims': {', '.join(clash)} come from {model.file} (or key 'batch'); "
                           "a workload adds only what the catalog does not hold")
        dims = {**model.dims, "batch": w["batch"]}  # the workload's literal dims join last, after the rows' (below)
        rows = {}
        for name, row_id in w["tokens"].items():
            row, label = self._row(model, row_id, where, f"tokens.{name}")
            if TOKEN_PARAM not in row.params:
                raise KdaError(f"{label}: the row has no token count {TOKEN_PARAM!r} for {name!r}")
            if BATCH_PARAM in row.params and row.params[BATCH_PARAM] != dims["batch"]:
                raise KdaError(f"{label}: the row's batch {row.params[BATCH_PARAM]} is not the workload's batch "
                               f"{dims['batch']} (key 'batch')")
            width = next((row.params[p] for p in WIDTH_PARAMS if p in row.params), None)
            if width is not None and "hidden" in dims and width != dims["hidden"]:
                raise KdaError(f"{label}: width {width} is not the model's hidden size {dims['hidden']}")
            dims[name] = row.params[TOKEN_PARAM]
            rows[name] = row
        for name, row_id in w["shapes"].items():
            row, label = self._row(model, row_id, where, f"shapes.{name}")
            missing = [p for p in SHAPE_PARAMS if p not in row.params]
            if missing:
                raise KdaError(f"{label}: the row has no {', '.join(missing)} for {name!r} "
                               f"(a shape is {', '.join(SHAPE_PARAMS)})")
            if row.params.get("dtype", self.dtype) != self.dtype:
                raise KdaError(f"{label}: dtype {row.params['dtype']} is not the block's {self.dtype}")
            if GROUPS_PARAM in row.params and "groups" in dims and row.params[GROUPS_PARAM] != dims["groups"]:
                raise KdaError(f"{label}: {row.params[GROUPS_PARAM]} groups, not the model's {dims['groups']}")
            dims.update({f"{name}_{p}": row.params[p] for p in SHAPE_PARAMS})
            dims[f"{name}_cl3d"] = int(row.params.get(LAYOUT_PARAM) == CL3D)
            rows[name] = row
        for name, value in w["dims"].items():
            if name in dims:
                raise KdaError(f"{where}: key 'dims.{name}': {name} = {dims[name]} already comes from the catalog")
            dims[name] = value
        self._check_dims(dims, f"workload {w['id']!r}")
        return Workload(w["id"], dims, rows)

    def _row(self, model: ModelEntry, row_id: str, where: str, key: str) -> tuple[CatalogRow, str]:
        """The catalog row `row_id` of `model`, which must be a call of one of this block's sites."""
        found = [r for r in model.rows if r.id == row_id]
        if not found:
            raise KdaError(f"{where}: key '{key}': {model.file} has no row {row_id!r}")
        row = found[0]
        label = f"{where}: catalog row {row.id!r} ({row.file})"
        entries = {(s.task, s.entry) for s in self.sites}
        if (row.task, row.function) not in entries:
            raise KdaError(f"{label}: {row.task}:{row.function} is no call site of this block "
                           f"(its sites: {', '.join(sorted(f'{t}:{e}' for t, e in entries))})")
        return row, label


def e2e_dir() -> Path:
    return repo_root() / E2E_DIR


def all_blocks() -> list[str]:
    d = e2e_dir()
    return sorted(p.parent.name for p in d.glob("*/block.toml")) if d.is_dir() else []


def load_block(ref: str | Path) -> BlockDef:
    """A block by folder path or by name under diffusion/e2e/; block.toml validated, its sites' tasks checked."""
    path = Path(ref)
    if not (path / "block.toml").is_file():
        path = e2e_dir() / str(ref)
    file = path / "block.toml"
    if not file.is_file():
        raise KdaError(f"no e2e block {str(ref)!r} (a folder with block.toml); known blocks: "
                       f"{', '.join(all_blocks()) or 'none'}")
    try:
        raw = tomllib.loads(file.read_text())
    except tomllib.TOMLDecodeError as e:
        raise KdaError(f"{file}: not valid TOML: {e}") from None
    block = BlockDef(path.resolve(), validate(raw, BLOCK_FILE, str(file)))
    check_sites(block)
    return block


def check_sites(block: BlockDef) -> None:
    """Every site names a task that exists and an entry point that task exports; every mirrored file is pinned."""
    seen = set()
    pinned = block.wheel_files
    for s in block.sites:
        where = f"{block.label} site {s.name!r}"
        if s.name in seen:
            raise KdaError(f"{where}: duplicate site name")
        seen.add(s.name)
        task = Task.load(s.task)
        exported = [e.split(":")[1] for e in task.cfg["task"]["entry_points"]]
        if s.entry not in exported:
            raise KdaError(f"{where}: task {s.task!r} does not export {s.entry!r} "
                           f"(its entry points: {', '.join(exported)}; {task.path / 'config.toml'})")
        for m in s.mirrors:
            if m.file not in pinned:
                raise KdaError(f"{where}: mirrors {m.file}, which [wheel].files does not pin (add it with its sha256)")
    if block.follows.file not in pinned:
        raise KdaError(f"{block.label}: block.follows names {block.follows.file}, which [wheel].files does not pin")
