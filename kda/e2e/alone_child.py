"""The child of kda.e2e.alone: time the given arms of a block (peers and eager, never a candidate) into --out.

Apart from kda.e2e.alone so the imports run one way: the timing imports the judgement, this imports the timing.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kda.e2e import timing
from kda.e2e.block import load_block


def main(argv: list[str] | None = None) -> int:
    """The child: time the given arms of the block (no candidate among them) into --out."""
    ap = argparse.ArgumentParser(prog="python -m kda.e2e.alone_child", description=__doc__.splitlines()[0])
    ap.add_argument("block")
    ap.add_argument("--arms", required=True, help="comma-separated: peers and eager, never a candidate")
    ap.add_argument("--trials", type=int, required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    arms = args.arms.split(",")
    bad = [a for a in arms if a == "candidate" or a.startswith("only-")]
    if bad:
        raise SystemExit(f"kda.e2e.alone_child: {', '.join(bad)} would import a candidate; the peers run alone here")
    timing.bench(load_block(args.block), arms, trials=args.trials, out=Path(args.out), predict=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
