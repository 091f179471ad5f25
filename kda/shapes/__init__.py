"""Capture the shapes production code calls upstream kernels with, and merge them into a catalog.

`kda.shapes.recorder` wraps entry points and appends one JSON line per new call signature;
`kda.shapes.ingest` validates such logs and merges them into diffusion/shapes/captured.jsonl.
"""
