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
#: The curves shown, when the run has them: (record key, label). GRPO's reward of each
#: function (``rewards/<fn>/mean``) follows its total reward.
CURVES = (
    ("loss", "train loss"),
    ("eval_loss", "eval loss"),
    ("reward", "reward"),
    ("kl", "KL"),
    ("completions/mean_length", "completion length"),
    ("rewards/accuracies", "reward accuracy"),
    ("rewards/margins", "reward margin"),
    ("eval_rewards/accuracies", "eval reward accuracy"),
    ("tokens_per_s", "tokens/s"),
)
#: What a GRPO run is judged by (its loss is about 0 on-policy whatever it learns), and a
#: preference run beside its loss; the reward of each function is added after ``reward``.
GRPO_JUDGED = (("reward", "reward"), ("kl", "KL"), ("completions/mean_length", "completion length"))
PREFERENCE_JUDGED = (("loss", "train loss"), ("rewards/accuracies", "reward accuracy"),
                     ("rewards/margins", "reward margin"))  # fmt: skip


def _reward_parts(records: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """``(rewards/<fn>/mean, reward <fn>)`` for each reward function a GRPO run records."""
    keys = dict.fromkeys(k for r in records for k in r)
    return [
        (k, f"reward {k[len('rewards/') : -len('/mean')]}")
        for k in keys
        if k.startswith("rewards/") and k.endswith("/mean")
    ]


def judged_by(records: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """The curves a run's objective is judged by, as ``(record key, label)``: GRPO's reward,
    each function's, KL and completion length; a preference objective's loss, reward accuracy
    and margin; otherwise the train loss."""
    keys = {k for r in records for k in r}
    if "reward" in keys:
        judged = [GRPO_JUDGED[0], *_reward_parts(records), *GRPO_JUDGED[1:]]
    elif "rewards/accuracies" in keys:
        judged = list(PREFERENCE_JUDGED)
    else:
        judged = [("loss", "train loss")]
    return [(k, label) for k, label in judged if k in keys]


def trend_text(points: Sequence[tuple[int, float]], label: str, fmt: str = ".4g") -> str:
    """``reward 0.087 (step 5) -> 0.667 (step 60)``, or ``reward 0.5 (step 12)`` for one point
    (no trend to show)."""
    (a, first), (b, last) = points[0], points[-1]
    if len(points) == 1:
        return f"{label} {first:{fmt}} (step {a})"
    return f"{label} {first:{fmt}} (step {a}) -> {last:{fmt}} (step {b})"


def curve_points(records: Sequence[dict[str, Any]], key: str) -> list[tuple[int, float]]:
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
    if settings.get("objective") == "grpo" and settings.get("batch_size"):
        # GRPO's rows are completions of up to max_prompt + max_completion tokens; --seq-len is
        # not what it trains on.
        rows = int(settings["batch_size"]) * int(settings.get("grad_accum") or 1)
        group = int(settings.get("grpo.num_generations") or 1)
        parts.append(
            f"{rows} completions a step ({rows // group} prompts x {group}) of up to "
            f"{settings.get('grpo.max_prompt_length')} + "
            f"{settings.get('grpo.max_completion_length')} tokens"
        )
    elif settings.get("batch_size") and settings.get("seq_len"):
        rows = int(settings["batch_size"]) * int(settings.get("grad_accum") or 1)
        parts.append(f"{rows} x {settings['seq_len']} tokens a step")
    kernels = [r["kernel"] for r in starts if r.get("kernel")]
    if kernels:
        changed = list(dict.fromkeys(kernels))
        parts.append("attention " + " then ".join(changed))
    return ", ".join(parts)


def _trend(records: Sequence[dict[str, Any]]) -> str | None:
    """First and last of what the objective is judged by (:func:`judged_by`) and of the eval
    loss, the last perplexity, the mean throughput."""
    parts = []
    for key, label in [*judged_by(records), ("eval_loss", "eval loss")]:
        points = curve_points(records, key)
        if points:
            parts.append(trend_text(points, label))
    ppl = curve_points(records, "eval_ppl")
    if ppl:
        parts.append(f"ppl {ppl[-1][1]:.4g}")
    rates = [v for _, v in curve_points(records, "tokens_per_s")]
    if rates:
        parts.append(
            f"{sum(rates) / len(rates):,.0f} tokens/s on average ({min(rates):,.0f}-"
            f"{max(rates):,.0f})"
        )
    return PREFIX + "; ".join(parts) if parts else None


def _curve_table(records: Sequence[dict[str, Any]]) -> list[str]:
    """A table of the curves: steps, first, last, lowest and highest value, and the shape."""
    rows = []
    curves = list(CURVES)
    at = curves.index(("reward", "reward")) + 1
    curves[at:at] = _reward_parts(records)
    for key, label in curves:
        points = curve_points(records, key)
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
