"""silu_and_mul written from the math in fp32 (fp64 when the inputs are fp64), never from the baseline. Hand-written
(`kda new` wrote this skeleton from templates/new/oracle.py.j2; `kda render` never touches it).
"""


def reference(row, inputs):
    """{output name: fp32/fp64 tensor} for the row's inputs."""
    raise NotImplementedError("TODO(silu_and_mul): write oracle.py's reference(row, inputs) from the math")
