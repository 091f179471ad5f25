"""Shim for `sglang.srt.utils.custom_op`: upstream registers torch custom ops so torch.compile can trace them.

A direct call of the decorated function is what the op runs, so the shim returns the function unchanged.
"""


def register_custom_op(fn=None, *, op_name=None, mutates_args=None, out_shape=None, **_ignored):
    def wrap(f):
        return f

    return wrap(fn) if callable(fn) else wrap
