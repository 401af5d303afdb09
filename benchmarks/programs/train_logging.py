"""Language-model training that logs every step: a transformers GPT-2 (6 layers, width 768, random
weights from `GPT2Config`, bf16 autocast, fused AdamW, gradient clipping), each batch collated on
the host from Python lists of token ids, the loss and the gradient norm read with `.item()` after
every step. No NVTX ranges.

    python benchmarks/programs/train_logging.py                  # as written: .item() per step
    python benchmarks/programs/train_logging.py --log-every 0    # the fix: the step's numbers stay
                                                                 # on the GPU, read once at the end

`.item()` blocks the host until the GPU has finished the step, so the next batch's collation and
the first launches of the next step happen while the GPU waits; without it the host prepares the
next step while the GPU still runs this one. Iteration times: the first `--warmup` steps are timed
one by one; with `--log-every 0` the timed steps are timed together (one sync at the end) and each
is given the mean.
"""

from __future__ import annotations

import argparse
import time

import torch
from _common import IterationTimer, add_common_args, report, synchronize


def collate(step: int, batch: int, tokens: int, vocab: int) -> torch.Tensor:
    """Token ids from Python lists, as a tokenizer's output padded and stacked would be."""
    rows = [
        [(step * 7919 + b * 104729 + t * 31) % vocab for t in range(tokens)] for b in range(batch)
    ]
    return torch.tensor(rows, dtype=torch.long)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser, warmup=5, iters=30)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument(
        "--log-every",
        type=int,
        default=1,
        help="steps between .item() reads (0: never inside the loop)",
    )
    parser.add_argument(
        "--pin-memory",
        action="store_true",
        help="collate into pinned memory and copy without blocking (the rest of NSD403's fix)",
    )
    args = parser.parse_args()
    from transformers import GPT2Config, GPT2LMHeadModel

    device = torch.device(args.device)
    torch.manual_seed(0)
    width = 64 if args.smoke else 768
    config = GPT2Config(
        n_layer=2 if args.smoke else args.layers,
        n_embd=width,
        n_head=max(width // 64, 1),
        n_positions=args.tokens,
    )
    model = GPT2LMHeadModel(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
    autocast = torch.autocast(device.type, dtype=torch.bfloat16)
    logged: list[tuple[float, float]] = []
    kept: list[torch.Tensor] = []
    timer = IterationTimer(device)
    timer.start()
    steps = args.warmup + args.iters
    t_timed = 0.0
    for step in range(steps):
        if step == args.warmup and args.log_every == 0:
            synchronize(device)
            t_timed = time.perf_counter()
        ids = collate(step, args.batch, args.tokens, config.vocab_size)
        if args.pin_memory and device.type == "cuda":
            ids = ids.pin_memory().to(device, non_blocking=True)  # no pageable-copy wait
        else:
            ids = ids.to(device)
        with autocast:
            loss = model(input_ids=ids, labels=ids).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if args.log_every and step % args.log_every == 0:
            logged.append((loss.item(), norm.item()))  # each .item() waits for the GPU
        else:
            kept.append(torch.stack([loss.detach(), norm]))
        if step < args.warmup or args.log_every:
            timer.lap()
    if args.log_every == 0:
        synchronize(device)
        mean_ms = (time.perf_counter() - t_timed) * 1e3 / args.iters
        timer.times_ms.extend([mean_ms] * args.iters)
        logged = [tuple(map(float, row)) for row in torch.stack(kept).cpu()]
    report(
        "train_logging",
        f"log_every={args.log_every}" + (",pin_memory" if args.pin_memory else ""),
        timer,
        args.warmup,
        batch=args.batch,
        tokens=args.tokens,
        last_loss=round(logged[-1][0], 4),
    )


if __name__ == "__main__":
    main()
