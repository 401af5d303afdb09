"""Decoder training with the attention as written: a transformers Llama (8 layers, width 1024,
16 heads, random weights from `LlamaConfig`, bf16 autocast, fused AdamW), batch 4 of 1024
tokens, the loss read every step. No NVTX ranges of its own.

    python benchmarks/programs/llama_train.py               # as written: attention computed
                                                            # eagerly (attn_implementation="eager")
    python benchmarks/programs/llama_train.py --attn sdpa       # fix: scaled_dot_product_attention
    python benchmarks/programs/llama_train.py --step-ranges     # each step in NVTX 'step_<i>'
    python benchmarks/programs/llama_train.py --emit-nvtx       # PyTorch's op ranges (emit_nvtx)

Eager attention materialises the 1024x1024 scores per head: a batched GEMM, the mask added, a
softmax in fp32, the cast back and a second batched GEMM, all again in the backward pass.
"""

from __future__ import annotations

import argparse
import contextlib

import torch
from _common import IterationTimer, add_common_args, nvtx, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser, warmup=3, iters=8)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--attn", choices=("eager", "sdpa"), default="eager")
    parser.add_argument("--step-ranges", action="store_true", help="NVTX 'step_<i>' per step")
    parser.add_argument(
        "--emit-nvtx", action="store_true", help="an NVTX range per autograd op (emit_nvtx)"
    )
    args = parser.parse_args()
    from transformers import AutoModelForCausalLM, LlamaConfig

    device = torch.device(args.device)
    torch.manual_seed(0)
    width = 64 if args.smoke else 1024
    config = LlamaConfig(
        hidden_size=width,
        intermediate_size=width * 11 // 4,
        num_hidden_layers=2 if args.smoke else args.layers,
        num_attention_heads=max(width // 64, 1),
        num_key_value_heads=max(width // 64, 1),
        vocab_size=32000,
        max_position_embeddings=args.tokens,
    )
    model = AutoModelForCausalLM.from_config(config, attn_implementation=args.attn).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
    ids = torch.randint(0, config.vocab_size, (args.batch, args.tokens), device=device)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16)
    timer = IterationTimer(device)
    ops = (
        torch.autograd.profiler.emit_nvtx()
        if args.emit_nvtx and device.type == "cuda"
        else contextlib.nullcontext()
    )
    timer.start()
    with ops:
        for i in range(args.warmup + args.iters):
            with nvtx(f"step_{i}", device) if args.step_ranges else contextlib.nullcontext():
                with autocast:
                    loss = model(input_ids=ids, labels=ids).loss
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                loss.item()
            timer.lap()
    report("llama_train", args.attn, timer, args.warmup, batch=args.batch, tokens=args.tokens)


if __name__ == "__main__":
    main()
