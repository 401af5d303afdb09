"""Online inference, one request at a time: a transformers BERT-base encoder (random weights from
`BertConfig()`, fp16, batch 1, 128 tokens), each request's token ids copied in from the host and
its pooled embedding copied back. No NVTX ranges.

    python benchmarks/programs/bert_serve.py                # as written: eager PyTorch
    python benchmarks/programs/bert_serve.py --cuda-graph   # the fix: the forward replayed as a
                                                            # CUDA graph from a static input buffer

At batch 1 each of the forward's ~166 kernels runs for a few microseconds, less than PyTorch
takes to dispatch and launch it, so eager mode is bound by the host's launch rate.
"""

from __future__ import annotations

import argparse

import torch
from _common import IterationTimer, add_common_args, cuda_graph, report


def build_model(smoke: bool) -> torch.nn.Module:
    from transformers import BertConfig, BertModel

    config = (
        BertConfig()
        if not smoke
        else BertConfig(
            num_hidden_layers=2, hidden_size=64, num_attention_heads=2, intermediate_size=128
        )
    )
    return BertModel(config, add_pooling_layer=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser, warmup=20, iters=200)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--cuda-graph", action="store_true", help="capture the forward, replay it")
    args = parser.parse_args()
    device = torch.device(args.device)
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    torch.manual_seed(0)
    model = build_model(args.smoke).to(device, dtype).eval()
    vocab = model.config.vocab_size
    requests = [torch.randint(0, vocab, (1, args.tokens)) for _ in range(8)]  # host-side inputs
    static_ids = torch.zeros(1, args.tokens, dtype=torch.long, device=device)

    def forward() -> torch.Tensor:
        return model(input_ids=static_ids).pooler_output

    with torch.inference_mode():
        step = cuda_graph(forward) if args.cuda_graph and device.type == "cuda" else forward
        timer = IterationTimer(device)
        timer.start()
        for i in range(args.warmup + args.iters):
            static_ids.copy_(requests[i % len(requests)])
            embedding = step().float().cpu()  # the answer goes back to the client
            timer.lap()
    variant = "cuda_graph" if args.cuda_graph else "eager"
    report(
        "bert_serve",
        variant,
        timer,
        args.warmup,
        tokens=args.tokens,
        norm=round(float(embedding.norm()), 3),
    )


if __name__ == "__main__":
    main()
