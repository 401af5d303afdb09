"""Predicted against measured savings: nsdiag's estimate, from a recording of a program as written,
next to the time the fix it names saved when applied and measured on the H200.

    python benchmarks/predictions.py            # the table of docs/predictions.md
    python benchmarks/predictions.py --json

Every figure is computed here from the recordings in tests/data (provenance in its README): the
predicted saving is the sum of the findings the fix addresses (their `saved_ns` per iteration, or
in the analysed region where it is one profiler range or one NVTX range); the measured saving is
the difference between the median steady-state iterations of the two runs the program timed
itself (`NSDIAG_RESULT` lines of tests/data/programs/logs), both under nsys (the conditions the
prediction was made in) and, where recorded, both with no profiler attached.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import nsdiag  # noqa: E402
from nsdiag.analysis.engine import diagnose  # noqa: E402
from nsdiag.analysis.records.diagnosis import Diagnosis  # noqa: E402
from nsdiag.analysis.records.findings import Finding  # noqa: E402

DATA = ROOT / "tests" / "data"
LOGS = DATA / "programs" / "logs"
TP = "third_party/logs"  # the third-party programs' logs (tests/data/README.md)
ID = "idioms/logs"  # issue 37's programs (tests/data/README.md, idioms/)


@dataclass(frozen=True)
class Timed:
    """An iteration time a program printed: its log, which NSDIAG_RESULT line, and the
    statistic (`median` of the steady iterations, or `first`, the first timed iteration)."""

    log: str
    line: int = 0
    statistic: str = "median"
    folder: str = "programs/logs"  # under tests/data

    def ms(self) -> float:
        path = DATA / self.folder / self.log
        text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else None
        results = [
            json.loads(line.split(" ", 1)[1])
            for line in (text if text is not None else path.read_text()).splitlines()
            if line.startswith("NSDIAG_RESULT ")
        ]
        result = results[self.line]
        if self.statistic == "first":
            return float(result["iteration_ms"][0])
        return float(statistics.median(result["iteration_ms"][result["warmup"] :]))


@dataclass(frozen=True)
class Benched:
    """A variant's time in benchmarks/bench_reference_kernels.py's JSON (tests/data/reference)."""

    variant: str

    def ms(self) -> float:
        with gzip.open(DATA / "reference" / "bench.json.gz", "rt") as f:
            return float(json.load(f)["variants"][self.variant]["ms"])


@dataclass(frozen=True)
class Ranged:
    """The wall time of an NVTX range in a recorded timeline (the program ran the slow and the
    fixed way one after the other)."""

    recording: str
    name: str

    def ms(self) -> float:
        nvtx = nsdiag.load(DATA / self.recording).nvtx_ranges
        return float(nvtx.loc[nvtx["name"] == self.name, "duration_ns"].sum()) / 1e6


@dataclass(frozen=True)
class Pair:
    program: str
    recording: str  # the program as written, under tests/data
    rules: tuple[str, ...]  # the findings the fix addresses
    fix: str
    before: Timed | Benched | Ranged  # in the recording's conditions (under nsys, or ncu)
    after: Timed | Benched | Ranged
    plain: tuple[Timed, Timed] | None = None  # the same, no profiler attached
    per_iteration: bool = True  # compare per iteration (else: the whole region)
    region: str = "auto"
    range: str | None = None  # only findings in this NVTX range
    note: str = ""


PAIRS: tuple[Pair, ...] = (
    Pair(
        "train_loader.py", "programs/train_loader", ("NSD407", "NSD401"),
        "DataLoader(num_workers=8, pin_memory=True), non_blocking copies",
        Timed("prof_train_loader.log"), Timed("tl_train_loader_fixed.log"),
    ),
    Pair(
        "infer_cnn.py", "programs/infer_cnn", ("NSD410", "NSD411"),
        "torch.compile(model) (fuses batch norm, add and ReLU; converts convolutions to NHWC)",
        Timed("prof_infer_cnn.log"), Timed("tl_infer_cnn_compiled.log"),
        (Timed("plain_infer.log"), Timed("plain_infer_compile.log")),
    ),
    Pair(
        "infer_cnn.py", "programs/infer_cnn", ("NSD411",),
        "model and input channels_last",
        Timed("prof_infer_cnn.log"), Timed("tl_infer_cnn_fixed.log"),
        (Timed("plain_infer.log"), Timed("plain_infer_cl.log")),
    ),
    Pair(
        "step_range.py", "programs/step_range", ("NSD406",),
        "the step captured once as a CUDA graph and replayed",
        Timed("prof_step_range.log", statistic="first"),
        Timed("tl_step_range_fixed.log", statistic="first"),
        (Timed("plain_step_range.log"), Timed("plain_step_range_fixed.log")),
        per_iteration=False,
        note="nsys's CUDA API tracing adds about 20 us to each eager launch, so the eager step "
        "takes 4.7 ms traced against 2.1 ms untraced: the saving measured without a profiler is "
        "smaller than under it",
    ),
    Pair(
        "elementwise.py", "programs/elementwise", ("NSD410",),
        "torch.compile of the loop body (one Triton kernel)",
        Timed("prof_elementwise.log"), Timed("tl_elementwise_fixed.log"),
    ),
    Pair(
        "lm_train.py", "programs/lm_train_full", ("NSD208",),
        "vocabulary padded from 50,257 to 50,304",
        Timed("lm_train_full.log"), Timed("tl_lm_train_fixed.log"),
        (Timed("plain_lm_train.log"), Timed("plain_lm_train_fixed.log")),
    ),
    Pair(
        "reference kernels (naive)", "reference/raw.csv.gz", ("NSD410",),
        "the fused CUDA kernel (reference_kernels: fused)",
        Benched("naive"), Benched("fused"), range="naive",
        note="ncu's durations (one launch each) predict, the benchmark's CUDA-event timings of "
        "the same session measure",
    ),
    Pair(
        "timeline_cases.py sync-heavy", "nsys/sync_heavy.sqlite.gz", ("NSD403",),
        "one synchronize at the end instead of one per op (NVTX sync_once)",
        Ranged("nsys/sync_heavy.sqlite.gz", "sync_every_op"),
        Ranged("nsys/sync_heavy.sqlite.gz", "sync_once"), per_iteration=False,
        range="sync_every_op",
    ),
    Pair(
        "timeline_cases.py tiny-burst", "nsys/tiny_burst.sqlite.gz", ("NSD406",),
        "one launch over all items instead of 2,000 tiny ones (NVTX batched)",
        Ranged("nsys/tiny_burst.sqlite.gz", "tiny_burst"),
        Ranged("nsys/tiny_burst.sqlite.gz", "batched"), per_iteration=False,
        range="tiny_burst",
    ),
    Pair(
        "bert_serve.py", "third_party/bert_serve", ("NSD406",),
        "the forward captured once as a CUDA graph and replayed from a static input buffer",
        Timed("prof_bert.log", folder=TP), Timed("tl_bert_graph.log", folder=TP),
        (Timed("plain_bert.log", folder=TP), Timed("plain_bert_graph.log", folder=TP)),
    ),
    Pair(
        "infer_cnn.py --channels-last", "third_party/infer_cnn_cl.sqlite.gz", ("NSD406",),
        "the forward captured once as a CUDA graph and replayed",
        Timed("tl_cnn_cl.log", folder=TP), Timed("tl_cnn_cl_graph.log", folder=TP),
        (Timed("plain_cnn_cl.log", folder=TP), Timed("plain_cnn_cl_graph.log", folder=TP)),
        note="traced, the host launches at 22 us a kernel and the GPU waits; untraced the "
        "batch is nearly GPU-bound (5.1 against 4.4 ms), so the graph saves less without a "
        "profiler",
    ),
    Pair(
        "vit_train.py", "third_party/vit_fp32", ("NSD204",),
        "TF32 on (torch.backends.cuda.matmul.allow_tf32 = True)",
        Timed("prof_vit.log", folder=TP), Timed("tl_vit_tf32.log", folder=TP),
        (Timed("plain_vit.log", folder=TP), Timed("plain_vit_tf32.log", folder=TP)),
    ),
    Pair(
        "vit_train.py", "third_party/vit_fp32", ("NSD204",),
        "bf16 autocast",
        Timed("prof_vit.log", folder=TP), Timed("tl_vit_bf16.log", folder=TP),
        (Timed("plain_vit.log", folder=TP), Timed("plain_vit_bf16.log", folder=TP)),
    ),
    Pair(
        "llama_train.py --batch 8 --tokens 2048", "third_party/llama_big_eager.sqlite.gz",
        ("NSD412",), "attn_implementation=\"sdpa\" (scaled_dot_product_attention)",
        Timed("tl_llama_big_eager.log", folder=TP), Timed("tl_llama_big_sdpa.log", folder=TP),
        (Timed("plain_llama_big.log", folder=TP), Timed("plain_llama_big_sdpa.log", folder=TP)),
    ),
    Pair(
        "train_logging.py --batch 24", "third_party/train_logging24.sqlite.gz", ("NSD403",),
        "NSD403's whole fix: no .item() per step, batches collated into pinned memory and "
        "copied with non_blocking=True",
        Timed("tl_logging24.log", folder=TP), Timed("tl_logging24_pinned.log", folder=TP),
        (Timed("plain_logging24.log", folder=TP), Timed("plain_logging24_pinned.log", folder=TP)),
    ),
    Pair(
        "optim_step.py", "idioms/optim_step", ("NSD413",),
        "AdamW(..., fused=True) instead of foreach=False",
        Timed("prof_optim.log.gz", folder=ID), Timed("tl_optim_fused.log", folder=ID),
        (Timed("plain_optim.log", folder=ID), Timed("plain_optim_fused.log", folder=ID)),
    ),
    Pair(
        "histogram.py", "idioms/histogram", ("NSD106",),
        "torch.bincount(index, minlength=256) instead of index_add_",
        Timed("prof_histogram.log.gz", folder=ID), Timed("tl_hist_bincount.log", folder=ID),
        (Timed("plain_hist_index_add.log", folder=ID), Timed("plain_hist_bincount.log", folder=ID)),
    ),
    Pair(
        "copy_feed.py", "idioms/copy_feed", ("NSD401", "NSD402"),
        "pinned batches, the next one copied on a side stream during the step",
        Timed("prof_copy.log.gz", folder=ID), Timed("tl_copy_prefetch.log", folder=ID),
        (Timed("plain_copy.log", folder=ID), Timed("plain_copy_prefetch.log", folder=ID)),
    ),
    Pair(
        "decode.py (GPT-2 generate, batch 1)", "idioms/decode.sqlite.gz", ("NSD406",),
        "generate(..., cache_implementation=\"static\") (its decode step compiled into CUDA "
        "graphs)",
        Timed("tl_decode.log", folder=ID), Timed("tl_decode_static_nsys.log", folder=ID),
        (Timed("plain_decode.log", folder=ID), Timed("plain_decode_static.log", folder=ID)),
        note="per request of 96 tokens; the traced static run is under nsys without "
        "--pytorch=functions-trace (torch.compile cannot import nsys's annotations module)",
    ),
)  # fmt: skip

# Pairs shown in the table that do not hold in the prediction's conditions, with why; the test
# checks they still do not (a change that makes them hold moves them up to PAIRS).
FAILING: tuple[Pair, ...] = (
    Pair(
        "train_logging.py --batch 24", "third_party/train_logging24.sqlite.gz", ("NSD403",),
        "loss and gradient norm kept on the GPU, read once at the end (no .item() per step)",
        Timed("tl_logging24.log", folder=TP), Timed("tl_logging24_fixed.log", folder=TP),
        (Timed("plain_logging24.log", folder=TP), Timed("plain_logging24_fixed.log", folder=TP)),
        note="under nsys the fixed run was no faster: its pageable input copy (.to(device) "
        "without pinned memory) still synchronises every step, and its traced host was 7.5 ms "
        "a step slower; without a profiler the prediction holds",
    ),
)  # fmt: skip


def addressed(d: Diagnosis, pair: Pair) -> list[Finding]:
    """The findings the pair's fix addresses (its rules, in its NVTX range where it has one)."""
    found = [f for _, f in d.top_findings(10_000) if f.rule in pair.rules and f.saved_ns]
    return [f for f in found if pair.range is None or f.range == pair.range]


