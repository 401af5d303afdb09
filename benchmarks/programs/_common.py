"""What the realistic programs share: per-iteration timing and one machine-readable result line.

Each program prints `NSDIAG_RESULT {json}` at its end: the variant it ran and the wall time of
every iteration (the GPU drained at each iteration's end, as a training loop that logs its loss
does), so a before/after pair is compared on the same statistic (median of the steady-state
iterations) with no profiler attached.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import torch

T = TypeVar("T")


def add_common_args(parser: argparse.ArgumentParser, warmup: int, iters: int) -> None:
    parser.add_argument(
        "--warmup", type=int, default=warmup, help="iterations before the timed ones"
    )
    parser.add_argument("--iters", type=int, default=iters, help="timed iterations")
    parser.add_argument("--device", default="cuda", help="cuda (the H200) or cpu (a smoke test)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, to check the script runs")


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@contextlib.contextmanager
def nvtx(name: str, device: torch.device) -> Iterator[None]:
    """An NVTX push/pop range on CUDA (what `torch.cuda.nvtx.range` does), nothing on the CPU."""
    if device.type != "cuda":
        yield
        return
    torch.cuda.nvtx.range_push(name)
    try:
        yield
    finally:
        torch.cuda.nvtx.range_pop()


class IterationTimer:
    """Wall time per iteration, the device drained at each end."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.times_ms: list[float] = []
        self._last = 0.0

    def start(self) -> None:
        synchronize(self.device)
        self._last = time.perf_counter()

    def lap(self) -> None:
        synchronize(self.device)
        now = time.perf_counter()
        self.times_ms.append((now - self._last) * 1e3)
        self._last = now


def report(program: str, variant: str, timer: IterationTimer, warmup: int, **extra: object) -> None:
    steady = timer.times_ms[warmup:] or timer.times_ms
    result = {
        "program": program,
        "variant": variant,
        "warmup": warmup,
        "iteration_ms": [round(t, 4) for t in timer.times_ms],
        "median_ms": round(statistics.median(steady), 4),
        "min_ms": round(min(steady), 4),
        **extra,
    }
    print("NSDIAG_RESULT " + json.dumps(result), flush=True)


def cuda_graph(step: Callable[[], T], warmup: int = 3) -> Callable[[], T]:
    """`step` captured once in a CUDA graph, and a function that replays it (returning the
    outputs of the capture, which each replay overwrites). Warm-up calls run on a side stream
    first, as PyTorch's CUDA-graph docs advise; the step must read its inputs from static
    buffers."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = step()

    def replay() -> T:
        graph.replay()
        return static_out

    return replay


def init_distributed(device_name: str) -> tuple[torch.device, int]:
    """Join the launcher's process group: NCCL on this rank's GPU (LOCAL_RANK), gloo on the CPU
    (a smoke test). Returns the device and the local rank."""
    import os

    import torch.distributed as dist

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device_name == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    return device, local_rank
