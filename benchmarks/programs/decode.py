"""LLM serving at batch 1: a transformers GPT-2 (124M, random weights from `GPT2Config()`, bf16)
answers requests one at a time with `generate()` (greedy, a 32-token prompt, 96 new tokens each).
No NVTX ranges.

    python benchmarks/programs/decode.py                    # as written: the default dynamic
                                                            # KV cache, eager decode steps
    python benchmarks/programs/decode.py --cache static     # the fix: a static KV cache, whose
                                                            # decode step generate() compiles
                                                            # into CUDA graphs (reduce-overhead)

Each decode step runs ~150 kernels of a few microseconds for one token, fewer than PyTorch takes
to dispatch, so eager decoding is bound by the host's launch rate. A static cache keeps every
tensor's shape fixed, so generate() can compile the step and replay it as a CUDA graph; its own
per-token Python work (logits processing, stopping criteria, cache bookkeeping) stays.
"""

from __future__ import annotations

import argparse
import statistics

import torch
from _common import IterationTimer, add_common_args, report


def build_model(smoke: bool) -> torch.nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = (
        GPT2Config()
        if not smoke
        else GPT2Config(
            n_layer=2, n_embd=64, n_head=2, n_positions=256, vocab_size=1000, eos_token_id=0
        )
    )
    return GPT2LMHeadModel(config)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser, warmup=2, iters=10)
    parser.add_argument("--prompt", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=96)
    parser.add_argument("--cache", choices=("dynamic", "static"), default="dynamic")
    args = parser.parse_args()
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    torch.manual_seed(0)
    model = build_model(args.smoke).to(device, dtype).eval()
    vocab = model.config.vocab_size
    new_tokens = 8 if args.smoke else args.new_tokens
    prompts = [torch.randint(0, vocab, (1, args.prompt)) for _ in range(4)]  # host-side requests
    options = {"cache_implementation": "static"} if args.cache == "static" else {}
    timer = IterationTimer(device)
    timer.start()
    with torch.inference_mode():
        for i in range(args.warmup + args.iters):
            ids = prompts[i % len(prompts)].to(device)
            out = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,  # every request decodes the same number of tokens
                do_sample=False,
                pad_token_id=model.config.eos_token_id,
                **options,
            )
            text = out[0, -new_tokens:].tolist()  # the answer goes back to the client
            timer.lap()
    steady = timer.times_ms[args.warmup :] or timer.times_ms
    report(
        "decode",
        args.cache,
        timer,
        args.warmup,
        new_tokens=new_tokens,
        median_token_ms=round(statistics.median(steady) / new_tokens, 4),
        last_token=text[-1],
    )


if __name__ == "__main__":
    main()
