"""Short display names for long demangled C++ kernel names."""
from __future__ import annotations

import re

_RETURN = re.compile(r"^(void|int|float|double)\s+")


def _strip_brackets(text: str, open_: str, close: str, keep: str) -> str:
    out, depth = [], 0
    for ch in text:
        if ch == open_:
            if depth == 0:
                out.append(open_ + keep)
            depth += 1
        elif ch == close and depth:
            depth -= 1
            if depth == 0:
                out.append(close)
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def short_name(name: str, limit: int = 60) -> str:
    """'void at::elementwise_kernel<128, 2, ...>(int, T3)' -> 'at::elementwise_kernel<…>'."""
    text = _RETURN.sub("", str(name).strip())
    text = _strip_brackets(text, "(", ")", "")
    text = text.replace("()", "")
    text = _strip_brackets(text, "<", ">", "…")
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"
