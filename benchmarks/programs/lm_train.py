"""GPT-style language-model training with GPT-2's vocabulary of 50,257 tokens: the 4-layer
model of benchmarks/workloads/tiny_transformer.py, mixed precision (fp16 with a gradient scaler,
or bf16), AdamW, one NVTX range "train_step" per step.

    python benchmarks/programs/lm_train.py                  # as written: vocabulary 50,257
    python benchmarks/programs/lm_train.py --pad-vocab      # the fix: embedding and head padded
                                                            # to a multiple of 64 (50,304)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from _common import IterationTimer, add_common_args, nvtx, report

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workloads"))
from tiny_transformer import TinyGPT

GPT2_VOCAB = 50257


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser, warmup=5, iters=20)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--dtype", choices=("fp16", "bf16"), default="fp16")
    parser.add_argument("--pad-vocab", action="store_true", help="round the vocabulary up to 64")
    args = parser.parse_args()
    device = torch.device(args.device)
    vocab = (GPT2_VOCAB + 63) // 64 * 64 if args.pad_vocab else GPT2_VOCAB
    width, heads, seq = (64, 4, 32) if args.smoke else (768, 12, args.seq)
    torch.manual_seed(0)
    model = TinyGPT(vocab, seq, width, heads, args.layers).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    half = torch.float16 if args.dtype == "fp16" else torch.bfloat16
    scaler = torch.amp.GradScaler(device.type, enabled=args.dtype == "fp16")
    tokens = torch.randint(0, GPT2_VOCAB, (args.batch, seq + 1), device=device)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    timer = IterationTimer(device)
    timer.start()
    for _ in range(args.warmup + args.iters):
        with nvtx("train_step", device):
            with torch.autocast(device.type, dtype=half):
                logits = model(inputs)
            loss = F.cross_entropy(logits.float().view(-1, vocab), targets.reshape(-1))
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            loss.item()
        timer.lap()
    report("lm_train", f"vocab={vocab},{args.dtype}", timer, args.warmup, vocab=vocab)


if __name__ == "__main__":
    main()
