"""Exploit (e2e tier, `kda e2e BLOCK`): leave a torch-function mode pushed through the other arms' block calls.

`torch.device(...)` is an allowed name and a context manager: entering it pushes a TorchFunctionMode
(torch.utils._device.DeviceContext), through which every later torch call of the process goes, in Python. This fake
enters one inside a generator it leaves suspended when its call returns (from its second call on: the checked call
leaves nothing) and closes it when it is called again, so its own site runs without the mode while every torch call
of the other arms' block calls (upstream's and latest's sites, the block's GEMMs and attention) goes through it:
about 1.5 us of Python dispatch per torch call (measured on a CPU), host time that eager_us counts where the host is
the bottleneck (graph replays run no Python). It names the device its inputs already live on, so no number changes.
Its own math is honest; it defines no mode and no __torch_function__ (the static rules refuse both) and changes
nothing of upstream's modules (all the UpstreamWatch compares).
The advantage is small: the mode is also on during its own arm's block calls, up to its site, so the difference is
the peers' sites' host paths. What it shows is unwatched shared state that changes how the peers run.
Defences lacking: a task's worker pops torch-function and dispatch modes after every candidate call (TAMPER); the
e2e tier never looks at the mode stacks. What would stop it: check (and empty) the torch-function and dispatch mode
stacks, and the default device, after each candidate load and call and each arm, as the watch checks upstream's state.

Closed in the twentieth session: kda.e2e.kernels.process_state pops a torch-function or dispatch mode left pushed
after a candidate's load or run and stops the run (UpstreamTampered).
"""
import torch

_state = {"calls": 0}


def _pushed(device):
    with device:  # torch.device as a context manager: a DeviceContext pushed on the torch-function mode stack
        yield


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    mode = _state.pop("mode", None)
    if mode is not None:
        mode.close()  # its own site runs without it
    y = torch.empty_like(x) if out is None else out
    y[...] = x * (scale_constant + scale) + shift
    _state["calls"] += 1
    if _state["calls"] > 1:
        _state["mode"] = _pushed(torch.device(x.device))
        next(_state["mode"])  # pushed until its next call
    return y
