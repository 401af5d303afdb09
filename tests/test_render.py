"""Renderers without a browser: HTML structure, self-containment, escaping, md/json, short names.

The helpers at the top (fixture sessions, a hostile kernel name, synthetic timelines and a 5,000
launch session) are shared with tests/test_report_browser.py.
"""

from __future__ import annotations

import copy
import json
import re
import time
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import nsdiag
from nsdiag.analysis.engine import diagnose
from nsdiag.analysis.records.diagnosis import Diagnosis
from nsdiag.errors import NsdiagError
from nsdiag.model.names import ELLIPSIS, short_name, short_names
from nsdiag.model.session import NVTX_COLUMNS, TIMELINE_COLUMNS, Session
from nsdiag.render import RenderOptions, format_from_path, render, timeline_chart
from nsdiag.render.markdown import escape as md_escape
from tests.conftest import DATA

HOSTILE = "<img src=x onerror=alert(1)>"
FIXTURES = {
    "reference": "reference/raw.csv.gz",
    "calib": "calib/raw.csv.gz",
    "torch_cases": "torch_cases/details.csv.gz",
}
# src=/href= (or CSS url()) pointing at a network location: http:, https: or protocol-relative //.
EXTERNAL = re.compile(
    r"""(?:\b(?:src|href)\s*=\s*["']?\s*|url\(\s*["']?\s*)(?:https?:)?//""", re.IGNORECASE
)


# ---------------------------------------------------------------- shared helpers


@cache
def fixture_session(name: str) -> Session:
    path = DATA / FIXTURES[name]
    if path.is_relative_to(Path.cwd()):
        path = path.relative_to(Path.cwd())  # the report shows its inputs: keep them short
    return nsdiag.load(path)


def fixture_case(name: str) -> tuple[Diagnosis, Session]:
    session = fixture_session(name)
    return diagnose(session), session


def hostile_session(name: str = "reference") -> Session:
    """A fixture session whose longest kernel is named like an HTML injection."""
    session = copy.deepcopy(fixture_session(name))
    first = session.kernels["duration_ns"].idxmax()
    old = session.kernels.loc[first, "name"]
    rows = session.kernels["name"] == old
    session.kernels.loc[rows, "name"] = HOSTILE
    session.kernels.loc[rows, "demangled"] = HOSTILE
    return session


