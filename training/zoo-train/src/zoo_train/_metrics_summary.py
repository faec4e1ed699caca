"""A run's summary and curves as lines for a terminal, from its ``metrics.jsonl`` records."""

from __future__ import annotations

import pathlib
from collections.abc import Sequence
from typing import Any

from ._console import PREFIX
from ._table import table_lines

_BARS = "▁▂▃▄▅▆▇█"
#: Points a curve is drawn with, at most.
CURVE_WIDTH = 40
#: The curves shown, when the run has them: (record key, label).
CURVES = (
    ("loss", "train loss"),
    ("eval_loss", "eval loss"),
    ("rewards/accuracies", "reward accuracy"),
    ("eval_rewards/accuracies", "eval reward accuracy"),
    ("tokens_per_s", "tokens/s"),
)


def _points(records: Sequence[dict[str, Any]], key: str) -> list[tuple[int, float]]:
    """``(step, value)`` of every record that holds a number under ``key``, in step order."""
    out = {
        int(r["step"]): float(r[key])
        for r in records
        if "step" in r and isinstance(r.get(key), int | float) and not isinstance(r[key], bool)
    }
    return sorted(out.items())


def sparkline(values: Sequence[float], width: int = CURVE_WIDTH) -> str:
    """``values`` as a line of block characters (at most ``width``, by evenly spaced picks)."""
    if not values:
        return ""
    if len(values) > width:
        values = [values[round(i * (len(values) - 1) / (width - 1))] for i in range(width)]
    low, high = min(values), max(values)
    span = high - low
    if span == 0:
        return _BARS[0] * len(values)
    return "".join(_BARS[min(int((v - low) / span * len(_BARS)), len(_BARS) - 1)] for v in values)


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _header(run: pathlib.Path, records: Sequence[dict[str, Any]]) -> str:
    """What the run is: its model, how far it got, its batch and the kernel it ran on."""
    starts = [r for r in records if r.get("event") in ("start", "resume")]
    last = starts[-1] if starts else {}
    settings = last.get("settings") or {}
    steps = settings.get("steps") or (last.get("config") or {}).get("steps")
    reached = max((int(r.get("step", 0)) for r in records), default=0)
    model = settings.get("model") or "a model"
    if settings.get("from_hf") or settings.get("from_run"):
        model = f"a fine-tune of {settings.get('from_hf') or settings.get('from_run')}"
    where = f"step {reached}" + (f" of {steps}" if steps else "")
    if steps and reached >= int(steps):
        where += " (complete)"
    parts = [f"{PREFIX}{run}: {model}, {where}"]
    if settings.get("batch_size") and settings.get("seq_len"):
        rows = int(settings["batch_size"]) * int(settings.get("grad_accum") or 1)
        parts.append(f"{rows} x {settings['seq_len']} tokens a step")
    kernels = [r["kernel"] for r in starts if r.get("kernel")]
    if kernels:
        changed = list(dict.fromkeys(kernels))
        parts.append("attention " + " then ".join(changed))
    return ", ".join(parts)


def _trend(records: Sequence[dict[str, Any]]) -> str | None:
    """First and last train and eval loss, the last perplexity, the mean throughput."""
    parts = []
    for key, label in (("loss", "train loss"), ("eval_loss", "eval loss")):
        points = _points(records, key)
        if points:
            (a, first), (b, last) = points[0], points[-1]
            parts.append(f"{label} {first:.4g} (step {a}) -> {last:.4g} (step {b})")
    ppl = _points(records, "eval_ppl")
    if ppl:
        parts.append(f"ppl {ppl[-1][1]:.4g}")
    rates = [v for _, v in _points(records, "tokens_per_s")]
    if rates:
        parts.append(
            f"{sum(rates) / len(rates):,.0f} tokens/s on average ({min(rates):,.0f}-"
            f"{max(rates):,.0f})"
        )
    return PREFIX + "; ".join(parts) if parts else None


def _curve_table(records: Sequence[dict[str, Any]]) -> list[str]:
    """A table of the curves: steps, first, last, lowest and highest value, and the shape."""
    rows = []
    for key, label in CURVES:
        points = _points(records, key)
        if not points:
            continue
        values = [v for _, v in points]
        rows.append(
            [
                label,
                f"{points[0][0]}-{points[-1][0]}",
                _number(values[0]),
                _number(values[-1]),
                _number(min(values)),
                _number(max(values)),
                sparkline(values),
            ]
        )
    if not rows:
        return []
    return table_lines(["curve", "steps", "first", "last", "min", "max", "shape"], rows)


def summary_lines(run: pathlib.Path, records: Sequence[dict[str, Any]]) -> list[str]:
    """The summary of ``run`` (status lines) and the table of its curves."""
    lines = [_header(run, records)]
    trend = _trend(records)
    if trend is not None:
        lines.append(trend)
    return lines + _curve_table(records)
