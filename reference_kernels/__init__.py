"""Reference kernels that nsdiag profiles: NHWC normalise + 3x3 colour transform.

Kept import-light on purpose: `algebra` needs only numpy-style operators, so CPU-only
tests can import it without torch; `variants` (torch + the CUDA extension) is imported
explicitly by the scripts that need a GPU.
"""
