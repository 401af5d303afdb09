"""What a change requires of the program, and what it says instead where that fails: the
changes a performance engineer would not offer (analysis/changes.py applies them).

- A rewrite needs a kernel the user compiles. For a library's kernel (model/kernel_owner.py) the
  change is what the user controls: the shape, precision, backend or operator that made the
  library pick it.
- One layout end to end (channels_last) needs convolutions: without them the layout
  conversions are transposes made contiguous, removed in the code around them.
- A CUDA graph of a program that already replays graphs is the rest of its step
  (records/idioms.py, graph-the-rest), and its graphs' kernels count as one launch each.
- DataLoader workers need host time that prepares input (timeline/host_wait.py: NSD407's advice).
"""

from __future__ import annotations

from collections.abc import Mapping

# library (kernel_owner.library_of) -> (title with {kernel}, fix) of a kernel-local change
LIBRARY_CHANGES: Mapping[str, tuple[str, str]] = {
    "cublas": (
        "Give cuBLAS another shape or precision for {kernel}",
        "This is cuBLAS's kernel, chosen for the matrix product's shape, precision and layout: "
        "nsdiag cannot rewrite it. Change what cuBLAS is given: dimensions that are multiples "
        "of 64, more rows per product (a larger batch), bf16 or TF32 instead of fp32, or let "
        'torch.compile(mode="max-autotune") try other kernels; the kernel\'s findings say what '
        "limits it.",
    ),
    "cudnn": (
        "Let cuDNN pick another kernel for {kernel}",
        "This is cuDNN's kernel: nsdiag cannot rewrite it. Change what cuDNN picks from: "
        "torch.backends.cudnn.benchmark = True (autotuning per shape), channels_last inputs "
        "for convolutions, bf16 or fp16, other shapes; for attention, another "
        "scaled_dot_product_attention backend (torch.nn.attention.sdpa_kernel).",
    ),
    "pytorch": (
        "Change the PyTorch operator behind {kernel}",
        "This is PyTorch's own kernel: nsdiag cannot rewrite it. Change the operator or its "
        "inputs (a fused or multi-tensor alternative, contiguous or channels_last inputs, "
        "another dtype), or torch.compile the code around it so that it generates a kernel of "
        "its own.",
    ),
    "triton": (
        "Tune the kernel torch.compile generated ({kernel})",
        'torch.compile generated this kernel: torch.compile(mode="max-autotune") searches '
        "its block sizes and warps; failing that, change the code it was traced from.",
    ),
    "flash-attention": (
        "Give FlashAttention other shapes for {kernel}",
        "This is FlashAttention's kernel: nsdiag cannot rewrite it. Change its inputs (head "
        "dimension, sequence length, dtype) or the scaled_dot_product_attention backend.",
    ),
    "cub": (
        "Change the CUB/Thrust call behind {kernel}",
        "This is a CUB/Thrust algorithm's kernel: nsdiag cannot rewrite it. Call it less often "
        "or on more data at once, or with another algorithm.",
    ),
}
# cuBLASLt and the CUTLASS kernels cuBLAS ships are cuBLAS's choice too
LIBRARY_CHANGES = {
    **LIBRARY_CHANGES,
    "cublaslt": LIBRARY_CHANGES["cublas"],
    "cutlass": LIBRARY_CHANGES["cublas"],
}

# The layout conversions of a program without convolutions
NO_CONVOLUTION_LAYOUT = (
    "Remove the layout copies (tensors transposed and made contiguous)",
    "The program has no convolutions: these are transposes or permutes made contiguous. Keep "
    "tensors in the layout their consumer reads: drop .contiguous() after .transpose() / "
    ".permute() where the next operation takes the view (matmul reads transposed operands "
    "without a copy), or torch.compile the code so the copy fuses into its neighbour.",
)
