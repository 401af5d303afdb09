"""An elementwise pipeline as PyTorch code often has it: a loop body of eight elementwise
operations with scalar operands (`x = x * a + b`, four times) on a 128 MB fp32 tensor, run for
many iterations. No NVTX ranges.

    python benchmarks/programs/elementwise.py              # as written: eight kernels per iteration
    python benchmarks/programs/elementwise.py --compile    # the fix: torch.compile fuses the body
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from _common import IterationTimer, add_common_args, report

COEFFICIENTS = ((1.01, 0.5), (0.99, -0.25), (1.02, 0.125), (0.98, -0.375))


def body(x: torch.Tensor) -> torch.Tensor:
    for scale, shift in COEFFICIENTS:
        x = x * scale + shift
    return x


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser, warmup=10, iters=50)
    parser.add_argument("--mib", type=int, default=128, help="tensor size in MiB")
    parser.add_argument("--compile", action="store_true", help="torch.compile the loop body")
    args = parser.parse_args()
    device = torch.device(args.device)
    elements = (1 if args.smoke else args.mib) * (1 << 20) // 4
    x = torch.randn(elements, device=device)
    fn: Callable[[torch.Tensor], torch.Tensor] = torch.compile(body) if args.compile else body
    timer = IterationTimer(device)
    timer.start()
    for _ in range(args.warmup + args.iters):
        y = fn(x)
        timer.lap()
    variant = "compiled" if args.compile else "eager"
    report("elementwise", variant, timer, args.warmup, mib=args.mib, checksum=float(y[:8].sum()))


if __name__ == "__main__":
    main()