def synthetic_timeline(
    n_kernels: int = 60,
    streams: int = 2,
    names: tuple[str, ...] = ("gemm", "relu"),
    nvtx_name: str = "train_step",
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Kernels and copies on a few streams with idle gaps, and NVTX ranges around them."""
    rng = np.random.default_rng(1)
    rows, t = [], 1_000_000
    for i in range(n_kernels):
        if i % 10 == 0:
            rows.append(
                {
                    "kind": "memcpy",
                    "start_ns": t,
                    "end_ns": t + 8_000,
                    "stream": 7,
                    "name": "[CUDA memcpy Host-to-Device]",
                    "copy_kind": "HtoD",
                    "bytes": 1 << 20,
                }
            )
            t += 9_000 + (50_000 if i % 20 == 0 else 0)  # an idle gap now and then
        dur = int(rng.integers(2_000, 20_000))
        rows.append(
            {
                "kind": "kernel",
                "start_ns": t,
                "end_ns": t + dur,
                "stream": 7 + (i % streams) * 6,
                "name": names[i % len(names)],
                "copy_kind": None,
                "bytes": None,
            }
        )
        t += dur + int(rng.integers(500, 3_000))
    timeline = pd.DataFrame(rows)
    timeline["duration_ns"] = timeline["end_ns"] - timeline["start_ns"]
    timeline = timeline.assign(
        device=0,
        context=1,
        process_id=1,
        correlation_id=np.arange(len(timeline)),
        src_kind=np.where(timeline["kind"] == "memcpy", "pinned", None),
        dst_kind=np.where(timeline["kind"] == "memcpy", "device", None),
    )
    nvtx = pd.DataFrame(
        [
            {"name": nvtx_name, "start_ns": 900_000, "end_ns": t // 2, "depth": 0},
            {"name": nvtx_name, "start_ns": t // 2, "end_ns": t, "depth": 0},
            {"name": "forward", "start_ns": 1_000_000, "end_ns": t // 4, "depth": 1},
        ]
    )
    nvtx = nvtx.assign(
        duration_ns=nvtx["end_ns"] - nvtx["start_ns"], thread_id=1, process_id=1, domain=""
    )
    return (
        timeline.reindex(columns=list(TIMELINE_COLUMNS)),
        nvtx.reindex(columns=list(NVTX_COLUMNS)),
    )


def with_timeline(session: Session, timeline: pd.DataFrame, nvtx: pd.DataFrame) -> Session:
    out = copy.copy(session)
    out.timeline, out.nvtx_ranges = timeline, nvtx
    return out


def scaled_session(launches: int = 5000, signatures: int = 1000) -> Session:
    """`launches` launches over `signatures` signatures, from the reference session's real rows."""
    base = fixture_session("reference")
    sig = np.arange(launches) % signatures
    reps = sig % len(base.kernels)
    kernels = base.kernels.iloc[reps].reset_index(drop=True).copy()
    names = [
        f"void synth::op_{j}<at::native::Functor<float, {j % 4}>, {j % 3}>(const float *, float "
        "*, long)"
        for j in sig
    ]
    kernels["name"], kernels["demangled"], kernels["id"] = names, names, np.arange(launches)
    kernels["duration_ns"] = kernels["duration_ns"] * np.random.default_rng(0).uniform(
        0.2, 3.0, launches
    )
    raw = base.raw.iloc[reps].reset_index(drop=True).copy() if len(base.raw) else base.raw
    return Session(
        kernels=kernels, raw=raw, raw_units=dict(base.raw_units), meta=copy.deepcopy(base.meta)
    )


def outside_plotly(html: str) -> str:
    """The report without the inlined plotly.js bundle (vendored code: its own strings name
    URLs)."""
    from nsdiag.render.plotly_js import plotly_js

    return html.replace(plotly_js(), "")


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module", params=sorted(FIXTURES))
def case(request: pytest.FixtureRequest) -> tuple[str, Diagnosis, Session, str]:
    diagnosis, session = fixture_case(request.param)
    return request.param, diagnosis, session, render(diagnosis, session, "html")


@pytest.fixture(scope="module")
def reference() -> tuple[Diagnosis, Session]:
    return fixture_case("reference")


@pytest.fixture(scope="module")
def hostile_html() -> str:
    session = hostile_session()
    timeline, nvtx = synthetic_timeline(
        names=(HOSTILE, "ok_kernel"), nvtx_name="<script>alert(2)</script>"
    )
    session = with_timeline(session, timeline, nvtx)
    return render(diagnose(session), session, "html")


# ---------------------------------------------------------------- HTML


def test_html_has_every_section_and_every_signature(
    case: tuple[str, Diagnosis, Session, str],
) -> None:
    _name, diagnosis, _, html = case
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    for section in ("summary", "kernels", "roofline", "cards", "program"):
        assert f'<section id="{section}">' in html, section
    table = html[html.index('<table id="kernel-table"') :]
    table = table[: table.index("</table>")]
    assert table.count("<tr>") == len(diagnosis.kernels) + 1  # header + one row per signature
    assert html.count('<article class="card"') == min(10, len(diagnosis.kernels))
    assert diagnosis.device.get("name", "unknown GPU") in html


def test_plotly_inlined_exactly_once_and_no_external_resources(
    case: tuple[str, Diagnosis, Session, str],
) -> None:
    _, _, _, html = case
    assert len(re.findall(r"\* plotly\.js (?:\([a-z -]+\) )?v\d", html)) == 1
    assert "cdn.plot.ly" not in outside_plotly(html)
    assert not re.search(r"<script[^>]*\bsrc\s*=", html, re.IGNORECASE)
    assert not re.search(r"<link\b", html, re.IGNORECASE)
    assert not re.search(r"@import|@font-face", outside_plotly(html))
    assert not EXTERNAL.search(outside_plotly(html))
    assert html.count("Plotly.newPlot(") >= 3  # verdicts, roofline, cards


def test_cards_limit_and_the_report_says_what_was_left_out(
    reference: tuple[Diagnosis, Session],
) -> None:
    diagnosis, session = reference
    html = render(diagnosis, session, "html", RenderOptions(cards=3))
    assert html.count('<article class="card"') == 3
    assert f"The other {len(diagnosis.kernels) - 3}" in html and "--cards N" in html
    full = render(diagnosis, session, "html", RenderOptions(cards=100))
    assert "--cards N" not in full


def test_hostile_names_stay_text(hostile_html: str) -> None:
    body = outside_plotly(hostile_html)
    assert HOSTILE not in body
    assert "<script>alert(2)" not in body
    assert "&lt;img src=x onerror=alert(1)&gt;" in body  # shown, as text
    assert not re.search(r"<img\b", body, re.IGNORECASE)
    # Chart JSON: plotly escapes < > / and nsdiag escapes names for plotly's HTML-like labels.
    assert "\\u003cimg" not in body and "&lt;img" in body


def test_timeline_section_from_a_synthetic_timeline(reference: tuple[Diagnosis, Session]) -> None:
    diagnosis, session = reference
    timeline, nvtx = synthetic_timeline()
    html = render(diagnosis, with_timeline(session, timeline, nvtx), "html")
    assert '<section id="timeline">' in html and 'id="chart-timeline"' in html
    assert '<section id="timeline">' not in render(diagnosis, session, "html")


def test_timeline_chart_lanes_and_decimation() -> None:
    timeline, nvtx = synthetic_timeline(n_kernels=60, streams=2)
    fig = timeline_chart.timeline(timeline, nvtx)
    # the drawn bars (each kind's hover trace, transparent, repeats them)
    bars = {t.name: t for t in fig.data if t.type == "bar" and t.hoverinfo == "skip"}
    assert set(bars) == {"kernel", "memcpy", "nvtx"}
    assert set(bars["kernel"].y) == {"stream 7 · kernels", "stream 13 · kernels"}
    assert len(bars["kernel"].x) == 60  # few rows: drawn exactly
    big, _ = synthetic_timeline(n_kernels=50_000, streams=4)
    start = time.perf_counter()
    fig = timeline_chart.timeline(big, None, max_segments=2000)
    elapsed = time.perf_counter() - start
    drawn = sum(len(t.x) for t in fig.data if t.type == "bar" and t.hoverinfo == "skip")
    assert drawn <= 2000 + 20 * 6 and len(fig.to_json()) < 1_500_000
    busy = next(t for t in fig.data if t.name == "GPU busy")
    assert min(busy.y) >= 0 and max(busy.y) <= 100.0001
    print(f"\ntimeline: {len(big):,} activities -> {drawn:,} bars in {elapsed:.2f} s")


def test_busy_time_is_the_union_of_activities() -> None:
    frame = pd.DataFrame({"start_ns": [0, 5, 20], "end_ns": [10, 12, 30]})
    assert timeline_chart.busy_time(frame) == (30.0, pytest.approx(22.0))


def test_no_kernel_metrics_still_renders(reference: tuple[Diagnosis, Session]) -> None:
    diagnosis, _session = reference
    empty = Diagnosis(
        device=diagnosis.device,
        total_gpu_time_ns=0.0,
        kernels=[],
        program_findings=[],
        skipped_rules=[],
        meta={},
    )
    timeline, nvtx = synthetic_timeline()
    html = render(empty, with_timeline(Session(), timeline, nvtx), "html")
    assert "no Nsight Compute data" in html and 'id="chart-timeline"' in html


def test_scale_5000_launches(capsys: pytest.CaptureFixture[str]) -> None:
    session = scaled_session()
    start = time.perf_counter()
    diagnosis = diagnose(session)
    diagnosed = time.perf_counter()
    html = render(diagnosis, session, "html")
    rendered = time.perf_counter()
    size = len(html.encode())
    with capsys.disabled():
        print(
            f"\n5,000 launches / {len(diagnosis.kernels):,} signatures: diagnose "
            f"{diagnosed - start:.1f} s, "
            f"render {rendered - diagnosed:.2f} s, {size / 1e6:.2f} MB"
        )
    assert len(diagnosis.kernels) == 1000
    assert size < 10_000_000
    assert html.count('<article class="card"') == 10 and "The other 990" in html
    table = html[html.index('<table id="kernel-table"') :]
    assert table[: table.index("</table>")].count("<tr>") == 1001  # the table stays complete


# ---------------------------------------------------------------- other formats


def test_json_is_the_diagnosis_contract(reference: tuple[Diagnosis, Session]) -> None:
    diagnosis, session = reference
    doc = json.loads(render(diagnosis, session, "json"))
    assert doc["schema"] == "nsdiag.diagnosis/4"
    assert [k["name"] for k in doc["kernels"]] == [k.name for k in diagnosis.kernels]
    assert "NaN" not in render(diagnosis, session, "json")


def test_markdown_summary(reference: tuple[Diagnosis, Session]) -> None:
    diagnosis, session = reference
    md = render(diagnosis, session, "md")
    assert md.startswith("## nsdiag: NVIDIA H200")
    assert "### Top findings" in md and "### Kernels" in md
    assert "| # | kernel |" in md
    kernel_rows = [line for line in md.splitlines() if re.match(r"\| \d+ \|", line)]
    assert len(kernel_rows) == min(20, len(diagnosis.kernels))


def test_markdown_escapes_hostile_names() -> None:
    session = hostile_session()
    md = render(diagnose(session), session, "md")
    assert HOSTILE not in md and "&lt;img src=x onerror=alert\\(1\\)&gt;" not in md
    assert "&lt;img src=x onerror=alert(1)&gt;" in md
    assert md_escape("a|b*c_d`e") == "a\\|b\\*c\\_d\\`e"


def test_text_dispatch(reference: tuple[Diagnosis, Session]) -> None:
    diagnosis, session = reference
    assert "NVIDIA H200" in render(diagnosis, session, "text")


@pytest.mark.parametrize(
    "path, fmt",
    [
        ("r.html", "html"),
        ("R.HTM", "html"),
        ("out/r.json", "json"),
        ("r.md", "md"),
        ("r.txt", "text"),
    ],
)
def test_format_from_path(path: str, fmt: str) -> None:
    assert format_from_path(path) == fmt


def test_unknown_formats_are_errors(reference: tuple[Diagnosis, Session]) -> None:
    with pytest.raises(NsdiagError, match="extensions"):
        format_from_path("report.pdf")
    with pytest.raises(NsdiagError, match="unknown report format"):
        render(reference[0], None, "pdf")


# ---------------------------------------------------------------- short names


@pytest.mark.parametrize(
    "full, short",
    [
        (
            "nsdiag::copy_float4_kernel(const float4 *, float4 *, long)",
            "nsdiag::copy_float4_kernel",
        ),
        (
            "void at::elementwise_kernel<128, 2, void "
            "at::gpu_kernel_impl_nocast<at::BinaryFunctor<float, float, float, "
            "binary_internal::DivFunctor<float>>>(at::TensorIteratorBase &, const T1 "
            "&)::[lambda(int) (instance 1)]>(int, T3)",
            f"at::elementwise_kernel<{ELLIPSIS}>",
        ),
        (
            "void at::native::(anonymous namespace)::reduce_kernel<512, 1, "
            "at::native::ReduceOp<float, "
            "at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>>(T3)",
            f"at::native::reduce_kernel<{ELLIPSIS}>",
        ),
        (
            "void at::native::<unnamed>::distribution_elementwise_grid_stride_kernel<float, "
            "(int)4>(long, T3)",
            f"at::native::distribution_elementwise_grid_stride_kernel<{ELLIPSIS}>",
        ),
        (
            "void cub::CUB_200200_900_NS::DeviceRadixSortOnesweepKernel<"
            "cub::CUB_200200_900_NS::Policy900, false>(T4 *)",
            f"cub::DeviceRadixSortOnesweepKernel<{ELLIPSIS}>",
        ),
        (
            "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(T1::Params)",
            "cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>",
        ),
        ("void foo<float>(float *, int)", "foo<float>"),
        (
            "void at::native::foo(int)::{lambda(int)#1}::operator()(int) const",
            "at::native::foo::lambda#1::operator()",
        ),
        (
            "foo(int)::[lambda(int) (instance 2)]::operator ()(int) const",
            "foo::lambda#2::operator()",
        ),
        (
            "cutlass::gemm::kernel::sm90::GemmUniversal<int, float>::operator()(Params const&, "
            "char*)",
            f"cutlass::{ELLIPSIS}::sm90::GemmUniversal<{ELLIPSIS}>::operator()",
        ),
        ("a::b::c::d::e::f(int)", f"a::{ELLIPSIS}::e::f"),
        ("triton_poi_fused_div_sub_0", "triton_poi_fused_div_sub_0"),
        ("[CUDA memcpy Host-to-Device]", "[CUDA memcpy Host-to-Device]"),
        (HOSTILE, HOSTILE),  # not C++: kept (and escaped later)
    ],
)
def test_short_name(full: str, short: str) -> None:
    assert short_name(full) == short


def test_long_names_are_truncated_in_the_middle() -> None:
    name = (
        "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4"
        "_execute_kernel__5x_cublas"
    )
    short = short_name(name, max_len=40)
    assert (
        len(short) == 40
        and short.startswith("sm80_xmma")
        and short.endswith("5x_cublas")
        and ELLIPSIS in short
    )


def test_colliding_short_names_get_a_distinguishing_hint() -> None:
    div = (
        "void at::elementwise_kernel<128, 2, void "
        "at::gpu_kernel_impl_nocast<at::BinaryFunctor<float, float, "
        "float, binary_internal::DivFunctor<float>>>(at::TensorIteratorBase &, const T1 "
        "&)::[lambda(int) "
        "(instance 1)]>(int, T3)"
    )
    add = (
        "void at::elementwise_kernel<128, 2, void "
        "at::gpu_kernel_impl_nocast<at::CUDAFunctor_add<float>>"
        "(at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)"
    )
    names = short_names([div, add, "nsdiag::fused_kernel(const float *)"])
    assert names[div] == f"at::elementwise_kernel<{ELLIPSIS}DivFunctor{ELLIPSIS}>"
    assert names[add] == f"at::elementwise_kernel<{ELLIPSIS}CUDAFunctor_add{ELLIPSIS}>"
    assert names["nsdiag::fused_kernel(const float *)"] == "nsdiag::fused_kernel"
