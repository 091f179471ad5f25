"""The head of the group_norm_silu interpreter probes (team kernel): imports, the candidate's module as `mod`, three
input shapes with their fp32 torch reference (`cases()`), and the tolerance check (`close`)."""
import textwrap

PROLOGUE = textwrap.dedent("""
    import sys
    import torch
    import torch.nn.functional as F
    from kda.definition.task import Task
    task = Task.load("group_norm_silu")
    sol = task.load_solution()
    mod = sys.modules[sol.__name__ + ".group_norm_silu"]
    g = torch.Generator().manual_seed(3)

    def cases():
        shapes = ((torch.float16, 2, 8, 2, (2, 8, 8), True), (torch.bfloat16, 1, 12, 3, (4, 32), False),
                  (torch.float16, 1, 4, 1, (128,), True))
        for dtype, B, C, G, sp, affine in shapes:
            x = (torch.randn(B, C, *sp, generator=g) * 2 + 50).to(dtype)  # |mean| >> std: the pivot's job
            w = torch.randn(C, generator=g).to(dtype) if affine else None
            b = torch.randn(C, generator=g).to(dtype) if affine else None
            ref = F.silu(F.group_norm(x.float(), G, None if w is None else w.float(),
                                      None if b is None else b.float(), 1e-5))
            yield x, w, b, G, ref

    def close(out, ref):
        tol = 5e-3 if out.dtype == torch.float16 else 2e-2
        return bool(((out.float() - ref).abs() <= tol + tol * ref.abs()).all())
""")
