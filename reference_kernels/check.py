"""Correctness of every variant against a float64 reference, on odd shapes.

Run as `python reference_kernels/check.py [--variants a,b] [--seed S]`: one line per
(variant, shape), exit status 1 if any fails.

Error metric: max over outputs of |out - ref| / scale, where
scale[p, d] = sum_c (|x[p, c]| + |mean[c]|) * |M'[c, d]|  (M' = M / std[:, None]),
the magnitude of the terms summed for that output. It bounds the fp32 rounding error of
both orders of evaluation (two-step and folded): a 3-term dot product plus bias rounds
to at most ~10 u * scale (u = 2^-24 ~ 6e-8; ~3 u is typical). Unlike |out - ref| / |ref|
it does not blow up when an output cancels to ~0. TOLERANCE = 1e-5 (~170 u) leaves wide
margin for any evaluation order (torch.compile may reorder), yet a layout, indexing or
tail bug gives O(1) errors, TF32 (~1e-3) fails too, and NaN fails.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

if __package__:  # imported, or python -m [nsdiag.]reference_kernels.check
    from .variants import PIPELINE_VARIANTS, VARIANTS, Params, make_inputs
else:  # run as a file; the folder is named reference_kernels in the repo and in the wheel
    sys.path.append(str(Path(__file__).resolve().parents[1]))
    from reference_kernels.variants import PIPELINE_VARIANTS, VARIANTS, Params, make_inputs

# Pixel counts 1, 4, 15, 126, 1581, 132612: P % 4 = 1, 0, 3, 2, 1, 0, i.e. every float4
# tail length, a batch smaller than one float4 group, and one larger than many blocks.
SHAPES: tuple[tuple[int, int, int], ...] = (
    (1, 1, 1),
    (1, 2, 2),
    (1, 3, 5),
    (2, 7, 9),
    (3, 17, 31),
    (4, 129, 257),
)
TOLERANCE = 1e-5


@dataclass(frozen=True)
class CheckResult:
    variant: str
    shape: tuple[int, int, int]
    error: float
    passed: bool

    def line(self) -> str:
        shape = "x".join(map(str, self.shape))
        verdict = "PASS" if self.passed else "FAIL"
        return f"{self.variant:16s} {shape:>12s}  max_scaled_err={self.error:.3e}  {verdict}"


def reference(x: torch.Tensor, params: Params) -> tuple[torch.Tensor, torch.Tensor]:
    """(ref, scale) in float64 on x's device, from the same fp32 inputs."""
    x64 = x.double()
    mean, std, matrix = (
        t.to(x.device, torch.float64) for t in (params.mean, params.std, params.matrix)
    )
    ref = torch.einsum("nhwc,cd->nhwd", (x64 - mean) / std, matrix)
    scale = torch.einsum("nhwc,cd->nhwd", x64.abs() + mean.abs(), (matrix / std[:, None]).abs())
    return ref, scale


def scaled_error(out: torch.Tensor, ref: torch.Tensor, scale: torch.Tensor) -> float:
    """max |out - ref| / scale; NaN if out has a NaN (torch.amax propagates NaN)."""
    if out.shape != ref.shape:
        return math.inf
    floor = torch.finfo(torch.float64).tiny
    err = (out.to(ref.device, torch.float64) - ref).abs() / scale.clamp_min(floor)
    return float(err.amax()) if err.numel() else 0.0


def check_variant(
    name: str, shape: tuple[int, int, int], seed: int = 0, **kwargs: object
) -> CheckResult:
    """Run one variant on one shape. Outputs go into a NaN-filled buffer, so an output
    element that a kernel forgets to write fails instead of passing on stale memory."""
    x, params = make_inputs(*shape, device="cuda", seed=seed)
    ref, scale = reference(x, params)
    fn = VARIANTS[name]
    if name in PIPELINE_VARIANTS:
        pinned = name == "stream_split"
        x_in = x.cpu().pin_memory() if pinned else x.cpu()
        out = torch.empty(x.shape, dtype=torch.float32, pin_memory=pinned).fill_(math.nan)
    else:
        x_in = x
        out = torch.full_like(x, math.nan)
    result = fn(x_in, params, out=out, **kwargs)
    torch.cuda.synchronize()
    error = scaled_error(result, ref, scale)
    return CheckResult(name, shape, error, math.isfinite(error) and error <= TOLERANCE)


def run_checks(
    variants: Sequence[str] = tuple(VARIANTS),
    shapes: Sequence[tuple[int, int, int]] = SHAPES,
    seed: int = 0,
) -> list[CheckResult]:
    return [check_variant(v, s, seed) for v in variants for s in shapes]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help="comma-separated subset of: " + ",".join(VARIANTS),
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    names = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(names) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variants: {','.join(unknown)}")
    if not torch.cuda.is_available():
        print("check.py needs a CUDA GPU", file=sys.stderr)
        return 2
    print(f"device: {torch.cuda.get_device_name()}  tolerance: {TOLERANCE:.0e} (scaled error)")
    failures = 0
    for name in names:
        for shape in SHAPES:
            result = check_variant(name, shape, args.seed)
            print(result.line(), flush=True)
            failures += not result.passed
    print(f"{'all passed' if not failures else f'{failures} FAILED'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
