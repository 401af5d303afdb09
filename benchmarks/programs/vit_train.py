"""Vision-transformer training: a timm ViT-B/16 (random weights, 224x224, batch 32, AdamW), the
loss read every step. No NVTX ranges.

    python benchmarks/programs/vit_train.py                      # as written: fp32, TF32 off
                                                                 # (PyTorch's default)
    python benchmarks/programs/vit_train.py --precision tf32     # fix: TF32 tensor cores
    python benchmarks/programs/vit_train.py --precision bf16     # fix: bf16 autocast

In fp32 with TF32 off every GEMM runs on the CUDA cores (cuBLAS's sm80_xmma_gemm_f32f32 and
CUTLASS simt sgemm kernels) at a fraction of the tensor cores' rate.
"""

from __future__ import annotations

import argparse
import contextlib

import torch
import torch.nn.functional as F
from _common import IterationTimer, add_common_args, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser, warmup=3, iters=8)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--model", default="vit_base_patch16_224")
    parser.add_argument("--precision", choices=("fp32", "tf32", "bf16"), default="fp32")
    args = parser.parse_args()
    import timm

    device = torch.device(args.device)
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = args.precision == "tf32"
    torch.backends.cudnn.allow_tf32 = args.precision == "tf32"
    size = 32 if args.smoke else 224
    model = timm.create_model(
        args.model if not args.smoke else "vit_tiny_patch16_224",
        pretrained=False,
        img_size=size,
        num_classes=1000,
    ).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    images = torch.randn(args.batch, 3, size, size, device=device)
    labels = torch.randint(0, 1000, (args.batch,), device=device)
    autocast = (
        torch.autocast(device.type, dtype=torch.bfloat16)
        if args.precision == "bf16"
        else contextlib.nullcontext()
    )
    timer = IterationTimer(device)
    timer.start()
    for _ in range(args.warmup + args.iters):
        with autocast:
            loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        loss.item()
        timer.lap()
    report("vit_train", args.precision, timer, args.warmup, batch=args.batch)


if __name__ == "__main__":
    main()
