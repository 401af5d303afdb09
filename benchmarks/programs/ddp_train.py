"""Data-parallel GPT training on every GPU of the machine (DistributedDataParallel over NCCL):
the 4-layer model of benchmarks/workloads/tiny_transformer.py, bf16 autocast, AdamW, one NVTX
range "train_step" per step. Run it under a launcher:

    python -m torch.distributed.run --nproc-per-node 2 benchmarks/programs/ddp_train.py
        [--straggler-rank 1 --straggler-ms 12 [--straggler-kind sleep|compute]]
        [--single-bucket]

As written it is balanced: every rank does the same work and the gradient all-reduce overlaps
the backward pass in 25 MB buckets. The faults a user meets, one flag each:
  --straggler-rank R --straggler-ms M   rank R arrives late at every step's all-reduce: its data
                                        loading takes M ms more on the host (`sleep`), or its GPU
                                        does M ms of extra matmuls (`compute`); the other ranks
                                        wait inside the NCCL kernel.
  --single-bucket                       one gradient bucket (bucket_cap_mb=10000): the all-reduce
                                        starts only after the whole backward pass, exposed.
Every rank prints one `NSDIAG_RESULT` line (its rank in it).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from _common import IterationTimer, add_common_args, init_distributed, nvtx, report
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workloads"))
from tiny_transformer import TinyGPT


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser, warmup=5, iters=15)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--vocab", type=int, default=32768)
    parser.add_argument("--straggler-rank", type=int, default=-1, help="the late rank (-1: none)")
    parser.add_argument("--straggler-ms", type=float, default=12.0, help="how late, per step")
    parser.add_argument("--straggler-kind", choices=("sleep", "compute"), default="sleep")
    parser.add_argument("--single-bucket", action="store_true", help="one gradient bucket")
    return parser.parse_args()


def extra_gpu_work(ms: float, device: torch.device) -> None:
    """About `ms` of GPU time in 4096^2 bf16 matmuls (about 0.2 ms each on an H200)."""
    a = torch.randn(4096, 4096, device=device, dtype=torch.bfloat16)
    for _ in range(max(1, round(ms / 0.2))):
        a = a @ a
        a = a / a.norm()


def main() -> None:
    args = parse_args()
    device, local_rank = init_distributed(args.device)
    rank = dist.get_rank()
    width, heads, seq = (64, 4, 32) if args.smoke else (768, 12, args.seq)
    torch.manual_seed(0)  # the same initial weights on every rank
    model = TinyGPT(args.vocab, seq, width, heads, args.layers).to(device)
    bucket_mb = 10000 if args.single_bucket else 25
    ddp = DistributedDataParallel(
        model, device_ids=[local_rank] if device.type == "cuda" else None, bucket_cap_mb=bucket_mb
    )
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=3e-4)
    half = torch.bfloat16
    torch.manual_seed(1 + rank)  # each rank its own data shard
    tokens = torch.randint(0, args.vocab, (args.batch, seq + 1), device=device)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    late = rank == args.straggler_rank
    timer = IterationTimer(device)
    timer.start()
    for _ in range(args.warmup + args.iters):
        with nvtx("train_step", device):
            if late and args.straggler_kind == "sleep":
                with nvtx("load_batch", device):
                    time.sleep(args.straggler_ms / 1e3)  # a slow input pipeline on this rank
            if late and args.straggler_kind == "compute":
                extra_gpu_work(args.straggler_ms, device)
            with torch.autocast(device.type, dtype=half):
                logits = ddp(inputs)
            loss = F.cross_entropy(logits.float().view(-1, args.vocab), targets.reshape(-1))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            loss.item()
        timer.lap()
    variant = "single-bucket" if args.single_bucket else "balanced"
    if args.straggler_rank >= 0:
        variant = f"straggler-{args.straggler_kind}-rank{args.straggler_rank}-{args.straggler_ms}ms"
    report("ddp_train", variant, timer, args.warmup, rank=rank, world=dist.get_world_size())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
