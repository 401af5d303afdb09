"""Where does stream_split's time go? Copy rates alone and at once; the pipeline per chunking.

    python tools/probes/probe_pipeline.py [--shape 16 512 512] [--iters 20]

Prints one JSON line: H2D and D2H of the whole batch alone (pinned, CUDA events), both at once on
two streams (is the link full duplex here?), the float4 kernel alone, and the pipeline for
several chunk counts, by CUDA events on the caller's stream and by host wall clock around
stream_split, each as a ratio to max(H2D, D2H, compute).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_reference_kernels import time_host

from reference_kernels.algebra import chunk_bounds
from reference_kernels.variants import _pipeline_streams, load_extension, make_inputs, stream_split


def cuda_ms(fn, iters: int) -> float:
    """CUDA-event median as the recorded probe logs measured it: unlike the benchmark's
    time_cuda, no spin kernel first, so the host's time to enqueue the work can count too."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--shape", nargs=3, type=int, default=[16, 512, 512])
    p.add_argument("--iters", type=int, default=20)
    args = p.parse_args()
    ext = load_extension()
    x, params = make_inputs(*args.shape)
    h_in = x.cpu().pin_memory()
    h_out = torch.empty(x.shape, dtype=torch.float32, pin_memory=True)
    d_out = torch.empty_like(x)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()

    def both() -> None:
        cur = torch.cuda.current_stream()
        s1.wait_stream(cur)
        s2.wait_stream(cur)
        with torch.cuda.stream(s1):
            x.copy_(h_in, non_blocking=True)
        with torch.cuda.stream(s2):
            h_out.copy_(d_out, non_blocking=True)
        cur.wait_stream(s1)
        cur.wait_stream(s2)

    h2d = cuda_ms(lambda: x.copy_(h_in, non_blocking=True), args.iters)
    d2h = cuda_ms(lambda: h_out.copy_(d_out, non_blocking=True), args.iters)
    compute = cuda_ms(
        lambda: ext.float4_into(x, params.matrix_folded, params.bias, d_out), args.iters
    )
    bidir = cuda_ms(both, args.iters)
    bound = max(h2d, d2h, compute)
    result: dict[str, object] = {
        "bytes_each_way": x.numel() * 4,
        "h2d_ms": h2d,
        "d2h_ms": d2h,
        "compute_ms": compute,
        "both_directions_at_once_ms": bidir,
        "duplex_ratio": bidir / bound,
        "bound_ms": bound,
    }
    d_in = torch.empty_like(x)
    streams = _pipeline_streams(x.device)
    pixels = x.numel() // 3

    def pipeline(chunks: int) -> None:
        cur = torch.cuda.current_stream()
        for s in streams:
            s.wait_stream(cur)
        ext.stream_split_into(
            h_in, h_out, d_in, d_out, params.matrix_folded, params.bias,
            chunk_bounds(pixels, chunks), *(s.cuda_stream for s in streams),
        )  # fmt: skip
        cur.wait_stream(streams[2])

    for chunks in (4, 8, 16, 24, 32, 48, 64):
        ms = cuda_ms(lambda c=chunks: pipeline(c), args.iters)
        result[f"events_{chunks}_over_bound"] = ms / bound
        ms = time_host(lambda c=chunks: stream_split(h_in, params, out=h_out, chunks=c), args.iters)
        result[f"split_{chunks}_ms"] = ms
        result[f"split_{chunks}_over_bound"] = ms / bound
    print("PIPELINE_PROBE " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