def row(pair: Pair) -> dict[str, Any]:
    d = diagnose(nsdiag.load(DATA / pair.recording), region=pair.region)
    per = d.iterations if pair.per_iteration and d.iterations else 1
    predicted = sum(f.saved_ns or 0.0 for f in addressed(d, pair)) / per / 1e6
    measured = pair.before.ms() - pair.after.ms()
    first = d.top_changes(1)[0]  # what nsdiag says first: a change (analysis/changes.py)
    out: dict[str, Any] = {
        "program": pair.program,
        "first_finding": first.causes[0],
        "fix": pair.fix,
        "rules": list(pair.rules),
        "predicted_ms": round(predicted, 4),
        "measured_ms": round(measured, 4),
        "ratio": round(measured / predicted, 3) if predicted else None,
        "per": "iteration" if per > 1 else "region",
    }
    if pair.plain:
        plain = pair.plain[0].ms() - pair.plain[1].ms()
        out["measured_plain_ms"] = round(plain, 4)
        out["ratio_plain"] = round(plain / predicted, 3) if predicted else None
    if pair.note:
        out["note"] = pair.note
    return out


def rows(pairs: tuple[Pair, ...] = PAIRS) -> list[dict[str, Any]]:
    return [row(pair) for pair in pairs]


def markdown(table: list[dict[str, Any]]) -> str:
    lines = [
        "| program | first finding | fix applied | findings it addresses | predicted | measured "
        "(nsys) | ratio | measured (no profiler) | ratio |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in table:
        unit = "ms/iteration" if r["per"] == "iteration" else "ms"
        plain = f"{r['measured_plain_ms']:.3g} {unit}" if "measured_plain_ms" in r else "–"
        lines.append(
            f"| `{r['program']}` | {r['first_finding']} | {r['fix']} | {', '.join(r['rules'])} "
            f"| {r['predicted_ms']:.3g} {unit} | {r['measured_ms']:.3g} {unit} | {r['ratio']:.2f} "
            f"| {plain} | {r.get('ratio_plain', '–')} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    table, failing = rows(), rows(FAILING)
    if args.json:
        print(json.dumps({"pairs": table, "failing": failing}, indent=1))
        return
    print(markdown(table))
    print("\nPairs that do not hold in the prediction's conditions (FAILING):\n")
    print(markdown(failing))
    for pair in FAILING:
        print(f"\n- `{pair.program}`: {pair.note}")


if __name__ == "__main__":
    main()
