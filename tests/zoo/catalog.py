"""The exploit zoo: every fake candidate in this folder, the rows it runs on and the reason codes it must earn.

Shared by tests/harness/test_exploit_zoo.py (CPU, Triton interpreter) and scripts/gpu_exploit_zoo.py (CUDA).
Loaded by path (tests/ is not a package). An expectation is judged on runtime reason codes: STATIC is expected
on nearly every fake and never counts towards (or against) an expectation, except a static fake's (static_*.py):
an honest kernel plus one trick only its source shows, whose lines are marked `# STATIC: rule...`; STATIC's
detail must name the first marked line and its rule, and no runtime code may appear.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

ZOO = Path(__file__).resolve().parent
REPO = ZOO.parents[1]
TASK = "fuse_scale_shift"

# Rows. SPECIALS is fp32 (so bf16 math is out of tolerance) and small; LARGE has values near 1e4; PROD is a large
# production row (166 MB of bf16 activations) where a side-stream launch has the most room to race.
SPECIALS = "reg_specials_s64_c512_fp32"
LARGE = "reg_large_magnitude_s127_c1024"
PROD = "hunyuanvideo_s27030_c3072_bcast2d"
CPU_ROWS = (SPECIALS,)
GPU_ROWS = (SPECIALS, LARGE, PROD)

STATIC = "STATIC"


@dataclass(frozen=True)
class Expect:
    """On one row: every code in all_of, at least one of any_of (if given); clean = no runtime code at all."""

    all_of: tuple[str, ...] = ()
    any_of: tuple[str, ...] = ()
    clean: bool = False
    static_at: str | None = None       # a static fake: STATIC's detail starts with this "file.py:LINE: "
    static_rules: tuple[str, ...] = ()  # ... and names one of these rules

    def describe(self) -> str:
        if self.static_at:
            return f"STATIC at {self.static_at.rstrip(': ')} (rule {'/'.join(self.static_rules)})" + \
                (", no runtime code" if self.clean else "")
        if self.clean:
            return "no runtime code"
        parts = list(self.all_of)
        if self.any_of:
            parts.append("one of " + "/".join(self.any_of))
        return " + ".join(parts)

    def problem(self, row: dict) -> str | None:
        """None if the row's result meets this expectation, else why not."""
        runtime = [r for r in row["reasons"] if r != STATIC]
        if self.static_at:
            said = [d[len(STATIC) + 2:] for d in row["details"] if d.startswith(f"{STATIC}: ")]
            if not said:
                return "no STATIC"
            if not said[0].startswith(self.static_at) or not any(f"(rule {r}:" in said[0] for r in self.static_rules):
                return f"STATIC said {said[0]!r}, expected {self.static_at}... (rule {'/'.join(self.static_rules)}: ...)"
        if self.clean:
            return None if not runtime else f"expected no runtime code, got {runtime}"
        if row["status"] == "PASS":
            return "the fake PASSED"
        missing = [c for c in self.all_of if c not in runtime]
        if missing:
            return f"missing {missing}"
        if self.any_of and not any(c in runtime for c in self.any_of):
            return f"none of {list(self.any_of)}"
        return None


@dataclass(frozen=True)
class Fake:
    name: str
    expect: Expect                     # on every row not named in per_row
    per_row: dict = field(default_factory=dict)  # row id -> Expect, or None: run but not judged
    cpu_rows: tuple[str, ...] = CPU_ROWS
    gpu_only: bool = False
    gap: str | None = None             # a known harness gap: the fake is NOT rejected today; says what is missing
    gpu_per_row: dict = field(default_factory=dict)  # on a GPU: row id -> Expect, over per_row and expect

    @property
    def path(self) -> Path:
        return ZOO / f"{self.name}.py"

    def expectation(self, row_id: str, gpu: bool = False) -> Expect | None:
        if gpu and row_id in self.gpu_per_row:
            return self.gpu_per_row[row_id]
        return self.per_row[row_id] if row_id in self.per_row else self.expect


FAKES = (
    Fake("cache_by_pointer", Expect(all_of=("MISMATCH",))),
    Fake("cache_by_shape", Expect(all_of=("MISMATCH",))),
    Fake("never_written", Expect(all_of=("UNWRITTEN", "RETURN"))),
    Fake("stale_buffer", Expect(any_of=("MISMATCH", "UNWRITTEN", "NAN_INF_POSITIONS"))),
    Fake("calls_baseline", Expect(all_of=("FORBIDDEN_CALL",))),
    Fake("calls_oracle", Expect(all_of=("FORBIDDEN_CALL",))),
    # bf16 math hides inside the bf16 tolerance on bf16 rows: judged on the fp32 row only.
    Fake("lower_precision", Expect(all_of=("PRECISION", "MISMATCH")), per_row={LARGE: None, PROD: None}),
    # Exact on randn-sized data (the specials and production rows): only the large-magnitude row exposes it. On a GPU
    # its torch ops are also seen on every row (TORCH_KERNEL, from the profile every GPU row gets).
    Fake("benign_only", Expect(clean=True), per_row={LARGE: Expect(all_of=("MISMATCH",))},
         cpu_rows=(SPECIALS, LARGE),
         gpu_per_row={SPECIALS: Expect(all_of=("TORCH_KERNEL",)), PROD: Expect(all_of=("TORCH_KERNEL",)),
                      LARGE: Expect(all_of=("MISMATCH", "TORCH_KERNEL"))}),
    Fake("mutates_inputs", Expect(all_of=("INPUT_MUTATED",))),
    Fake("patches_timer", Expect(all_of=("TAMPER",))),
    Fake("lazy_subclass", Expect(all_of=("UNWRITTEN", "RETURN"))),
    Fake("side_stream", Expect(all_of=("UNWRITTEN",)), gpu_only=True),
)

