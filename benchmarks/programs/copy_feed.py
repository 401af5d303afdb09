"""Training fed from batches held in host memory (a data set preloaded into RAM, no DataLoader):
each step copies its batch (256 images of 3x224x224, fp32: 154 MB) to the GPU, then a
torchvision ResNet-18 trains on it (bf16 autocast, SGD, the loss read every step).
No NVTX ranges.

    python benchmarks/programs/copy_feed.py                           # as written: pageable
                                                                      # batches, copied in line
    python benchmarks/programs/copy_feed.py --copies pinned_prefetch  # the fix: pinned batches,
                                                                      # the next one copied on a
                                                                      # side stream meanwhile
    python benchmarks/programs/copy_feed.py --copies pinned           # pinned, still in line

A copy from pageable memory is staged through a driver buffer at a fraction of the link's rate
and blocks the host until it is done, so the GPU idles while the batch crawls across. Pinned
memory copies at the link's rate, and a copy issued one step ahead on its own stream runs while
the GPU computes.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from _common import IterationTimer, add_common_args, report


def build_model(smoke: bool) -> torch.nn.Module:
    try:
        import torchvision
    except ImportError:
        if not smoke:
            raise
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, stride=4), torch.nn.Flatten(), torch.nn.LazyLinear(1000)
        )
    return torchvision.models.resnet18(num_classes=1000)


class Prefetcher:
    """The next batch copied on a side stream while the current step runs (pinned sources, so
    the copy is asynchronous); the step's stream waits for the copy before it reads the batch."""

    def __init__(self, batches: list[torch.Tensor], device: torch.device) -> None:
        self.batches, self.device = batches, device
        self.stream = torch.cuda.Stream(device)
        self.next = self._issue(0)

    def _issue(self, i: int) -> torch.Tensor:
        with torch.cuda.stream(self.stream):
            return self.batches[i % len(self.batches)].to(self.device, non_blocking=True)

    def take(self, i: int) -> torch.Tensor:
        torch.cuda.current_stream(self.device).wait_stream(self.stream)
        batch = self.next
        batch.record_stream(torch.cuda.current_stream(self.device))
        self.next = self._issue(i + 1)
        return batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser, warmup=5, iters=20)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--pool", type=int, default=4, help="distinct host batches, reused")
    parser.add_argument(
        "--copies", choices=("pageable", "pinned", "pinned_prefetch"), default="pageable"
    )
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.manual_seed(0)
    size = 32 if args.smoke else 224
    pinned = args.copies != "pageable" and device.type == "cuda"
    batches = [torch.randn(args.batch, 3, size, size) for _ in range(args.pool)]
    if pinned:
        batches = [b.pin_memory() for b in batches]
    labels = torch.randint(0, 1000, (args.batch,), device=device)
    model = build_model(args.smoke).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    prefetch = (
        Prefetcher(batches, device)
        if args.copies == "pinned_prefetch" and device.type == "cuda"
        else None
    )
    autocast = torch.autocast(device.type, dtype=torch.bfloat16)
    timer = IterationTimer(device)
    timer.start()
    for i in range(args.warmup + args.iters):
        if prefetch is not None:
            images = prefetch.take(i)
        else:
            images = batches[i % len(batches)].to(device, non_blocking=pinned)
        with autocast:
            loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        loss.item()  # the loss is logged every step
        timer.lap()
    report(
        "copy_feed",
        args.copies,
        timer,
        args.warmup,
        batch=args.batch,
        batch_mb=round(batches[0].numel() * 4 / 1e6, 1),
    )


if __name__ == "__main__":
    main()
