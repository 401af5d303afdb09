"""Five identical elementwise launches inside cudaProfilerStart/Stop (probe_sections.sh)."""

import torch

x = torch.ones(1 << 22, device="cuda")
torch.cuda.synchronize()
torch.cuda.profiler.start()
for _ in range(5):
    y = x + 1
torch.cuda.synchronize()
torch.cuda.profiler.stop()
print("probe done", float(y[0]), flush=True)
