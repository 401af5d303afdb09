"""The analysed region (its windows, iterations and warm-up, and how it was chosen) and the
start-up before it (region/choose.py and region/startup.py compute them)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

Window = tuple[int, int]


@dataclass(frozen=True)
class Iteration:
    index: int  # position among all detected iterations, warm-up included
    start_ns: int
    end_ns: int
    kernels: int  # kernel launches inside

    @property
    def wall_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class Region:
    """The windows of the timeline the diagnosis analyses (host time, ns since the trace's clock
    origin) and how they were chosen."""

    method: (
        str  # user | profiler-range | nvtx-iterations | nvtx-annotated | kernel-sequence | whole
    )
    description: str  # one line: which region, and how it was chosen
    windows: tuple[Window, ...]
    trace_start_ns: int
    trace_end_ns: int
    iterations: tuple[Iteration, ...] = ()  # steady-state iterations analysed
    warmup: tuple[Iteration, ...] = ()  # detected, left out

    @property
    def start_ns(self) -> int:
        return self.windows[0][0]

    @property
    def end_ns(self) -> int:
        return self.windows[-1][1]

    @property
    def wall_ns(self) -> int:
        return int(sum(end - start for start, end in self.windows))

    @property
    def is_whole(self) -> bool:
        return self.start_ns <= self.trace_start_ns and self.end_ns >= self.trace_end_ns

    @property
    def iteration_median_ns(self) -> float | None:
        if not self.iterations:
            return None
        return float(statistics.median(i.wall_ns for i in self.iterations))

    def to_json(self) -> dict[str, object]:
        return {
            "method": self.method,
            "description": self.description,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "wall_ns": self.wall_ns,
            "windows": [list(w) for w in self.windows],
            "iterations": len(self.iterations),
            "warmup_iterations": len(self.warmup),
            "iteration_median_ns": self.iteration_median_ns,
        }


@dataclass(frozen=True)
class StartupPart:
    name: str
    time_ns: float
    detail: str = ""

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "time_ns": self.time_ns, "detail": self.detail}


@dataclass(frozen=True)
class Startup:
    """The time before the region and its parts, largest first."""

    time_ns: float
    parts: tuple[StartupPart, ...]
    after_ns: float = 0.0  # after the region to the end of the trace (teardown, a final pass)

    def line(self, top: int = 3) -> str:
        parts = ", ".join(
            f"{p.name} {ms(p.time_ns)}" + (f" ({p.detail})" if p.detail else "")
            for p in self.parts[:top]
        )
        head = f"start-up and warm-up: {ms(self.time_ns)} before the analysed region, not ranked"
        return head + (f": {parts}" if parts else "")

    def to_json(self) -> dict[str, object]:
        return {
            "time_ns": self.time_ns,
            "after_ns": self.after_ns,
            "parts": [p.to_json() for p in self.parts],
            "line": self.line(),
        }


def ms(ns: float) -> str:
    return f"{ns / 1e6:.3g} ms" if ns < 1e9 else f"{ns / 1e9:.3g} s"
