"""The program nsdiag profiles by default: run the reference variants once each.

    python reference_kernels/run_all.py [--shape N H W] [--variants a,b,...] [--iters K]
        [--with-pipeline] [--profile-region] [--copy-ceiling]

Every variant is warmed up first (this also builds the extension and runs torch.compile),
so with --profile-region (cudaProfilerStart/Stop around the measured part; pair it with
`ncu --profile-from-start off` or `nsys --capture-range=cudaProfilerApi`) the profile
holds only steady-state work. Each call sits in an NVTX range named after its variant;
--copy-ceiling adds a large device-to-device copy in the NVTX range "copy_ceiling".
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

if __package__:  # python -m [nsdiag.]reference_kernels.run_all, or imported
    from .variants import (
        DEFAULT_CHUNKS,
        DEVICE_VARIANTS,
        PIPELINE_VARIANTS,
        VARIANTS,
        load_extension,
        make_inputs,
        nvtx_range,
    )
else:  # run as a file; the folder is named reference_kernels in the repo and in the wheel
    sys.path.append(str(Path(__file__).resolve().parents[1]))
    from reference_kernels.variants import (
        DEFAULT_CHUNKS,
        DEVICE_VARIANTS,
        PIPELINE_VARIANTS,
        VARIANTS,
        load_extension,
        make_inputs,
        nvtx_range,
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--shape",
        nargs=3,
        type=int,
        default=[64, 512, 512],
        metavar=("N", "H", "W"),
        help="device-variant batch (default 64 512 512: 201 MB in)",
    )
    p.add_argument(
        "--pipeline-shape",
        nargs=3,
        type=int,
        default=[16, 512, 512],
        metavar=("N", "H", "W"),
        help="batch for stream_split/serial_pageable",
    )
    p.add_argument(
        "--variants",
        default=",".join(DEVICE_VARIANTS),
        help="comma-separated, any of: " + ",".join(VARIANTS),
    )
    p.add_argument(
        "--with-pipeline", action="store_true", help="also run " + ",".join(PIPELINE_VARIANTS)
    )
    p.add_argument("--iters", type=int, default=1, help="calls per variant in the region")
    p.add_argument("--warmup", type=int, default=2, help="calls per variant before the region")
    p.add_argument("--chunks", type=int, default=DEFAULT_CHUNKS, help="stream_split chunks")
    p.add_argument(
        "--profile-region",
        action="store_true",
        help="cudaProfilerStart/Stop around the measured region",
    )
    p.add_argument(
        "--copy-ceiling",
        action="store_true",
        help="also run a device-to-device copy (NVTX 'copy_ceiling')",
    )
    p.add_argument("--copy-mib", type=int, default=256, help="copy-ceiling buffer size (MiB)")
    args = p.parse_args(argv)
    names = [v for v in args.variants.split(",") if v]
    if args.with_pipeline:
        names += [v for v in PIPELINE_VARIANTS if v not in names]
    unknown = sorted(set(names) - set(VARIANTS))
    if unknown:
        p.error(f"unknown variants: {','.join(unknown)}")
    if args.iters < 1 or args.warmup < 0 or args.chunks < 1 or args.copy_mib < 1:
        p.error("--iters, --chunks and --copy-mib must be >= 1, --warmup >= 0")
    args.names = names
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print("run_all.py needs a CUDA GPU", file=sys.stderr)
        return 2
    ext = load_extension()

    # Inputs and outputs are made outside the region. Pipeline outputs are preallocated
    # so the profile shows transfers, not host allocation and page faults.
    calls: dict[str, Callable[[], object]] = {}
    shapes: dict[str, str] = {}
    if any(name not in PIPELINE_VARIANTS for name in args.names):
        x, params = make_inputs(*args.shape)
    for name in args.names:
        fn = VARIANTS[name]
        if name in PIPELINE_VARIANTS:
            xp, pp = make_inputs(*args.pipeline_shape)
            pinned = name == "stream_split"
            host_x = xp.cpu().pin_memory() if pinned else xp.cpu()
            host_out = torch.empty(host_x.shape, dtype=torch.float32, pin_memory=pinned)
            kwargs = {"chunks": args.chunks} if pinned else {}
            calls[name] = functools.partial(fn, host_x, pp, out=host_out, **kwargs)
            shapes[name] = "x".join(map(str, host_x.shape))
        else:
            calls[name] = functools.partial(fn, x, params)
            shapes[name] = "x".join(map(str, x.shape))

    for call in calls.values():
        for _ in range(args.warmup):
            call()
        torch.cuda.synchronize()

    if args.copy_ceiling:
        # float32 buffers; ext.copy_float4 is a kernel (visible to ncu), copy_ is a
        # cudaMemcpy device-to-device (visible to nsys).
        src = torch.rand(args.copy_mib * 2**18, device="cuda")
        dst = torch.empty_like(src)
        dst.copy_(src)
        ext.copy_float4(src, dst)
        torch.cuda.synchronize()

    print(
        f"device: {torch.cuda.get_device_name()}  iters: {args.iters}  "
        f"profile-region: {args.profile_region}",
        flush=True,
    )
    if args.profile_region:
        torch.cuda.profiler.start()
    try:
        for name, call in calls.items():
            start = time.perf_counter()
            for _ in range(args.iters):
                call()
            torch.cuda.synchronize()
            ms = (time.perf_counter() - start) * 1e3 / args.iters
            print(
                f"{name:16s} shape={shapes[name]:>16s}  {ms:9.3f} ms/iter (host wall clock)",
                flush=True,
            )
        if args.copy_ceiling:
            start = time.perf_counter()
            with nvtx_range("copy_ceiling"):
                dst.copy_(src)
                ext.copy_float4(src, dst)
            torch.cuda.synchronize()
            ms = (time.perf_counter() - start) * 1e3
            print(
                f"{'copy_ceiling':16s} {args.copy_mib:>10d} MiB  {ms:9.3f} ms "
                "(memcpy + float4 kernel)",
                flush=True,
            )
    finally:
        if args.profile_region:
            torch.cuda.profiler.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
