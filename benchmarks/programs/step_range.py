"""A small-batch MLP "decode step" (24 pre-norm residual MLP blocks, width 512, batch 16, fp16):
warmed up, then exactly one step between cudaProfilerStart and cudaProfilerStop, as a user
brackets what they want profiled; then the step timed on its own.

    python benchmarks/programs/step_range.py                 # as written: eager PyTorch
    python benchmarks/programs/step_range.py --cuda-graph    # the fix: the step replayed as a graph

Each block launches five kernels of a few microseconds (layer norm, two GEMMs, GELU, the residual
add), so eager mode spends most of the step launching them.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from _common import IterationTimer, add_common_args, cuda_graph, nvtx, report
from torch import nn


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(self.norm(x))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser, warmup=20, iters=200)
    parser.add_argument("--blocks", type=int, default=24)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--cuda-graph", action="store_true", help="capture the step, replay it")
    args = parser.parse_args()
    device = torch.device(args.device)
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    torch.manual_seed(0)
    model = nn.Sequential(*(Block(args.width) for _ in range(args.blocks))).to(device, dtype)
    static_x = torch.randn(args.batch, args.width, device=device, dtype=dtype)

    def eager() -> torch.Tensor:
        return model(static_x)

    with torch.inference_mode():
        step = cuda_graph(eager) if args.cuda_graph and device.type == "cuda" else eager
        for _ in range(args.warmup):
            step()
        timer = IterationTimer(device)
        timer.start()
        if device.type == "cuda":
            torch.cuda.profiler.start()
        with nvtx("step", device):
            step()
        timer.lap()
        if device.type == "cuda":
            torch.cuda.profiler.stop()
        for _ in range(args.iters):
            step()
            timer.lap()
    variant = "cuda_graph" if args.cuda_graph else "eager"
    # The first lap is the profiled step; the steady state is the ones after it.
    report("step_range", variant, timer, 1, blocks=args.blocks, batch=args.batch)


if __name__ == "__main__":
    main()
