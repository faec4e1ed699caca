"""A run's metric records as tracker calls.

The records are those of ``metrics.jsonl`` (the loop hands each to its ``on_record`` watcher as
it writes it), so what a tracker shows is what the file holds, at the same steps:

- the ``start`` / ``resume`` record starts the trackers (:class:`RunStart`): its ``settings``
  (the command line's settings, flattened; else its ``config``) become hyperparameters and its
  ``attention`` list the kernels' text;
- every other record's numbers are scalars at its ``step``, tagged ``eval/X`` for a key
  ``eval_X``, ``train/X`` for any other key, unchanged for a key already holding a ``/``
  (``rewards/chosen``), and ``EVENT/X`` in an event record (``nonfinite/loss``); a nested table
  of numbers adds its keys (``eval/loss_by_source/web``). ``"nan"``/``"inf"`` (how the file
  writes them) count as numbers; other strings, lists and nulls are left out.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from ._tracker import RunStart

_STARTS = ("start", "resume")
#: A tracker call: the method's name and its arguments.
Call = tuple[str, tuple[Any, ...]]
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        return _NON_FINITE.get(value)
    return None


def _numbers(prefix: str, value: Any) -> Iterator[tuple[str, float]]:
    if isinstance(value, Mapping):
        for key, inner in value.items():
            yield from _numbers(f"{prefix}/{key}", inner)
        return
    number = _number(value)
    if number is not None:
        yield prefix, number


def _tag(key: str, event: str | None) -> str:
    if event is not None:
        return f"{event}/{key}"
    if "/" in key:
        return key
    if key.startswith("eval_"):
        return "eval/" + key[len("eval_") :]
    return "train/" + key


def scalars_of(record: Mapping[str, Any]) -> dict[str, float]:
    """The scalars of a record by tag (empty for a start or resume record)."""
    event = record.get("event")
    if event in _STARTS:
        return {}
    out: dict[str, float] = {}
    for key, value in record.items():
        if key not in ("step", "event"):
            out.update(_numbers(_tag(key, event), value))
    return out


def _flat(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, Mapping):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value
    return out


def _hparam(value: Any) -> str | int | float | bool | None:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def run_start_of(record: Mapping[str, Any]) -> RunStart | None:
    """The :class:`RunStart` a start or resume record describes (``None`` for other records)."""
    if record.get("event") not in _STARTS:
        return None
    settings = record.get("settings") or _flat(record.get("config") or {})
    hparams = {k: _hparam(v) for k, v in settings.items()}
    return RunStart(
        step=int(record.get("step", 0)),
        resumed=record["event"] == "resume",
        settings={k: v for k, v in hparams.items() if v is not None},
        kernels=tuple(record.get("attention") or ()),
    )


class RecordFeed:
    """Turns a stream of records into tracker calls: ``(method, args)`` pairs.

    The first record starts the trackers (with the run it describes, or an empty one when it
    is no start record); later start records (a file that holds resumed runs) add nothing.
    """

    def __init__(self) -> None:
        self.started = False

    def calls(self, record: Mapping[str, Any]) -> list[Call]:
        """The calls ``record`` makes."""
        step = int(record.get("step", 0))
        out = self._start(step, run_start_of(record))
        values = scalars_of(record)
        if values:
            out.append(("scalars", (step, values)))
        return out

    def call(self, method: str, args: tuple[Any, ...], step: int) -> list[Call]:
        """``method(*args)`` at ``step``, after the start if nothing started the trackers yet."""
        return [*self._start(step, None), (method, args)]

    def _start(self, step: int, start: RunStart | None) -> list[Call]:
        if self.started:
            return []
        self.started = True
        return [("start", (start or RunStart(step=step, resumed=False, settings={}),))]
