"""Batched image-classifier inference: a torchvision ResNet-50 in fp16 with cuDNN autotuning
(`cudnn.benchmark`), warm-up batches first, one NVTX range "batch" per batch, the predicted
classes copied back to the host.

    python benchmarks/programs/infer_cnn.py                    # as written: NCHW tensors
    python benchmarks/programs/infer_cnn.py --channels-last    # fix: NHWC end to end
    python benchmarks/programs/infer_cnn.py --compile          # fix: torch.compile (fusion)
    python benchmarks/programs/infer_cnn.py --channels-last --cuda-graph   # and the forward
                                                               # replayed as a CUDA graph
"""

from __future__ import annotations

import argparse

import torch
from _common import IterationTimer, add_common_args, cuda_graph, nvtx, report


def build_model(smoke: bool) -> torch.nn.Module:
    try:
        import torchvision
    except ImportError:
        if not smoke:
            raise
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()
        )
    return torchvision.models.resnet50(num_classes=1000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser, warmup=10, iters=30)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--channels-last", action="store_true", help="NHWC model and input")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model")
    parser.add_argument("--cuda-graph", action="store_true", help="capture the forward, replay it")
    args = parser.parse_args()
    device = torch.device(args.device)
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    size = 32 if args.smoke else 224
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    model = build_model(args.smoke).to(device, dtype).eval()
    images = torch.randn(args.batch, 3, size, size, device=device, dtype=dtype)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
        images = images.to(memory_format=torch.channels_last)
    if args.compile:
        model = torch.compile(model)

    def forward() -> torch.Tensor:
        return model(images).argmax(dim=1)

    timer = IterationTimer(device)
    with torch.inference_mode():
        step = forward
        if args.cuda_graph and device.type == "cuda":
            for _ in range(3):  # cudnn.benchmark picks its algorithms before the capture
                forward()
            step = cuda_graph(forward)
        timer.start()
        for _ in range(args.warmup + args.iters):
            with nvtx("batch", device):
                predicted = step().cpu()
            timer.lap()
    variant = (
        ("channels_last" if args.channels_last else "nchw")
        + ("+compile" if args.compile else "")
        + ("+cuda_graph" if args.cuda_graph else "")
    )
    report("infer_cnn", variant, timer, args.warmup, batch=args.batch, first=int(predicted[0]))


if __name__ == "__main__":
    main()
