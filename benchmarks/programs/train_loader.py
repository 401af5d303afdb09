"""Image-classifier training with a real DataLoader: CPU-side decoding and augmentation feed a
torchvision ResNet-18 (or `--model resnet50`; bf16 autocast, SGD, the loss logged every step).
No NVTX ranges.

    python benchmarks/programs/train_loader.py                 # as written: the loader works in
                                                               # the main process, pageable batches
    python benchmarks/programs/train_loader.py --workers 8 --pin-memory   # the fix

Each sample is "decoded" (random pixels from a per-sample seed), randomly cropped and flipped,
and normalised in NumPy, about as much CPU work as decoding a small JPEG. With `--workers 0` the
GPU waits for the host at every step.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
import torch.nn.functional as F
from _common import IterationTimer, add_common_args, report
from torch.utils.data import DataLoader, Dataset

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


class SyntheticImages(Dataset[tuple[torch.Tensor, int]]):
    """Images decoded and augmented on the CPU, as an ImageFolder with transforms would be."""

    def __init__(self, length: int, size: int) -> None:
        self.length, self.size = length, size

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        rng = np.random.default_rng(index)
        full = self.size + self.size // 7
        image = rng.integers(0, 256, (full, full, 3), dtype=np.uint8)  # the "decoded" image
        y, x = rng.integers(0, full - self.size, 2)
        crop = image[y : y + self.size, x : x + self.size]
        if rng.random() < 0.5:
            crop = crop[:, ::-1]
        pixels = (crop.astype(np.float32) / 255.0 - MEAN) / STD
        return torch.from_numpy(np.ascontiguousarray(pixels.transpose(2, 0, 1))), int(
            rng.integers(0, 1000)
        )


def build_model(name: str, smoke: bool) -> torch.nn.Module:
    try:
        import torchvision
    except ImportError:
        if not smoke:
            raise
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, stride=4), torch.nn.Flatten(), torch.nn.LazyLinear(1000)
        )
    return getattr(torchvision.models, name)(num_classes=1000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser, warmup=5, iters=20)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--model", default="resnet18", help="a torchvision model (resnet50, ...)")
    parser.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    parser.add_argument(
        "--pin-memory", action="store_true", help="page-locked batches, async copies"
    )
    args = parser.parse_args()
    size = 32 if args.smoke else 224
    device = torch.device(args.device)
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    model = build_model(args.model, args.smoke).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    steps = args.warmup + args.iters
    loader = DataLoader(
        SyntheticImages(steps * args.batch, size),
        batch_size=args.batch,
        num_workers=args.workers,
        pin_memory=args.pin_memory and device.type == "cuda",
        persistent_workers=args.workers > 0,
    )
    autocast = torch.autocast(device.type, dtype=torch.bfloat16)
    timer = IterationTimer(device)
    timer.start()
    for images, labels in loader:
        images = images.to(device, non_blocking=args.pin_memory)
        labels = labels.to(device, non_blocking=args.pin_memory)
        with autocast:
            loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        loss.item()  # the loss is logged every step
        timer.lap()
    variant = f"workers={args.workers},pin_memory={args.pin_memory}"
    report("train_loader", variant, timer, args.warmup, batch=args.batch, model=args.model)


if __name__ == "__main__":
    main()
