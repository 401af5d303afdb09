"""Kernels whose limiter is known, twice each inside cudaProfilerStart/Stop
(probe_stall_sampling.sh): a DRAM-bound add, a bf16 tensor-core GEMM, an fp32 CUDA-core GEMM,
a softmax, a layer norm, a random gather (latency-bound), a sort (CUB)."""

import torch

torch.backends.cuda.matmul.allow_tf32 = False
big = torch.ones(1 << 26, device="cuda")
a16 = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
a32 = torch.randn(2048, 2048, device="cuda")
rows = torch.randn(8192, 4096, device="cuda")
index = torch.randint(0, 1 << 26, (1 << 24,), device="cuda")
keys = torch.randn(1 << 22, device="cuda")


def work() -> None:
    big.add(1.0)
    a16 @ a16
    a32 @ a32
    torch.softmax(rows, dim=-1)
    torch.nn.functional.layer_norm(rows, (4096,))
    big[index]
    torch.sort(keys)


for _ in range(2):  # warm-up: cuBLAS handles, lazy module loading
    work()
torch.cuda.synchronize()
torch.cuda.profiler.start()
for _ in range(2):
    work()
torch.cuda.synchronize()
torch.cuda.profiler.stop()
print("probe done", flush=True)
