"""Four kinds of waiting in four NVTX ranges, repeated every iteration (inside a `step` range),
so that each finding can be checked against the range its evidence lies in:

- `pageable_serial`: four 64 MB batches copied from pageable host memory, each then scaled on the
  GPU, one after another (the copies block the host and cannot overlap anything);
- `tiny_launches`: 3,000 elementwise kernels on a 4 kB tensor (launch-bound: each runs for a
  microsecond or two, less than its launch takes);
- `sync_every_op`: 200 matrix products of 1024x1024, each followed by torch.cuda.synchronize()
  (the GPU idles while the host waits and launches the next);
- `pinned_overlapped`: four 64 MB pinned batches copied on a side stream while the GPU computes
  on the default stream (the healthy pattern: nothing to report).

    python benchmarks/programs/nvtx_phases.py
"""

from __future__ import annotations

import argparse

import torch
from _common import IterationTimer, add_common_args, nvtx, report, synchronize


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser, warmup=2, iters=6)
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.manual_seed(0)
    mb = 1 if args.smoke else 64
    n = mb * (1 << 20) // 4
    pageable = [torch.randn(n) for _ in range(4)]
    pinned = [b.pin_memory() for b in pageable] if device.type == "cuda" else pageable
    landed = [torch.empty(n, device=device) for _ in range(4)]
    tiny = torch.zeros(1024, device=device)
    a = torch.randn(1024, 1024, device=device)
    work = torch.randn(4096, 4096, device=device)
    side = torch.cuda.Stream(device) if device.type == "cuda" else None
    timer = IterationTimer(device)
    timer.start()
    for _ in range(args.warmup + args.iters):
        with nvtx("step", device):
            with nvtx("pageable_serial", device):
                for host, dst in zip(pageable, landed, strict=True):
                    dst.copy_(host)
                    dst.mul_(0.5)
            with nvtx("tiny_launches", device):
                for _ in range(3000):
                    tiny.add_(1.0)
            with nvtx("sync_every_op", device):
                for _ in range(200):
                    b = a @ a
                    synchronize(device)
            with nvtx("pinned_overlapped", device):
                if side is not None:
                    side.wait_stream(torch.cuda.current_stream(device))
                    with torch.cuda.stream(side):
                        for host, dst in zip(pinned, landed, strict=True):
                            dst.copy_(host, non_blocking=True)
                for _ in range(4):
                    work = torch.tanh(work @ work * 1e-3)
                if side is not None:
                    torch.cuda.current_stream(device).wait_stream(side)
        timer.lap()
    report(
        "nvtx_phases", "as_written", timer, args.warmup, check=round(float(b.sum() + tiny[0]), 1)
    )


if __name__ == "__main__":
    main()
