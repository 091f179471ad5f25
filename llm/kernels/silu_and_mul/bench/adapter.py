"""How the harness calls each arm of silu_and_mul with the inputs a row declares (hand-written; `kda new` wrote this
skeleton from templates/new/adapter.py.j2 and `kda render` never touches it).

The baseline is upstream's public function, called exactly as SGLang calls it. The candidate gets the same arguments
plus the harness's preallocated, poisoned `out=` buffer(s) and must write every element.
"""

TODO = "TODO(silu_and_mul): write bench/adapter.py"


def output_specs(row, inputs):
    """{output name: (shape, torch dtype)} of the buffers the harness allocates for the candidate."""
    raise NotImplementedError(f"{TODO}: output_specs(row, inputs)")


def call_baseline(upstream, row, inputs, out):
    """Call upstream[...] (silu_and_mul, gelu_and_mul, gelu_tanh_and_mul) as SGLang does; return {output name: tensor}."""
    raise NotImplementedError(f"{TODO}: call_baseline(upstream, row, inputs, out)")


def call_candidate(solution, row, inputs, out):
    """Call solution.silu_and_mul(..., out=...) so that it writes the buffers in `out`."""
    raise NotImplementedError(f"{TODO}: call_candidate(solution, row, inputs, out)")


def bytes_moved(row):
    """Bytes the op must read and write at least (each input element once, each output element once)."""
    raise NotImplementedError(f"{TODO}: bytes_moved(row)")
