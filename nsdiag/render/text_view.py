"""What the text renderer's sections share while they draw one diagnosis: the page, the names
that tell kernels apart, which listed change a kernel or finding belongs to, and the fix texts
already printed (a fix is said once; later places refer back to it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from nsdiag.analysis.records.changes import Change, Touch
from nsdiag.analysis.records.diagnosis import Diagnosis, KernelDiagnosis
from nsdiag.analysis.records.findings import Finding
from nsdiag.render import fmt, kernel_names
from nsdiag.render.text_layout import FIX, Page


@dataclass
class View:
    diagnosis: Diagnosis
    page: Page
    verbose: bool
    changes: list[Change]  # the changes listed, in rank order (numbered from 1)
    names: dict[str, str] = field(default_factory=dict)  # signature name -> short name
    labels: dict[int, str] = field(default_factory=dict)  # kernel id -> a name no other shares
    tellers: dict[int, str] = field(default_factory=dict)  # look-alike id -> `grid 64`
    said: dict[str, str] = field(default_factory=dict)  # fix text -> where it was printed

    @classmethod
    def of(cls, diagnosis: Diagnosis, page: Page, verbose: bool, ranked: int) -> View:
        changes = list(diagnosis.changes) if verbose else diagnosis.top_changes(ranked)
        names = fmt.display_names(diagnosis)
        labels = kernel_names.labels(diagnosis.kernels, names)
        tellers = kernel_names.tellers(diagnosis.kernels, names)
        return cls(diagnosis, page, verbose, changes, names, labels, tellers)

    # ---------------------------------------------------------------- names

    def kernel(self, kernel: KernelDiagnosis) -> str:
        """`#3 at::batch_norm_backward_kernel<…> grid 64`: its number in the kernel list and a
        name no other kernel shares."""
        return f"#{kernel.id + 1} {self.labels.get(kernel.id, kernel.name)}"

    def fitted(self, kernel: KernelDiagnosis, width: int, extra: str = "") -> str:
        """The kernel's label in `width` characters: the short name cut in the middle, what
        tells it apart from look-alikes (and `extra`) kept whole."""
        teller = " ".join(t for t in (self.tellers.get(kernel.id, ""), extra) if t)
        if teller and len(teller) > width - 12:  # no room for the name: `g256x64 b512`
            teller = teller.replace("grid ", "g").replace("block ", "b")
        base = fmt.printable(self.names.get(kernel.name, kernel.name))
        others = [fmt.printable(self.names.get(k.name, k.name)) for k in self.diagnosis.kernels]
        if not teller:
            return kernel_names.fit(base, width, others)
        return f"{kernel_names.fit(base, max(width - len(teller) - 1, 6), others)} {teller}"

    def kernel_of(self, touch: Touch) -> KernelDiagnosis | None:
        """The listed kernel a touch is, if it is one."""
        if touch.kind != "kernel" or touch.kernel_id is None:
            return None
        return next((k for k in self.diagnosis.kernels if k.id == touch.kernel_id), None)

    def touch(self, touch: Touch) -> str:
        if touch.kind == "kernel":
            if touch.kernel_id is not None and touch.kernel_id in self.labels:
                return f"#{touch.kernel_id + 1} {self.labels[touch.kernel_id]}"
            return self.names.get(touch.name, touch.name)
        return fmt.touch_name(touch, self.names)

    # ---------------------------------------------------------------- changes

    def number(self, change: Change) -> int:
        return self.changes.index(change) + 1

    def change_of_kernel(self, kernel_id: int, rule: str | None = None) -> int | None:
        """The first listed change that touches the kernel (for `rule`, when given)."""
        for i, change in enumerate(self.changes, 1):
            for t in change.touches:
                mine = t.kind == "kernel" and t.kernel_id == kernel_id
                if mine and (rule is None or rule in t.rules):
                    return i
        return None

    def change_of_finding(self, finding: Finding) -> int | None:
        """The listed change that groups a program finding."""
        for i, change in enumerate(self.changes, 1):
            if any(_same(finding, f) for f in change.findings):
                return i
        return None

    # ---------------------------------------------------------------- fixes said once

    def fix(self, text: str, where: str) -> str | None:
        """None the first time a fix text is seen (print it; later ones refer to `where`),
        else where it was said."""
        earlier = self.said.get(text)
        if earlier is None:
            self.said[text] = where
        return earlier

    def say_fix(self, text: str, where: str, indent: int, lines: int | None = None) -> None:
        """The fix, or where the same fix was said ("same fix as change 2")."""
        if not text:
            return
        earlier = self.fix(text, where)
        shown = text if earlier is None else f"same fix as {earlier}"
        self.page.para(shown, label="fix: ", indent=indent, label_style=FIX, lines=lines)

    def saved(self, ns: float | None) -> str:
        """A saving in the region's currency, without the `/iteration` (said in the heading)."""
        if ns is None:
            return fmt.NO_ESTIMATE
        n = self.diagnosis.iterations
        return fmt.time_ns(ns / n) if n else fmt.time_ns(ns)


def _same(a: Finding, b: Finding) -> bool:
    return (a.rule, a.kernel, a.range, a.message, a.saved_ns) == (
        b.rule,
        b.kernel,
        b.range,
        b.message,
        b.saved_ns,
    )
