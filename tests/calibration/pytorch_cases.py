"""PyTorch calibration cases for nsdiag (real library kernels, not hand-written).

Run under Nsight Compute with profiling off until the measured part:

    ncu --set full --clock-control none --profile-from-start off --nvtx \
        -f -o torch_cases python tests/calibration/pytorch_cases.py

    python tests/calibration/pytorch_cases.py [CASE...]   # CASE: tensor-core-unused,
                                                          # layout-conversion (default: both)

Everything (allocation, cuBLAS/cuDNN heuristics, first-call autotuning and
lazy module loading) is warmed up first; only the measured part runs between
cudaProfilerStart() and cudaProfilerStop(), one NVTX range per variant:

  tensor-core-unused
    tc_unused_fp32_sgemm  fp32 4096^3 matmul with TF32 off -> FFMA SGEMM (bad)
    tc_used_bf16_gemm     bf16 4096^3 matmul -> tensor-core GEMM (good)
  layout-conversion
    layout_mixed          3x conv2d(64->64, 3x3) fp16, batch 32, 112x112;
                          weights channels_last, activations NCHW and the
                          block output forced back to NCHW after every conv,
                          so PyTorch inserts NCHW<->NHWC copy kernels (bad)
    layout_channels_last  the same net, weights and activations all
                          channels_last: no conversion kernels (good)
    layout_nchw           the same net, all NCHW (reference: cuDNN may or may
                          not insert its own nchwToNhwc/nhwcToNchw kernels)
"""

import sys
import time

import torch
import torch.nn as nn

CASES = ("tensor-core-unused", "layout-conversion")


def log(msg):
    print(msg, flush=True)


def nvtx_push(name):
    torch.cuda.nvtx.range_push(name)


def nvtx_pop():
    torch.cuda.nvtx.range_pop()


def profiler_start():
    torch.cuda.synchronize()
    cudart = getattr(torch.cuda, "cudart", None)
    if cudart is not None and hasattr(cudart(), "cudaProfilerStart"):
        cudart().cudaProfilerStart()
    else:
        torch.cuda.profiler.start()


def profiler_stop():
    torch.cuda.synchronize()
    cudart = getattr(torch.cuda, "cudart", None)
    if cudart is not None and hasattr(cudart(), "cudaProfilerStop"):
        cudart().cudaProfilerStop()
    else:
        torch.cuda.profiler.stop()


def disable_tf32_matmul():
    """Make fp32 matmul a true FP32 (FFMA) SGEMM.

    torch >= 2.9 has the per-backend fp32_precision API and complains (or,
    when mixed with the legacy flags, can raise) if the legacy allow_tf32 flag
    is used, so use only one of the two APIs.
    """
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        matmul.fp32_precision = "ieee"
        return "torch.backends.cuda.matmul.fp32_precision = %r" % matmul.fp32_precision
    matmul.allow_tf32 = False
    return "torch.backends.cuda.matmul.allow_tf32 = %r" % matmul.allow_tf32


def timed(fn):
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    out = fn()
    end.record()
    torch.cuda.synchronize()
    return out, start.elapsed_time(end)


# ---------------------------------------------------------------------------
# tensor-core-unused
# ---------------------------------------------------------------------------
def make_tensor_core_cases():
    setting = disable_tf32_matmul()
    n = 4096
    g = torch.Generator(device="cuda").manual_seed(0)
    a32 = torch.randn(n, n, device="cuda", generator=g)
    b32 = torch.randn(n, n, device="cuda", generator=g)
    a16 = a32.to(torch.bfloat16)
    b16 = b32.to(torch.bfloat16)
    log("tensor-core-unused: %s; A, B %dx%d" % (setting, n, n))

    def fp32():
        return a32 @ b32

    def bf16():
        return a16 @ b16

    return [
        (
            "tc_unused_fp32_sgemm",
            fp32,
            "fp32 matmul %d^3, TF32 off (FFMA SGEMM, no tensor cores)" % n,
        ),
        ("tc_used_bf16_gemm", bf16, "bf16 matmul %d^3 (tensor-core GEMM)" % n),
    ]


# ---------------------------------------------------------------------------
# layout-conversion
# ---------------------------------------------------------------------------
class ConvNet(nn.Module):
    """3 x (conv2d 64->64, 3x3, pad 1) + ReLU.

    force_nchw=True makes every block hand an NCHW-contiguous tensor to the
    next layer (as an NCHW-only custom op or a .contiguous() in user code
    would), while the conv weights are channels_last: every conv then needs an
    NCHW->NHWC copy of its input and every block an NHWC->NCHW copy of its
    output.
    """

    def __init__(self, force_nchw=False):
        super().__init__()
        self.convs = nn.ModuleList(
            [nn.Conv2d(64, 64, kernel_size=3, padding=1, bias=False) for _ in range(3)]
        )
        self.force_nchw = force_nchw

    def forward(self, x):
        for conv in self.convs:
            x = torch.relu(conv(x))
            if self.force_nchw:
                x = x.contiguous(memory_format=torch.contiguous_format)
        return x


