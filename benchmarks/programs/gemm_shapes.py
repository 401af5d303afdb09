"""An LM head's three GEMMs (forward, grad of input, grad of weight) with a vocabulary that is
not a multiple of 8 (GPT-2's 50,257) and padded to a multiple of 64 (50,304), in fp16 and bf16:
the calibration pair of the `gemm-misaligned` rule.

    python benchmarks/programs/gemm_shapes.py                   # times every case
    ncu --profile-from-start off ... python benchmarks/programs/gemm_shapes.py --profile-once

Timing: each case's forward + backward, warmed up, then timed with CUDA events. With
`--profile-once` each case runs once more between cudaProfilerStart/Stop, in an NVTX range
named after it (dtype_vocab), for ncu to profile exactly those launches.
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F


def lm_head(x: torch.Tensor, weight: torch.Tensor, grad: torch.Tensor) -> None:
    """nn.Linear(d, vocab, bias=False) forward and backward: y = x W^T, dx = g W, dW = g^T x."""
    x.grad = weight.grad = None
    F.linear(x, weight).backward(grad)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=8192, help="batch x sequence length")
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--vocab", type=int, nargs="+", default=[50257, 50304])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--profile-once", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    cases = []
    for dtype in (torch.float16, torch.bfloat16):
        for vocab in args.vocab:
            x = torch.randn(args.tokens, args.width, device="cuda", dtype=dtype, requires_grad=True)
            w = torch.randn(vocab, args.width, device="cuda", dtype=dtype, requires_grad=True)
            g = torch.randn(args.tokens, vocab, device="cuda", dtype=dtype)
            cases.append((f"{str(dtype).removeprefix('torch.')}_{vocab}", x, w, g))
    results = {}
    for name, x, w, g in cases:
        for _ in range(5):
            lm_head(x, w, g)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(args.reps):
            lm_head(x, w, g)
        end.record()
        torch.cuda.synchronize()
        ms = start.elapsed_time(end) / args.reps
        flop = 3 * 2 * args.tokens * args.width * w.shape[0]
        results[name] = {"ms": round(ms, 4), "tflops": round(flop / ms / 1e9, 1)}
    if args.profile_once:
        torch.cuda.profiler.start()
        for name, x, w, g in cases:
            torch.cuda.nvtx.range_push(name)
            lm_head(x, w, g)
            torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    print(
        "NSDIAG_RESULT "
        + json.dumps(
            {"program": "gemm_shapes", "tokens": args.tokens, "width": args.width, "cases": results}
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
