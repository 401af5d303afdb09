"""Data-parallel training of a transformers GPT-2 (DistributedDataParallel over NCCL), fed by a
real DataLoader with a DistributedSampler, the way a user writes it: each sample is "tokenised"
on the host (a NumPy pass over its text, about as much CPU work as a fast tokenizer), batches are
padded to their longest sequence, bf16 autocast, fused AdamW. Run it under a launcher:

    python -m torch.distributed.run --nproc-per-node 2 benchmarks/programs/ddp_hf_train.py
        [--slow-loader-rank R] [--uneven-lengths] [--step-ranges]

As written it is balanced: every rank's loader has the same workers and the same lengths. The
stragglers users meet, one flag each, with their fixes:
  --slow-loader-rank R   rank R's DataLoader runs in the main process (num_workers=0, no pinned
                         memory; the others use --workers), so its host tokenises while the other
                         ranks wait in the gradient all-reduce. Fix: the same workers everywhere
                         (drop the flag).
  --uneven-lengths       each rank's shard holds documents of another length (rank r: `--tokens`
                         x (1 + r) / world, the longest on the last rank), as a length-sorted
                         dataset split by rank gives; batches padded to their longest sequence,
                         so the last rank computes longest. Fix: --pad-to-max (every batch padded
                         to --tokens: the same work on every rank).
  --step-ranges          one NVTX range per step named `step_<i>` (NCCL adds its own ranges).
Every rank prints one `NSDIAG_RESULT` line (its rank in it).
"""

from __future__ import annotations

import argparse
import functools

import numpy as np
import torch
import torch.distributed as dist
from _common import IterationTimer, add_common_args, init_distributed, nvtx, report
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class Documents(Dataset[np.ndarray]):
    """Synthetic documents, "tokenised" on access: a per-document seed, a text of random bytes,
    and a hash pass over it (the CPU work of a fast tokenizer, in NumPy)."""

    def __init__(self, count: int, length: int, vocab: int, text_bytes: int) -> None:
        self.count, self.length, self.vocab, self.text_bytes = count, length, vocab, text_bytes

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> np.ndarray:
        rng = np.random.default_rng(index)
        text = rng.integers(0, 256, self.text_bytes, dtype=np.uint64)
        mixed = (text * np.uint64(2654435761) + np.arange(self.text_bytes, dtype=np.uint64)) % (
            np.uint64(self.vocab)
        )
        return mixed[: self.length].astype(np.int64)


def pad_batch(samples: list[np.ndarray], to: int | None) -> torch.Tensor:
    """Pad to the batch's longest sequence (dynamic padding), or to `to`."""
    width = to or max(len(s) for s in samples)
    out = np.zeros((len(samples), width), dtype=np.int64)
    for i, s in enumerate(samples):
        out[i, : len(s)] = s[:width]
    return torch.from_numpy(out)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser, warmup=5, iters=20)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--workers", type=int, default=4, help="DataLoader workers per rank")
    parser.add_argument("--text-bytes", type=int, default=200_000, help="host work per sample")
    parser.add_argument("--slow-loader-rank", type=int, default=-1, help="(-1: none)")
    parser.add_argument("--uneven-lengths", action="store_true")
    parser.add_argument("--pad-to-max", action="store_true", help="pad every batch to --tokens")
    parser.add_argument("--step-ranges", action="store_true", help="NVTX 'step_<i>' per step")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    from transformers import GPT2Config, GPT2LMHeadModel

    device, local_rank = init_distributed(args.device)
    rank, world = dist.get_rank(), dist.get_world_size()
    width = 64 if args.smoke else 768
    tokens = 32 if args.smoke else args.tokens
    config = GPT2Config(
        n_layer=2 if args.smoke else args.layers,
        n_embd=width,
        n_head=max(width // 64, 1),
        n_positions=tokens,
    )
    torch.manual_seed(0)  # the same initial weights on every rank
    model = GPT2LMHeadModel(config).to(device)
    ddp = DistributedDataParallel(model, device_ids=[local_rank] if device.type == "cuda" else None)
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=1e-4, fused=device.type == "cuda")
    length = tokens * (1 + rank) // world if args.uneven_lengths else tokens
    steps = args.warmup + args.iters
    data = Documents(steps * args.batch * world, length, config.vocab_size, args.text_bytes)
    slow = rank == args.slow_loader_rank
    workers = 0 if slow else args.workers
    loader = DataLoader(
        data,
        batch_size=args.batch,
        sampler=DistributedSampler(data, num_replicas=world, rank=rank, shuffle=False),
        num_workers=workers,
        pin_memory=not slow and device.type == "cuda",
        persistent_workers=workers > 0,
        collate_fn=functools.partial(pad_batch, to=tokens if args.pad_to_max else None),
    )
    autocast = torch.autocast(device.type, dtype=torch.bfloat16)
    timer = IterationTimer(device)
    timer.start()
    for step, ids in enumerate(loader):
        if step >= steps:
            break
        with nvtx(f"step_{step}" if args.step_ranges else "train_step", device):
            ids = ids.to(device, non_blocking=True)
            with autocast:
                loss = ddp(input_ids=ids, labels=ids).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        timer.lap()
    variant = "balanced"
    if args.slow_loader_rank >= 0:
        variant = f"slow-loader-rank{args.slow_loader_rank}"
    if args.uneven_lengths:
        variant = "uneven-lengths" + (",pad-to-max" if args.pad_to_max else "")
    report("ddp_hf_train", variant, timer, args.warmup, rank=rank, world=world, length=length)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
