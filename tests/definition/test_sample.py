"""kda.definition.sample: the covering sample behind the quick CPU gate."""
from kda.core.paths import all_task_dirs
from kda.definition.sample import features, layout_kind, representative
from kda.definition.task import Task
from kda.definition.workloads import Row, TensorSpec


def _row(id, dtype="float32", shape=(4, 8), stride=None, offset=0, fn="f", dist="randn"):
    stride = stride or (shape[1], 1)
    return Row(id=id, production=False, model="m", source="s", function=fn,
               tensors={"x": TensorSpec(shape, dtype, stride, offset, dist)}, scalars={}, seed=0, cpu=True)


def test_layout_kinds():
    assert layout_kind((4, 8), (8, 1), 0) == "contiguous"
    assert layout_kind((4, 8), (8, 1), 3) == "offset"
    assert layout_kind((4, 8), (0, 1), 0) == "broadcast"
    assert layout_kind((4, 8), (1, 4), 0) == "strided"
    assert layout_kind((4, 8), (16, 1), 0) == "strided"
    assert layout_kind((0, 8), (8, 1), 0) == "empty"
    assert layout_kind((1, 8), (99, 1), 0) == "contiguous"  # a size-1 dim's stride is never read


def test_cover_takes_the_cheapest_row_of_each_new_feature():
    rows = [_row("big", shape=(64, 64)), _row("small"), _row("half", dtype="float16"),
            _row("bcast", stride=(0, 1)), _row("g", fn="g"), _row("half_again", dtype="float16", shape=(8, 8))]
    got = [r.id for r in representative(rows, 10)]
    assert "big" not in got and "half_again" not in got  # a cheaper row covered the same features
    assert set().union(*(features(r) for r in rows)) == set().union(*(features(r) for r in representative(rows, 10)))
    assert got == [r.id for r in rows if r.id in got]  # the grid's order kept
    assert len(representative(rows, 2)) == 2 and representative([], 3) == []


def test_every_task_sample_covers_its_dtypes_and_entry_points():
    for path in all_task_dirs():
        rows = Task.load(path).select(cpu_only=True)
        picked = representative(rows, 6)
        seen = set().union(*(features(r) for r in picked))
        assert {("function", r.function) for r in rows} <= seen, path.name
        assert {f for r in rows for f in features(r) if f[0] == "dtype" and f[1] in ("x", "q", "input")} <= seen, path.name
