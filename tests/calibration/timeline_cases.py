"""Timeline (Nsight Systems) calibration cases for nsdiag.

    nsys profile -t cuda,nvtx,osrt -f true -o timeline_tiny \
        python tests/calibration/timeline_cases.py tiny-burst
    nsys profile -t cuda,nvtx,osrt -f true -o timeline_sync \
        python tests/calibration/timeline_cases.py sync-heavy
    python tests/calibration/timeline_cases.py [tiny-burst] [sync-heavy]   # default: both

tiny-burst
    NVTX "tiny_burst": 2,000 launches of x.add_(1) on a 1K-element tensor
    (each kernel ~1-2 us, the GPU mostly idle between launches: launch-bound).
    NVTX "batched":    the same 2,000 x 1K adds as ONE add_ on a 2,000 x 1K tensor.
sync-heavy
    NVTX "sync_every_op": 500 small ops, each followed by torch.cuda.synchronize()
    (CPU blocks after every op; GPU idles while the CPU launches the next).
    NVTX "sync_once":     the same 500 ops, one synchronize at the end.

Everything is warmed up before the measured ranges.
"""

import sys
import time

import torch

CASES = ("tiny-burst", "sync-heavy")
N_TINY = 2000
ELEMS = 1024
N_SYNC = 500


class nvtx_range:
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        torch.cuda.nvtx.range_push(self.name)
        return self

    def __exit__(self, *exc):
        torch.cuda.nvtx.range_pop()
        return False


def wall(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def tiny_burst():
    x = torch.zeros(ELEMS, device="cuda")
    y = torch.zeros(N_TINY, ELEMS, device="cuda")
    for _ in range(20):  # warm-up: kernel load, allocator
        x.add_(1)
        y.add_(1)
    torch.cuda.synchronize()
    x.zero_()
    y.zero_()
    torch.cuda.synchronize()

    def burst():
        with nvtx_range("tiny_burst"):
            for _ in range(N_TINY):
                x.add_(1)
            torch.cuda.synchronize()

    def batched():
        with nvtx_range("batched"):
            y.add_(1)
            torch.cuda.synchronize()

    t_burst = wall(burst)
    t_batch = wall(batched)
    ok = float(x[0].item()) == N_TINY and float(y.sum().item()) == N_TINY * ELEMS
    print(
        "tiny-burst: tiny_burst %d launches x %d elems: %.2f ms; "
        "batched 1 launch %dx%d: %.3f ms; %s"
        % (N_TINY, ELEMS, t_burst, N_TINY, ELEMS, t_batch, "values OK" if ok else "VALUES WRONG"),
        flush=True,
    )


def sync_heavy():
    x = torch.zeros(ELEMS, device="cuda")
    for _ in range(20):  # warm-up
        x.mul_(0.5).add_(1)
    torch.cuda.synchronize()
    x.zero_()
    torch.cuda.synchronize()

    def every_op():
        with nvtx_range("sync_every_op"):
            for _ in range(N_SYNC):
                x.add_(1)
                torch.cuda.synchronize()  # CPU waits for the GPU after every op

    def once():
        with nvtx_range("sync_once"):
            for _ in range(N_SYNC):
                x.add_(1)
            torch.cuda.synchronize()  # one wait at the end

    t_every = wall(every_op)
    t_once = wall(once)
    ok = float(x[0].item()) == 2 * N_SYNC
    print(
        "sync-heavy: sync_every_op %d ops: %.2f ms; sync_once %d ops: %.2f ms; %s"
        % (N_SYNC, t_every, N_SYNC, t_once, "values OK" if ok else "VALUES WRONG"),
        flush=True,
    )


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
    print("torch %s, device %s" % (torch.__version__, torch.cuda.get_device_name()), flush=True)
    if "tiny-burst" in wanted:
        tiny_burst()
    if "sync-heavy" in wanted:
        sync_heavy()
    print("timeline_cases: done (%s)" % ", ".join(wanted), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