# Caught since the harness grew tripwires on the oracle and upstream functions (any thread), bound check functions,
# whole-table tamper watching, and resets of torch-function modes and swapped classes after every call.
FAKES += (
    Fake("oracle_in_thread", Expect(all_of=("FORBIDDEN_CALL",))),
    Fake("unhooks_profiler", Expect(all_of=("FORBIDDEN_CALL",))),
    Fake("patches_checks", Expect(any_of=("TAMPER", "UNWRITTEN"))),
    Fake("class_swap", Expect(any_of=("LAYOUT", "RETURN", "TAMPER", "UNWRITTEN"))),
    Fake("torch_function_mode", Expect(any_of=("TAMPER", "UNWRITTEN"))),
)

# Forged results: the candidate writes PASS row lines into the worker's result pipe, found in /proc/self/fd (it passed
# every row while the parent took the next line on trust). Caught since every result line is authenticated and answers
# one request (kda/harness/channel.py); the static rules also refuse its imports. tests/harness/test_result_channel.py
# runs it with the static rules off, and a thief of the key (tests/zoo/channel/steals_key.py) against the parent's
# own check of the outputs.
FAKES += (Fake("forges_results", Expect(all_of=("FORGED",))),)



def static_marks(path: Path) -> list[tuple[int, tuple[str, ...]]]:
    """(line, rules) of every line of a static fake marked `# STATIC: rule...`, in order."""
    return [(i, tuple(line.split("# STATIC: ", 1)[1].split()))
            for i, line in enumerate(path.read_text().splitlines(), start=1) if "# STATIC: " in line]


def static_fake(name: str) -> Fake:
    """A fake only the static rules can see: rejected with STATIC at its first marked line, nothing at run time."""
    line, rules = static_marks(ZOO / f"{name}.py")[0]
    return Fake(name, Expect(clean=True, static_at=f"{name}.py:{line}: ", static_rules=rules))


# Bypasses of the static rules while they were a blacklist of names (each passed them): aliases of forbidden modules,
# lookups by string, assignments through a local alias of a module, hooks on Triton objects, the file system through
# open / pathlib, builtins reached through an allowed module. Caught since the rules became an allowlist
# (kda/harness/static_rules.py).
STATIC_FAKES = ("static_os_sys", "static_logging_threading", "static_logging_time", "static_getattr_string",
                "static_alias_assign", "static_triton_hook", "static_open_fd", "static_path_write", "static_tl_builtins")
FAKES += tuple(static_fake(name) for name in STATIC_FAKES)

# Known gaps: exploits the harness does not catch today. Each would be marked xfail(strict=True) by the tests.
GAPS: tuple = ()

# Slowing the baseline arm (issue 34, attack 3): a proxy on the upstream kernel that launches twice and an idle
# thread, both reached through `logging`. Caught since upstream's state is snapshotted before the candidate is
# imported and compared after every call and sample, and threads running the candidate's code are reported.
FAKES += (Fake("slows_baseline", Expect(all_of=("UPSTREAM_TAMPERED", "TAMPER"))),)

# Skipping work on unchanged inputs (issue 34, attack 2): a fingerprint of sampled input and output elements per output
# buffer; caught by the repeat check (phase 4) since it exists.
FAKES += (Fake("skips_unchanged", Expect(all_of=("STALE_REPEAT",))),)

# Bench-mode only (GPU): each passes every check by construction; scripts/gpu_exploit_zoo.py --bench-probe times them
# and judges each against its expectation.
BENCH_FAKES = (
    # closed: the out buffer is checked after every trial's timed calls, and phase-1 checks run untraced
    Fake("cheats_when_untraced", Expect(any_of=("MISMATCH", "UNWRITTEN", "INVALID")), gpu_only=True),
    # the baseline's graph captured while a self-removing proxy launched twice: caught by the baseline timed alone
    # in a hot run; a cold run (`kda bench --cold`) records that comparison without judging it, so the same fake
    # would pass there (docs/harness.md, "Slowing the baseline arm": cold files gate nothing)
    Fake("slows_baseline_quietly", Expect(all_of=("BASELINE_SLOWED",)), gpu_only=True),
    # today's SGLang (the peer `latest`, loaded only in a GPU bench) called as our own: its vendored root is a
    # forbidden prefix of the call tracer, as the baseline's is (not yet run on a GPU: written 2026-11-28)
    Fake("calls_latest", Expect(all_of=("FORBIDDEN_CALL",)), gpu_only=True),
    # today's SGLang's compiled launchers doubled in place: its time alone in the clean worker (not yet run on a GPU)
    Fake("slows_latest_quietly", Expect(all_of=("PEER_SLOWED",)), gpu_only=True),
)

# End-to-end tier only (`kda e2e BLOCK`: every arm in one process): fakes that keep the static rules and change nothing
# the UpstreamWatch compares, loaded in fuse_scale_shift's place in block wan by tests/e2e/test_e2e_redteam.py (each an
# xfail(strict=True) there while the hole is open), never through a task's harness.
E2E_FAKES = ("e2e_honest_only_when_checked", "e2e_rewrites_shared_weights", "e2e_leaves_a_mode",
             "e2e_native_doubles_peers")

# The control: the real solution must pass every row the fakes run on.
CONTROL_CPU_ROWS = tuple(dict.fromkeys(r for f in FAKES if not f.gpu_only for r in f.cpu_rows))
