"""scripts/graph_placement.py on a CPU: a variant arm swaps its attributes in only for the duration of each call and
clears cached launch plans around it, so a captured graph holds the variant's kernels and the default arm's do not
change."""
import types

from script_support import load_script


GP = load_script("graph_placement")


def _module(name, **attrs):
    mod = types.ModuleType(name)  # variants patch a candidate's modules
    for k, v in attrs.items():
        setattr(mod, k, v)
    return mod


def test_patched_call_swaps_attributes_only_while_it_runs():
    main = _module("main", knob="default", _plans={"old": 1})
    other = _module("other", layout="default", _plans={"stale": 2})
    seen = []

    def call():
        seen.append((main.knob, other.layout, dict(main._plans), dict(other._plans)))
        main._plans["during"] = 3  # a plan cached under the variant must not outlive it
        return "ret"

    run = GP._patched(call, main, {"knob": "variant", (other, "layout"): "variant"})
    assert run() == "ret"
    assert seen == [("variant", "variant", {}, {})]
    assert (main.knob, other.layout) == ("default", "default")
    assert main._plans == {} and other._plans == {}


def test_patched_call_restores_attributes_when_the_call_raises():
    main = _module("main", knob="default")

    def call():
        raise RuntimeError("launch failed")

    run = GP._patched(call, main, {"knob": "variant"})
    try:
        run()
    except RuntimeError:
        pass
    else:
        raise AssertionError("the call's exception was swallowed")
    assert main.knob == "default"
