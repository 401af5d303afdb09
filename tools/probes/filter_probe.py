"""Launch sequence for probing ncu's launch filters (tools/probes/probe_ncu_filters.sh).

One elementwise `add` before cudaProfilerStart, then add, mul, add, mul inside the region: every
launch has the same grid and block, add and mul share ncu's `function` name
(vectorized_elementwise_kernel) and differ in their mangled names.
"""

import torch

x = torch.ones(1 << 20, device="cuda")
torch.cuda.synchronize()
_ = x + 1  # before the region
torch.cuda.synchronize()
torch.cuda.profiler.start()
a, b, c, d = x + 1, x * 2, x + 1, x * 3
torch.cuda.synchronize()
torch.cuda.profiler.stop()
print("probe done", float(a[0] + b[0] + c[0] + d[0]), flush=True)
