"""Vision-transformer fine-tuning as older recipes write it: a timm ViT-S/16 (random weights,
224x224, batch 128, bf16 autocast) stepped by an AdamW built with `foreach=False`, the gradients
clipped with `clip_grad_norm_`, the loss read every step. No NVTX ranges.

    python benchmarks/programs/optim_step.py                       # as written: AdamW steps its
                                                                   # 152 parameters one by one
    python benchmarks/programs/optim_step.py --optimizer fused     # the fix: AdamW(fused=True)
    python benchmarks/programs/optim_step.py --optimizer foreach   # PyTorch's default on CUDA

With `foreach=False` the optimizer launches a handful of elementwise kernels per parameter
tensor (about 1,200 per step for ViT-S), each a few microseconds of GPU work behind more host
time to dispatch it, so the step waits on the host's Python loop. `fused=True` updates every
parameter in a few multi-tensor kernels.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from _common import IterationTimer, add_common_args, report


def build_model(name: str, smoke: bool) -> torch.nn.Module:
    try:
        import timm
    except ImportError:  # a CPU smoke test without timm (it needs torchvision)
        if not smoke:
            raise
        layers = [torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 64)]
        layers += [m for _ in range(8) for m in (torch.nn.LayerNorm(64), torch.nn.Linear(64, 64))]
        return torch.nn.Sequential(*layers, torch.nn.Linear(64, 1000))
    return timm.create_model(
        "vit_tiny_patch16_224" if smoke else name,
        pretrained=False,
        img_size=32 if smoke else 224,
        num_classes=1000,
    )


def build_optimizer(params: list[torch.nn.Parameter], kind: str) -> torch.optim.Optimizer:
    options = {"foreach_false": {"foreach": False}, "foreach": {"foreach": True}}
    if kind == "fused":
        return torch.optim.AdamW(params, lr=1e-4, weight_decay=0.05, fused=True)
    return torch.optim.AdamW(params, lr=1e-4, weight_decay=0.05, **options[kind])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser, warmup=5, iters=20)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--model", default="vit_small_patch16_224")
    parser.add_argument(
        "--optimizer", choices=("foreach_false", "foreach", "fused"), default="foreach_false"
    )
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.manual_seed(0)
    model = build_model(args.model, args.smoke).to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    kind = "foreach_false" if args.optimizer == "fused" and device.type == "cpu" else args.optimizer
    optimizer = build_optimizer(params, kind)
    size = 32 if args.smoke else 224
    images = torch.randn(args.batch, 3, size, size, device=device)
    labels = torch.randint(0, 1000, (args.batch,), device=device)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16)
    timer = IterationTimer(device)
    timer.start()
    for _ in range(args.warmup + args.iters):
        with autocast:
            loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, max_norm=1.0)
        optimizer.step()
        loss.item()  # the loss is logged every step
        timer.lap()
    report(
        "optim_step", args.optimizer, timer, args.warmup, batch=args.batch, parameters=len(params)
    )


if __name__ == "__main__":
    main()
