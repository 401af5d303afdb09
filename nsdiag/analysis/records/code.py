"""Whose code a change is about: the Python functions whose ranges hold its kernels' launches or
its host time (nsys's `--pytorch=functions-trace` ranges, domain `PyTorch`), or, without them,
what the kernel names say (analysis/program/code_sites.py finds them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Where the attribution comes from.
PYTORCH_RANGES = "pytorch-ranges"  # the PyTorch function ranges phase 1 records
KERNEL_NAMES = "kernel-names"  # no ranges: the PyTorch operator a kernel's name implies
NO_CODE = "none"  # neither
SOURCES = (PYTORCH_RANGES, KERNEL_NAMES, NO_CODE)


@dataclass(frozen=True)
class CodeSite:
    """One Python function (its outermost PyTorch range on the launching thread) and what of the
    change's work lies in it, per iteration (or in the region, where it has no iterations)."""

    function: str  # torch.optim.AdamW.step, torch.autograd.backward, torch.Tensor.to, ...
    inner: str = ""  # the innermost range inside it where the work sits, if another one
    launches: float = 0.0  # the change's kernel launches (or copies) inside it
    host_ns: float | None = None  # the host's time inside the function (its ranges' duration)
    idle_ns: float | None = None  # the GPU's idle time while the host was inside it

    def to_json(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "inner": self.inner or None,
            "launches": round(self.launches, 1),
            "host_ns": None if self.host_ns is None else round(self.host_ns, 1),
            "idle_ns": None if self.idle_ns is None else round(self.idle_ns, 1),
        }


@dataclass(frozen=True)
class CodeAttribution:
    """A change's code: its sites, most work first."""

    source: str  # one of SOURCES
    sites: tuple[CodeSite, ...] = ()
    launches: float = 0.0  # the change's launches per iteration, in every site and outside
    total_launches: float = 0.0  # every kernel launch of an iteration
    per_iteration: bool = True  # figures per iteration (else over the region)
    # kernel-name source: the PyTorch operators the kernels' names imply ("Tensor.index_add_")
    operators: tuple[str, ...] = ()
    # what a profile with the PyTorch ranges would add, where they were not recorded
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "sites": [s.to_json() for s in self.sites],
            "launches": round(self.launches, 1),
            "total_launches": round(self.total_launches, 1),
            "per_iteration": self.per_iteration,
            "operators": list(self.operators),
            "note": self.note or None,
        }
