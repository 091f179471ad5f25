"""kda.harness.peers: which oracle function the peers time, and the arm they make."""
import types

import torch

from kda.harness.peers import peer_call, peer_math


def _oracle(with_peer):
    def reference(row, inputs):
        return {"y": inputs["x"].double() * 2}

    mod = types.SimpleNamespace(reference=reference)
    if with_peer:
        mod.peer_reference = lambda row, inputs: {"y": inputs["x"] * 3}
    return mod


def test_peer_math_prefers_peer_reference_and_falls_back_to_reference():
    x = torch.ones(4)
    assert torch.equal(peer_math(_oracle(True))(None, {"x": x})["y"], x * 3)
    plain = _oracle(False)
    assert peer_math(plain) is plain.reference


def test_eager_peer_runs_the_peer_math_cast_to_the_output_dtype():
    x = torch.arange(4, dtype=torch.float32)
    arm = peer_call(peer_math(_oracle(True)), None, {"x": x, "unused": None}, {"y": torch.float16}, "eager")
    y = arm()["y"]
    assert y.dtype == torch.float16 and torch.equal(y.float(), x * 3)
