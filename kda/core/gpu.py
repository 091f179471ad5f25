"""GPU identity: a short slug for results file names and the datasheet memory bandwidth (the impossibility line)."""
from __future__ import annotations

# Datasheet HBM bandwidth in TB/s. A row that streams faster than this is INVALID, not fast.
DATASHEET_TBPS = {"h100": 3.35, "h200": 4.8, "h100-pcie": 2.0, "h100-nvl": 3.9, "gh200": 4.9, "a100": 2.039,
                  "b200": 8.0, "h20": 4.0}


def gpu_slug(name: str) -> str:
    n = name.lower()
    if "gh200" in n:
        return "gh200"  # Grace Hopper: the fastest variant's bandwidth as the impossibility line
    for key in ("h200", "b200", "h20 ", "a100"):
        if key.strip() in n.split() or key.strip() in n.replace("-", " ").split():
            return key.strip()
    if "h100" in n:
        return "h100-nvl" if "nvl" in n else "h100-pcie" if "pcie" in n else "h100"
    if "h200" in n:
        return "h200"
    return "".join(c if c.isalnum() else "-" for c in n).strip("-") or "unknown"


def datasheet_tbps(slug: str) -> float | None:
    return DATASHEET_TBPS.get(slug)
