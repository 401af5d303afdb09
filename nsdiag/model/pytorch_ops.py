"""The PyTorch operator a kernel of PyTorch's own implies, from its name: what names the code
where no PyTorch function ranges were recorded (`indexFuncLargeIndex<..., ReduceAdd>` is
`Tensor.index_add_`). Read off ATen's CUDA sources (aten/src/ATen/native/cuda: Indexing.cu,
ScatterGatherKernel.cu, SummaryOps.cu, Normalization.cuh, layer_norm_kernel.cu, Shape.cu,
SoftMax.cu, Embedding.cu) and the kernels of the H200 recordings under tests/data.
"""

from __future__ import annotations

import re
from functools import lru_cache

from nsdiag.model.kernel_facts import parse_kernel_name

# (pattern on the kernel's name, the operator), first match wins.
OPERATORS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), op)
    for p, op in (
        (r"indexFunc(Small|Large)Index.*ReduceAdd", "Tensor.index_add_"),
        (r"indexFunc(Small|Large)Index", "Tensor.index_reduce_ / index_copy_"),
        (r"_scatter_gather_elementwise_kernel.*ReduceAdd", "Tensor.scatter_add_"),
        (r"_scatter_gather_elementwise_kernel", "Tensor.scatter_ / gather"),
        (r"index_put_(with_sort_)?kernel|indexing_backward_kernel", "Tensor.index_put_"),
        (r"kernelHistogram1D", "torch.bincount / torch.histc"),
        (r"indexSelect(Small|Large)Index|vectorized_gather_kernel", "index_select / embedding"),
        (r"embedding_backward|compute_grad_weight|sum_and_scatter", "embedding (backward)"),
        (r"CatArrayBatchedCopy", "torch.cat"),
        (r"layer_norm|GammaBetaBackward", "layer_norm"),
        (r"batch_norm", "batch_norm"),
        (r"softmax_warp|cunn_SoftMax", "softmax"),
        (r"multi_tensor_apply_kernel.*(Adam|SGD|Sgd)", "a foreach/fused optimizer step"),
        (r"fused_adam|FusedAdam", "a fused optimizer step"),
    )
)


@lru_cache(maxsize=4096)
def operator_of(name: str) -> str | None:
    """The PyTorch operator a kernel name implies, for PyTorch's own kernels (None: another
    library's kernel, or one this table does not know)."""
    if parse_kernel_name(name).library != "pytorch":
        return None
    return next((op for pattern, op in OPERATORS if pattern.search(name)), None)


def is_pytorch_kernel(name: str) -> bool:
    return parse_kernel_name(name).library == "pytorch"
