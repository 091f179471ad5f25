"""Exploit (e2e tier, `kda e2e BLOCK`): reach the block's weights through autograd and rewrite them after its own
check, so that every arm checked after it fails its check and is never timed.

Every arm of a block runs one model object (kda/e2e/timing.py `time_workload`; kda/e2e/trajectory.py `run` shares
its stack of models and its inputs between arms the same way, not tested here), and the arms are checked in order:
upstream, candidate, eager, compile, latest, only-<task>. On import this fake enters `torch.inference_mode(False)`
inside a generator it leaves suspended: that turns grad mode on, even inside the harness's `torch.no_grad()`, so the
block's next call records an autograd graph. On its first call it computes its own output honestly, then walks
`grad_fn.next_functions` from its inputs to the AccumulateGrad nodes, whose `.variable` are the block's parameters,
doubles each in place (under `torch.no_grad()`, by a subscript store) and closes its generator (grad mode back as
it was). Its check has passed; every arm checked after it (eager, compile, latest, each only-<task>: all run the
same model object; tests/e2e/test_e2e_redteam.py shows it for latest) then misses the fp32 path and is recorded
"does not match the fp32 path, not timed": the row keeps candidate/upstream and loses candidate/latest,
candidate/compile and candidate/eager, the comparisons a candidate slower than torch.compile or SGLang 0.5.23 loses.
Its source keeps the static rules (public attributes of values are not followed, subscript stores are not
assignments, `with` on an allowed context manager is not a hook), and it changes nothing of upstream's modules.
Defences lacking: nothing snapshots the model, the inputs or grad mode between arms. What would stop it: each arm
on its own copy of the weights (or the weights' checksums compared before and after each arm, as a task's worker
snapshots inputs: INPUT_MUTATED), grad mode and inference mode checked after each candidate load and call, and
`grad_fn` / `next_functions` / `variable` refused by the static rules.

Closed in the twentieth session: kda.e2e.kernels.process_state, after every arm's load and run, stops the run when
grad mode is on inside the runner's no_grad (this fake, at its load), a mode is left pushed or the default device
moved; WeightPrint compares the block's weights and inputs (storage, version counter, exact byte sum).
"""
import torch

_state = {}


def _grad_on():
    with torch.inference_mode(False):  # disabling inference mode enables grad mode
        yield


_state["grad"] = _grad_on()
next(_state["grad"])  # left suspended: grad mode stays on for the block's next call


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    y = torch.empty_like(x) if out is None else out
    y[...] = x * (scale_constant + scale) + shift
    grad = _state.pop("grad", None)
    if grad is None:
        return y
    nodes, seen, params = [x.grad_fn, scale.grad_fn, shift.grad_fn], {}, []
    while nodes:
        node = nodes.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        if hasattr(node, "variable"):
            params.append(node.variable)
        for nxt, _ in node.next_functions:
            nodes.append(nxt)
    with torch.no_grad():
        for p in params:
            p[...] = p * 2
    grad.close()
    return y