def fmt(t):
    if t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous():
        return "channels_last"
    if t.is_contiguous():
        return "NCHW"
    return "strided"


def make_layout_cases():
    torch.backends.cudnn.benchmark = False  # heuristics only: same kernels every call
    batch, ch, hw = 32, 64, 112
    torch.manual_seed(0)
    x_nchw = torch.randn(batch, ch, hw, hw, device="cuda", dtype=torch.float16)
    x_cl = x_nchw.contiguous(memory_format=torch.channels_last)

    net_mixed = ConvNet(force_nchw=True).cuda().half().to(memory_format=torch.channels_last).eval()
    net_cl = ConvNet().cuda().half().to(memory_format=torch.channels_last).eval()
    net_nchw = ConvNet().cuda().half().eval()
    net_cl.load_state_dict(net_mixed.state_dict())
    net_nchw.load_state_dict(net_mixed.state_dict())
    # load_state_dict copies values in place; re-assert the intended weight layouts.
    net_cl.to(memory_format=torch.channels_last)

    def w(net):
        return fmt(net.convs[0].weight)

    log(
        "layout-conversion: input %s fp16; weights: mixed=%s, channels_last=%s, nchw=%s"
        % (tuple(x_nchw.shape), w(net_mixed), w(net_cl), w(net_nchw))
    )

    return [
        (
            "layout_mixed",
            lambda: net_mixed(x_nchw),
            "input NCHW, weights channels_last, NCHW forced between layers (conversion copies)",
        ),
        (
            "layout_channels_last",
            lambda: net_cl(x_cl),
            "input and weights channels_last (no conversions)",
        ),
        (
            "layout_nchw",
            lambda: net_nchw(x_nchw),
            "input and weights NCHW (reference; cuDNN may transpose internally)",
        ),
    ]


def main(argv):
    wanted = [a for a in argv if not a.startswith("-")]
    for a in wanted:
        if a not in CASES:
            print("unknown case %r; choose from %s" % (a, ", ".join(CASES)), file=sys.stderr)
            return 2
    if not wanted:
        wanted = list(CASES)
    if not torch.cuda.is_available():
        print("CUDA is not available", file=sys.stderr)
        return 1

    log(
        "torch %s, CUDA %s, cuDNN %s, device %s"
        % (
            torch.__version__,
            torch.version.cuda,
            torch.backends.cudnn.version(),
            torch.cuda.get_device_name(),
        )
    )

    variants = []
    if "tensor-core-unused" in wanted:
        variants += make_tensor_core_cases()
    if "layout-conversion" in wanted:
        variants += make_layout_cases()

    with torch.inference_mode():
        # Warm-up: 3 calls each (library handles, heuristics, lazy loading).
        for _name, fn, _desc in variants:
            for _ in range(3):
                fn()
        torch.cuda.synchronize()

        profiler_start()
        results = []
        for name, fn, desc in variants:
            nvtx_push(name)
            out, ms = timed(fn)
            nvtx_pop()
            results.append((name, desc, out, ms))
        profiler_stop()

    for name, desc, out, ms in results:
        log(
            "ran %-22s %-80s out %s %s %s, %.3f ms (event time, inflated under ncu)"
            % (name, desc, tuple(out.shape), str(out.dtype).replace("torch.", ""), fmt(out), ms)
        )
    # Sanity: the layout variants compute the same thing.
    outs = {name: out for name, _d, out, _ms in results}
    if "layout_mixed" in outs and "layout_channels_last" in outs:
        diff = (
            (outs["layout_mixed"].float() - outs["layout_channels_last"].float()).abs().max().item()
        )
        log("layout check: max |mixed - channels_last| = %.4g" % diff)
    if "tc_unused_fp32_sgemm" in outs and "tc_used_bf16_gemm" in outs:
        ref = outs["tc_unused_fp32_sgemm"]
        rel = ((outs["tc_used_bf16_gemm"].float() - ref).norm() / ref.norm()).item()
        log(
            "gemm check: relative error of bf16 vs fp32 = %.3g "
            "(bf16 input rounding: ~1e-3..1e-2 expected)" % rel
        )
    log("pytorch_cases: done (%d variants, %s)" % (len(results), time.strftime("%H:%M:%S")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
