"""A histogram of 200M samples into 256 bins, built every iteration as a metrics pass would
(the samples' bin indices computed, then counted). No NVTX ranges.

    python benchmarks/programs/histogram.py                      # as written: hist.index_add_
    python benchmarks/programs/histogram.py --method bincount    # the fix: torch.bincount
    python benchmarks/programs/histogram.py --method scatter_add # the same atomics as index_add_

`index_add_` (and `scatter_add_`) add each sample with a global atomic into one of 256 counters:
every warp's 32 adds land on a few addresses, so the L2's atomic units serialise them while DRAM
sits idle. `torch.bincount` with few bins counts into per-block shared-memory histograms and adds
those up once.
"""

from __future__ import annotations

import argparse

import torch
from _common import IterationTimer, add_common_args, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser, warmup=3, iters=10)
    parser.add_argument("--samples", type=int, default=200_000_000)
    parser.add_argument("--bins", type=int, default=256)
    parser.add_argument(
        "--method", choices=("index_add", "scatter_add", "bincount"), default="index_add"
    )
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.manual_seed(0)
    n = 100_000 if args.smoke else args.samples
    values = torch.rand(n, device=device) ** 2  # skewed: low bins fill faster, as real data does
    ones = torch.ones(1, device=device).expand(n)
    timer = IterationTimer(device)
    timer.start()
    for _ in range(args.warmup + args.iters):
        index = (values * args.bins).long().clamp_(max=args.bins - 1)
        if args.method == "bincount":
            counts = torch.bincount(index, minlength=args.bins).float()
        else:
            counts = torch.zeros(args.bins, device=device)
            if args.method == "index_add":
                counts.index_add_(0, index, ones)
            else:
                counts.scatter_add_(0, index, ones)
        top = int(counts.argmax())  # the mode is logged every iteration
        timer.lap()
    report(
        "histogram",
        args.method,
        timer,
        args.warmup,
        samples=n,
        bins=args.bins,
        mode_bin=top,
        total=float(counts.sum()),
    )


if __name__ == "__main__":
    main()
