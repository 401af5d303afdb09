"""nsdiag: why is my CUDA kernel slow, and what do I change?"""

from __future__ import annotations

from nsdiag.errors import NsdiagError
from nsdiag.model.session import Session

__version__ = "0.1.0"
__all__ = ["NsdiagError", "Session", "__version__", "load"]


def load(paths, **kwargs) -> Session:
    """Read one or several profiler outputs (or a session directory) into one Session."""
    from nsdiag.readers import load as _load

    return _load(paths, **kwargs)
