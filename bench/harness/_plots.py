"""PNG plots next to a result's JSON (matplotlib, Agg backend): each benchmark draws its own."""

from __future__ import annotations

import pathlib
from typing import Any


def figure(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """``plt.subplots(*args, **kwargs)`` on the Agg backend (imported here: workers never plot)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(*args, **kwargs)


def save_figure(fig: Any, path: pathlib.Path) -> str:
    """Write ``fig`` as a PNG at ``path``, close it, and return the file name."""
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name
