"""Shim for `sglang.kernel_api_logging`: upstream's debug logging decorator, a no-op unless enabled there."""


def debug_kernel_api(fn=None, **_ignored):
    if callable(fn):
        return fn
    return lambda f: f
