"""A small GPT-style transformer training step in plain PyTorch: the benchmark workload.

    python benchmarks/workloads/tiny_transformer.py [--layers 4] [--width 768] [--heads 12]
        [--seq 512] [--batch 8] [--vocab 32768] [--warmup 3] [--dtype bf16|fp32] [--foreach]

Warm-up steps first (cuBLAS/cuDNN heuristics, allocator, lazy module loading), then exactly one
training step between cudaProfilerStart and cudaProfilerStop (profile it with
`--profile-from-start off`), with NVTX ranges forward / backward / optimizer. One step of the
defaults launches a few hundred kernels (embedding, layer norms, GEMMs, attention, GELU, residual
adds, cross-entropy, their backward passes, bf16 weight casts, AdamW).
"""

from __future__ import annotations

import argparse
import math
import time

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc1, self.fc2 = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int, seq: int, width: int, heads: int, layers: int) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(seq, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * layers))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--width", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--vocab", type=int, default=32768)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    p.add_argument(
        "--foreach",
        action="store_true",
        help="AdamW's multi-tensor update (PyTorch's default on CUDA): "
        "a few launches instead of ~8 per parameter",
    )
    return p.parse_args()


def main() -> None:
    args = parse_args()
    torch.manual_seed(0)
    device = torch.device("cuda")
    model = TinyGPT(args.vocab, args.seq, args.width, args.heads, args.layers).to(device)
    # Without --foreach: one small update kernel group per parameter, as many training loops have.
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, foreach=args.foreach)
    data = torch.randint(0, args.vocab, (args.batch, args.seq + 1), device=device)
    inputs, targets = data[:, :-1], data[:, 1:]
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.dtype == "bf16")

    def step() -> float:
        torch.cuda.nvtx.range_push("forward")
        with autocast:
            logits = model(inputs)
            loss = F.cross_entropy(logits.float().view(-1, args.vocab), targets.reshape(-1))
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push("backward")
        loss.backward()
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push("optimizer")
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.nvtx.range_pop()
        return float(loss.detach())

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    torch.cuda.profiler.start()
    loss = step()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    params = sum(p.numel() for p in model.parameters())
    step_ms = 1e3 * (time.perf_counter() - start)
    print(
        f"tiny_transformer: {args.layers} layers, width {args.width}, "
        f"{params / 1e6:.1f} M parameters, batch {args.batch}x{args.seq}, {args.dtype}: "
        f"loss {loss:.3f}, step {step_ms:.1f} ms",
        flush=True,
    )


if __name__ == "__main__":
    main()
