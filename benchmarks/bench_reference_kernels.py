"""Benchmark the reference variants against the copy ceiling measured in the same run.

    python benchmarks/bench_reference_kernels.py [--shape N H W] [--iters K]
        [--pipeline-shape N H W] [--chunks K] [--no-pipeline] [--json PATH]

Device variants are timed with CUDA events (3 warm-up calls, then the median of --iters
calls). Effective GB/s counts the minimum traffic: input read once + output written
once = 2 * N*H*W*3*4 bytes. The ceiling is the faster of cudaMemcpy device-to-device
and the extension's float4 copy kernel on a large buffer, counting bytes read + written.
The pipeline section times stream_split and serial_pageable by host wall clock (both
return only when the result is on the host) and compares stream_split with the slowest
of its stages measured alone: max(H2D, D2H, compute); a ratio near 1 means full overlap.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the reference_kernels package

import torch

from reference_kernels.variants import (
    DEFAULT_CHUNKS,
    DEVICE_VARIANTS,
    VARIANTS,
    load_extension,
    make_inputs,
    serial_pageable,
    stream_split,
)

WARMUP = 3
LEAD_CYCLES = 2_000_000  # about 1 ms at H200 clocks


def time_cuda(fn: Callable[[], object], iters: int, warmup: int = WARMUP) -> float:
    """Median milliseconds of `fn` on the current stream, by CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        # A ~1 ms spin kernel queued first lets the host get ahead, so the events time the GPU
        # work alone, not the Python and launch overhead of the call (which for a 0.1 ms
        # kernel was 20% of the figure).
        torch.cuda._sleep(LEAD_CYCLES)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def time_host(fn: Callable[[], object], iters: int, warmup: int = WARMUP) -> float:
    """Median milliseconds of a call that synchronises itself, by host wall clock."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def gbps(nbytes: int, ms: float) -> float:
    return nbytes / (ms * 1e-3) / 1e9


def copy_ceiling(ext: Any, iters: int, mib: int) -> dict[str, float]:
    src = torch.rand(mib * 2**18, device="cuda")  # float32: 2**18 elements per MiB
    dst = torch.empty_like(src)
    nbytes = 2 * src.numel() * 4  # read + write
    memcpy = gbps(nbytes, time_cuda(lambda: dst.copy_(src), iters))
    kernel = gbps(nbytes, time_cuda(lambda: ext.copy_float4(src, dst), iters))
    return {
        "buffer_mib": mib,
        "memcpy_d2d_gbps": memcpy,
        "float4_copy_gbps": kernel,
        "ceiling_gbps": max(memcpy, kernel),
    }


def bench_device(shape: Sequence[int], iters: int, ceiling: float) -> dict[str, dict[str, float]]:
    n, h, w = shape
    x, params = make_inputs(n, h, w)
    nbytes = 2 * x.numel() * 4
    results: dict[str, dict[str, float]] = {}
    for name in DEVICE_VARIANTS:
        ms = time_cuda(functools.partial(VARIANTS[name], x, params), iters)
        rate = gbps(nbytes, ms)
        results[name] = {"ms": ms, "gbps": rate, "pct_ceiling": 100 * rate / ceiling}
    for r in results.values():
        r["speedup_vs_naive"] = results["naive"]["ms"] / r["ms"]
    return results


def bench_pipeline(shape: Sequence[int], iters: int, chunks: int, ext: Any) -> dict[str, float]:
    n, h, w = shape
    x, params = make_inputs(n, h, w)
    pinned_in = x.cpu().pin_memory()
    pageable_in = x.cpu()
    pinned_out = torch.empty(x.shape, dtype=torch.float32, pin_memory=True)
    pageable_out = torch.empty(x.shape, dtype=torch.float32)
    d_out = torch.empty_like(x)
    h2d = time_cuda(lambda: x.copy_(pinned_in, non_blocking=True), iters)
    d2h = time_cuda(lambda: pinned_out.copy_(d_out, non_blocking=True), iters)
    compute = time_cuda(lambda: ext.float4_into(x, params.matrix_folded, params.bias, d_out), iters)
    split = time_host(lambda: stream_split(pinned_in, params, out=pinned_out, chunks=chunks), iters)
    serial = time_host(lambda: serial_pageable(pageable_in, params, out=pageable_out), iters)
    bound = max(h2d, d2h, compute)
    return {
        "chunks": chunks,
        "bytes_each_way": x.numel() * 4,
        "h2d_pinned_ms": h2d,
        "d2h_pinned_ms": d2h,
        "compute_float4_ms": compute,
        "stream_split_ms": split,
        "serial_pageable_ms": serial,
        "bound_ms": bound,
        "split_over_bound": split / bound,
        "split_speedup_vs_serial": serial / split,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", nargs=3, type=int, default=[64, 512, 512], metavar=("N", "H", "W"))
    p.add_argument(
        "--pipeline-shape", nargs=3, type=int, default=[16, 512, 512], metavar=("N", "H", "W")
    )
    p.add_argument("--iters", type=int, default=20, help="timed calls per measurement (median)")
    p.add_argument("--chunks", type=int, default=DEFAULT_CHUNKS)
    p.add_argument("--copy-mib", type=int, default=256, help="copy-ceiling buffer size (MiB)")
    p.add_argument("--no-pipeline", action="store_true", help="skip the host<->device section")
    p.add_argument("--json", type=Path, help="also write the figures to this file")
    args = p.parse_args(argv)
    if args.iters < 1 or args.chunks < 1:
        p.error("--iters and --chunks must be >= 1")
    if not torch.cuda.is_available():
        print("bench_reference_kernels.py needs a CUDA GPU", file=sys.stderr)
        return 2

    ext = load_extension()
    report: dict[str, Any] = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "shape": list(args.shape),
        "iters": args.iters,
        "warmup": WARMUP,
    }
    ceiling = copy_ceiling(ext, args.iters, args.copy_mib)
    report["copy_ceiling"] = ceiling
    print(
        f"device: {report['device']}  torch {report['torch']}  "
        f"median of {args.iters} after {WARMUP} warm-up"
    )
    print(
        f"copy ceiling ({args.copy_mib} MiB, read+write): "
        f"memcpy D2D {ceiling['memcpy_d2d_gbps']:.0f} GB/s, "
        f"float4 copy kernel {ceiling['float4_copy_gbps']:.0f} GB/s "
        f"-> {ceiling['ceiling_gbps']:.0f} GB/s"
    )

    device = bench_device(args.shape, args.iters, ceiling["ceiling_gbps"])
    report["variants"] = device
    n, h, w = args.shape
    print(
        f"\nshape {n}x{h}x{w}x3 fp32, minimum traffic (in + out) {2 * n * h * w * 12 / 1e6:.1f} MB"
    )
    print(f"{'variant':12s} {'ms':>9s} {'GB/s':>8s} {'% ceiling':>10s} {'vs naive':>9s}")
    for name, r in device.items():
        print(
            f"{name:12s} {r['ms']:9.4f} {r['gbps']:8.0f} {r['pct_ceiling']:9.1f}% "
            f"{r['speedup_vs_naive']:8.2f}x"
        )

    if not args.no_pipeline:
        pipe = bench_pipeline(args.pipeline_shape, args.iters, args.chunks, ext)
        report["pipeline"] = {"shape": list(args.pipeline_shape), **pipe}
        mb = pipe["bytes_each_way"] / 1e6
        print(
            f"\npipeline {'x'.join(map(str, args.pipeline_shape))}x3 fp32 ({mb:.1f} MB each way), "
            f"{args.chunks} chunks"
        )
        rows = [
            ("H2D pinned only", pipe["h2d_pinned_ms"]),
            ("D2H pinned only", pipe["d2h_pinned_ms"]),
            ("compute only", pipe["compute_float4_ms"]),
            ("stream_split", pipe["stream_split_ms"]),
            ("serial_pageable", pipe["serial_pageable_ms"]),
        ]
        for label, ms in rows:
            print(f"{label:16s} {ms:9.3f} ms")
        print(
            f"stream_split / max(H2D, D2H, compute) = {pipe['split_over_bound']:.2f} "
            "(1.0 = perfect overlap)"
        )
        print(f"stream_split speedup over serial_pageable = {pipe['split_speedup_vs_serial']:.2f}x")

    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
