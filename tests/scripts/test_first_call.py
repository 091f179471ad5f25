"""scripts/first_call.py: its rendering of a run (the tables docs/evidence/ commits) and its timers' names."""
import json

from kda.core.paths import repo_root

from script_support import load_script

first_call = load_script("first_call")
EVIDENCE = repo_root() / "docs" / "evidence"


def test_every_committed_run_renders_to_its_committed_tables():
    runs = sorted(EVIDENCE.glob("first-call-*.json"))
    assert runs, "docs/evidence/ holds no first_call run"
    for run in runs:
        md = run.with_suffix(".md")
        assert md.exists(), f"{md.name} missing: python3 scripts/first_call.py --render {run}"
        assert md.read_text() == first_call.render(json.loads(run.read_text())) + "\n", f"{md.name} is stale"


def test_render_shows_each_timer_and_its_excess_over_the_device_time():
    report = {"task": "t", "gpu": "G", "commit": "abc", "time_utc": "now", "reps": 3, "timers": list(first_call.TIMERS),
              "rows": {"r1": {"candidate": {t: 100.0 + i for i, t in enumerate(first_call.TIMERS)}}}}
    md = first_call.render(report)
    row = next(line for line in md.splitlines() if line.startswith("| candidate |"))
    cells = [c.strip() for c in row.strip("|").split("|")][1:]
    assert len(cells) == len(first_call.TIMERS)
    ref = 100.0 + first_call.TIMERS.index("blocked_nosync")
    for t, cell in zip(first_call.TIMERS, cells):
        value = 100.0 + first_call.TIMERS.index(t)
        assert cell == (f"{value:.1f}" if t == "blocked_nosync" else f"{value:.1f} ({value - ref:+.1f})")


def test_the_harness_timer_is_the_harness_device_us():
    # The "harness" column must time what kda bench times: the timing module's own device_us.
    src = (repo_root() / "scripts" / "first_call.py").read_text()
    assert 's["harness"].append(timing.device_us(call, 1, flush))' in src
    assert "harness" in first_call.TIMERS and "idle_start" in first_call.TIMERS
