"""eager-attention: attention computed as separate kernels, the S x S scores passing through DRAM.

Eager attention (transformers' attn_implementation="eager", a hand-written
`softmax(q @ k.T / sqrt(d) + mask) @ v`) runs, per layer and per pass, a batched GEMM, then
elementwise kernels over the scores (scale, mask, the upcast to fp32, dropout), a softmax, the
cast back, and a second batched GEMM; the backward pass mirrors it. Each elementwise kernel reads
and writes the whole S x S tensor. A fused attention kernel (scaled_dot_product_attention's
FlashAttention or memory-efficient backends) computes the same products tile by tile on chip and
never writes the scores.

Found from the launch sequence by name (score_chains.py). The chain is the kernels between the
two GEMMs; the saving is their time, the GEMMs' FLOPs staying (a fused kernel does them too): a
lower bound, since a fused kernel also runs the products faster than two batched GEMMs through
DRAM.
"""

from __future__ import annotations

from nsdiag.analysis.program.analyses import EAGER_ATTENTION
from nsdiag.analysis.program.context import ProgramContext
from nsdiag.analysis.program.timeline.findings import Draft, make_finding
from nsdiag.analysis.program.timeline.findings import share as share_evidence
from nsdiag.analysis.records.findings import Evidence, Finding
from nsdiag.analysis.rules.spec import RuleSpec


def eager_attention(rule: RuleSpec, ctx: ProgramContext) -> list[Finding]:
    params = EAGER_ATTENTION.params_of(rule)
    seq = ctx.launches
    inside, chain = ctx.attention
    if not inside.any():
        return []
    n = float(ctx.iterations or 1)
    members = seq[inside].assign(chain=chain[inside])
    chains = members.groupby("chain")
    if len(chains) / n < params["min_chains"]:
        return []
    saved = float(members["duration_ns"].sum())
    if not ctx.wall_ns or saved / ctx.wall_ns < params["min_impact"]:
        return []
    backward = members["name"].str.contains("[Bb]ackward").groupby(members["chain"]).any()
    kinds = backward.map({True: "backward", False: "forward"})
    ranges = members["range"].value_counts()
    name = str(ranges.index[0]) if len(ranges) else ""
    top = members.groupby("name")["duration_ns"].sum().sort_values(ascending=False)
    short = [_short(k) for k in top.index[:3]]
    values = {
        "chains": round(len(chains) / n),
        "forward": round(int((kinds == "forward").sum()) / n),
        "backward": round(int((kinds == "backward").sum()) / n),
        "kernels": round(len(members) / n),
        "chain_ms": saved / n / 1e6,
        "ops": ", ".join(short),
        "per": " per iteration" if ctx.iterations else "",
        "saved_per_ms": saved / n / 1e6,
    }
    evidence = (
        Evidence("attention_chains", float(len(chains)), ">=", params["min_chains"] * n),
        Evidence("score_kernels", float(len(members))),
        Evidence("score_kernel_ns", saved),
        share_evidence(ctx, saved, params["min_impact"]),
    )
    kernels = tuple(sorted({str(k) for k in members["name"]}))
    details = {
        "chains": len(chains),
        "kernels": list(kernels),
        "score_kernel_ns": saved,
        "estimate_basis": "names",
    }
    draft = Draft(0, name, saved, values, evidence, details, kernels)
    return [make_finding(EAGER_ATTENTION, rule, ctx, draft)]


def _short(name: str) -> str:
    head = name.split("<", 1)[0].replace("void ", "").strip()
    return head.rsplit("::", 1)[-1] or head
