"""kda.e2e.alone's child under the CPU stand-ins of tests/e2e/test_e2e_redteam.py: the same block (wan at its CPU
sizes), every arm on the PyTorch path, aten ops counted as kernels. Run as a script by the parent's `alone_cmd`,
so the peers are timed in a process that never imported the candidate, as on a GPU."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: kda, whatever the child's cwd

from e2e_cpu_support import CpuStandIn  # noqa: E402

from kda.definition import eager_chains  # noqa: E402
from kda.e2e import alone_child, block as blocks, check, kernels, timing  # noqa: E402
from kda.e2e.kernels import KernelSet  # noqa: E402


def main(argv: list[str]) -> int:
    timing.DEV = CpuStandIn(ops_as_kernels=True)
    timing.TARGET_SAMPLE_US = 1.0  # one block call per sample, as in the parent
    kernels._upstream = lambda task: dict(eager_chains.PATHS)
    kernels.upstream_modules = lambda b: {"kda.definition.eager_chains": eager_chains}
    real = kernels.kernel_set

    def kernel_set(b, arm):  # as the parent's: every arm but the candidate's on the PyTorch path
        got = real(b, "eager")
        return KernelSet(arm, dict(got._fns), got.sources)

    timing.kernel_set = check.kernel_set = kernel_set
    load = blocks.load_block

    def at_cpu_sizes(name):
        b = load(name)
        dims, w = b.cpu_dims(), b.workloads()[0]
        b.workloads = lambda: [blocks.Workload(w.id, dims, w.rows)]
        return b

    alone_child.load_block = at_cpu_sizes  # the name the child calls (bound at its import)
    return alone_child.main(argv)


def command(block: str, arms: list[str], trials: int, out: Path) -> list[str]:
    """The parent's `alone_cmd`: this script in place of `python -m kda.e2e.alone_child`."""
    return [sys.executable, str(Path(__file__).resolve()), block, "--arms", ",".join(arms), "--trials", str(trials),
            "--out", str(out)]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
