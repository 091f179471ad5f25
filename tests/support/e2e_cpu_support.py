"""timing.Cuda's primitives on the CPU, for the e2e timing tests (tests/e2e/test_e2e_timing.py,
tests/e2e/test_e2e_redteam.py): perf_counter for events, a "graph" that makes the calls it holds, the profiler on
CPU activity (no kernels: an empty inventory; with ops_as_kernels, every aten op stands for a kernel, so a site's
launches can be counted as on a GPU). Counts what it is asked to do."""
import gc
import time

from kda.e2e import inventory, timing


class CpuStandIn:
    device = "cpu"

    def __init__(self, ops_as_kernels: bool = False):
        self.captures, self.freed, self.syncs = [], 0, 0
        self.ops_as_kernels = ops_as_kernels

    def available(self):
        return True

    def name(self):
        return "CPU stand-in"

    def free(self):
        gc.collect()
        self.freed += 1

    def eager_us(self, fn, n):
        fn()
        t = time.perf_counter()
        timing._calls(fn, n)
        return (time.perf_counter() - t) * 1e6 / n

    def graph_calls(self, fn, n):
        return max(1, min(n, 2))  # as Cuda.graph_calls with a memory cap: fewer calls per graph, several replays

    def graph(self, fn, n):
        self.captures.append(n)
        fn()
        return lambda: timing._calls(fn, n)

    def graph_us(self, graph, calls, replays):
        t = time.perf_counter()
        for _ in range(replays):
            graph()
        return (time.perf_counter() - t) * 1e6 / (calls * replays)

    def synchronize(self):
        self.syncs += 1

    def profile(self, fn):
        if not self.ops_as_kernels:
            return inventory.profile_events(fn, cuda=False)
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            fn()
        windows, ops = [], []
        for e in prof.events():
            span = (e.time_range.start, e.time_range.end)
            if e.name.startswith(inventory.SITE_PREFIX):
                windows.append((*span, e.name))
            elif e.name.startswith("aten::"):
                ops.append({"name": e.name, "start_us": span[0], "end_us": span[1]})
        return inventory.attribute(ops, windows)
