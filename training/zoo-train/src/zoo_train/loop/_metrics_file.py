"""Metrics as JSON lines, and the loss-curve plot."""

from __future__ import annotations

import contextlib
import json
import math
import os
import pathlib
from collections.abc import Iterator
from typing import Any

METRICS_FILE = "metrics.jsonl"
PLOT_FILE = "loss_curve.png"


def _clean(value: Any) -> Any:
    # JSON has no NaN/inf: write them as strings so every line stays valid JSON.
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def read_metrics(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every complete record of a ``metrics.jsonl`` (a torn last line is ignored)."""
    path = pathlib.Path(path)
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


class MetricsWriter:
    """Appends one JSON object per line to ``path``, flushed after each line.

    On resume from step ``s``, :meth:`truncate_after` first drops records past ``s`` (they were
    written by steps that are being redone), so the file reads as one run.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = pathlib.Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", encoding="utf-8")

    def truncate_after(self, step: int) -> None:
        """Keep only complete records with ``step <= step``."""
        self._file.close()
        kept = [r for r in read_metrics(self.path) if int(r.get("step", 0)) <= step]
        tmp = self.path.with_suffix(".jsonl.tmp")
        with _naming(self.path):
            tmp.write_text("".join(json.dumps(_clean(r)) + "\n" for r in kept), encoding="utf-8")
        os.replace(tmp, self.path)
        self._file = self.path.open("a", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        """Append ``record`` (NaN/inf become strings).

        Raises:
            OSError: the write failed (e.g. a full disk), naming the file.
        """
        with _naming(self.path):
            self._file.write(json.dumps(_clean(record)) + "\n")
            self._file.flush()

    def close(self) -> None:
        with _naming(self.path):
            self._file.close()


@contextlib.contextmanager
def _naming(path: pathlib.Path) -> Iterator[None]:
    # An OSError from writing or flushing names no file: add which one.
    try:
        yield
    except OSError as e:
        if e.filename is not None:
            raise
        raise OSError(e.errno, e.strerror, str(path)) from e


def plot_loss_curve(
    records: list[dict[str, Any]], path: str | os.PathLike[str], *, title: str = "zoo training"
) -> pathlib.Path:
    """Plot train ``loss`` and ``eval_loss`` against ``step`` into a PNG (matplotlib, Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def series(key: str) -> tuple[list[int], list[float]]:
        pts = [
            (int(r["step"]), float(r[key]))
            for r in records
            if isinstance(r.get(key), int | float) and "step" in r
        ]
        return [p[0] for p in pts], [p[1] for p in pts]

    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    for key, label in (("loss", "train"), ("eval_loss", "eval")):
        xs, ys = series(key)
        if xs:
            ax.plot(xs, ys, marker="o" if key == "eval_loss" else None, label=label)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    path = pathlib.Path(path)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
