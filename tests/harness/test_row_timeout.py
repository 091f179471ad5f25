"""--row-timeout (issue 38): a hanging candidate costs bench.row_timeout_s per row (300 s by default); the flag
shortens it for one run of kda check, kda bench or kda gate, and the results record the timeout that applied."""
import textwrap
import time

import pytest

from kda import cli
from kda.definition.task import Task
from kda.harness.runner import RunOptions, run_task

TASK = "fuse_scale_shift"


def test_a_hanging_candidate_fails_its_row_within_the_timeout_given(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # not for this process: what `kda check --cpu` sets, kept local
    hang = tmp_path / "hangs.py"
    hang.write_text(textwrap.dedent("""\
        def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
            n = 0
            while n >= 0:  # never returns
                n += 1
        """))
    task = Task.load(TASK)
    row = task.select(cpu_only=True)[0].id
    t0 = time.monotonic()
    out = run_task(task, RunOptions(mode="check", device="cpu", candidate=hang, rows=[row], write=False, quiet=True,
                                    row_timeout_s=3.0))
    took = time.monotonic() - t0
    r = out["rows"][0]
    assert r["status"] != "PASS" and "no answer within 3 s" in str(r), r
    assert out["provenance"]["row_timeout_s"] == 3.0
    assert took < 60, took  # the default would have waited 300 s


@pytest.mark.parametrize("value", ["0", "-5", "abc", "inf"])
def test_row_timeout_must_be_a_positive_number_of_seconds(value, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["check", TASK, "--cpu", "--row-timeout", value])
    assert e.value.code == 2 and "expected a positive number of seconds" in capsys.readouterr().err


def test_the_flag_reaches_the_runner_from_check_and_gate(monkeypatch):
    from kda.core.errors import KdaError
    from kda.loop.gate import run_gate

    seen = []

    def runner(task, opts):
        seen.append(opts.row_timeout_s)
        raise KdaError("stop here: only the options are under test")

    monkeypatch.setattr("kda.harness.runner.run_task", runner)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert cli.main(["check", TASK, "--cpu", "--rows", "x", "--row-timeout", "12"]) != 0
    res = run_gate(Task.load(TASK), device="cpu", rows=["x"], runner=runner, compiler=lambda t: None,
                   row_timeout_s=7.5)
    assert seen == [12.0, 7.5] and res.status == "FAIL"
